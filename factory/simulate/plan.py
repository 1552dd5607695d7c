"""What one simulated turn is (`TurnPlan`) and how the agent executed it (`Exec`), before it becomes spans."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal

from agent_factory.factory.simulate.texts import Request

Segment = Literal["real", "internal", "test", "suggestion", "synthetic"]
"""Traffic segments: real users, internal and test accounts, cached suggestion clicks, synthetic probes."""
NS = 1_000_000_000
"""Nanoseconds per second."""
SEEN_ANSWER = ("delivered", "failed_truncated")
"""Delivery states in which the user sees (at least the start of) the answer's text."""


@dataclass(slots=True)
class Exec:
    """How the agent executed one turn (natural, before any planted defect)."""

    failed: bool
    kind: str  # delivered | failed_empty | failed_error | failed_truncated
    latency_s: float
    has_thinking: bool
    has_retrieval: bool
    extra_llm: bool = False
    n_tools: int = 0
    planned_steps: int = 0
    done_steps: int = 0
    progress: float | None = None


@dataclass(slots=True)
class TurnPlan:
    """Everything about one simulated turn: what is logged as spans and what truth records."""

    trace_id: str
    user_id: str
    session_id: str
    turn_index: int
    segment: Segment
    account_type: str
    request_source: str
    synthetic: bool
    mode: str
    request: Request
    """The logged request (after planted defects)."""
    natural_request: Request
    """The request as the user drew it, before planted defects rewrote it: the user's next message is drawn
    from this one, so runs with and without defects stay paired."""
    answer: str | None
    """The logged answer; None when the turn ended in an error (no output recorded)."""
    delivery: str
    """Delivery state as the logged evidence shows it (after planted defects)."""
    natural_delivery: str
    ex: Exec
    start_ns: int
    latency_ns: int
    error_message: str | None = None
    is_replay: bool = False
    """Whether the logged request resends the previous one of its session by the replay definition."""
    is_verbatim_replay: bool = False
    replay_of: str | None = None
    """The turn resent (the previous turn of the session) when `is_replay`."""
    redo_of: str | None = None
    disclosure: bool = False
    template: bool = False
    planted: list[str] = field(default_factory=list)
    injection: str | None = None
    secrets: list[dict[str, str]] = field(default_factory=list)
    defect_user: bool = False
    """Whether the turn's user was drawn into the planted-defect group."""
    clarifying: bool = False
    """Whether the agent's answer, as planned before any failure, asks the user to clarify; the user saw the
    question when the logged delivery is in `SEEN_ANSWER` (a cut answer keeps its opening question)."""

    @property
    def asks_clarification(self) -> bool:
        """Whether the logged answer asks the user to clarify (planted blanking removes the question)."""
        return self.clarifying and self.delivery in SEEN_ANSWER

    @property
    def end_ns(self) -> int:
        """When the turn ends (ns since the epoch)."""
        return self.start_ns + self.latency_ns


def trace_id(seed: int, *parts: object) -> str:
    """A 32-hex trace id derived from the seed and the turn's position (stable across runs)."""
    return hashlib.sha256(repr((seed, *parts)).encode()).hexdigest()[:32]
