"""Prompts: jinja2 templates beside the code, evidence quoted as data, secrets redacted.

Every evidence field goes in its own `<evidence id=...>` block whose content is JSON with `<`, `>` and `&`
escaped, so no evidence text can close its block or open another; the template says that evidence is data,
never instructions. Ranges provenance flagged as injection are additionally set apart as
`{"injection_flagged": "..."}` parts, and an omitted middle (a `head_tail` projection) as
`{"omitted_chars": n}`. Redaction runs on each whole field before it is cut or split, so no secret survives in
pieces (see `redact.redact_pieces`).
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

import jinja2

from agent_factory.adapters.model import EvidencePointer
from agent_factory.evaluators.collect import schema
from agent_factory.evaluators.collect.project import ProjectedEvidence, ShownField
from agent_factory.evaluators.collect.redact import Redaction, Redactor, redact_pieces, redact_text
from agent_factory.evaluators.core.model import DataDefinition, Layer

VERSION = "1"
"""Version of the prompt-building code (evidence encoding); enters the template digest."""
TEMPLATES = Path(__file__).resolve().parent / "templates"
PromptKind = Literal["checklist", "jury"]
_SOURCES: dict[PromptKind, tuple[str, ...]] = {"checklist": ("checklist.j2",), "jury": ("jury.j2", "checklist.j2")}
LAYER_NAMES: dict[Layer, str] = {
    "span": "span (one model or tool call)",
    "trace": "turn (one request and its answer)",
    "conversation": "session (one conversation)",
    "engagement": "engagement window (one user's sessions)",
}


def _json_data(value: object) -> str:
    """JSON that cannot contain a tag: `<`, `>` and `&` are escaped as in HTML-safe JSON."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


@lru_cache(maxsize=8)
def _environment(templates: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates),
        autoescape=False,  # the prompt is not HTML; evidence is made inert by `_json_data` instead
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["xattr"] = lambda s: html.escape(str(s), quote=True)
    return env


def template_dir(suite_files: Path | None) -> Path:
    """Where prompts render from: a suite's `templates/` (what a person approved) when it has them, else the
    package's own."""
    if suite_files is not None and all((suite_files / "templates" / n).is_file() for n in _SOURCES["jury"]):
        return (suite_files / "templates").resolve()
    return TEMPLATES


def template_digest(kind: PromptKind, templates: Path | None = None) -> str:
    """Content hash of the templates a prompt kind renders (plus sigma's and this module's versions); from
    `templates` (a suite's copy) or the package's."""
    templates = templates if templates is not None else TEMPLATES
    h = hashlib.sha256(f"prompt{VERSION}\x1fsigma{schema.VERSION}".encode())
    for name in _SOURCES[kind]:
        h.update(b"\x1e" + name.encode() + b"\x1f")
        h.update((templates / name).read_bytes())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Block:
    """One `<evidence>` block of a prompt."""

    id: str
    unit_id: str
    field: str
    shown: int
    total: int
    content: str


def _parts(f: ShownField, flags: Sequence[tuple[int, int]]) -> list[tuple[int, int, bool]]:
    """The shown ranges split at injection-flag boundaries: (start, end, flagged)."""
    out: list[tuple[int, int, bool]] = []
    for a, b in f.shown:
        cuts = sorted({a, b} | {x for s, e in flags for x in (s, e) if a < x < b})
        for s, e in zip(cuts, cuts[1:], strict=False):
            flagged = any(fs < e and fe > s for fs, fe in flags)
            if out and out[-1][1] == s and out[-1][2] == flagged:
                out[-1] = (out[-1][0], e, flagged)
            else:
                out.append((s, e, flagged))
    return out


def _content(f: ShownField, flags: Sequence[tuple[int, int]], redactions: Sequence[Redaction]) -> str:
    parts = _parts(f, flags)
    texts = redact_pieces(f.text, [(s, e) for s, e, _ in parts], redactions)
    if len(parts) == 1 and not parts[0][2]:
        return _json_data(texts[0])
    value: list[object] = []
    prev_end = 0
    for (s, e, flagged), text in zip(parts, texts, strict=True):
        if s > prev_end:
            value.append({"omitted_chars": s - prev_end})
        value.append({"injection_flagged": text} if flagged else text)
        prev_end = e
    if prev_end < len(f.text):
        value.append({"omitted_chars": len(f.text) - prev_end})
    return _json_data(value)


def evidence_blocks(
    evidence: Sequence[ProjectedEvidence],
    *,
    injection_ranges: Sequence[EvidencePointer],
    redactor: Redactor,
) -> tuple[list[Block], list[list[str]]]:
    """The blocks of all projections (shared fields once) and, per projection, the block ids it may use."""
    variants: dict[str, list[tuple[tuple[int, int], ...]]] = {}
    for ev in evidence:
        for f in ev.fields:
            seen = variants.setdefault(f.id, [])
            if f.shown not in seen:
                seen.append(f.shown)
    blocks: dict[tuple[str, tuple[tuple[int, int], ...]], Block] = {}
    uses: list[list[str]] = []
    found: dict[str, list[Redaction]] = {}
    for ev in evidence:
        ids: list[str] = []
        for f in ev.fields:
            key = (f.id, f.shown)
            if key not in blocks:
                n = variants[f.id].index(f.shown)
                bid = f.id if len(variants[f.id]) == 1 else f"{f.id}#{n + 1}"
                flags = [(p.start, p.end) for p in injection_ranges
                         if p.unit_id == f.unit_id and p.field == f.field and p.end > p.start]
                if f.text not in found:
                    found[f.text] = list(redactor.find(f.text))
                blocks[key] = Block(
                    id=bid,
                    unit_id=redact_text(f.unit_id, redactor),
                    field=f.field,
                    shown=f.shown_chars,
                    total=f.original_chars,
                    content=_content(f, flags, found[f.text]),
                )
            ids.append(blocks[key].id)
        uses.append(ids)
    return list(blocks.values()), uses


def render_prompt(
    kind: PromptKind,
    *,
    unit_id: str,
    layer: Layer,
    definitions: Sequence[DataDefinition],
    evidence: Sequence[ProjectedEvidence],
    injection_ranges: Sequence[EvidencePointer] = (),
    redactor: Redactor,
    templates: Path | None = None,
) -> str:
    """The prompt for one unit's items (`evidence[i]` is `definitions[i]`'s projection), rendered from the
    templates in `templates` (a suite's approved copy, or the package's)."""
    return _render(kind, unit_id=unit_id, layer_name=LAYER_NAMES[layer],
                   items=[(d.id, d.question) for d in definitions], evidence=evidence,
                   injection_ranges=injection_ranges, redactor=redactor, templates=templates)


def _render(
    kind: PromptKind, *, unit_id: str, layer_name: str, items: Sequence[tuple[str, str]],
    evidence: Sequence[ProjectedEvidence], injection_ranges: Sequence[EvidencePointer], redactor: Redactor,
    templates: Path | None,
) -> str:
    blocks, uses = evidence_blocks(evidence, injection_ranges=injection_ranges, redactor=redactor)
    listed = [
        {"id": key, "question": redact_text(question, redactor), "evidence_ids": ids or ["(none)"]}
        for (key, question), ids in zip(items, uses, strict=True)
    ]
    template = _environment(templates if templates is not None else TEMPLATES).get_template(_SOURCES[kind][0])
    return template.render(
        unit_id=redact_text(unit_id, redactor),
        layer_name=layer_name,
        items=listed,
        blocks=blocks,
    )


# ---- several units in one prompt (`batch = "conversation"`) ---------------------------------------------

BATCH_UNIT: dict[Layer, str] = {"trace": "turn"}
"""The layers whose units can share a prompt, and what each unit is called in its answer keys."""
BATCH_LAYER_NAMES: dict[Layer, str] = {
    "trace": "session, turn by turn (each turn one request and its answer; each checklist item names its turn)",
}


@dataclass(frozen=True)
class BatchUnit:
    """One unit of a batched prompt: its id, its items and their projections (`evidence[i]` is
    `definitions[i]`'s)."""

    unit_id: str
    definitions: Sequence[DataDefinition]
    evidence: Sequence[ProjectedEvidence]


def batch_key(layer: Layer, position: int, item_id: str) -> str:
    """The answer key of item `item_id` of the batch's `position`-th unit (from 1): `turn_3.substance.i1`."""
    return f"{BATCH_UNIT[layer]}_{position}.{item_id}"


def _prefixed(evidence: ProjectedEvidence, prefix: str) -> ProjectedEvidence:
    """The projection with its evidence ids under the unit's prefix (`turn_3.request`): two turns' fields of
    one name are different evidence, and each item lists only its own turn's."""
    fields = tuple(f.model_copy(update={"id": f"{prefix}.{f.id}"}) for f in evidence.fields)
    return evidence.model_copy(update={"fields": fields})


def render_batch_prompt(
    kind: PromptKind,
    *,
    batch_id: str,
    layer: Layer,
    units: Sequence[BatchUnit],
    injection_ranges: Sequence[EvidencePointer] = (),
    redactor: Redactor,
    templates: Path | None = None,
) -> str:
    """One prompt for the items of several units of one layer (the turns of conversation `batch_id`), from the
    same templates as a unit's: each item keyed `batch_key(layer, position, id)`, its evidence the blocks of its
    own unit (`turn_<position>.<field>`), the flagged ranges of every unit marked where they are."""
    if layer not in BATCH_UNIT:
        raise ValueError(f"units of the {layer} layer are not batched")
    items: list[tuple[str, str]] = []
    evidence: list[ProjectedEvidence] = []
    for n, u in enumerate(units, start=1):
        for d, ev in zip(u.definitions, u.evidence, strict=True):
            items.append((batch_key(layer, n, d.id), d.question))
            evidence.append(_prefixed(ev, f"{BATCH_UNIT[layer]}_{n}"))
    return _render(kind, unit_id=batch_id, layer_name=BATCH_LAYER_NAMES[layer], items=items, evidence=evidence,
                   injection_ranges=injection_ranges, redactor=redactor, templates=templates)
