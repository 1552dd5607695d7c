"""Evidence coverage: which text fields of a turn reached us, whole or cut, so no evaluator judges text it
never saw in full.

For each field (the turn's request and answer, each span's input and output) the result says whether it is
present, empty or missing - an empty answer is evidence (a delivery failure), a missing one is a gap in the
evidence - how many characters arrived, the original length a source declares, and whether the text was cut:
declared longer than what arrived, a truncation marker, or a finish reason of `length`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from adapters.assemble import TRUNCATION_FINISH
from adapters.model import Span, Turn
from evaluators.provenance import normalize as _norm
from evaluators.provenance.segments import lookup
from knowledge_packs import KnowledgePack

VERSION = f"1+norm{_norm.VERSION}"
"""Version of the coverage logic, including the normalization used to find truncation markers."""

FINISH_KEYS = ("gen_ai.response.finish_reasons", "gen_ai.response.finish_reason", "llm.finish_reason",
               "finish_reason", "finish_reasons")
"""Attributes that carry a model call's finish reason(s); values in `TRUNCATION_FINISH` mean it was cut off."""

FieldState = Literal["present", "empty", "missing"]
"""`missing`: the source did not record the field (None); `empty`: recorded but blank; `present`: has text."""
TruncationReason = Literal[
    "declared_shorter", "marker_end", "marker_inside", "finish_length", "delivery_truncated"
]
"""Why a field is judged cut: fewer characters than declared, a marker at the end or inside the text, a
`length` finish reason, or the turn's delivery state `failed_truncated`."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FieldCoverage(_Frozen):
    """Coverage of one text field of one unit."""

    unit_id: str
    """The turn (for `request` / `answer`) or span (for `input` / `output`) the field belongs to."""
    field: Literal["request", "answer", "input", "output"]
    """The field."""
    label: str
    """A name unique within the turn: `request`, `answer`, `spans.<span_id>.input`, ..."""
    state: FieldState
    """Present, empty (blank text) or missing (not recorded)."""
    chars: int = Field(ge=0)
    """Characters that arrived (0 when missing)."""
    declared_length: int | None = Field(default=None, ge=0)
    """Original length declared by an attribute, if any."""
    declared_by: str | None = None
    """The attribute that declared it."""
    truncated: bool
    """Whether the text that arrived is only part of the original."""
    reasons: tuple[TruncationReason, ...] = ()
    """Every reason found for `truncated`, in a fixed order."""
    marker: str | None = None
    """The truncation marker found, if any."""
    required: bool
    """Whether the pack requires this field (see `CoveragePolicy`)."""
    complete: bool
    """False when the field is truncated, or required and missing."""


class Coverage(_Frozen):
    """Evidence coverage of one turn."""

    turn_id: str
    """The turn."""
    fields: tuple[FieldCoverage, ...]
    """Request, answer, then each span's input and output in source order."""
    complete: bool
    """True when every field is complete."""
    incomplete: tuple[str, ...] = ()
    """Labels of the incomplete fields, in `fields` order."""
    version: str = VERSION
    """Version of the coverage logic."""


def _declared(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[int | None, str | None]:
    for key in keys:
        value = lookup(attributes, key)
        if isinstance(value, bool):
            continue
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        if isinstance(value, int | float) and value >= 0 and float(value).is_integer():
            return int(value), key
    return None, None


def _finish_length(attributes: Mapping[str, Any]) -> bool:
    for key in FINISH_KEYS:
        value = lookup(attributes, key)
        values = value if isinstance(value, list | tuple) else [value]
        if any(isinstance(v, str) and v.strip().lower() in TRUNCATION_FINISH for v in values):
            return True
    return False


def _marker(text: str, markers: tuple[str, ...]) -> tuple[str | None, TruncationReason | None]:
    folded = _norm.fold(text).rstrip()
    inside: str | None = None
    for m in markers:
        fm = _norm.fold(m).strip()  # cached: markers repeat on every call
        if folded.endswith(fm):
            return m, "marker_end"
        if inside is None and fm in folded:
            inside = m
    return (inside, "marker_inside") if inside is not None else (None, None)


def field_coverage(
    text: str | None,
    *,
    unit_id: str,
    field: Literal["request", "answer", "input", "output"],
    label: str,
    attributes: Mapping[str, Any],
    pack: KnowledgePack,
    required: bool,
    finish_applies: bool,
    delivery_truncated: bool = False,
) -> FieldCoverage:
    """Coverage of one field; `finish_applies` says whether the unit's finish reason describes this field."""
    state: FieldState = "missing" if text is None else ("empty" if not text.strip() else "present")
    chars = 0 if text is None else len(text)
    declared, declared_by = _declared(attributes, pack.coverage.length_keys.get(field, ()))
    reasons: list[TruncationReason] = []
    if declared is not None and text is not None and declared > chars:
        reasons.append("declared_shorter")
    marker, why = _marker(text, pack.truncation_markers()) if text else (None, None)
    if why is not None:
        reasons.append(why)
    if finish_applies and _finish_length(attributes):
        reasons.append("finish_length")
    if delivery_truncated:
        reasons.append("delivery_truncated")
    truncated = bool(reasons)
    return FieldCoverage(
        unit_id=unit_id,
        field=field,
        label=label,
        state=state,
        chars=chars,
        declared_length=declared,
        declared_by=declared_by,
        truncated=truncated,
        reasons=tuple(reasons),
        marker=marker,
        required=required,
        complete=not truncated and not (required and state == "missing"),
    )


def _span_fields(span: Span, pack: KnowledgePack) -> list[FieldCoverage]:
    required = pack.coverage.required_span_fields.get(span.kind, ())
    out = []
    for field in ("input", "output"):
        # An errored span's error message is its evidence; a missing output is then expected, not a gap.
        needed = field in required and not (field == "output" and span.status == "error" and span.error)
        out.append(
            field_coverage(
                getattr(span, field), unit_id=span.id, field=field, label=f"spans.{span.id}.{field}",
                attributes=span.attributes, pack=pack, required=needed, finish_applies=field == "output",
            )
        )
    return out


def coverage(turn: Turn, pack: KnowledgePack) -> Coverage:
    """Coverage of every text field of `turn` under the pack's coverage policy."""
    required = pack.coverage.required_turn_fields
    fields = [
        field_coverage(
            turn.request, unit_id=turn.id, field="request", label="request", attributes=turn.attributes,
            pack=pack, required="request" in required, finish_applies=False,
        ),
        field_coverage(
            turn.answer, unit_id=turn.id, field="answer", label="answer", attributes=turn.attributes,
            # A hand-off or the user's goodbye expects no answer from the agent: its absence is no gap.
            pack=pack, required="answer" in required and turn.delivery not in ("handed_off", "closing"),
            finish_applies=True,
            delivery_truncated=turn.delivery == "failed_truncated",
        ),
    ]
    for span in turn.spans:
        fields += _span_fields(span, pack)
    incomplete = tuple(f.label for f in fields if not f.complete)
    return Coverage(turn_id=turn.id, fields=tuple(fields), complete=not incomplete, incomplete=incomplete)
