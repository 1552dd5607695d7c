"""Provenance rules: a turn's segment, evidence coverage and injection flags as atomic data.

Each rule reads the provenance record ingest stored for the turn (`stored_json`: carried by a turn read from
the store, trusted only under the same logic version, knowledge digest and turn fields), so a run does not scan and
measure every text again, nor build the record's models; without one it calls the pure provenance functions
(`segment_turn`, `coverage`, `scan_turn`, `scan_turn_suspects`) with the context's pack. Both give the same answers.
Several data read the same provenance, so the last few results are remembered per (turn, pack) object in the
run's memos (`evaluators.core.memo`): the answer depends only on those two frozen inputs, so this changes nothing
but time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from agent_factory.adapters.model import EvidencePointer, Turn
from agent_factory.evaluators.components.provenance.definitions import (
    EVIDENCE_COMPLETE,
    FIELD_ITEMS,
    INJECTION_FLAGGED,
    SEGMENT,
)
from agent_factory.evaluators.core.memo import memos
from agent_factory.evaluators.core.registry import RuleAnswer, RuleContext, rule
from agent_factory.evaluators.provenance import VERSION as PROVENANCE_VERSION
from agent_factory.evaluators.provenance import (
    Coverage,
    InjectionFlag,
    coverage,
    scan_turn,
    scan_turn_suspects,
    segment_turn,
    stored_json,
    stored_record,
)
from agent_factory.knowledge_packs import KnowledgePack

VERSION = f"2;{PROVENANCE_VERSION}"
"""Version of these rules, including the provenance logic they call."""

MAX_EVIDENCE = 20
"""Pointers kept per answer."""

T = TypeVar("T")


def _memo(what: str, turn: Turn, pack: KnowledgePack, make: Callable[[], T]) -> T:
    # The run's table (`evaluators.core.memo`): the data of one turn are collected together, so a few entries do.
    return memos().identity("provenance.turn", max_entries=64).get(what, turn, pack, make)


def turn_coverage(turn: Turn, pack: KnowledgePack) -> Coverage:
    """`coverage(turn, pack)`: the one ingest stored, if the turn carries it and it still holds; otherwise
    computed once for the data of one turn."""
    rec = stored_record(turn, pack)
    if rec is not None:
        return rec.coverage
    return _memo("coverage", turn, pack, lambda: coverage(turn, pack))


def turn_flags(turn: Turn, pack: KnowledgePack) -> list[InjectionFlag]:
    """`scan_turn(turn, pack)`: stored by ingest, or computed once for the data of one turn (as coverage)."""
    rec = stored_record(turn, pack)
    if rec is not None:
        return list(rec.injections)
    return _memo("flags", turn, pack, lambda: scan_turn(turn, pack))


class _Field(NamedTuple):
    """What the coverage rules read of one field's coverage (`FieldCoverage`)."""

    label: str
    field: str
    unit_id: str
    chars: int
    complete: bool
    reasons: tuple[str, ...]
    state: str


class _Read(NamedTuple):
    """What the rules read of a turn's provenance record: fields, flags and suspects (pattern id, pointer, detail)
    and segment."""

    fields: tuple[_Field, ...]
    flags: tuple[tuple[str, EvidencePointer], ...]
    segment: str
    rule: str | None
    segment_evidence: tuple[EvidencePointer, ...]
    suspects: tuple[tuple[str, EvidencePointer, str | None], ...] = ()


def _from_json(rec: dict[str, Any]) -> _Read:
    """The parts of a stored record (its JSON) the rules read; no model is built but the evidence pointers.
    A field at its default may be left out (`record_json`): `reasons`, `injections`, `rule` and `evidence` are
    read with the models' defaults. Raises KeyError / TypeError on a record of another shape."""
    seg = rec["segment"]
    return _Read(
        tuple(_Field(f["label"], f["field"], f["unit_id"], f["chars"], f["complete"], tuple(f.get("reasons", ())),
                     f["state"]) for f in rec["coverage"]["fields"]),
        tuple((f["pattern_id"], EvidencePointer(**f["pointer"])) for f in rec.get("injections", ())),
        seg["segment"], seg.get("rule"), tuple(EvidencePointer(**e["pointer"]) for e in seg.get("evidence", ())),
        tuple((f["pattern_id"], EvidencePointer(**f["pointer"]), f.get("detail")) for f in rec.get("suspects", ())),
    )


def _computed(turn: Turn, pack: KnowledgePack) -> _Read:
    seg = segment_turn(turn, pack)
    flags = turn_flags(turn, pack)
    suspects = () if flags else tuple((f.pattern_id, f.pointer, f.detail) for f in scan_turn_suspects(turn, pack))
    return _Read(
        tuple(_Field(f.label, f.field, f.unit_id, f.chars, f.complete, f.reasons, f.state)
              for f in turn_coverage(turn, pack).fields),
        tuple((f.pattern_id, f.pointer) for f in flags),
        seg.segment, seg.rule, tuple(e.pointer for e in seg.evidence), suspects,
    )


def _read(turn: Turn, pack: KnowledgePack) -> _Read:
    """The turn's provenance as the rules read it: from the record ingest stored while it holds (parsed once
    per turn, without building its models), else computed; the same either way."""
    def make() -> _Read:
        rec = stored_json(turn, pack)
        if rec is not None:
            try:
                return _from_json(rec)
            except (KeyError, TypeError, ValueError):  # a record of another shape: compute afresh
                pass
        return _computed(turn, pack)

    return _memo("read", turn, pack, make)


def _pointer(fc: _Field) -> EvidencePointer:
    return EvidencePointer(unit_id=fc.unit_id, field=fc.field, start=0, end=fc.chars)


def _why(fc: _Field) -> str:
    return f"{fc.label}: " + (", ".join(fc.reasons) if fc.reasons else f"{fc.state} but required")


def _wrong_unit(unit: object) -> RuleAnswer:
    return RuleAnswer("uncollected", reason=f"provenance rules read turns, got {type(unit).__name__}")


@rule(SEGMENT)
def segment(unit: object, ctx: RuleContext) -> RuleAnswer:
    """Fact: the turn's segment; evidence: the satisfied conditions of the matching rule."""
    if not isinstance(unit, Turn):
        return _wrong_unit(unit)
    read = _read(unit, ctx.pack)
    why = f"rule {read.rule}" if read.rule else "no segmentation rule matched"
    return RuleAnswer("yes", fact=read.segment, evidence=read.segment_evidence, reason=why)


def _fields_answer(fields: list[_Field], what: str) -> RuleAnswer:
    if not fields:
        return RuleAnswer("not_applicable", reason=f"no {what}")
    bad = [f for f in fields if not f.complete]
    if not bad:
        return RuleAnswer("yes", reason=f"{len(fields)} {what} complete")
    return RuleAnswer(
        "no", fact="; ".join(f.label for f in bad), evidence=tuple(_pointer(f) for f in bad[:MAX_EVIDENCE]),
        reason="; ".join(_why(f) for f in bad[:MAX_EVIDENCE]),
    )


@rule(EVIDENCE_COMPLETE)
def evidence_complete(unit: object, ctx: RuleContext) -> RuleAnswer:
    """Every field complete; otherwise the fact lists the incomplete field labels and evidence cites them."""
    if not isinstance(unit, Turn):
        return _wrong_unit(unit)
    return _fields_answer(list(_read(unit, ctx.pack).fields), "fields")


def _field_rule(name: str, select: Callable[[_Field], bool], what: str) -> Callable[[object, RuleContext], RuleAnswer]:
    def collect(unit: object, ctx: RuleContext) -> RuleAnswer:
        if not isinstance(unit, Turn):
            return _wrong_unit(unit)
        return _fields_answer([f for f in _read(unit, ctx.pack).fields if select(f)], what)

    collect.__name__ = collect.__qualname__ = name.replace(".", "_")
    collect.__doc__ = f"Completeness of the turn's {what}."
    return rule(name)(collect)


# Module names: the registry registers the rules of this module it finds tagged among them.
request_complete = _field_rule(FIELD_ITEMS["request"], lambda f: f.label == "request", "request")
answer_complete = _field_rule(FIELD_ITEMS["answer"], lambda f: f.label == "answer", "answer")
span_inputs_complete = _field_rule(FIELD_ITEMS["span_inputs"], lambda f: f.field == "input", "span inputs")
span_outputs_complete = _field_rule(FIELD_ITEMS["span_outputs"], lambda f: f.field == "output", "span outputs")


@rule(INJECTION_FLAGGED)
def injection_flagged(unit: object, ctx: RuleContext) -> RuleAnswer:
    """Yes when any text of the turn is flagged (a lexicon pattern, or the intent scorer sure of an attack); the
    fact lists the pattern ids. Abstains when the scan found text suspicious but could not decide (a suspect: an
    evaluator addressed without a clear verdict, a score in the middle band), so a configured model decides; in a
    rules-only run the datum is then uncollected, never a pass. No otherwise."""
    if not isinstance(unit, Turn):
        return _wrong_unit(unit)
    read = _read(unit, ctx.pack)
    flags = read.flags
    if not flags and read.suspects:
        why = "; ".join(f"{pattern}: {detail or 'suspect'}" for pattern, _pointer, detail in read.suspects[:3])
        return RuleAnswer(None, evidence=tuple(p for _id, p, _d in read.suspects[:MAX_EVIDENCE]),
                          reason=f"undecided by the rules, for a model: {why}")
    if not flags:
        return RuleAnswer("no", reason="no injection found")
    ids = list(dict.fromkeys(pattern for pattern, _pointer in flags))
    return RuleAnswer(
        "yes", fact=", ".join(ids), evidence=tuple(pointer for _pattern, pointer in flags[:MAX_EVIDENCE]),
        reason=f"{len(flags)} match(es): {', '.join(ids)}",
    )
