"""The normalized four-layer model every evaluator reads: span, turn (trace), conversation, engagement.

All models are frozen and forbid extra fields, so a unit read from the store is exactly what an adapter
produced. Ids are stable: taken from the source where it has them, otherwise derived from content
(never from file paths or read order), so ingesting the same data twice yields the same ids.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field, PrivateAttr

from agent_factory.frozen import Frozen

SpanKind = Literal["llm", "tool", "retrieval", "reasoning", "agent", "embedding", "other"]
"""What a span did. `reasoning` is a thinking step; `agent` an orchestrating or chain step."""

SpanStatus = Literal["ok", "error", "unset"]

DeliveryState = Literal[
    "delivered", "failed_empty", "failed_error", "failed_truncated", "cut_off", "handed_off", "closing", "unknown"
]
"""Whether the turn's answer reached the user: delivered, or how it failed; `handed_off` when the agent handed the
conversation to a person (neither delivered nor failed); `closing` for the user's last message that expects no
reply (a goodbye, a simulator's stop token), which ends the session and is no turn with a missing answer;
`cut_off` when the run was stopped (its step or turn limit) before the agent answered the turn, as a source that
records whole runs shows it (tau-bench: the episode ends on a tool result or on a user message without the stop
token); `unknown` if the source cannot tell."""

FAILED_STATES: frozenset[str] = frozenset({"failed_empty", "failed_error", "failed_truncated", "cut_off"})
"""Delivery states that are failures: the answer did not reach the user."""

COMPLETE_WITHOUT = "coverage.complete_without"
"""Unit attribute by which an adapter declares the text fields a complete record of the unit may lack: a
list of `request` / `answer` on a turn, `input` / `output` on a span (an assistant message that only calls
tools has no text, and that is the whole message). Coverage reads it (evaluators.provenance.coverage)."""
TextField = Literal["request", "answer", "input", "output", "error"]
"""Fields of a unit that evidence pointers may cite."""




class EvidencePointer(Frozen):
    """Where a datum's evidence is: a unit, one of its text fields and a character range in it."""

    unit_id: str
    """Id of the span, turn, conversation or engagement cited."""
    field: str
    """Name of the cited field (`request`, `answer`, `input`, `output`, `error`, or `attributes.<key>`)."""
    start: int = Field(ge=0)
    """First character of the cited range (0-based, in Python str indices)."""
    end: int = Field(ge=0)
    """One past the last character of the cited range."""


class TokenUsage(Frozen):
    """Token counts reported for a model call."""

    input: int | None = Field(default=None, ge=0)
    """Prompt / input tokens."""
    output: int | None = Field(default=None, ge=0)
    """Completion / output tokens."""
    total: int | None = Field(default=None, ge=0)
    """Total tokens, as reported or input + output."""


class Span(Frozen):
    """One model, tool, retrieval or reasoning call: the span layer's unit."""

    id: str
    """Span id, unique within its trace (as given by the source)."""
    trace_id: str
    """Id of the trace (turn) the span belongs to."""
    parent_id: str | None = None
    """Parent span id within the same trace; None for a root."""
    kind: SpanKind = "other"
    """Normalized step type."""
    name: str = ""
    """The source's span or step name."""
    input: str | None = None
    """Input text (prompt, tool arguments, query) as recorded; None if absent."""
    output: str | None = None
    """Output text (completion, tool result, retrieved text); None if absent."""
    status: SpanStatus = "unset"
    """Status reported by the source."""
    error: str | None = None
    """Error message, if the span failed."""
    start: datetime | None = None
    """Start time (timezone-aware UTC) if known."""
    end: datetime | None = None
    """End time if known."""
    duration_ms: float | None = Field(default=None, ge=0)
    """Duration in milliseconds, as given or end - start."""
    model: str | None = None
    """Model name for llm spans."""
    tokens: TokenUsage | None = None
    """Token usage for llm spans."""
    attributes: dict[str, Any] = Field(default_factory=dict)
    """Remaining source attributes, JSON-compatible, for rules that need them."""


ANNOTATION_KINDS: frozenset[str] = frozenset({"mistake_agent", "mistake_step", "mistake_reason", "label", "labels"})
"""Event kinds that are annotations, not outcomes: a label someone put on a run (the agent or step that failed it,
why). They are stored with the run, but joined to no flag: a step index is no measure of how the task went."""
TASK_END_KINDS: frozenset[str] = frozenset({"task_reward", "task_success"})
"""Outcome kinds that grade a finished task: a session carrying one has ended (it is not censored)."""
TASK_FINISHED = "task_finished"
"""Conversation attribute an adapter sets to True when its source says the task ran to its end (a benchmark record
that was graded): the session has ended, whatever its outcome."""


class OutcomeEvent(Frozen):
    """Something observed about a user or session after the fact: a reward, feedback, a return; or, for the kinds
    of `ANNOTATION_KINDS`, a label (see `is_outcome`)."""

    id: str
    """Stable event id."""
    kind: str
    """Event type, e.g. `task_reward`, `feedback`, `purchase`."""
    user_id: str | None = None
    """User the event belongs to."""
    conversation_id: str | None = None
    """Conversation the event belongs to, when it is tied to one."""
    time: datetime | None = None
    """When it happened."""
    value: float | str | bool | None = None
    """The observed value (e.g. reward 0.0 / 1.0)."""
    attributes: dict[str, Any] = Field(default_factory=dict)
    """Extra fields of the source (task id, trial, ...)."""

    @property
    def is_outcome(self) -> bool:
        """Whether the event is an outcome (a reward, feedback, task success) that flags may be compared with;
        False for an annotation (`ANNOTATION_KINDS`), which is kept but compared with nothing."""
        return self.kind not in ANNOTATION_KINDS


class Turn(Frozen):
    """One request and its answer, with the span tree that produced it: the trace layer's unit."""

    id: str
    """Turn id (the trace id for OTel sources)."""
    conversation_id: str
    """Conversation (session) this turn belongs to."""
    user_id: str | None = None
    """The end user, if known."""
    index: int = Field(default=0, ge=0)
    """Position of the turn in its conversation (0-based, by start time or source order)."""
    request: str | None = None
    """The user's request text."""
    answer: str | None = None
    """The answer text delivered (or attempted)."""
    mode: str | None = None
    """Agent mode (e.g. normal / simple / deep) when the source records one."""
    delivery: DeliveryState = "unknown"
    """Whether the answer reached the user."""
    start: datetime | None = None
    """When the request arrived."""
    end: datetime | None = None
    """When the answer finished."""
    latency_ms: float | None = Field(default=None, ge=0)
    """Request-to-answer time in milliseconds."""
    spans: tuple[Span, ...] = ()
    """The span tree, in source order; parents precede children where the source allows."""
    attributes: dict[str, Any] = Field(default_factory=dict)
    """Turn-level source attributes (account type, request source, ...)."""
    _stored: Stored | None = PrivateAttr(default=None)
    # What ingest established about the turn and stored beside it (its provenance record), attached when the
    # store reads the turn back so no run computes it again. Not the turn's data: not dumped, hashed or compared.


class Stored:
    """Something computed from a unit at ingest and read back with it, with the inputs it was computed from.

    `inputs` holds the unit's field values (the objects themselves) that the result depends on; a reader
    trusts `payload` only for a unit whose fields are still those (`matches`): a copy with one of them changed
    (`model_copy(update=...)`) computes afresh. Equal to any other `Stored` and to None, so attaching one never
    makes two units unequal.
    """

    __slots__ = ("payload", "inputs")

    def __init__(self, payload: Any, inputs: tuple[Any, ...]) -> None:
        self.payload = payload
        """As stored (JSON text), or parsed by its reader on first use (kept, so it is parsed once)."""
        self.inputs = inputs

    def matches(self, inputs: tuple[Any, ...]) -> bool:
        """Whether the unit's current field values are the ones the payload was computed from."""
        return len(inputs) == len(self.inputs) and all(
            a is b or a == b for a, b in zip(self.inputs, inputs, strict=True))

    def __eq__(self, other: object) -> bool:
        return other is None or isinstance(other, Stored)

    __hash__ = None  # type: ignore[assignment]


class Conversation(Frozen):
    """One session of a user with the agent: the conversation layer's unit."""

    id: str
    """Session id (from the source, or derived)."""
    user_id: str | None = None
    """The end user, if known."""
    start: datetime | None = None
    """Start of the first turn."""
    end: datetime | None = None
    """End of the last turn."""
    turns: tuple[Turn, ...] = ()
    """The turns, in order."""
    events: tuple[OutcomeEvent, ...] = ()
    """Outcome events tied to this conversation (rewards, feedback)."""
    attributes: dict[str, Any] = Field(default_factory=dict)
    """Conversation-level source attributes (task id, trial, termination source, ...)."""


class Engagement(Frozen):
    """One user's sessions and outcome events within a window: the engagement layer's unit."""

    id: str
    """Stable id derived from user and window."""
    user_id: str
    """The user."""
    window_start: datetime | None = None
    """Start of the window."""
    window_end: datetime | None = None
    """End of the window; events after it are unobserved (censored)."""
    conversation_ids: tuple[str, ...] = ()
    """The user's sessions in the window, in time order."""
    events: tuple[OutcomeEvent, ...] = ()
    """Outcome events of the user in the window."""
