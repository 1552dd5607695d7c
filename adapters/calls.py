"""Client-only traces: each model call its own trace (the instrumentation quick-starts), grouped into turns.

An app that instruments only its model client writes one trace per call: a user turn with two tool rounds is
three traces. Calls are grouped into conversations (by the session id the spans carry, else by the message
history: each call of a conversation resends the history, so it begins with the previous call's input), and a
conversation's calls into turns: a call whose input has one more user message than the call before starts a
turn; calls that follow a tool result continue it, and their tool-call replies are steps, not answers.
Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_factory.adapters.assemble import (
    ANSWER_SOURCE,
    ANSWER_SPAN,
    LLM_INPUT,
    LLM_OUTPUT,
    REQUEST_SOURCE,
    REQUEST_SPAN,
    USER_KEYS,
    delivery_of,
    first_attr,
    roots_first,
    turn_attributes,
)
from agent_factory.adapters.model import Span, Turn
from agent_factory.adapters.otel.attributes import SESSION_KEYS
from agent_factory.adapters.otel.messages import model_messages, reply_text
from agent_factory.adapters.otel.toolcalls import attach_tool_calls
from agent_factory.digest import stable_id

CALL_GROUP = "call_group"
"""Turn attribute of a turn built from client-only calls: the key of its conversation's call group (a session
id, or a digest of the opening messages), so a later file's calls rejoin it."""
CALL_TRACES = "call_traces"
"""Turn attribute: the trace ids of the model calls that form the turn, in order."""
ASSEMBLED_FROM = "assembled_from"
"""Turn attribute; `llm_calls` for a turn built from several client-only traces."""


def is_call_trace(spans: Sequence[Span]) -> bool:
    """True when the trace is one model call on its own: its single root is a model call."""
    roots = [s for s in spans if s.parent_id is None]
    return len(roots) == 1 and roots[0].kind == "llm"


def _root(spans: Sequence[Span]) -> Span:
    return roots_first(spans)[0]


@dataclass(frozen=True)
class _Call:
    spans: tuple[Span, ...]
    root: Span
    messages: tuple[tuple[str | None, str | None], ...]
    """(role, text) of the call's input messages."""

    @property
    def users(self) -> int:
        return sum(1 for role, text in self.messages if role in ("user", "human") and text)


def _call(spans: Sequence[Span]) -> _Call:
    root = _root(spans)
    msgs = tuple(model_messages(root.attributes, root.input, side="input"))
    return _Call(spans=tuple(spans), root=root, messages=msgs)


def group_key(spans: Sequence[Span]) -> str:
    """The call group of a call trace: its session id, else a digest of its opening (system and first user
    messages), which every later call of the conversation repeats."""
    session = first_attr(roots_first(spans), SESSION_KEYS)
    if session is not None:
        return f"session:{session}"
    msgs = _call(spans).messages
    opening: list[tuple[str | None, str | None]] = []
    for role, text in msgs:
        opening.append((role, text))
        if role in ("user", "human") and text:
            break
    return stable_id("opening", tuple(opening), prefix="opening:")


def _when(c: _Call) -> tuple[bool, object, str]:
    return (c.root.start is None, c.root.start, c.root.trace_id)


def _chains(calls: list[_Call], *, by_session: bool) -> list[list[_Call]]:
    """Conversations: with a session id, all calls in time order; else calls joined to the conversation whose
    latest call's input their own input extends (the longest such history wins)."""
    calls = sorted(calls, key=_when)
    if by_session:
        return [calls]
    chains: list[list[_Call]] = []
    for c in calls:
        best, best_len = None, -1
        for chain in chains:
            prev = chain[-1].messages
            if len(prev) < len(c.messages) and c.messages[:len(prev)] == prev and len(prev) > best_len:
                best, best_len = chain, len(prev)
        if best is None:
            chains.append([c])
        else:
            best.append(c)
    return chains


def _turns_of(chain: list[_Call]) -> list[list[_Call]]:
    """A call continues the turn of the call before when its input is that call's input plus what followed
    (the reply, tool results) with no new user message; any other call starts a turn (a new user message, or
    a history the app rewrote, as when it drops a failed exchange before the user retries)."""
    turns: list[list[_Call]] = []
    for c in chain:
        prev = turns[-1][-1] if turns else None
        extends = prev is not None and c.messages[:len(prev.messages)] == prev.messages
        if prev is None or not extends or c.users > prev.users:
            turns.append([c])
        else:
            turns[-1].append(c)
    return turns


def _turn(calls: list[_Call], *, conversation_id: str, index: int, key: str) -> Turn:
    first, last = calls[0], calls[-1]
    spans = attach_tool_calls([s for c in calls for s in c.spans])
    users = [t for role, t in first.messages if role in ("user", "human") and t]
    request = users[-1] if users else None
    # The answer is the last call's reply text; a call that replied with tool calls only was a step.
    answer = None
    out = next(s for s in spans if s.id == last.root.id)
    if out.output is not None and out.status != "error":
        texts = [t for _role, t in model_messages(out.attributes, out.output, side="output") if t]
        answer = texts[-1] if texts else (None if out.attributes.get("tool_calls") else
                                          reply_text(out.attributes, out.output))
    attrs = turn_attributes(None, spans)
    attrs.update({
        ASSEMBLED_FROM: "llm_calls", CALL_GROUP: key, CALL_TRACES: [c.root.trace_id for c in calls],
        REQUEST_SOURCE: LLM_INPUT, REQUEST_SPAN: first.root.id,
    })
    if answer is not None:
        attrs.update({ANSWER_SOURCE: LLM_OUTPUT, ANSWER_SPAN: last.root.id})
    starts = [s.start for s in spans if s.start is not None]
    ends = [s.end for s in spans if s.end is not None]
    start, end = (min(starts) if starts else None), (max(ends) if ends else None)
    user = first_attr([c.root for c in calls], USER_KEYS)
    return Turn(
        id=first.root.trace_id, conversation_id=conversation_id, user_id=None if user is None else str(user),
        index=index, request=request, answer=answer,
        delivery=delivery_of(last.root, answer, spans, last.root),
        start=start, end=end,
        latency_ms=None if start is None or end is None else max((end - start).total_seconds() * 1000.0, 0.0),
        spans=spans, attributes=attrs,
    )


def group_calls(traces: Sequence[Sequence[Span]], *, key: str) -> list[Turn]:
    """The turns of one call group's traces (each a checked call trace), in conversation and turn order."""
    calls = [_call(t) for t in traces if t]
    by_session = key.startswith("session:")
    out: list[Turn] = []
    for chain in _chains(calls, by_session=by_session):
        cid = key.removeprefix("session:") if by_session else f"calls-{chain[0].root.trace_id}"
        for k, turn_calls in enumerate(_turns_of(chain)):
            out.append(_turn(turn_calls, conversation_id=cid, index=k, key=key))
    return out
