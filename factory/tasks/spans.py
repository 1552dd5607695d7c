"""Task trials as OpenTelemetry traces in OTLP/JSON (issue 35): the run contract in the shape the project's own
OTel adapter reads (`adapters/otel/otlp.py`), with the GenAI semantic conventions.

Each trial is one trace: a root span `invoke_agent <suite>` (the agent, the task, the trial, how it ended, the
sandbox's tables before and after), a `chat <model>` span per decision of the agent (the scripted agents' model is
`script:<name>`; the decision is its output message: a tool call or the answer), and an `execute_tool <name>` span
per tool call (arguments, result, error status and message, timestamps). Ids are derived from the trial (suite,
task, trial, agent, start time), so the same trial always gives the same trace and two runs never share one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from agent_factory.adapters.otel.values import encode_attributes
from agent_factory.evaluators.tasks.model import TaskRun
from agent_factory.factory.tasks.agents import Answer, ToolCall
from agent_factory.factory.tasks.runner import CallRecord, Decision, TrialResult

SERVICE = "agent-factory-tasks"
"""The `service.name` of the traces the runner writes."""


def _hex(*parts: object, length: int) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:length]


def trace_id(r: TrialResult) -> str:
    """The trial's trace id (32 hex digits)."""
    return _hex(r.suite, r.task_id, r.trial, r.agent, r.start_ns, length=32)


def conversation_id(r: TrialResult) -> str:
    """The trial's conversation in the store: `task-<suite>-<task>-<trial>-<trace id's first 8>`."""
    return f"task-{r.suite}-{r.task_id}-{r.trial}-{trace_id(r)[:8]}"


def _span(r: TrialResult, index: int, name: str, start: int, end: int, attrs: dict[str, object],
          error: str | None) -> dict[str, Any]:
    root = index == 0
    return {
        "traceId": trace_id(r), "spanId": _hex(trace_id(r), index, length=16),
        "parentSpanId": "" if root else _hex(trace_id(r), 0, length=16), "name": name, "kind": 1 if root else 3,
        "startTimeUnixNano": str(start), "endTimeUnixNano": str(end), "attributes": encode_attributes(attrs),
        "status": {"code": "STATUS_CODE_ERROR", "message": error} if error else {"code": "STATUS_CODE_OK"},
    }


def _call_id(step: int) -> str:
    """The id of the trial's `step`-th tool call: on the model call's tool-call part and on the tool span that
    executed it, so the adapter pairs them (a call without a tool span, one the step limit refused, stays a call
    nobody executed)."""
    return f"call-{step}"


def _output_message(d: Decision, step: int) -> str:
    cost = d.action.cost
    parts: list[dict[str, Any]] = [{"type": "reasoning", "content": cost.reasoning}] if cost and cost.reasoning else []
    if isinstance(d.action, Answer):
        parts.append({"type": "text", "content": d.action.text})
    else:
        parts.append({"type": "tool_call", "id": _call_id(step), "name": d.action.tool,
                      "arguments": d.action.args})
    return json.dumps([{"role": "assistant", "parts": parts}])


def _usage(d: Decision) -> dict[str, object]:
    """The decision's model, tokens and requests: a model agent's response as it gave them; a scripted agent's
    claimed tokens as output tokens (it called no model)."""
    cost = d.action.cost
    if cost is None:
        return {"gen_ai.response.model": None, "gen_ai.usage.output_tokens": d.action.tokens}
    return {"gen_ai.response.model": cost.model, "gen_ai.usage.input_tokens": cost.input_tokens,
            "gen_ai.usage.output_tokens": cost.output_tokens, "task.model_requests": cost.requests}


def _decision_spans(r: TrialResult, inputs: Sequence[str], first: int) -> list[dict[str, Any]]:
    spans, turn, step = [], 0, 0
    for i, d in enumerate(r.decisions):
        step += isinstance(d.action, ToolCall)
        # The user's message the decision answers or works on: the multi-turn task's current turn.
        user = inputs[min(turn, len(inputs) - 1)]
        spans.append(_span(r, first + i, f"chat {r.agent}", d.start_ns, d.end_ns, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": r.agent, "gen_ai.response.model": r.agent,
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": user}]}]),
            "gen_ai.output.messages": _output_message(d, step), **{k: v for k, v in _usage(d).items() if v is not None},
        }, None))
        turn += isinstance(d.action, Answer)
    return spans


def _tool_span(r: TrialResult, index: int, c: CallRecord) -> dict[str, Any]:
    return _span(r, index, f"execute_tool {c.tool}", c.start_ns, c.end_ns, {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": c.tool,
        "gen_ai.tool.call.id": _call_id(c.step), "gen_ai.tool.call.arguments": json.dumps(c.args),
        "gen_ai.tool.call.result": c.output if c.ok else c.error, "task.step": c.step,
    }, c.error)


def trial_spans(r: TrialResult, inputs: Sequence[str]) -> list[dict[str, Any]]:
    """The trial's spans (OTLP/JSON span objects): the root, its decisions, its tool calls. `inputs`: the task's
    user messages."""
    root = _span(r, 0, f"invoke_agent {r.suite}", r.start_ns, r.end_ns, {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": r.agent,
        "gen_ai.conversation.id": conversation_id(r), "task.suite": r.suite, "task.id": r.task_id,
        "task.trial": r.trial, "task.ended_by": r.ended_by, "task.success": r.success,
        "input.value": "\n\n".join(inputs), "output.value": r.answers[-1] if r.answers else None,
        "gen_ai.usage.output_tokens": r.tokens,
        "sandbox.state.before": json.dumps(r.tables_before, default=str),
        "sandbox.state.after": json.dumps(r.tables_after, default=str),
    }, None if r.ended_by == "answered" else f"{r.ended_by}: {r.reason}")
    decisions = _decision_spans(r, inputs, 1)
    tools = [_tool_span(r, 1 + len(decisions) + i, c) for i, c in enumerate(r.calls)]
    return [root, *decisions, *tools]


def otlp_document(results: Sequence[TrialResult], inputs: dict[str, Sequence[str]]) -> dict[str, Any]:
    """The trials as one OTLP/JSON `ExportTraceServiceRequest`: a resource block per trial (its session is its
    conversation). `inputs`: task id -> its user messages."""
    return {"resourceSpans": [{
        "resource": {"attributes": encode_attributes({"service.name": SERVICE, "session.id": conversation_id(r)})},
        "scopeSpans": [{"scope": {"name": "agent_factory.factory.tasks"},
                        "spans": trial_spans(r, inputs[r.task_id])}],
    } for r in results]}


def task_run(r: TrialResult, *, source: str, digest: str) -> TaskRun:
    """The trial as the store's task run, in the store as the conversation its trace became (`source`, `digest`:
    the OTLP file it was ingested from). Dimensions it did not measure are left out (not collected)."""
    measured = {"step_pass_rate": r.step_pass_rate, "error_recovery": r.error_recovery, "overlap": r.overlap,
                "state_consistency": r.state_consistency, "final_quality": r.final_quality}
    return TaskRun(suite=r.suite, task_id=r.task_id, trial=str(r.trial), success=r.success, source=source,
                   source_digest=digest, conversation_id=conversation_id(r), steps=r.steps, tokens=r.tokens,
                   seconds=r.seconds, ended_by=r.ended_by,
                   dimensions={k: v for k, v in measured.items() if v is not None},
                   first_deviation=r.first_deviation, agent=r.agent, redundant_calls=r.redundant_calls,
                   failed_calls=r.failed_calls, fault=r.ended_by in ("agent_error", "sandbox_error"),
                   not_collected=dict(r.not_collected))


__all__ = ["SERVICE", "conversation_id", "otlp_document", "task_run", "trace_id", "trial_spans"]
