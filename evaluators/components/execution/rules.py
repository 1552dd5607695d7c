"""Execution's rule collectors: pure functions of one turn (or one span) and the knowledge pack.

A rule answers from evidence the unit carries; where the evidence is absent (no span tree, no timing, no mode)
it returns `uncollected` with the reason instead of guessing, because no model could see more than the rule.
Evidence pointers cite the turn's `answer` / `mode` / `latency_ms` field or a span's `error` / `output` field;
numeric fields are cited with an empty character range (the pointer names the field, not a substring).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from agent_factory.adapters.model import FAILED_STATES, EvidencePointer, Span, Turn
from agent_factory.evaluators.components.execution.definitions import (
    CHAIN_COMPLETE,
    CHAIN_REQUIREMENTS,
    DELIVERED,
    FAST_ANSWER,
    HAS_RETRIEVAL,
    HAS_THINKING,
    LATENCY_MS,
    MODE,
    PROGRESS_AT_STOP,
    SPAN_ERROR,
)
from agent_factory.evaluators.core.registry import RuleAnswer, RuleContext, SpanView, rule

VERSION = "2"
"""Version of these rules; the cache also keys on this module's source."""

PROGRESS_KEYS = ("agent.progress", "job.progress", "task.progress")
"""Attributes (turn first, then spans) that carry an asynchronous job's progress at its end."""

_NO_SPANS = "no span tree recorded for this turn"


def text_pointer(unit_id: str, field: str, text: str | None) -> EvidencePointer:
    """A pointer to the whole of a text field (an empty range when the text is empty or absent)."""
    return EvidencePointer(unit_id=unit_id, field=field, start=0, end=len(text or ""))


def field_pointer(unit_id: str, field: str) -> EvidencePointer:
    """A pointer to a non-text field (a number, an attribute): the field is named, the range is empty."""
    return EvidencePointer(unit_id=unit_id, field=field, start=0, end=0)


def _steps(turn: Turn) -> list[Span]:
    # The root span is the turn itself, not a step of it.
    return [s for s in turn.spans if s.parent_id is not None] or [s for s in turn.spans if s.kind != "agent"]


def _first_of(spans: Iterable[Span], kinds: frozenset[str]) -> Span | None:
    return next((s for s in spans if s.kind in kinds), None)


@rule(MODE)
def mode(turn: Turn, ctx: RuleContext) -> RuleAnswer:
    if not turn.mode:
        return RuleAnswer("uncollected", reason="the source records no agent mode")
    return RuleAnswer("yes", fact=turn.mode, evidence=(text_pointer(turn.id, "mode", turn.mode),))


@rule(DELIVERED)
def delivered(turn: Turn, ctx: RuleContext) -> RuleAnswer:
    state = turn.delivery
    answer = text_pointer(turn.id, "answer", turn.answer)
    if state == "delivered":
        return RuleAnswer("yes", evidence=(answer,), reason="a non-empty answer was delivered")
    if state == "unknown":
        return RuleAnswer("uncollected", reason="the source shows neither an answer nor an error for this turn")
    if state == "handed_off":
        span = turn.attributes.get("handoff_span_id")
        evidence: tuple[EvidencePointer, ...] = (text_pointer(span, "output", None),) if isinstance(span, str) else ()
        return RuleAnswer("not_applicable", fact=state, evidence=evidence,
                          reason=f"handed off to a person ({turn.attributes.get('handoff_name') or 'hand-off'}): "
                                 "neither delivered nor failed")
    if state == "closing":
        return RuleAnswer("not_applicable", fact=state, reason="the user's closing message expects no answer")
    if state == "failed_error":
        erroring = [s for s in turn.spans if s.status == "error"]
        evidence = tuple(text_pointer(s.id, "error", s.error) for s in erroring) or (answer,)
        first = next((s.error for s in erroring if s.error), None)
        return RuleAnswer("no", fact=state, evidence=evidence,
                          reason=f"the turn ended in an error: {first}" if first else "the turn ended in an error")
    if state == "cut_off":
        # The evidence is where the run stopped: the last step's output, or the request, that got no answer.
        ended = turn.spans[-1] if turn.spans else None
        stop = (text_pointer(ended.id, "output", ended.output) if ended is not None
                else text_pointer(turn.id, "request", turn.request))
        return RuleAnswer("no", fact=state, evidence=(stop,),
                          reason="the run stopped before the agent answered (its step or turn limit), not an empty "
                                 "answer")
    why = {"failed_empty": "the answer is empty", "failed_truncated": "the answer was cut off"}[state]
    return RuleAnswer("no", fact=state, evidence=(answer,), reason=why)


def _has_kind(turn: Turn, kind: str, name: str) -> RuleAnswer:
    if not turn.spans:
        return RuleAnswer("uncollected", reason=_NO_SPANS)
    found = _first_of(turn.spans, frozenset({kind}))
    if found is None:
        return RuleAnswer("no", reason=f"no span of kind {kind!r} among {len(turn.spans)} spans")
    return RuleAnswer("yes", evidence=(text_pointer(found.id, "output", found.output),),
                      reason=f"{name} step in span {found.name or found.id!r}")


@rule(HAS_THINKING)
def has_thinking(turn: Turn, ctx: RuleContext) -> RuleAnswer:
    return _has_kind(turn, "reasoning", "thinking")


@rule(HAS_RETRIEVAL, layers=("trace",), summary="The turn has a retrieval step.")
def has_retrieval(turn: Turn, ctx: RuleContext) -> RuleAnswer:
    return _has_kind(turn, "retrieval", "retrieval")


@rule(CHAIN_COMPLETE)
def chain_complete(turn: Turn, ctx: RuleContext) -> RuleAnswer:
    if turn.mode is None or turn.mode not in CHAIN_REQUIREMENTS:
        return RuleAnswer("not_applicable", reason=f"no chain requirement stated for mode {turn.mode!r}")
    need = CHAIN_REQUIREMENTS[turn.mode]
    if not need:
        return RuleAnswer("not_applicable", reason=f"mode {turn.mode!r} needs no particular step")
    if not turn.spans:
        return RuleAnswer("uncollected", reason=_NO_SPANS)
    steps = _steps(turn)
    found = [(name, _first_of(steps, kinds)) for name, kinds in need]
    missing = [name for name, span in found if span is None]
    evidence = tuple(text_pointer(s.id, "output", s.output) for _, s in found if s is not None)
    if missing:
        return RuleAnswer("no", fact=", ".join(missing), evidence=evidence,
                          reason=f"mode {turn.mode!r} lacks: {', '.join(missing)}")
    return RuleAnswer("yes", evidence=evidence, reason=f"all steps mode {turn.mode!r} needs are present")


@rule(LATENCY_MS)
def latency_ms(turn: Turn, ctx: RuleContext) -> RuleAnswer:
    if turn.latency_ms is None:
        return RuleAnswer("uncollected", reason="the source records no timing for this turn")
    return RuleAnswer("yes", fact=float(turn.latency_ms), evidence=(field_pointer(turn.id, "latency_ms"),))


@rule(FAST_ANSWER)
def fast_answer(turn: Turn, ctx: RuleContext) -> RuleAnswer:
    if turn.latency_ms is None:
        return RuleAnswer("uncollected", reason="the source records no timing for this turn")
    band_ms = ctx.pack.baselines.fast_failure_seconds * 1000.0
    fast = turn.latency_ms < band_ms
    return RuleAnswer("yes" if fast else "no", fact=float(turn.latency_ms),
                      evidence=(field_pointer(turn.id, "latency_ms"),),
                      reason=f"{turn.latency_ms / 1000:.1f} s {'<' if fast else '>='} {band_ms / 1000:g} s")


def _progress_value(raw: Any) -> float | None:
    """A progress reading as a share in [0, 1]; percentages (1 < x <= 100) are scaled; None if unreadable."""
    if isinstance(raw, bool) or raw is None:
        return None
    try:
        x = float(raw)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(x) or x < 0:
        return None
    if x > 1.0:
        x = x / 100.0 if x <= 100.0 else math.nan
    return x if math.isfinite(x) else None


def find_progress(turn: Turn) -> tuple[str, str, Any] | None:
    """(unit id, attribute key, raw value) of the first progress attribute on the turn, then its spans."""
    for unit_id, attrs in [(turn.id, turn.attributes), *((s.id, s.attributes) for s in turn.spans)]:
        for key in PROGRESS_KEYS:
            if attrs.get(key) is not None:
                return unit_id, key, attrs[key]
    return None


@rule(PROGRESS_AT_STOP)
def progress_at_stop(turn: Turn, ctx: RuleContext) -> RuleAnswer:
    found = find_progress(turn)
    if found is None:
        if turn.mode == "deep" and turn.delivery in FAILED_STATES:
            return RuleAnswer("uncollected", reason="a deep job stopped but the source records no progress")
        return RuleAnswer("not_applicable", reason="no progress recorded: not a stopped asynchronous job")
    unit_id, key, raw = found
    value = _progress_value(raw)
    pointer = field_pointer(unit_id, f"attributes.{key}")
    if value is None:
        return RuleAnswer("uncollected", evidence=(pointer,), reason=f"unreadable progress value {raw!r}")
    return RuleAnswer("yes", fact=value, evidence=(pointer,))


@rule(SPAN_ERROR)
def span_error(view: SpanView, ctx: RuleContext) -> RuleAnswer:
    span = view.span
    if span.status == "error":
        return RuleAnswer("yes", fact=span.error, evidence=(text_pointer(span.id, "error", span.error),),
                          reason=span.error or "status error without a message")
    return RuleAnswer("no", reason=f"status {span.status}")
