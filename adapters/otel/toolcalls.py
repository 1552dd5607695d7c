"""Tool calls wherever instrumentation puts them: tool spans (children or siblings of the model call) and the
tool-call parts of a model call's output messages.

A turn's model-call spans get the calls they made as `attributes.tool_calls` (`[{"id", "name"}]`, the shape
the chat adapter writes), each tool span gets its tool in `attributes["tool.name"]`, and a call no tool span
executed (client-only tracing records the model's decision, not the execution) becomes a `tool` span of its
own under the model call, marked `tool_span_source: llm_output`. Pure functions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent_factory.adapters.model import COMPLETE_WITHOUT, Span
from agent_factory.adapters.otel.messages import indexed_messages, maybe_json
from agent_factory.digest import stable_id

TOOL_NAME_KEYS = ("tool.name", "gen_ai.tool.name", "ai.toolCall.toolName", "ai.toolCall.name")
"""Span attributes that name the tool a span called (OpenInference, OTel GenAI, Vercel AI SDK)."""
TOOL_CALL_ID_KEYS = ("gen_ai.tool.call.id", "tool_call.id", "tool.call.id", "ai.toolCall.id", "tool_call_id")
"""Span attributes carrying the id of the call a tool span executes."""
DERIVED = "tool_span_source"
"""Attribute of a tool span built from a model call's output (value `llm_output`): no span recorded it."""


def tool_name_of(span: Span) -> str | None:
    """The tool a tool span ran: a naming attribute, else the GenAI span name `execute_tool <name>`."""
    for k in TOOL_NAME_KEYS:
        v = span.attributes.get(k)
        if isinstance(v, str) and v:
            return v
    if span.name.startswith("execute_tool "):
        return span.name.split(" ", 1)[1]
    return None


def _call_id(span: Span) -> str | None:
    for k in TOOL_CALL_ID_KEYS:
        v = span.attributes.get(k)
        if isinstance(v, str) and v:
            return v
    return None


def _text(value: Any) -> str | None:
    # Arguments and results as recorded: strings as they are, structured values as JSON.
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _from_messages(value: Any) -> list[dict[str, Any]]:
    """Calls in a message list: GenAI `parts` of type tool_call, OpenAI `tool_calls`, Vercel `tool-call`."""
    value = maybe_json(value)
    if isinstance(value, Mapping):
        choices = value.get("choices")
        if isinstance(choices, list):  # an OpenAI response body
            value = [c.get("message") for c in choices if isinstance(c, Mapping)]
        else:
            value = [value]
    if not isinstance(value, list):
        return []
    calls: list[dict[str, Any]] = []
    for m in value:
        m = maybe_json(m)
        if not isinstance(m, Mapping):
            continue
        parts = [p for key in ("parts", "content") if isinstance(m.get(key), list) for p in m[key]]
        for p in parts:
            if isinstance(p, Mapping) and str(p.get("type", "")).replace("-", "_") in ("tool_call", "function_call"):
                calls.append({"id": p.get("id") or p.get("toolCallId") or p.get("call_id"),
                              "name": p.get("name") or p.get("toolName"),
                              "arguments": _text(p.get("arguments", p.get("args", p.get("input"))))})
        for c in m.get("tool_calls") or []:
            if isinstance(c, Mapping):
                fn = f if isinstance(f := c.get("function"), Mapping) else c
                calls.append({"id": c.get("id"), "name": fn.get("name"), "arguments": _text(fn.get("arguments"))})
    return [c for c in calls if isinstance(c["name"], str) and c["name"]]


def _from_openinference(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    calls = []
    for msg in indexed_messages(attrs, "llm.output_messages"):
        for c in indexed_messages(msg, "message.tool_calls"):
            name = c.get("tool_call.function.name")
            if isinstance(name, str) and name:
                calls.append({"id": c.get("tool_call.id"), "name": name,
                              "arguments": _text(c.get("tool_call.function.arguments"))})
    return calls


def output_tool_calls(span: Span) -> list[dict[str, Any]]:
    """The tool calls a model-call span's output asks for (`{"id", "name", "arguments"}`), first convention
    that has any: OpenInference indexed keys, GenAI output messages (current, deprecated), the output text."""
    attrs = span.attributes
    finders: tuple[Callable[[], list[dict[str, Any]]], ...] = (
        lambda: _from_openinference(attrs),
        lambda: _from_messages(attrs.get("gen_ai.output.messages")),
        lambda: _from_messages(attrs.get("gen_ai.completion")),
        lambda: _from_messages(attrs.get("output.value")),
        lambda: _from_messages(span.output),
    )
    for found in finders:
        calls = found()
        if calls:
            return calls
    return []


def input_tool_results(span: Span) -> dict[str, str]:
    """Tool results a model call was sent, by call id: GenAI `tool_call_response` parts, OpenAI-style `tool`
    messages (`tool_call_id`), OpenInference indexed `message.tool_call_id` keys."""
    out: dict[str, str] = {}
    for fields in indexed_messages(span.attributes, "llm.input_messages"):
        cid, text = fields.get("message.tool_call_id"), _text(fields.get("message.content"))
        if isinstance(cid, str) and text is not None:
            out[cid] = text
    if out:
        return out
    for key in ("gen_ai.input.messages", "gen_ai.prompt"):
        value = maybe_json(span.attributes.get(key))
        if isinstance(value, Mapping) and isinstance(value.get("messages"), list):
            value = value["messages"]
        for m in value if isinstance(value, list) else []:
            m = maybe_json(m)
            if not isinstance(m, Mapping):
                continue
            if isinstance(m.get("tool_call_id"), str) and (text := _text(m.get("content"))) is not None:
                out[m["tool_call_id"]] = text
            for p in m.get("parts") or []:
                if isinstance(p, Mapping) and p.get("type") in ("tool_call_response", "tool_result") \
                        and isinstance(p.get("id"), str):
                    text = _text(p.get("response", p.get("result")))
                    if text is not None:
                        out[p["id"]] = text
        if out:
            return out
    return out


def attach_tool_calls(spans: Sequence[Span]) -> tuple[Span, ...]:
    """The spans with tool calls linked: `tool_calls` on each model call, `tool.name` on each tool span, and
    a derived tool span for each call that no tool span executed (matched by call id, else by name in order)."""
    tools = [s for s in spans if s.kind == "tool"]
    by_call = {cid: s for s in tools if (cid := _call_id(s)) is not None}
    llms = sorted((s for s in spans if s.kind == "llm"), key=lambda s: (s.start is None, s.start))
    updates: dict[str, Span] = {}
    pending: list[tuple[Span, int, dict[str, Any]]] = []
    used: set[str] = set()
    for llm in llms:
        calls = output_tool_calls(llm)
        if not calls:
            continue
        updates[llm.id] = llm.model_copy(update={"attributes": {
            **llm.attributes, "tool_calls": [{"id": c["id"], "name": c["name"]} for c in calls]}})
        for k, call in enumerate(calls):
            match = by_call.get(call["id"]) if call["id"] else None
            if match is not None and match.id not in used:
                used.add(match.id)
            else:
                pending.append((llm, k, call))
    # Calls without an id match a tool span of their tool that started after them: the nearest pairs first, so
    # a call nobody executed does not take the span of a later call.
    free = [t for t in tools if t.id not in used and _call_id(t) is None]
    pairs = sorted(((_gap(llm, t), i, j) for i, (llm, _k, call) in enumerate(pending) for j, t in enumerate(free)
                    if tool_name_of(t) == call["name"] and _gap(llm, t) is not None), key=lambda p: p[:2])
    matched: set[int] = set()
    taken: set[int] = set()
    for _gap_s, i, j in pairs:
        if i not in matched and j not in taken:
            matched.add(i)
            taken.add(j)
    extra: dict[str, list[Span]] = {}
    results: dict[str, str] = {}
    if len(matched) < len(pending):
        for llm in llms:
            results.update(input_tool_results(llm))
    for i, (llm, k, call) in enumerate(pending):
        if i in matched:
            continue
        # What the tool returned is in the next model call's input, when the app sent it back.
        result = results.get(call["id"]) if call["id"] else None
        extra.setdefault(llm.id, []).append(Span(
            id=stable_id(llm.id, k, call["id"], prefix="call-"), trace_id=llm.trace_id, parent_id=llm.id,
            kind="tool", name=call["name"], input=call["arguments"], output=result,
            status="unset" if result is None else "ok", start=llm.end, end=llm.end,
            attributes={"tool.name": call["name"], "tool_call_id": call["id"], DERIVED: "llm_output",
                        **({COMPLETE_WITHOUT: ["output"]} if result is None else {})},
        ))
    out: list[Span] = []
    for s in spans:
        s = updates.get(s.id, s)
        if s.kind == "tool" and "tool.name" not in s.attributes and (name := tool_name_of(s)) is not None:
            s = s.model_copy(update={"attributes": {**s.attributes, "tool.name": name}})
        out.append(s)
        out.extend(extra.get(s.id, ()))
    return tuple(out)


def _gap(llm: Span, tool: Span) -> float | None:
    """Seconds from the model call's start to the tool span's start; None if the tool started first. Without
    times, source order stands in (0)."""
    if tool.start is None or llm.start is None:
        return 0.0
    gap = (tool.start - llm.start).total_seconds()
    return gap if gap >= 0 else None
