"""From a span's flat attributes and name to the typed fields: kind, input, output, model, tokens.

Three conventions are read, first match wins: OpenInference (`openinference.span.kind`, `input.value`,
`llm.*`), OTel GenAI (`gen_ai.*`, current and deprecated keys) and the Vercel AI SDK (`ai.*`). Pure
functions; a bad token count raises `AttributeValueError` naming the key.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_factory.adapters.jsontext import loads_embedded
from agent_factory.adapters.model import SpanKind, TokenUsage
from agent_factory.adapters.otel.messages import (
    message_pairs,
    render_indexed_genai,
    render_messages,
    render_openinference,
)
from agent_factory.adapters.otel.values import AttributeValueError

OPENINFERENCE_KINDS: dict[str, SpanKind] = {
    "LLM": "llm", "TOOL": "tool", "RETRIEVER": "retrieval", "RERANKER": "retrieval", "EMBEDDING": "embedding",
    "AGENT": "agent", "CHAIN": "agent", "REASONING": "reasoning", "GUARDRAIL": "other", "EVALUATOR": "other",
    "UNKNOWN": "other",
}
"""`openinference.span.kind` values (upper-cased) to span kinds."""
GENAI_OPERATIONS: dict[str, SpanKind] = {
    "chat": "llm", "text_completion": "llm", "generate_content": "llm", "execute_tool": "tool",
    "embeddings": "embedding", "invoke_agent": "agent", "create_agent": "agent", "retrieval": "retrieval",
}
"""`gen_ai.operation.name` values to span kinds."""
VERCEL_OPERATIONS: dict[str, SpanKind] = {
    "ai.generateText": "agent", "ai.generateText.doGenerate": "llm",
    "ai.generateObject": "agent", "ai.generateObject.doGenerate": "llm",
    "ai.streamText": "agent", "ai.streamText.doStream": "llm",
    "ai.streamObject": "agent", "ai.streamObject.doStream": "llm",
    "ai.embed": "agent", "ai.embed.doEmbed": "embedding",
    "ai.embedMany": "agent", "ai.embedMany.doEmbed": "embedding",
    "ai.toolCall": "tool",
}
"""Vercel AI SDK operation ids to span kinds (as openinference-vercel maps them: wrapper calls are agents)."""
REASONING_WORDS = ("thinking", "reasoning", "think", "reason")
"""Values of a step-type attribute, or words of a span name, that mark a thinking step."""
STEP_KEYS = ("agent.step", "step.type", "agent.step.type", "span.type")
"""Attributes naming the step type of a custom agent (e.g. `agent.step = thinking`)."""

INPUT_TOKEN_KEYS = ("llm.token_count.prompt", "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens",
                    "ai.usage.inputTokens", "ai.usage.promptTokens", "gen_ai.aggregated_usage.input_tokens")
OUTPUT_TOKEN_KEYS = ("llm.token_count.completion", "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens",
                     "ai.usage.outputTokens", "ai.usage.completionTokens", "gen_ai.aggregated_usage.output_tokens")
TOTAL_TOKEN_KEYS = ("llm.token_count.total", "gen_ai.usage.total_tokens", "ai.usage.totalTokens", "ai.usage.tokens",
                    "gen_ai.aggregated_usage.total_tokens")
"""Token count keys; pydantic-ai's `gen_ai.aggregated_usage.*` (an agent run's sum over its model calls) last,
so a turn counts its tokens once (adapters.assemble.turn_usage)."""
MODEL_KEYS = ("llm.model_name", "gen_ai.response.model", "ai.response.model", "gen_ai.request.model", "ai.model.id",
              "embedding.model_name")
"""Model name keys, most specific first (the model that answered before the one that was asked for)."""
SESSION_KEYS = ("session.id", "gen_ai.conversation.id", "conversation.id", "ai.telemetry.metadata.sessionId")
"""Span attributes that carry the conversation (session) id, first found wins (OpenInference, OTel GenAI)."""

_WORD = re.compile(r"[a-z]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@dataclass(frozen=True)
class Mapped:
    """The typed fields derived from one span's attributes."""

    kind: SpanKind = "other"
    input: str | None = None
    output: str | None = None
    model: str | None = None
    tokens: TokenUsage | None = None
    consumed: frozenset[str] = field(default_factory=frozenset)
    """Attribute keys whose value was copied verbatim into `input` / `output` (callers may drop them)."""


def _words(name: str) -> list[str]:
    return _WORD.findall(_CAMEL.sub(" ", name).lower())


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def span_kind(attrs: Mapping[str, Any], name: str = "") -> SpanKind:
    """The normalized kind; explicit markers first, then conventions, then name words; `other` if nothing fits."""
    for key in STEP_KEYS:
        v = attrs.get(key)
        if isinstance(v, str) and v.strip().lower() in REASONING_WORDS:
            return "reasoning"
    oi = attrs.get("openinference.span.kind")
    if isinstance(oi, str) and oi.strip().upper() in OPENINFERENCE_KINDS:
        kind = OPENINFERENCE_KINDS[oi.strip().upper()]
        # CHAIN / AGENT / UNKNOWN are generic: a name saying "thinking" is the sharper statement.
        if kind not in ("agent", "other") or not _name_says_reasoning(name):
            return kind
        return "reasoning"
    op = attrs.get("gen_ai.operation.name")
    if isinstance(op, str) and op.strip().lower() in GENAI_OPERATIONS:
        return GENAI_OPERATIONS[op.strip().lower()]
    vercel = attrs.get("ai.operationId")
    for candidate in (vercel, name, str(attrs.get("operation.name", "")).split(" ")[0]):
        if isinstance(candidate, str) and candidate in VERCEL_OPERATIONS:
            return VERCEL_OPERATIONS[candidate]
    if any(k.startswith("retrieval.documents") for k in attrs):
        return "retrieval"
    if _name_says_reasoning(name):
        return "reasoning"
    words = _words(name)
    if any(w.startswith(("retriev", "search")) for w in words):
        return "retrieval"
    if any(w.startswith("embed") for w in words):
        return "embedding"
    if "tool.name" in attrs or "gen_ai.tool.name" in attrs:
        return "tool"
    if any(k in attrs for k in ("llm.model_name", "gen_ai.request.model", "gen_ai.system", "gen_ai.prompt",
                                "gen_ai.prompt.0.content")):
        return "llm"
    return "other"


def _name_says_reasoning(name: str) -> bool:
    return any(w in REASONING_WORDS for w in _words(name))


def model_name(attrs: Mapping[str, Any]) -> str | None:
    """The model's name, if any attribute states it."""
    for key in MODEL_KEYS:
        v = attrs.get(key)
        if v not in (None, ""):
            return str(v)
    return None


def token_count(attrs: Mapping[str, Any], key: str) -> int | None:
    """One token count: ints, integral floats and numeric strings are read; anything else raises."""
    v = attrs.get(key)
    if v is None or v == "":
        return None
    n: float | None = None
    if isinstance(v, bool):
        n = None
    elif isinstance(v, int | float):
        n = float(v)
    elif isinstance(v, str):
        try:
            n = float(v.strip())
        except ValueError:
            n = None
    if n is None or not math.isfinite(n):
        raise AttributeValueError(key, f"token count is not a number: {v!r}")
    if n < 0:
        raise AttributeValueError(key, f"token count is negative: {v!r}")
    if not n.is_integer():
        raise AttributeValueError(key, f"token count is not a whole number: {v!r}")
    return int(n)


def _first_count(attrs: Mapping[str, Any], keys: Sequence[str]) -> int | None:
    found = None
    for key in keys:
        if key not in attrs:
            continue
        n = token_count(attrs, key)  # every present key is checked, so a bad duplicate is still reported
        if found is None:
            found = n
    return found


def token_usage(attrs: Mapping[str, Any]) -> TokenUsage | None:
    """Input / output / total tokens; total is computed when only the parts are reported."""
    inp = _first_count(attrs, INPUT_TOKEN_KEYS)
    out = _first_count(attrs, OUTPUT_TOKEN_KEYS)
    total = _first_count(attrs, TOTAL_TOKEN_KEYS)
    if inp is None and out is None and total is None:
        return None
    if total is None and inp is not None and out is not None:
        total = inp + out
    return TokenUsage(input=inp, output=out, total=total)


def _json_strings(value: Any) -> str | None:
    if value is None:
        return None
    # Vercel writes embedding inputs as JSON-encoded strings (`"\"text\""`), one per value.
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, str):
            try:
                decoded = loads_embedded(item)
                item = decoded if isinstance(decoded, str) else item
            except ValueError:
                pass
        t = _text(item)
        if t is not None:
            out.append(t)
    return "\n".join(out) or None


def _key_index(attrs: Mapping[str, Any]) -> str:
    # One string of all keys, so "is any key under prefix P" is one C-level substring search per rule.
    return "\n" + "\n".join(attrs)


_Rule = tuple[str | None, str, Any]
"""(key copied verbatim or None, key prefix that must be present, text function)."""


def _verbatim(key: str) -> _Rule:
    return key, key, lambda a: _text(a.get(key))


def _body(key: str, messages: str) -> _Rule:
    # OpenInference puts the raw HTTP body in `input.value` / `output.value` (`*.mime_type` application/json)
    # beside the structured messages; the body is text for no reader when the messages are there.
    def text(a: Mapping[str, Any]) -> str | None:
        mime = str(a.get(key.replace(".value", ".mime_type")) or "").lower()
        if "json" in mime and any(k.startswith(messages) for k in a):
            return None
        return _text(a.get(key))
    return key, key, text


def _new_user_prompt(a: Mapping[str, Any]) -> str | None:
    """pydantic-ai's agent run span: this run's user prompt, the first user text from `new_message_index`."""
    pairs = message_pairs(a.get("pydantic_ai.all_messages"))
    start = a.get("pydantic_ai.new_message_index")
    start = start if isinstance(start, int) and 0 <= start <= len(pairs) else 0
    return next((t for role, t in pairs[start:] if role in ("user", "human") and t), None)


def _rendered(key: str) -> _Rule:
    return None, key, lambda a: render_messages(a.get(key)) if a.get(key) not in (None, "") else None


_INPUT_RULES: tuple[_Rule, ...] = (
    _body("input.value", "llm.input_messages."),
    (None, "pydantic_ai.all_messages", _new_user_prompt),
    _rendered("gen_ai.input.messages"),
    (None, "llm.input_messages.", lambda a: render_openinference(a, "llm.input_messages")),
    _rendered("gen_ai.prompt"),
    (None, "gen_ai.prompt.", lambda a: render_indexed_genai(a, "gen_ai.prompt")),
    _rendered("ai.prompt.messages"),
    _rendered("ai.prompt"),
    _verbatim("gen_ai.tool.call.arguments"),
    _verbatim("ai.toolCall.args"),
    _verbatim("ai.toolCall.input"),
    (None, "ai.values", lambda a: _json_strings(a.get("ai.values"))),
    (None, "ai.value", lambda a: _json_strings(a.get("ai.value"))),
    _verbatim("input"),
)
_OUTPUT_RULES: tuple[_Rule, ...] = (
    _body("output.value", "llm.output_messages."),
    _verbatim("final_result"),
    _rendered("gen_ai.output.messages"),
    (None, "llm.output_messages.", lambda a: render_openinference(a, "llm.output_messages")),
    _rendered("gen_ai.completion"),
    (None, "gen_ai.completion.", lambda a: render_indexed_genai(a, "gen_ai.completion")),
    _verbatim("ai.response.text"),
    _verbatim("ai.response.object"),
    _verbatim("gen_ai.tool.call.result"),
    _verbatim("ai.toolCall.result"),
    _verbatim("ai.toolCall.output"),
    _verbatim("output"),
)


def _pick(attrs: Mapping[str, Any], rules: Sequence[_Rule], keys: str) -> tuple[str | None, str | None]:
    for key, gate, fn in rules:
        if "\n" + gate not in keys:
            continue
        text = fn(attrs)
        if text is not None:
            return text, key
    return None, None


def map_attributes(attrs: Mapping[str, Any], name: str = "") -> Mapped:
    """All typed fields of one span; raises `AttributeValueError` on a bad token count."""
    keys = _key_index(attrs)
    inp, in_key = _pick(attrs, _INPUT_RULES, keys)
    out, out_key = _pick(attrs, _OUTPUT_RULES, keys)
    return Mapped(
        kind=span_kind(attrs, name),
        input=inp,
        output=out,
        model=model_name(attrs),
        tokens=token_usage(attrs),
        consumed=frozenset(k for k in (in_key, out_key) if k is not None),
    )


def exception_message(events: Sequence[Mapping[str, Any]]) -> str | None:
    """The message of the first `exception` event (`{"name", "attributes"}` with flat attributes), if any."""
    for ev in events:
        if str(ev.get("name", "")).lower() != "exception":
            continue
        attrs = ev.get("attributes") or {}
        msg = attrs.get("exception.message") if isinstance(attrs, Mapping) else None
        typ = attrs.get("exception.type") if isinstance(attrs, Mapping) else None
        if msg not in (None, ""):
            return f"{typ}: {msg}" if typ and not str(msg).startswith(str(typ)) else str(msg)
        return str(typ) if typ else "exception"
    return None
