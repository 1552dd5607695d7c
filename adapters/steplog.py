"""Adapters for task-run logs (docs/method.md section 10): the generic step log and the run contract.

Both describe one agent run of one task as an ordered list of steps; each run becomes one Conversation
with one Turn whose spans are the steps. The accepted schemas are the pydantic models below, so a record
that does not fit is quarantined with the dotted path of the offending field (`steps[3].ended_at`).

`step-log` (one run per JSON line, or a JSON array of runs)::

    {"run_id": "r1", "task_id": "t7", "trial": 0, "agent": "planner-v2", "input": "Book a flight ...",
     "steps": [{"index": 0, "type": "model_call", "name": "gpt-4o", "input": "...", "output": "...",
                "reasoning": "...", "started_at": "2025-01-01T10:00:00Z", "duration_ms": 850,
                "tokens": {"input": 900, "output": 40}},
               {"index": 1, "type": "tool_call", "name": "search", "arguments": {"q": "..."},
                "result": [...], "error": null, "started_at": "...", "ended_at": "...",
                "state_before": {...}, "state_after": {...}}],
     "success": true, "final_output": "Booked."}

`run-contract` (one JSON document, or JSON lines of them)::

    {"contract_id": "c1", "task": {"id": "t7", "input": "Book a flight ..."},
     "steps": [{"type": "thought", "content": "..."},
               {"type": "tool_call", "tool": "search", "arguments": {...}, "result": ..., "timestamp": "...",
                "duration_ms": 120},
               {"type": "final_output", "content": "Booked."}],
     "outcome": {"success": true, "reward": 1.0}}
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, overload

from pydantic import Field, StrictBool, ValidationError, ValidationInfo, field_validator, model_validator

from agent_factory.adapters.base import AdapterItem
from agent_factory.adapters.chat_io import (
    RecordProblem,
    first_record,
    json_safe,
    json_type,
    problem_from,
    read_conversations,
    to_text,
)
from agent_factory.adapters.model import Conversation, DeliveryState, OutcomeEvent, Span, SpanKind, TokenUsage, Turn
from agent_factory.adapters.source import Source
from agent_factory.frozen import Frozen

StepType = Literal["model_call", "tool_call", "reasoning", "thought", "retrieval", "embedding", "agent", "other"]
"""Step types of the step log; `other` is for anything else (its `name` says what)."""

STEP_KIND: dict[str, SpanKind] = {
    "model_call": "llm", "tool_call": "tool", "reasoning": "reasoning", "thought": "reasoning",
    "retrieval": "retrieval", "embedding": "embedding", "agent": "agent", "other": "other",
}
"""Span kind of each step type."""

ContractStepType = Literal["thought", "tool_call", "final_output"]
"""Step types of the run contract."""

_STEPLOG_ONLY_KEYS = {"index", "started_at", "ended_at", "name", "input", "output", "reasoning",
                      "state_before", "state_after", "tokens", "model"}
_CONTRACT_ONLY_KEYS = {"content", "tool", "timestamp"}
_CONTRACT_TYPES = {"thought", "tool_call", "final_output"}


@overload
def _utc(v: datetime) -> datetime: ...
@overload
def _utc(v: datetime | None) -> datetime | None: ...
def _utc(v: datetime | None) -> datetime | None:
    # Naive timestamps are taken as UTC, so every span time is comparable.
    if v is None:
        return None
    return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)


class StepTokens(Frozen):
    """Token counts of a model call."""

    input: int | None = Field(default=None, ge=0, strict=True)
    """Prompt tokens."""
    output: int | None = Field(default=None, ge=0, strict=True)
    """Completion tokens."""
    total: int | None = Field(default=None, ge=0, strict=True)
    """Total tokens, if reported separately."""


class Step(Frozen):
    """One step of a step-log run. Needs `started_at` and one of `ended_at` / `duration_ms`."""

    index: int = Field(ge=0, strict=True)
    """Position of the step in the run (unique within the run)."""
    type: StepType
    """What the step did."""
    name: str | None = None
    """Model name for a model call, tool name for a tool call, else a label."""
    input: Any = None
    """Prompt or query (string, or JSON kept as compact JSON text)."""
    output: Any = None
    """Completion, retrieved text or any output."""
    reasoning: str | None = None
    """Reasoning text of a model call (or the thought of a reasoning step)."""
    arguments: dict[str, Any] | str | None = None
    """Tool arguments (object or JSON string)."""
    result: Any = None
    """Tool result."""
    error: str | None = None
    """Error message if the step failed."""
    started_at: datetime
    """Start time (ISO 8601 or Unix seconds; naive means UTC)."""
    ended_at: datetime | None = None
    """End time; not before `started_at`."""
    duration_ms: float | None = Field(default=None, ge=0)
    """Duration in milliseconds (used when `ended_at` is absent)."""
    state_before: Any = None
    """Environment state before the step (any JSON)."""
    state_after: Any = None
    """Environment state after the step (any JSON)."""
    tokens: StepTokens | None = None
    """Token counts of a model call."""
    model: str | None = None
    """Model name, if not given as `name`."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Anything else, kept in the span's attributes."""

    @field_validator("ended_at")
    @classmethod
    def _not_before_start(cls, v: datetime | None, info: ValidationInfo) -> datetime | None:
        start = _utc(info.data.get("started_at"))
        if v is not None and start is not None and _utc(v) < start:
            raise ValueError(f"ended_at {v.isoformat()} is before started_at {start.isoformat()}")
        return v

    @model_validator(mode="after")
    def _has_end(self) -> Step:
        if self.ended_at is None and self.duration_ms is None:
            raise ValueError("a step needs ended_at or duration_ms")
        return self


class Run(Frozen):
    """One step-log run: a task attempt by an agent, as its ordered steps."""

    run_id: str = Field(min_length=1)
    """Run id, unique within the file; becomes the conversation id."""
    task_id: str | int | None = None
    """Task the run attempts."""
    trial: int | None = Field(default=None, ge=0, strict=True)
    """Trial number of the task (for pass^k)."""
    agent: str | None = None
    """Agent name or version."""
    input: str | None = None
    """The task's initial input as given to the agent (the turn's request)."""
    steps: list[Step]
    """The steps, in order."""
    success: StrictBool | None = None
    """Whether the run met the task's success criteria."""
    final_output: str | None = None
    """The run's final answer."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Anything else, kept in the conversation's attributes."""

    @field_validator("run_id", mode="before")
    @classmethod
    def _int_id(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


class ContractStep(Frozen):
    """One step of a run contract. A `tool_call` needs `tool`; a `final_output` needs `content`."""

    type: ContractStepType
    """What the step is."""
    content: str | None = None
    """Thought text, or the final answer."""
    tool: str | None = None
    """Tool name of a tool call."""
    arguments: dict[str, Any] | str | None = None
    """Tool arguments (object or JSON string)."""
    result: Any = None
    """Tool result."""
    error: str | None = None
    """Error message if the step failed."""
    timestamp: datetime | None = None
    """Start time (ISO 8601 or Unix seconds; naive means UTC); steps must not go back in time."""
    duration_ms: float | None = Field(default=None, ge=0)
    """Duration in milliseconds."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Anything else, kept in the span's attributes."""


class ContractOutcome(Frozen):
    """How the run ended, as judged by the task's checks."""

    success: StrictBool | None = None
    """Whether the task succeeded (a `task_success` event)."""
    reward: float | None = Field(default=None, strict=True)
    """Numeric reward (a `task_reward` event)."""
    reason: str | None = None
    """Why, in words."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Anything else."""


class RunContract(Frozen):
    """A run contract: one run of one task. Needs `run_id` or `contract_id`."""

    run_id: str | None = Field(default=None, min_length=1)
    """Run id (preferred as the conversation id)."""
    contract_id: str | None = Field(default=None, min_length=1)
    """Contract id, used when there is no `run_id`."""
    task: dict[str, Any] | None = None
    """The task: `id`, and its request as `input`, `instruction`, `description` or `prompt`."""
    steps: list[ContractStep]
    """The steps, in order."""
    outcome: ContractOutcome | None = None
    """The task's verdict."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Anything else, kept in the conversation's attributes."""

    @field_validator("run_id", "contract_id", mode="before")
    @classmethod
    def _int_id(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


def _validate(model: type[Frozen], value: Any, what: str) -> Any:
    if not isinstance(value, dict):
        raise RecordProblem(None, f"{what} must be an object, got {json_type(value)}")
    try:
        return model.model_validate(value)
    except ValidationError as e:
        raise problem_from(e) from None


def _delivery(answer: str | None, last_error: str | None, n_steps: int) -> DeliveryState:
    if answer is not None and answer.strip():
        return "delivered"
    if last_error:
        return "failed_error"
    return "unknown" if n_steps == 0 and answer is None else "failed_empty"


def _times(spans: list[Span]) -> tuple[datetime | None, datetime | None, float | None]:
    starts = [s.start for s in spans if s.start is not None]
    if not starts:
        return None, None, None
    # A step with a start but no end (a thought, a final output) still means the run lasted until then.
    start, end = min(starts), max(starts + [s.end for s in spans if s.end is not None])
    return start, end, (end - start).total_seconds() * 1000.0


def _event(cid: str, kind: str, value: float | bool, extra: dict[str, Any]) -> OutcomeEvent:
    return OutcomeEvent(id=f"{cid}/{kind}", kind=kind, conversation_id=cid, value=value, attributes=extra)


def _step_span(step: Step, cid: str, trace: str) -> Span:
    start = _utc(step.started_at)
    end = _utc(step.ended_at)
    if end is None and start is not None and step.duration_ms is not None:
        end = start + timedelta(milliseconds=step.duration_ms)
    if step.duration_ms is not None:
        duration = step.duration_ms
    else:
        assert end is not None  # a Step has ended_at or duration_ms (its validator)
        duration = (end - start).total_seconds() * 1000.0
    is_tool = step.type == "tool_call"
    text_in = to_text(step.arguments) if is_tool and step.arguments is not None else to_text(step.input)
    out = step.output if step.output is not None else step.result
    if STEP_KIND[step.type] == "reasoning" and step.reasoning is not None and out is None:
        out = step.reasoning
    attrs: dict[str, Any] = {"step_index": step.index, "step_type": step.type}
    for key in ("state_before", "state_after"):
        if key in step.model_fields_set:
            attrs[key] = json_safe(getattr(step, key))
    if step.reasoning is not None and out is not step.reasoning:
        attrs["reasoning"] = step.reasoning
    if is_tool and step.input is not None and step.arguments is not None:
        attrs["input"] = json_safe(step.input)
    if step.metadata:
        attrs["metadata"] = json_safe(step.metadata)
    tokens = None
    if (t := step.tokens) is not None:
        total = t.total
        if total is None and t.input is not None and t.output is not None:
            total = t.input + t.output
        tokens = TokenUsage(input=t.input, output=t.output, total=total)
    return Span(
        id=f"{cid}/step-{step.index}", trace_id=trace, kind=STEP_KIND[step.type], name=step.name or step.type,
        input=text_in, output=to_text(out), status="error" if step.error else "ok", error=step.error,
        start=start, end=end, duration_ms=duration,
        model=step.model or (step.name if step.type == "model_call" else None), tokens=tokens, attributes=attrs,
    )


def steplog_conversation(value: Any) -> Conversation:
    """One step-log run as a Conversation with one Turn; `RecordProblem` naming the field if invalid."""
    run: Run = _validate(Run, value, "run")
    seen: dict[int, int] = {}
    for i, step in enumerate(run.steps):
        if step.index in seen:
            raise RecordProblem(f"steps[{i}].index",
                                f"step index {step.index} already used by steps[{seen[step.index]}]")
        seen[step.index] = i
    cid = run.run_id
    trace = f"{cid}/turn-0"
    spans = [_step_span(s, cid, trace) for s in run.steps]
    last = run.steps[-1] if run.steps else None
    answer = run.final_output
    if answer is None and last is not None and last.type == "model_call":
        answer = to_text(last.output)
    start, end, latency = _times(spans)
    turn = Turn(
        id=trace, conversation_id=cid, index=0, request=run.input, answer=answer,
        delivery=_delivery(answer, last.error if last else None, len(spans)),
        start=start, end=end, latency_ms=latency, spans=tuple(spans), attributes={"run_id": cid},
    )
    attrs: dict[str, Any] = {"run_id": cid, "task_id": run.task_id, "trial": run.trial, "agent": run.agent,
                             "success": run.success, "step_count": len(spans)}
    if run.metadata:
        attrs["metadata"] = json_safe(run.metadata)
    events: tuple[OutcomeEvent, ...] = ()
    if run.success is not None:
        events = (_event(cid, "task_success", run.success, {"task_id": run.task_id, "trial": run.trial}),)
    return Conversation(id=cid, start=start, end=end, turns=(turn,), events=events, attributes=attrs)


_REQUEST_KEYS = ("input", "instruction", "description", "prompt")


def _contract_span(step: ContractStep, i: int, cid: str, trace: str) -> Span:
    start = _utc(step.timestamp)
    end = start + timedelta(milliseconds=step.duration_ms) if start and step.duration_ms is not None else None
    kinds: dict[str, SpanKind] = {"thought": "reasoning", "tool_call": "tool", "final_output": "llm"}
    kind = kinds[step.type]
    attrs: dict[str, Any] = {"step_index": i, "step_type": step.type}
    if step.metadata:
        attrs["metadata"] = json_safe(step.metadata)
    is_tool = step.type == "tool_call"
    return Span(
        id=f"{cid}/step-{i}", trace_id=trace, kind=kind, name=step.tool if is_tool and step.tool else step.type,
        input=to_text(step.arguments) if is_tool else None,
        output=to_text(step.result) if is_tool else step.content,
        status="error" if step.error else "ok", error=step.error,
        start=start, end=end, duration_ms=step.duration_ms, attributes=attrs,
    )


def contract_conversation(value: Any) -> Conversation:
    """One run contract as a Conversation with one Turn; `RecordProblem` naming the field if invalid."""
    rc: RunContract = _validate(RunContract, value, "run contract")
    if rc.run_id is None and rc.contract_id is None:
        raise RecordProblem("run_id", "a run contract needs run_id or contract_id")
    previous: datetime | None = None
    for i, step in enumerate(rc.steps):
        if step.type == "tool_call" and not step.tool:
            raise RecordProblem(f"steps[{i}].tool", "a tool_call step needs the tool's name in 'tool'")
        if step.type == "final_output" and step.content is None:
            raise RecordProblem(f"steps[{i}].content", "a final_output step needs its text in 'content'")
        t = _utc(step.timestamp)
        if t is not None and previous is not None and t < previous:
            raise RecordProblem(f"steps[{i}].timestamp",
                                f"timestamp {t.isoformat()} is before the previous step's {previous.isoformat()}")
        previous = t or previous
    cid = rc.run_id or rc.contract_id or ""
    trace = f"{cid}/turn-0"
    spans = [_contract_span(s, i, cid, trace) for i, s in enumerate(rc.steps)]
    finals = [s.content for s in rc.steps if s.type == "final_output"]
    answer = finals[-1] if finals else None
    task = rc.task or {}
    request = next((task[k] for k in _REQUEST_KEYS if isinstance(task.get(k), str)), None)
    task_id = task.get("id", task.get("task_id"))
    last = rc.steps[-1] if rc.steps else None
    start, end, latency = _times(spans)
    turn = Turn(
        id=trace, conversation_id=cid, index=0, request=request, answer=answer,
        delivery=_delivery(answer, last.error if last else None, len(spans)),
        start=start, end=end, latency_ms=latency, spans=tuple(spans), attributes={"run_id": cid},
    )
    out = rc.outcome
    attrs: dict[str, Any] = {"run_id": rc.run_id, "contract_id": rc.contract_id, "task_id": json_safe(task_id),
                             "step_count": len(spans)}
    if task:
        attrs["task"] = json_safe(task)
    if rc.metadata:
        attrs["metadata"] = json_safe(rc.metadata)
    events: list[OutcomeEvent] = []
    if out is not None:
        attrs["outcome"] = json_safe(out.model_dump(exclude_none=True, exclude_defaults=True))
        extra = {"task_id": json_safe(task_id)}
        if out.success is not None:
            events.append(_event(cid, "task_success", out.success, extra))
        if out.reward is not None:
            events.append(_event(cid, "task_reward", out.reward, extra))
    return Conversation(id=cid, start=start, end=end, turns=(turn,), events=tuple(events), attributes=attrs)


def _step_dicts(rec: Any) -> list[dict[str, Any]] | None:
    if not isinstance(rec, dict) or "messages" in rec or "traj" in rec:
        return None
    steps = rec.get("steps")
    if not isinstance(steps, list):
        return None
    return [s for s in steps if isinstance(s, dict)]


def looks_like_contract(rec: Any) -> bool:
    """A record with `steps` typed only thought / tool_call / final_output and none of the step-log keys."""
    steps = _step_dicts(rec)
    if steps is None or any(_STEPLOG_ONLY_KEYS & s.keys() for s in steps):
        return False
    if any(s.get("type") not in _CONTRACT_TYPES for s in steps):
        return False
    return "contract_id" in rec or bool(steps) or "outcome" in rec or "task" in rec


def looks_like_steplog(rec: Any) -> bool:
    """A record with `run_id` and `steps` that is not a run contract."""
    return _step_dicts(rec) is not None and "run_id" in rec and not looks_like_contract(rec)


class StepLogAdapter:
    """Generic step logs of task runs (docs/method.md section 10), one run per record."""

    name = "step-log"
    description = "step log of task runs: {run_id, steps: [{index, type, started_at, ...}], success?}"
    reads_sources = True

    def sniff(self, head: bytes, path: Path) -> bool:
        """A run with `run_id` and `steps` that is not a run contract."""
        return looks_like_steplog(first_record(head))

    def read(self, source: Source | Path) -> Iterator[AdapterItem]:
        """Stream runs as conversations; bad records become `Quarantine` items."""
        return read_conversations(source, steplog_conversation, kind="run")


class RunContractAdapter:
    """Run-contract documents: thought / tool_call / final_output steps and an outcome."""

    name = "run-contract"
    description = "run contract: {run_id|contract_id, task?, steps: [{type: thought|tool_call|final_output}], outcome?}"
    reads_sources = True

    def sniff(self, head: bytes, path: Path) -> bool:
        """A record whose steps are typed thought / tool_call / final_output only."""
        return looks_like_contract(first_record(head))

    def read(self, source: Source | Path) -> Iterator[AdapterItem]:
        """Stream contracts as conversations; bad records become `Quarantine` items."""
        return read_conversations(source, contract_conversation, kind="run")
