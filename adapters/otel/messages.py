"""Chat messages as text: one `role: content` line per message, from every shape the conventions use.

Shapes read: OpenAI-style `{"role", "content": str | [parts]}`, OTel GenAI `{"role", "parts": [...]}`,
Vercel `{"role", "content": [{"type": "text" | "tool-call" | "tool-result", ...}]}`, Vercel `ai.prompt`
(`{"prompt"} | {"system", "messages"}`), and the indexed flat keys of OpenInference
(`llm.input_messages.<i>.message.*`) and deprecated GenAI (`gen_ai.prompt.<i>.role|content`).
Pure functions; text that is not JSON is returned as is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from agent_factory.adapters.jsontext import loads_embedded

_INDEXED = re.compile(r"^(\d+)\.(.+)$")
_RESULT_TYPES = ("tool_call_response", "tool_result", "function_call_output", "tool-result")


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def maybe_json(value: Any) -> Any:
    """A string that holds a JSON object or array, decoded; anything else as it is."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("[", "{"):
            try:
                return loads_embedded(text)
            except ValueError:
                return value
    return value


def part_text(part: Any) -> str | None:
    """The text of one content part (text, tool call, tool result, or a placeholder for media)."""
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        return None if part is None else _compact(part)
    ptype = str(part.get("type", "text")).replace("-", "_")
    if ptype in ("text", "input_text", "output_text", "reasoning", "thinking"):
        for k in ("text", "content", "thinking"):
            if isinstance(v := part.get(k), str):
                return v
    if ptype in ("tool_call", "function_call"):
        name = part.get("name") or part.get("toolName") or ""
        args = part.get("arguments", part.get("args", part.get("input")))
        return f"[tool call] {name} {_compact(args)}".rstrip() if args is not None else f"[tool call] {name}"
    if ptype in ("tool_call_response", "tool_result", "function_call_output"):
        res = part.get("response", part.get("result", part.get("output", part.get("content"))))
        return None if res is None else _compact(res)
    for k in ("text", "content"):
        if isinstance(v := part.get(k), str):
            return v
    return f"[{ptype}]"


def message_text(message: Any) -> str | None:
    """One message as `role: content` (content alone when there is no role)."""
    if isinstance(message, str):
        return message
    if not isinstance(message, Mapping):
        return None
    role = message.get("role")
    pieces: list[str] = []
    content = message.get("content")
    if isinstance(content, str):
        pieces.append(content)
    elif isinstance(content, list):
        pieces.extend(t for t in (part_text(p) for p in content) if t)
    elif content is not None:
        pieces.append(_compact(content))
    for p in message.get("parts") or []:
        t = part_text(p)
        if t:
            pieces.append(t)
    for call in message.get("tool_calls") or []:
        if isinstance(call, Mapping):
            fn = f if isinstance(f := call.get("function"), Mapping) else call
            pieces.append(part_text({"type": "tool_call", "name": fn.get("name"), "arguments": fn.get("arguments")})
                          or "")
    body = "\n".join(p for p in pieces if p)
    if not body and role is None:
        return None
    parts = [p for p in (message.get("parts") or []) if isinstance(p, Mapping)]
    if role == "user" and parts and all(str(p.get("type", "")) in _RESULT_TYPES for p in parts):
        role = "tool"  # pydantic-ai's format v5 files tool results under role `user`: the user said none of it
    return f"{role}: {body}" if role else body


def render_messages(value: Any) -> str | None:
    """A message list (or JSON text of one, or a Vercel prompt object) as text; None if there is nothing."""
    value = maybe_json(value)
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        if isinstance(value.get("messages"), list) or "system" in value or "prompt" in value:
            lines = []
            if value.get("system"):
                lines.append(f"system: {_compact(value['system'])}")
            if value.get("prompt") is not None:
                p = render_messages(value["prompt"])
                if p:
                    lines.append(p)
            if isinstance(value.get("messages"), list):
                m = render_messages(value["messages"])
                if m:
                    lines.append(m)
            return "\n".join(lines) or None
        if isinstance(text := value.get("text"), str):
            return text  # a completion object such as {"text": ..., "finish_reason": ...}
        return message_text(value) or _compact(value)
    if isinstance(value, list):
        lines = [t for t in (message_text(maybe_json(m)) for m in value) if t]
        return "\n".join(lines) or None
    return None if value is None else _compact(value)


def indexed_messages(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Messages spread over `<prefix>.<i>.<rest>` keys, as dicts of `<rest>` (in index order)."""
    by_index: dict[int, dict[str, Any]] = {}
    dot = prefix + "."
    for key, v in attrs.items():
        if not key.startswith(dot):
            continue
        m = _INDEXED.match(key[len(dot):])
        if m:
            by_index.setdefault(int(m.group(1)), {})[m.group(2)] = v
    return [by_index[i] for i in sorted(by_index)]


def render_openinference(attrs: Mapping[str, Any], prefix: str) -> str | None:
    """OpenInference `llm.input_messages.<i>.message.*` (or output) keys as `role: content` lines."""
    lines: list[str] = []
    for fields in indexed_messages(attrs, prefix):
        role = fields.get("message.role")
        pieces: list[str] = []
        if fields.get("message.content") not in (None, ""):
            pieces.append(_compact(fields["message.content"]))
        for part in indexed_messages(fields, "message.contents"):
            t = part.get("message_content.text")
            if t not in (None, ""):
                pieces.append(_compact(t))
        for call in indexed_messages(fields, "message.tool_calls"):
            name = call.get("tool_call.function.name")
            if name is not None:
                pieces.append(part_text({"type": "tool_call", "name": name,
                                         "arguments": call.get("tool_call.function.arguments")}) or "")
        body = "\n".join(p for p in pieces if p)
        if body or role:
            lines.append(f"{role}: {body}" if role else body)
    return "\n".join(lines) or None


def render_indexed_genai(attrs: Mapping[str, Any], prefix: str) -> str | None:
    """Deprecated GenAI `gen_ai.prompt.<i>.role|content` keys as `role: content` lines."""
    msgs = [{"role": f.get("role"), "content": f.get("content")} for f in indexed_messages(attrs, prefix)]
    return render_messages(msgs) if msgs else None


# ---- one message's text, for a turn built from its model calls -------------------------------------------

_TEXT_PARTS = ("text", "input_text", "output_text")


def _plain_text(content: Any) -> str | None:
    """The text parts of a message content (string, list of parts): no tool calls, media or reasoning."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping) and str(part.get("type", "text")).replace("-", "_") in _TEXT_PARTS:
            t = part.get("text", part.get("content"))
            if isinstance(t, str):
                texts.append(t)
    return "\n".join(texts) if texts else None


def message_pairs(value: Any) -> list[tuple[str | None, str | None]]:
    """`(role, text)` of each message in a list, a `{"messages"}` request or a Vercel prompt object."""
    value = maybe_json(value)
    if isinstance(value, Mapping):
        if isinstance(value.get("messages"), list):
            value = value["messages"]
        elif isinstance(value.get("prompt"), str):
            return [("user", value["prompt"])]
        else:
            return []
    if not isinstance(value, list):
        return []
    out: list[tuple[str | None, str | None]] = []
    for m in value:
        m = maybe_json(m)
        if isinstance(m, Mapping):
            role = m.get("role")
            text = _plain_text(m.get("content"))
            if text is None and isinstance(m.get("parts"), list):
                text = _plain_text(m["parts"])
            out.append((role if isinstance(role, str) else None, text))
    return out


def _openinference_pairs(attrs: Mapping[str, Any], prefix: str) -> list[tuple[str | None, str | None]]:
    out: list[tuple[str | None, str | None]] = []
    for fields in indexed_messages(attrs, prefix):
        role = fields.get("message.role")
        text = fields.get("message.content")
        if not isinstance(text, str):
            parts = [p.get("message_content.text") for p in indexed_messages(fields, "message.contents")]
            text = "\n".join(p for p in parts if isinstance(p, str)) or None
        out.append((role if isinstance(role, str) else None, text))
    return out


def _genai_indexed_pairs(attrs: Mapping[str, Any], prefix: str) -> list[tuple[str | None, str | None]]:
    return [(f.get("role") if isinstance(f.get("role"), str) else None,
             f.get("content") if isinstance(f.get("content"), str) else None)
            for f in indexed_messages(attrs, prefix)]


def model_messages(attrs: Mapping[str, Any], text: str | None, *, side: str) -> list[tuple[str | None, str | None]]:
    """`(role, text)` of the messages of a model call's `side` (`input` or `output`), from the first convention
    that has them: OpenInference indexed keys, GenAI messages (current, then deprecated), Vercel's prompt, and
    last the span's own text when it is JSON of a message list or request."""
    oi, genai, old = (("llm.input_messages", "gen_ai.input.messages", "gen_ai.prompt") if side == "input"
                      else ("llm.output_messages", "gen_ai.output.messages", "gen_ai.completion"))
    finders: tuple[Callable[[], list[tuple[str | None, str | None]]], ...] = (
        lambda: _openinference_pairs(attrs, oi),
        lambda: message_pairs(attrs.get(genai)),
        lambda: message_pairs(attrs.get(old)),
        lambda: _genai_indexed_pairs(attrs, old),
        lambda: message_pairs(attrs.get("ai.prompt.messages")) if side == "input" else [],
        lambda: message_pairs(attrs.get("ai.prompt")) if side == "input" else [],
        lambda: message_pairs(text),
    )
    for pairs in finders:
        found = pairs()
        if found:
            return found
    return []


def last_user_text(attrs: Mapping[str, Any], text: str | None) -> str | None:
    """The last user message of a model call's input; None when its input has no user message."""
    users = [t for role, t in model_messages(attrs, text, side="input") if role in ("user", "human") and t]
    return users[-1] if users else None


def reply_text(attrs: Mapping[str, Any], text: str | None) -> str | None:
    """The text a model call replied with: its last output message's text, else the `text` or `content` of a
    completion object, else the span's output as is (a plain completion, or a reply with only tool calls)."""
    replies = [t for _role, t in model_messages(attrs, text, side="output") if t]
    if replies:
        return replies[-1]
    value = maybe_json(text)
    if isinstance(value, Mapping):
        choices = value.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            value = choices[0].get("message") or choices[0]
        for key in ("content", "text"):
            got = _plain_text(value.get(key)) if isinstance(value, Mapping) else None
            if got:
                return got
    return text
