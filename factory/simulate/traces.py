"""One `TurnPlan` as an OTLP/JSON `resourceSpans` document: a root AGENT span and its step spans.

Attributes follow OpenInference (`openinference.span.kind`, `input.value`, `output.value`, `llm.*`) plus the
session keys the assembler reads (`session.id`, `user.id`, `agent.mode`, ...). Delivery is never written
explicitly: it must be derived from the evidence (status, finish reason, answer text).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from agent_factory.adapters.otel.values import encode_attributes
from agent_factory.factory.simulate import texts
from agent_factory.factory.simulate.plan import TurnPlan

SCOPE = {"name": "agent-factory.simulator", "version": "1"}
"""The instrumentation scope of every simulated span."""
MODELS = {"normal": "qwen-plus", "simple": "qwen-turbo", "deep": "qwen-max"}
"""Model name per mode, as `llm.model_name` records it."""

_RESOURCE = {"attributes": [
    {"key": "service.name", "value": {"stringValue": "business-analysis-agent"}},
    {"key": "service.version", "value": {"stringValue": "2.3.0"}},
    {"key": "telemetry.sdk.language", "value": {"stringValue": "python"}},
]}
_OK = {"code": 1}


def _span_id(trace: str, i: int) -> str:
    # Unique within the trace (distinct multipliers of an odd constant), never all zeros.
    return f"{(int(trace[:16], 16) ^ ((i + 1) * 0x9E3779B97F4A7C15)) & 0xFFFFFFFFFFFFFFFF or 1:016x}"


def _tokens(text: str, lang: str) -> int:
    return max(1, int(len(text) / (1.6 if lang == "zh" else 4.0)))


class _Builder:
    """Collects the spans of one trace, laying children end to end inside the root's interval."""

    def __init__(self, tp: TurnPlan) -> None:
        self.tp = tp
        self.common = {"session.id": tp.session_id, "user.id": tp.user_id}
        self.root_id = _span_id(tp.trace_id, 0)
        self.steps: list[tuple[str, str | None, dict[str, Any], dict[str, Any]]] = []

    def add(self, name: str, attrs: dict[str, Any], *, parent: str | None = None,
            status: dict[str, Any] | None = None) -> str:
        sid = _span_id(self.tp.trace_id, len(self.steps) + 1)
        self.steps.append((name, parent, {**self.common, **attrs}, status or _OK))
        return sid

    def fail_last(self, status: dict[str, Any]) -> None:
        name, parent, attrs, _ = self.steps[-1]
        self.steps[-1] = (name, parent, attrs, status)

    def llm(self, mode: str, prompt: str, output: str | None, *, parent: str | None = None,
            status: dict[str, Any] | None = None, context_tokens: int = 0) -> str:
        lang = self.tp.request.lang
        p = _tokens(prompt, lang) + context_tokens
        o = _tokens(output, lang) if output else 0
        return self.add("llm.chat", {
            "openinference.span.kind": "LLM", "llm.model_name": MODELS[mode], "input.value": prompt,
            "output.value": output, "llm.token_count.prompt": p, "llm.token_count.completion": o,
            "llm.token_count.total": p + o}, parent=parent, status=status)

    def document(self, rng: np.random.Generator) -> dict[str, Any]:
        tp = self.tp
        n = len(self.steps)
        # Child intervals: random shares of the root's duration, in order, none empty.
        w = rng.random(n) + 0.25 if n else np.zeros(0)
        total = float(w.sum()) or 1.0
        spans = [self._root()]
        t = tp.start_ns
        for i, (name, parent, attrs, status) in enumerate(self.steps):
            dur = int(tp.latency_ns * float(w[i]) / total)
            spans.append({
                "traceId": tp.trace_id, "spanId": _span_id(tp.trace_id, i + 1),
                "parentSpanId": parent or self.root_id, "name": name, "kind": 1,
                "startTimeUnixNano": str(t), "endTimeUnixNano": str(t + dur),
                "attributes": encode_attributes(attrs), "status": status,
            })
            t += dur
        return {"resourceSpans": [{"resource": _RESOURCE, "scopeSpans": [{"scope": SCOPE, "spans": spans}]}]}

    def _root(self) -> dict[str, Any]:
        tp = self.tp
        attrs: dict[str, Any] = {
            **self.common, "openinference.span.kind": "AGENT", "agent.mode": tp.mode,
            "session.turn_index": tp.turn_index, "user.account_type": tp.account_type,
            "request.source": tp.request_source, "traffic.synthetic": tp.synthetic, "input.value": tp.request.text,
            "output.value": tp.answer,
        }
        if tp.natural_delivery == "failed_truncated":
            attrs["gen_ai.response.finish_reasons"] = ["length"]
        if tp.ex.progress is not None:
            attrs["agent.progress"] = tp.ex.progress
        status = {"code": 2, "message": tp.error_message} if tp.error_message else _OK
        return {
            "traceId": tp.trace_id, "spanId": self.root_id, "name": "agent.turn", "kind": 2,
            "startTimeUnixNano": str(tp.start_ns), "endTimeUnixNano": str(tp.end_ns),
            "attributes": encode_attributes(attrs), "status": status,
        }


def build_document(tp: TurnPlan, rng: np.random.Generator) -> dict[str, Any]:
    """The OTLP/JSON document (one `resourceSpans` entry) of one turn."""
    b = _Builder(tp)
    ex, req, mode = tp.ex, tp.request, tp.mode
    error = {"code": 2, "message": tp.error_message} if tp.error_message else None
    if tp.segment == "suggestion":
        b.add("tool.suggestion_cache", {"openinference.span.kind": "TOOL", "tool.name": "suggestion_cache",
                                        "input.value": req.text, "output.value": tp.answer}, status=error)
        return b.document(rng)
    if ex.has_thinking:
        b.add("thinking", {"openinference.span.kind": "CHAIN", "agent.step": "thinking", "input.value": req.text,
                           "output.value": texts.thinking_text(req)})
    if ex.has_retrieval:
        b.add("retrieve", {"openinference.span.kind": "RETRIEVER", "input.value": req.text,
                           "output.value": texts.retrieval_text(req)})
    context = 600 if ex.has_retrieval else 0
    if mode == "deep":
        if ex.done_steps or not ex.failed:
            b.llm(mode, req.text, f"plan: {ex.planned_steps} analysis steps", context_tokens=context)
        for _ in range(ex.done_steps):
            name, args, result = texts.tool_call(rng, req)
            tool = b.add(f"tool.{name}", {"openinference.span.kind": "TOOL", "tool.name": name,
                                          "input.value": args, "output.value": result})
            b.llm(mode, result, "step result read", parent=tool, context_tokens=200)
        if not ex.failed or ex.kind == "failed_truncated":
            b.llm(mode, req.text, tp.answer, context_tokens=context + 400 * ex.done_steps)
        elif error is not None and b.steps:
            b.fail_last(error)  # the step the task died in
        return b.document(rng)
    if ex.extra_llm:
        b.llm(mode, req.text, "rewritten query: " + req.text[:40], context_tokens=200)
    for _ in range(ex.n_tools):
        name, args, result = texts.tool_call(rng, req)
        b.add(f"tool.{name}", {"openinference.span.kind": "TOOL", "tool.name": name, "input.value": args,
                               "output.value": result})
    b.llm(mode, req.text, tp.answer, status=error, context_tokens=context + 300)
    return b.document(rng)


def otlp_line(tp: TurnPlan, rng: np.random.Generator) -> tuple[str, int]:
    """(one JSON line holding the turn's trace, number of spans in it)."""
    doc = build_document(tp, rng)
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")), len(spans)
