"""sigma: the structured output a model answers in, built from the data definitions, and its quotes mapped back.

One unit's model-tier items go to a model in one call; sigma has one property per item, keyed by the
definition id, each an `ItemAnswer` (value, confidence, an exact evidence quote, a reason). The quote is
located in the original evidence and becomes an `EvidencePointer` with a character range; a quote not found
gives no pointer and a note, never a guessed range.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from agent_factory.adapters.model import EvidencePointer
from agent_factory.evaluators.collect.project import ProjectedEvidence
from agent_factory.evaluators.core.model import DataDefinition
from agent_factory.frozen import Frozen

VERSION = "1"
"""Version of sigma's shape: it enters the template digest and so every model datum's cache key."""
QUOTE_NOT_FOUND = "evidence quote not found in the evidence"

_PLACEHOLDER = re.compile(r"\[[A-Z][A-Z_]*\]")


class ItemAnswer(Frozen):
    """A model's answer to one checklist item."""

    value: Literal["yes", "no", "not_applicable"]
    """yes / no, or not_applicable when the item does not apply to this unit."""
    confidence: float = Field(ge=0, le=1)
    """How sure the model is, 0-1; under the cascade's `escalate_below` the item goes to the jury."""
    evidence_quote: str
    """A passage copied exactly from the evidence supporting the value; empty when there is none."""
    reason: str
    """One sentence of rationale."""


@lru_cache(maxsize=512)
def _sigma(items: tuple[tuple[str, str], ...]) -> type[BaseModel]:
    fields: dict[str, Any] = {
        f"q{i}": (ItemAnswer, Field(alias=item_id, description=question))
        for i, (item_id, question) in enumerate(items)
    }
    return create_model(
        "Checklist",
        __config__=ConfigDict(frozen=True, extra="forbid", populate_by_name=True),
        __doc__="Answers to the checklist, one per item id.",
        **fields,
    )


def build_sigma(definitions: Sequence[DataDefinition]) -> type[BaseModel]:
    """The output model for these definitions (one required `ItemAnswer` property per id, in order)."""
    return _sigma(tuple((d.id, d.question) for d in definitions))


def build_keyed_sigma(items: Sequence[tuple[str, str]]) -> type[BaseModel]:
    """The output model for (answer key, question) pairs: a batch of units, each item keyed by its unit."""
    return _sigma(tuple(items))


def json_schema(sigma: type[BaseModel]) -> dict[str, Any]:
    """sigma's JSON schema, property names being the definition ids (strict-mode compatible)."""
    return sigma.model_json_schema(by_alias=True)


def _candidates(quote: str) -> list[str]:
    out = [quote]
    stripped = quote.strip().strip('"').strip()
    if stripped and stripped != quote:
        out.append(stripped)
    try:  # the model may quote the JSON-encoded form (\n, \u003c, ...)
        decoded = json.loads(f'"{stripped}"')
        if isinstance(decoded, str) and decoded not in out:
            out.append(decoded)
    except ValueError:
        pass
    return [c for c in out if c]


def _loose(quote: str) -> re.Pattern[str] | None:
    """A pattern for a quote with redaction placeholders (any text) and flexible whitespace."""
    parts = _PLACEHOLDER.split(quote)
    while parts and not parts[0].strip():
        parts.pop(0)
    while parts and not parts[-1].strip():
        parts.pop()
    if not parts:
        return None
    body = r"[\s\S]{1,400}?".join(r"\s+".join(re.escape(w) for w in p.split()) for p in parts)
    return re.compile(body) if body else None


def locate_quote(quote: str, evidence: ProjectedEvidence) -> EvidencePointer | None:
    """The original character range of `quote` in the shown evidence (first match), or None."""
    if not quote or not quote.strip():
        return None
    candidates = _candidates(quote)
    for search in ("exact", "loose"):
        for cand in candidates:
            pattern = _loose(cand) if search == "loose" else None
            if search == "loose" and pattern is None:
                continue
            for f in evidence.fields:
                for a, b in f.shown:
                    segment = f.text[a:b]
                    if pattern is None:
                        i = segment.find(cand)
                        if i >= 0:
                            return EvidencePointer(unit_id=f.unit_id, field=f.field, start=a + i, end=a + i + len(cand))
                    else:
                        m = pattern.search(segment)
                        if m:
                            return EvidencePointer(unit_id=f.unit_id, field=f.field,
                                                   start=a + m.start(), end=a + m.end())
    return None
