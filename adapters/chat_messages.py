"""OpenAI chat-completions message lists -> turns and spans (pure functions, no I/O).

A turn is one user message and every message up to the next user message. Each assistant message is an
`llm` span; each tool call it makes is a `tool` span under it, whose output is the matching `tool`
message. System (and `developer`) messages are not part of any turn: the conversation keeps only their
hash and length. Every span and turn records the index of the message it came from, so an evidence
pointer can cite the exact message of the source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_factory.adapters.chat_io import RecordProblem, json_type, problem_from
from agent_factory.adapters.jsontext import loads_embedded
from agent_factory.adapters.model import COMPLETE_WITHOUT, DeliveryState, Span, Turn
from agent_factory.digest import digest

ROLES = ("system", "developer", "user", "assistant", "tool")
"""Accepted message roles (`developer` is the newer name of `system`)."""

_ERROR_PREFIX = re.compile(r"^\s*Error\b")


class FunctionCall(BaseModel):
    """The function a tool call invokes."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str = Field(min_length=1)
    """Tool (function) name."""
    arguments: str
    """Arguments as a JSON-encoded string, exactly as the model produced it (it may be invalid JSON)."""

    @field_validator("arguments", mode="before")
    @classmethod
    def _string_arguments(cls, v: Any) -> Any:
        if not isinstance(v, str):
            raise ValueError(f"arguments must be a JSON-encoded string, got {json_type(v)}")
        return v


class ToolCall(BaseModel):
    """One entry of an assistant message's `tool_calls`."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str = Field(min_length=1)
    """Call id that the answering `tool` message cites as `tool_call_id`."""
    type: str = "function"
    """Call type; only `function` calls carry a name and arguments."""
    function: FunctionCall
    """The function called."""


@dataclass
class _SpanDraft:
    """A span under construction: tool outputs arrive in later messages, and spans are frozen."""

    values: dict[str, Any]
    answered: bool = False


@dataclass
class _TurnDraft:
    request_index: int | None
    request: str | None = None
    request_non_text_parts: int = 0
    spans: list[_SpanDraft] = field(default_factory=list)
    last_role: str | None = None
    last_text: str | None = None
    answer: str | None = None
    answer_index: int | None = None
    last_index: int | None = None


@dataclass(frozen=True)
class Converted:
    """Turns of one conversation plus what the conversation keeps of its system messages."""

    turns: tuple[Turn, ...]
    attributes: dict[str, Any]


def content_text(content: Any, path: str) -> tuple[str | None, int]:
    """Text of a message's content (string, null or list of parts) and the number of non-text parts."""
    if content is None or isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        raise RecordProblem(path, f"content must be a string, null or a list of parts, got {json_type(content)}")
    texts: list[str] = []
    other = 0
    for j, part in enumerate(content):
        where = f"{path}[{j}]"
        if not isinstance(part, dict):
            raise RecordProblem(where, f"content part must be an object, got {json_type(part)}")
        kind = part.get("type")
        if not isinstance(kind, str):
            raise RecordProblem(f"{where}.type", "content part needs a string 'type'")
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise RecordProblem(f"{where}.text", f"text part needs a string 'text', got {json_type(text)}")
            texts.append(text)
        else:
            other += 1
    return ("\n".join(texts) if texts else None), other


def looks_like_error(text: str | None) -> bool:
    """A tool result that reports failure: starts with `Error`, or is a JSON object with a non-empty `error`."""
    if not text:
        return False
    if _ERROR_PREFIX.match(text):
        return True
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            obj = loads_embedded(stripped)
        except ValueError:
            return False
        return isinstance(obj, dict) and obj.get("error") not in (None, False, "", [], {})
    return False


def _tool_calls(raw: Any, path: str) -> list[ToolCall]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise RecordProblem(path, f"tool_calls must be an array, got {json_type(raw)}")
    calls = []
    for j, item in enumerate(raw):
        try:
            calls.append(ToolCall.model_validate(item))
        except ValidationError as e:
            raise problem_from(e, f"{path}[{j}]") from None
    return calls


def _role(msg: Any, path: str) -> str:
    if not isinstance(msg, dict):
        raise RecordProblem(path, f"message must be an object, got {json_type(msg)}")
    role = msg.get("role")
    if role not in ROLES:
        got = "message has no role" if "role" not in msg else f"role {role!r} is not valid"
        raise RecordProblem(f"{path}.role", f"{got}; valid roles: {', '.join(ROLES)}")
    return str(role)


def _valid_json(text: str) -> bool:
    try:
        loads_embedded(text)
    except ValueError:
        return False
    return True


def convert_messages(messages: list[Any], *, conversation_id: str, user_id: str | None, path: str) -> Converted:
    """Turns and spans of one message list; `RecordProblem` naming the field (under `path`) if it is invalid."""
    system: list[str] = []
    turns: list[_TurnDraft] = []
    calls: dict[str, tuple[_SpanDraft, str]] = {}
    for i, msg in enumerate(messages):
        where = f"{path}[{i}]"
        role = _role(msg, where)
        text, other_parts = content_text(msg.get("content"), f"{where}.content")
        if role in ("system", "developer"):
            system.append(text or "")
            continue
        if role == "user":
            turns.append(_TurnDraft(request_index=i, request=text, request_non_text_parts=other_parts,
                                    last_role="user", last_index=i))
            continue
        if not turns:
            turns.append(_TurnDraft(request_index=None))
        turn = turns[-1]
        turn.last_role, turn.last_text, turn.last_index = role, text, i
        if role == "assistant":
            _assistant(msg, i, where, text, other_parts, turn, calls, conversation_id, len(turns) - 1)
        else:
            _tool_result(msg, i, where, text, calls)
    built = tuple(_build_turn(t, k, conversation_id, user_id) for k, t in enumerate(turns))
    prompt = "\n\n".join(system)
    attrs: dict[str, Any] = {"message_count": len(messages), "system_messages": len(system)}
    if system:
        attrs["system_prompt_sha256"] = digest(prompt)
        attrs["system_prompt_chars"] = len(prompt)
    return Converted(turns=built, attributes=attrs)


def turn_id(conversation_id: str, index: int) -> str:
    """Stable id of a conversation's `index`-th turn."""
    return f"{conversation_id}/turn-{index}"


def _assistant(
    msg: dict[str, Any], i: int, where: str, text: str | None, other_parts: int,
    turn: _TurnDraft, calls: dict[str, tuple[_SpanDraft, str]], conversation_id: str, turn_index: int,
) -> None:
    if text is not None and text.strip():
        turn.answer, turn.answer_index = text, i
    tcalls = _tool_calls(msg.get("tool_calls"), f"{where}.tool_calls")
    trace = turn_id(conversation_id, turn_index)
    llm_id = f"{conversation_id}/m{i}"
    attrs: dict[str, Any] = {"message_index": i, "role": "assistant"}
    if tcalls:
        attrs["tool_calls"] = [{"id": c.id, "name": c.function.name} for c in tcalls]
        attrs[COMPLETE_WITHOUT] = ["output"]  # a message that calls tools is whole without text (content null)
    if other_parts:
        attrs["non_text_parts"] = other_parts
    if isinstance(msg.get("refusal"), str):
        attrs["refusal"] = msg["refusal"]
    turn.spans.append(_SpanDraft({
        "id": llm_id, "trace_id": trace, "kind": "llm", "name": str(msg.get("name") or "assistant"),
        "output": text, "status": "ok", "attributes": attrs,
    }))
    for j, call in enumerate(tcalls):
        cpath = f"{where}.tool_calls[{j}].id"
        earlier = calls.get(call.id)
        # Ids are reused in real logs (tau-bench reuses an id once its call is answered); only a reuse
        # while the earlier call still awaits its result makes the matching ambiguous.
        if earlier is not None and not earlier[0].answered:
            raise RecordProblem(cpath, f"tool call id {call.id!r} reused while the call at {earlier[1]} "
                                       "still awaits its result")
        draft = _SpanDraft({
            "id": f"{llm_id}/call-{j}", "trace_id": trace, "parent_id": llm_id, "kind": "tool",
            "name": call.function.name, "input": call.function.arguments, "status": "unset",
            "attributes": {
                "message_index": i, "tool_call_index": j, "tool_call_id": call.id,
                "arguments_valid_json": _valid_json(call.function.arguments),
                **({"tool_call_id_reused": True} if earlier is not None else {}),
            },
        })
        calls[call.id] = (draft, cpath)
        turn.spans.append(draft)


def _tool_result(msg: dict[str, Any], i: int, where: str, text: str | None,
                 calls: dict[str, tuple[_SpanDraft, str]]) -> None:
    call_id = msg.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise RecordProblem(f"{where}.tool_call_id",
                            f"tool message needs a string tool_call_id, got {json_type(call_id)}")
    if call_id not in calls:
        raise RecordProblem(f"{where}.tool_call_id", f"tool_call_id {call_id!r} matches no earlier tool call")
    draft, _ = calls[call_id]
    if draft.answered:
        raise RecordProblem(f"{where}.tool_call_id", f"tool call {call_id!r} already has a result")
    draft.answered = True
    failed = looks_like_error(text)
    draft.values.update(output=text, status="error" if failed else "ok", error=text if failed else None)
    draft.values["attributes"]["result_message_index"] = i


def _delivery(t: _TurnDraft) -> DeliveryState:
    if t.request_index is None or t.last_role == "user":
        # A preamble before the first request, or a request with nothing after it in the log: the log
        # cannot tell whether an answer was (or would have been) delivered.
        return "unknown"
    if t.last_role == "assistant" and t.last_text is not None and t.last_text.strip():
        return "delivered"
    return "failed_empty"


def _build_turn(t: _TurnDraft, index: int, conversation_id: str, user_id: str | None) -> Turn:
    attrs: dict[str, Any] = {"last_message_index": t.last_index}
    if t.request_index is not None:
        attrs["request_message_index"] = t.request_index
    else:
        attrs["preamble"] = True
    if t.request_non_text_parts:
        # Images or audio in the request: the text alone may not be the whole question.
        attrs["request_non_text_parts"] = t.request_non_text_parts
    if t.answer_index is not None:
        attrs["answer_message_index"] = t.answer_index
    return Turn(
        id=turn_id(conversation_id, index), conversation_id=conversation_id, user_id=user_id, index=index,
        request=t.request, answer=t.answer, delivery=_delivery(t),
        spans=tuple(Span(**s.values) for s in t.spans), attributes=attrs,
    )
