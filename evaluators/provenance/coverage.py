"""Evidence coverage: which text fields of a turn reached us, whole or cut, so no evaluator judges text it
never saw in full.

For each field (the turn's request and answer, each span's input and output) the result says whether it is
present, empty or missing - an empty answer is evidence (a delivery failure), a missing one is a gap in the
evidence - how many characters arrived, the original length a source declares, and whether the text was cut:
declared longer than what arrived, a truncation marker, a finish reason of `length`, or cut at ingest
because it was over the field limit (`adapters.jsonio.CUT_MARKER`).

What a complete record is depends on the format, so the adapter says it: a unit's `coverage.complete_without`
attribute (`adapters.model.COMPLETE_WITHOUT`) lists the fields it may lack and still be whole (an assistant
message that only calls tools has no text output). A turn whose delivery is `handed_off`, `closing` or a failure
with no reply expects no answer; an answer cut by the model (`finish_reason=length`) is flagged `truncated` but
is a complete record of what was delivered. A request or answer taken from a model call rather than the root span
names its source. Every incomplete field carries the pointer to its gap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import Field

from agent_factory.adapters.assemble import (
    ANSWER_SOURCE,
    ANSWER_SPAN,
    FINISH_KEYS,
    REQUEST_SOURCE,
    REQUEST_SPAN,
    TRUNCATION_FINISH,
)
from agent_factory.adapters.jsonio import CUT_PATTERN
from agent_factory.adapters.model import COMPLETE_WITHOUT, EvidencePointer, Span, Turn
from agent_factory.evaluators.core.memo import memos
from agent_factory.evaluators.provenance import normalize as _norm
from agent_factory.evaluators.provenance.segments import lookup, lookup_in
from agent_factory.frozen import Frozen
from agent_factory.knowledge_packs import KnowledgePack

VERSION = f"5+norm{_norm.VERSION}"
"""Version of the coverage logic, including the normalization used to find truncation markers."""


FieldState = Literal["present", "empty", "missing"]
"""`missing`: the source did not record the field (None); `empty`: recorded but blank; `present`: has text."""
TruncationReason = Literal[
    "cut_at_ingest", "declared_shorter", "marker_end", "marker_inside", "finish_length", "delivery_truncated"
]
"""Why a field is judged cut: cut at ingest for being over the field limit, fewer characters than declared, a
marker at the end or inside the text, a `length` finish reason, or the turn's delivery state `failed_truncated`."""
Waiver = Literal["adapter", "delivery"]
"""Why a missing field is no gap: the adapter declared the unit complete without it, or the turn's delivery
state expects no answer."""
NO_ANSWER_EXPECTED = frozenset({"handed_off", "closing", "failed_error", "failed_empty", "cut_off"})
"""Delivery states after which no answer text is to be seen: a hand-off to a person, the user's goodbye, and a
failure whose answer never came (the error, the empty reply or the run's stop is the evidence)."""
DELIVERED_CUTS = frozenset({"finish_length", "delivery_truncated"})
"""Truncation reasons that describe the answer as delivered (cut by the model or in delivery), not the record:
the field is flagged `truncated` but complete."""


class FieldCoverage(Frozen):
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
    """Whether the field must be present: the pack requires it (see `CoveragePolicy`) and nothing waives it."""
    waived_by: Waiver | None = None
    """What made a field the pack requires optional for this unit, if anything."""
    source: str | None = None
    """Where a turn's text was taken from when not from its root span (`llm_input`, `llm_output`), as the
    turn's `request_source` / `answer_source` declares; None for the unit's own field."""
    source_unit_id: str | None = None
    """The span the text was taken from, with `source`."""
    complete: bool
    """False when the field is truncated, or required and missing."""
    pointer: EvidencePointer | None = None
    """Where the gap is, for an incomplete field: the cut marker, the whole cut text, or the empty range of
    the missing field."""


class Coverage(Frozen):
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


def _declared(get: Callable[[str], Any], keys: tuple[str, ...]) -> tuple[int | None, str | None]:
    for key in keys:
        value = get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        if isinstance(value, int | float) and value >= 0 and float(value).is_integer():
            return int(value), key
    return None, None


def _finish_length(get: Callable[[str], Any]) -> bool:
    # The keys turn assembly reads (`adapters.assemble.FINISH_KEYS`), looked up flat or nested.
    for key in FINISH_KEYS:
        value = get(key)
        values = value if isinstance(value, list | tuple) else [value]
        if any(isinstance(v, str) and v.strip().lower() in TRUNCATION_FINISH for v in values):
            return True
    return False


def _ingest_cut(text: str) -> tuple[int, int, int] | None:
    """(start, end, original length) of the first ingest cut marker in `text`, if any."""
    if "[agent-factory: " not in text:  # the marker's fixed prefix: most texts are dismissed here
        return None
    m = CUT_PATTERN.search(text)
    return (m.start(), m.end(), int(m.group(2))) if m else None


def _marker_range(text: str, marker: str) -> tuple[int, int] | None:
    folded = text.casefold()
    if len(folded) != len(text):  # folding changed lengths (ß -> ss): its indices are not the text's
        return None
    at = folded.rfind(marker.casefold())
    return (at, at + len(marker)) if at >= 0 else None


def waivers(attributes: Mapping[str, Any]) -> frozenset[str]:
    """The fields a unit's adapter declared it complete without (`coverage.complete_without`)."""
    value = lookup(attributes, COMPLETE_WITHOUT)
    if isinstance(value, str):
        value = [value]
    return frozenset(v for v in value if isinstance(v, str)) if isinstance(value, list | tuple) else frozenset()


def _marker(text: str, markers: tuple[str, ...], inside_markers: tuple[str, ...]
            ) -> tuple[str | None, TruncationReason | None]:
    folded = _norm.fold(text).rstrip()
    inside: str | None = None
    for m in markers:
        fm = _norm.fold(m).strip()  # cached: markers repeat on every call
        if folded.endswith(fm):
            return m, "marker_end"
        if inside is None and m in inside_markers and fm in folded:
            inside = m
    return (inside, "marker_inside") if inside is not None else (None, None)


def _text_facts(text: str, pack: KnowledgePack
                ) -> tuple[tuple[int, int, int] | None, tuple[str | None, TruncationReason | None]]:
    """The ingest cut and the truncation marker of a text: they depend on the text and the pack's markers only,
    so each distinct text is read once in a run (`evaluators.core.memo`)."""
    run = memos()
    key = run.identity("coverage.markers", max_entries=16).get(
        None, pack, None, lambda: (pack.truncation_markers(), pack.truncation_markers(inside=True)))
    return run.text("coverage.text_facts").get(key, text, lambda: (_ingest_cut(text), _marker(text, *key)))


def field_coverage(
    text: str | None,
    *,
    unit_id: str,
    field: Literal["request", "answer", "input", "output"],
    label: str,
    get: Callable[[str], Any],
    pack: KnowledgePack,
    required: bool,
    finish_length: bool,
    delivery_truncated: bool = False,
    waived_by: Waiver | None = None,
    source: str | None = None,
    source_unit_id: str | None = None,
) -> FieldCoverage:
    """Coverage of one field; `get` reads its unit's attributes (`lookup_in`), `finish_length` says whether the
    unit's finish reason, which describes this field, is a cut (`_finish_length`). `required` is the pack's
    requirement; `waived_by` lifts it."""
    state: FieldState = "missing" if text is None else ("empty" if not text.strip() else "present")
    chars = 0 if text is None else len(text)
    declared, declared_by = _declared(get, pack.coverage.length_keys.get(field, ()))
    reasons: list[TruncationReason] = []
    gap: tuple[int, int] | None = None
    cut, (marker, why) = _text_facts(text, pack) if text else (None, (None, None))
    if cut is not None:
        reasons.append("cut_at_ingest")
        gap = cut[:2]
        if declared is None:
            declared, declared_by = cut[2], "ingest"
    if declared is not None and text is not None and declared > chars and cut is None:
        reasons.append("declared_shorter")
    if why is not None:
        reasons.append(why)
        gap = gap or _marker_range(text or "", marker or "")
    if finish_length:
        reasons.append("finish_length")
    if delivery_truncated:
        reasons.append("delivery_truncated")
    truncated = bool(reasons)
    waived = waived_by if required and state == "missing" else None
    required = required and waived_by is None
    # An answer the model or the delivery cut short is recorded whole: what the user got is all there is, and
    # the cut is Execution's finding (`failed_truncated`), not a gap in the evidence.
    cut_in_record = any(r not in DELIVERED_CUTS for r in reasons)
    complete = not cut_in_record and not (required and state == "missing")
    pointer = None
    if not complete:
        start, end = gap or (0, chars)
        pointer = EvidencePointer(unit_id=unit_id, field=field, start=start, end=end)
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
        waived_by=waived,
        source=source,
        source_unit_id=source_unit_id,
        complete=complete,
        pointer=pointer,
    )


def _span_fields(span: Span, pack: KnowledgePack) -> list[FieldCoverage]:
    required = pack.coverage.required_span_fields.get(span.kind, ())
    declared = waivers(span.attributes)
    get = lookup_in(span.attributes)
    out = []
    for field in ("input", "output"):
        # An errored span's error message is its evidence; a missing output is then expected, not a gap.
        needed = field in required and not (field == "output" and span.status == "error" and span.error)
        out.append(
            field_coverage(
                getattr(span, field), unit_id=span.id, field=field, label=f"spans.{span.id}.{field}",
                get=get, pack=pack, required=needed, finish_length=field == "output" and _finish_length(get),
                waived_by="adapter" if field in declared else None,
            )
        )
    return out


def _source(turn: Turn, source_key: str, span_key: str) -> tuple[str | None, str | None]:
    source, span = turn.attributes.get(source_key), turn.attributes.get(span_key)
    return (source if isinstance(source, str) else None), (span if isinstance(span, str) else None)


def coverage(turn: Turn, pack: KnowledgePack) -> Coverage:
    """Coverage of every text field of `turn` under the pack's coverage policy."""
    required = pack.coverage.required_turn_fields
    declared = waivers(turn.attributes)
    req_source, req_span = _source(turn, REQUEST_SOURCE, REQUEST_SPAN)
    ans_source, ans_span = _source(turn, ANSWER_SOURCE, ANSWER_SPAN)
    answer_waiver: Waiver | None = (
        "adapter" if "answer" in declared else "delivery" if turn.delivery in NO_ANSWER_EXPECTED else None
    )
    get = lookup_in(turn.attributes)
    fields = [
        field_coverage(
            turn.request, unit_id=turn.id, field="request", label="request", get=get,
            pack=pack, required="request" in required, finish_length=False,
            waived_by="adapter" if "request" in declared else None, source=req_source, source_unit_id=req_span,
        ),
        field_coverage(
            turn.answer, unit_id=turn.id, field="answer", label="answer", get=get,
            pack=pack, required="answer" in required, finish_length=_finish_length(get),
            delivery_truncated=turn.delivery == "failed_truncated", waived_by=answer_waiver,
            source=ans_source, source_unit_id=ans_span,
        ),
    ]
    for span in turn.spans:
        fields += _span_fields(span, pack)
    incomplete = tuple(f.label for f in fields if not f.complete)
    return Coverage(turn_id=turn.id, fields=tuple(fields), complete=not incomplete, incomplete=incomplete)
