"""rho of Execution (docs/method.md section 4): did the turn's chain run and did its answer reach the user.

Every item here is collected by a rule: the evidence (span kinds, status, timings, the answer text) is
structured, so a model adds nothing. Trace-layer items are about one turn, `execution.span_error` about one
span. Ids are constants so analyses and other components refer to them without string typos.
"""

from __future__ import annotations

from agent_factory.adapters.model import SpanKind
from agent_factory.evaluators.core.model import DataDefinition

MODE = "execution.mode"
DELIVERED = "execution.delivered"
HAS_THINKING = "execution.has_thinking"
HAS_RETRIEVAL = "execution.has_retrieval"
CHAIN_COMPLETE = "execution.chain_complete"
LATENCY_MS = "execution.latency_ms"
FAST_ANSWER = "execution.fast_answer"
PROGRESS_AT_STOP = "execution.progress_at_stop"
SPAN_ERROR = "execution.span_error"

CHAIN_REQUIREMENTS: dict[str, tuple[tuple[str, frozenset[SpanKind]], ...]] = {
    "normal": (("thinking", frozenset({"reasoning"})), ("retrieval", frozenset({"retrieval"}))),
    "deep": (
        ("thinking", frozenset({"reasoning"})),
        ("retrieval", frozenset({"retrieval"})),
        ("tool or model step", frozenset({"tool", "llm"})),
    ),
    "simple": (),
}
"""Steps each mode needs: (step name, span kinds any of which is that step). A versioned constant rather than a
pack field because the pack's `Baselines` holds latencies only; it is written into the definition's description,
so editing it changes the definition's digest and every cache key that depends on it."""


def _requirement_text() -> str:
    parts = []
    for mode, steps in CHAIN_REQUIREMENTS.items():
        need = " + ".join(f"{name} ({'/'.join(sorted(kinds))})" for name, kinds in steps) or "nothing"
        parts.append(f"{mode}: {need}")
    return "; ".join(parts)


def _d(id: str, question: str, *, layer: str = "trace", kind: str = "check", description: str = "") -> DataDefinition:
    return DataDefinition(
        id=id, question=question, component="execution", layer=layer, kind=kind,
        rule=id, tiers=("rule",), description=description,
    )


DEFINITIONS: tuple[DataDefinition, ...] = (
    _d(MODE, "Which agent mode served this turn?", kind="fact",
       description="The mode the source records (normal / simple / deep ...); uncollected when it records none."),
    _d(DELIVERED, "Did the turn's answer reach the user?",
       description="no when the answer is empty, the turn ended in an error, the answer was cut off, or the run "
                   "stopped before any answer (a step or turn limit); the fact holds the failure kind (failed_empty "
                   "/ failed_error / failed_truncated / cut_off). Uncollected when the "
                   "source cannot tell (no answer recorded and no error). not_applicable, fact `handed_off`, "
                   "when the agent handed the user to a person (the pack's hand-off tools and spans): neither a "
                   "delivery nor a failure."),
    _d(HAS_THINKING, "Did the turn run a thinking (reasoning) step?",
       description="yes when a span of kind `reasoning` is present; uncollected when no span tree was recorded."),
    _d(HAS_RETRIEVAL, "Did the turn run a retrieval step?",
       description="yes when a span of kind `retrieval` is present; uncollected when no span tree was recorded."),
    _d(CHAIN_COMPLETE, "Are the steps the turn's mode needs all present?",
       description="Steps needed per mode (span kinds in brackets): " + _requirement_text() + ". not_applicable "
                   "for a mode with no stated requirement or no mode; uncollected when no span tree was recorded."),
    _d(LATENCY_MS, "How long did the turn take from request to answer (ms)?", kind="fact"),
    _d(FAST_ANSWER, "Did the answer come back faster than the pack's fast-failure band?",
       description="Latency under `pack.baselines.fast_failure_seconds` (5 s by default); in the study such "
                   "normal-mode answers failed 38.7% of the time."),
    _d(PROGRESS_AT_STOP, "How far had the asynchronous job progressed when it stopped (0-1)?", kind="fact",
       description="From the `agent.progress` attribute; not_applicable for turns that record no progress "
                   "(not a stopped job); uncollected for a failed deep turn that records none."),
    _d(SPAN_ERROR, "Did this span end in an error?", layer="span",
       description="The span's status is error; evidence is its error message."),
)
"""Execution's data definitions, trace layer first."""
