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
from collections.abc import Mapping
from typing import Any

_INDEXED = re.compile(r"^(\d+)\.(.+)$")


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("[", "{"):
            try:
                return json.loads(text)
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
            if isinstance(part.get(k), str):
                return part[k]
    if ptype in ("tool_call", "function_call"):
        name = part.get("name") or part.get("toolName") or ""
        args = part.get("arguments", part.get("args", part.get("input")))
        return f"[tool call] {name} {_compact(args)}".rstrip() if args is not None else f"[tool call] {name}"
    if ptype in ("tool_call_response", "tool_result", "function_call_output"):
        res = part.get("response", part.get("result", part.get("output", part.get("content"))))
        return None if res is None else _compact(res)
    for k in ("text", "content"):
        if isinstance(part.get(k), str):
            return part[k]
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
            fn = call.get("function") if isinstance(call.get("function"), Mapping) else call
            pieces.append(part_text({"type": "tool_call", "name": fn.get("name"), "arguments": fn.get("arguments")})
                          or "")
    body = "\n".join(p for p in pieces if p)
    if not body and role is None:
        return None
    return f"{role}: {body}" if role else body


def render_messages(value: Any) -> str | None:
    """A message list (or JSON text of one, or a Vercel prompt object) as text; None if there is nothing."""
    value = _maybe_json(value)
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
        if isinstance(value.get("text"), str):
            return value["text"]  # a completion object such as {"text": ..., "finish_reason": ...}
        return message_text(value) or _compact(value)
    if isinstance(value, list):
        lines = [t for t in (message_text(_maybe_json(m)) for m in value) if t]
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
