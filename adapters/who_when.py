"""Who&When failure-attribution logs: one multi-agent run per record, with the agent and step that failed it.

A record (one JSON document per file in the benchmark; JSON lines and arrays of records are read too) is::

    {"question": "...", "question_ID": "...", "ground_truth": "...", "is_correct": false,
     "history": [{"role": "assistant", "name": "Excel_Expert", "content": "..."},      # algorithm-generated
                 {"role": "Orchestrator (-> WebSurfer)", "content": "..."},            # hand-crafted
                 ...],
     "mistake_agent": "WebSurfer", "mistake_step": "12", "mistake_reason": "..."}

The agent of a message is its `name` (AG2's group chats, where `role` is only user / assistant), or else its
`role`, which hand-crafted Magentic-One logs write as `Agent (channel)`: `Orchestrator (thought)`,
`Orchestrator (-> WebSurfer)`. A `human` message is the user's: the question is the turn's request. Each agent
message becomes a span of the run's one turn, named after the agent and keeping its `message_index` (the
benchmark's step). The labels become annotation events of the conversation (`ANNOTATION_KINDS`: stored,
compared with no flag): `mistake_agent`, `mistake_step` (with the span of that step) and
`mistake_reason`. A record graded by the benchmark (`is_correct` / `is_corrected`) is a finished task: the
conversation says so (`TASK_FINISHED`), so its session is not read as still open. No user id: these are
benchmark runs, no person's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_factory.adapters.assemble import REQUEST_SOURCE
from agent_factory.adapters.base import HEAD_BYTES, AdapterItem
from agent_factory.adapters.chat_io import RecordProblem, first_record, json_safe, json_type, read_conversations
from agent_factory.adapters.model import TASK_FINISHED, Conversation, DeliveryState, OutcomeEvent, Span, SpanKind, Turn
from agent_factory.adapters.source import Source
from agent_factory.digest import digest

HUMAN_ROLES = frozenset({"human"})
"""Roles (without a `name`) of the person who asked: not an agent, so not a span."""
TERMINATION_TOKENS = ("TERMINATE",)
"""Words an agent ends a group chat with (AG2's convention); a message of only these is no answer."""
EXECUTOR_WORDS = ("terminal", "executor")
"""Words of an agent name that mark a code executor: its messages are tool output (`tool` spans)."""
LABEL_KEYS = ("mistake_agent", "mistake_step", "mistake_reason")
"""The failure labels, each kept as an annotation event of the same kind (all in `ANNOTATION_KINDS`)."""
GRADED_KEYS = ("is_correct", "is_corrected")
"""Keys holding the benchmark's verdict on the run: a record with one ran to its end and was graded."""
SIGNATURE_KEYS = frozenset({"question", "question_ID", "ground_truth", *LABEL_KEYS})
"""Top-level keys by which sniffing recognises a record next to its `history`."""
OTHER_FORMAT_KEYS = frozenset({"messages", "traj", "steps", "spans", "resourceSpans"})
"""Top-level keys of other formats' records: a record with one of them is not this format's."""

_CHANNEL = re.compile(r"^(?P<agent>[^()]+?)\s*\((?P<channel>[^()]*)\)\s*$")
_EXIT = re.compile(r"^\s*exitcode:\s*(-?\d+)")
_KNOWN_KEYS = {"question", "question_ID", "ground_truth", "history", "level", "is_correct", "is_corrected",
               "system_prompt", "labels", "mistake_type", *LABEL_KEYS}


@dataclass(frozen=True)
class _Message:
    index: int
    agent: str
    channel: str | None
    role: str
    text: str | None


def _message(msg: Any, i: int) -> _Message | None:
    """One history entry; None for the person's own message."""
    where = f"history[{i}]"
    if not isinstance(msg, dict):
        raise RecordProblem(where, f"message must be an object, got {json_type(msg)}")
    role, name, content = msg.get("role"), msg.get("name"), msg.get("content")
    if not isinstance(role, str) or not role.strip():
        raise RecordProblem(f"{where}.role", f"role must be a non-empty string, got {json_type(role)}")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise RecordProblem(f"{where}.name", f"name must be a non-empty string, got {json_type(name)}")
    if content is not None and not isinstance(content, str):
        raise RecordProblem(f"{where}.content", f"content must be a string or null, got {json_type(content)}")
    if name:
        return _Message(i, name.strip(), None, role, content)
    if role.strip().lower() in HUMAN_ROLES:
        return None
    m = _CHANNEL.match(role)
    if m:
        return _Message(i, m.group("agent").strip(), m.group("channel").strip(), role, content)
    return _Message(i, role.strip(), None, role, content)


def _kind(m: _Message) -> SpanKind:
    if any(w in m.agent.lower() for w in EXECUTOR_WORDS):
        return "tool"
    if m.channel is None:
        return "llm"
    return "reasoning" if m.channel.lower() == "thought" else "agent"


def _strip_termination(text: str | None) -> str:
    body = (text or "").rstrip()
    for token in TERMINATION_TOKENS:
        body = body.removesuffix(token).rstrip()
    return body


def _span(m: _Message, *, trace: str) -> Span:
    attrs: dict[str, Any] = {"message_index": m.index, "agent": m.agent, "role": m.role}
    if m.channel is not None:
        attrs["channel"] = m.channel
        if m.channel.startswith("->"):
            attrs["recipient"] = m.channel[2:].strip()
    kind = _kind(m)
    exit_code = _EXIT.match(m.text or "") if kind == "tool" else None
    failed = exit_code is not None and int(exit_code.group(1)) != 0
    return Span(
        id=f"{trace}/step-{m.index}", trace_id=trace, kind=kind, name=m.agent, output=m.text,
        status="error" if failed else "ok", error=(m.text or "").splitlines()[0] if failed else None,
        attributes=attrs,
    )


def _step(value: Any, n_messages: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise RecordProblem("mistake_step", f"mistake_step must be an integer or a string of one, got "
                                            f"{json_type(value)}")
    try:
        step = int(value)
    except ValueError:
        raise RecordProblem("mistake_step", f"mistake_step is not an integer: {value!r}") from None
    if not 0 <= step < n_messages:
        raise RecordProblem("mistake_step", f"mistake_step {step} is outside the history (0..{n_messages - 1})")
    return step


def _answer(messages: list[_Message]) -> tuple[_Message | None, bool]:
    """The last message of a speaking agent that says more than a termination token, and whether the log
    shows the run's end (a termination token, or Magentic-One's `termination condition` message)."""
    ended = False
    if messages:
        last = messages[-1]
        ended = (bool(last.text) and not _strip_termination(last.text)) or (last.channel or "").lower() == (
            "termination condition")
    for m in reversed(messages):
        if _kind(m) in ("llm", "agent") and _strip_termination(m.text):
            return m, ended
    return None, ended


def _labels(record: dict[str, Any], cid: str, trace: str, spans: dict[int, Span],
            n_messages: int) -> tuple[OutcomeEvent, ...]:
    for key in ("mistake_agent", "mistake_reason"):
        if record.get(key) is not None and not isinstance(record[key], str):
            raise RecordProblem(key, f"{key} must be a string, got {json_type(record[key])}")
    agent, reason = record.get("mistake_agent"), record.get("mistake_reason")
    step = _step(record["mistake_step"], n_messages) if record.get("mistake_step") is not None else None
    events = []
    span = spans.get(step) if step is not None else None
    at_step = {"message_index": step, "span_id": span.id if span else None}
    if agent is not None:
        attrs: dict[str, Any] = dict(at_step) if step is not None else {}
        if span is not None:
            # The benchmark's own check: the labelled agent is the one speaking at the labelled step.
            attrs["agent_at_step"] = span.name
            attrs["matches_step"] = agent.strip().lower() in span.name.lower()
        events.append(("mistake_agent", agent, attrs))
    if step is not None:
        events.append(("mistake_step", float(step), {**at_step, "turn_id": trace}))
    if reason is not None:
        events.append(("mistake_reason", reason, {}))
    return tuple(OutcomeEvent(id=f"{cid}/{kind}", kind=kind, conversation_id=cid, value=value, attributes=attrs)
                 for kind, value, attrs in events)


def _content_id(record: dict[str, Any]) -> str:
    # The benchmark repeats question ids across runs, so the id comes from the run's content.
    return "whowhen-" + digest([record.get("question_ID"), record.get("question"), record["history"]], n=16)


def _prompts(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecordProblem("system_prompt", f"system_prompt must be an object, got {json_type(value)}")
    # Like the chat adapters: the prompt's hash and length, not its text.
    return {"system_prompts": {
        str(k): {"sha256": digest(str(v)), "chars": len(str(v))}
        for k, v in value.items()
    }}


def who_when_conversation(value: Any) -> Conversation:
    """One Who&When record as a Conversation of one turn with its failure labels; `RecordProblem` if invalid."""
    if not isinstance(value, dict):
        raise RecordProblem(None, f"record must be an object, got {json_type(value)}")
    history = value.get("history")
    if not isinstance(history, list):
        raise RecordProblem("history", f"history must be an array of messages, got {json_type(history)}")
    question = value.get("question")
    if not isinstance(question, str):
        raise RecordProblem("question", f"question must be a string, got {json_type(question)}")
    cid = _content_id(value)
    trace = f"{cid}/turn-0"
    parsed = [_message(m, i) for i, m in enumerate(history)]
    messages = [m for m in parsed if m is not None]
    spans = {m.index: _span(m, trace=trace) for m in messages}
    answer_msg, ended = _answer(messages)
    answer = _strip_termination(answer_msg.text) if answer_msg is not None else None
    delivery: DeliveryState = "delivered" if ended and answer else "unknown"
    turn_attrs: dict[str, Any] = {REQUEST_SOURCE: "question", "user_identity": "none", "log_ended": ended}
    humans = [i for i, m in enumerate(parsed) if m is None]
    if humans:
        turn_attrs["request_message_index"] = humans[0]
    if answer_msg is not None:
        turn_attrs["answer_message_index"] = answer_msg.index
    turn = Turn(id=trace, conversation_id=cid, request=question, answer=answer, delivery=delivery,
                spans=tuple(spans.values()), attributes=turn_attrs)
    attrs: dict[str, Any] = {"user_identity": "none", "message_count": len(history),
                             "agents": sorted({m.agent for m in messages})}
    for key in ("question_ID", "ground_truth", "level", "is_correct", "is_corrected", "labels", "mistake_type"):
        if value.get(key) is not None:
            attrs[key] = json_safe(value[key])
    if any(isinstance(value.get(k), bool) for k in GRADED_KEYS):
        attrs[TASK_FINISHED] = True
    attrs.update(_prompts(value.get("system_prompt")))
    ignored = sorted(k for k in value if k not in _KNOWN_KEYS)
    if ignored:
        attrs["ignored_keys"] = ignored
    events = _labels(value, cid, trace, spans, len(history))
    return Conversation(id=cid, turns=(turn,), events=events, attributes=attrs)


class WhoWhenAdapter:
    """Who&When failure-attribution logs (algorithm-generated AG2 and hand-crafted Magentic-One runs)."""

    name = "who-and-when"
    description = "Who&When multi-agent failure logs: {question, history: [{role, name?, content}], mistake_*}"
    reads_sources = True

    def sniff(self, head: bytes, path: Path) -> bool:
        """A record with a `history` of role/content messages and a Who&When key beside it; or, when the head
        ends inside a first key `history` (hand-crafted logs are long), messages of the person and agents."""
        rec = first_record(head)
        if not isinstance(rec, dict) or OTHER_FORMAT_KEYS & rec.keys():
            return False
        history = rec.get("history")
        if not isinstance(history, list) or not history:
            return False
        first = history[0]
        if not (isinstance(first, dict) and isinstance(first.get("role"), str) and "content" in first):
            return False
        if SIGNATURE_KEYS & rec.keys():
            return True
        cut_in_history = len(head) >= HEAD_BYTES and list(rec) == ["history"]
        return cut_in_history and any(
            isinstance(m, dict) and isinstance(m.get("role"), str)
            and (m["role"].strip().lower() in HUMAN_ROLES or _CHANNEL.match(m["role"]) is not None)
            for m in history
        )

    def read(self, source: Source | Path) -> Iterator[AdapterItem]:
        """Stream records; bad ones become `Quarantine` items."""
        return read_conversations(source, who_when_conversation, kind="conversation")


__all__ = ["WhoWhenAdapter", "who_when_conversation"]
