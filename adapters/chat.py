"""Adapters for chat-format logs: OpenAI chat-completions message lists and tau-bench trajectories.

`openai-chat` reads one conversation per record, where a record is a message list or an object
`{"id"?, "user_id"?, "session_id"?, "messages": [...], "metadata"?: {...}}`, laid out as JSON lines, one
JSON array of records, or a single (pretty-printed) record. `tau-bench` reads the benchmark's trajectory
file, a JSON array of `{task_id, trial, reward, info, traj}` whose `traj` is such a message list, and adds
the task reward as an outcome event. Both stream one record at a time; a bad record becomes a `Quarantine`
naming the file, the record and the field, and reading goes on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_factory.adapters.base import AdapterItem
from agent_factory.adapters.chat_io import RecordProblem, first_record, json_safe, json_type, read_conversations
from agent_factory.adapters.chat_messages import ROLES, convert_messages
from agent_factory.adapters.model import Conversation, OutcomeEvent, Turn
from agent_factory.adapters.source import Source
from agent_factory.digest import digest

_RECORD_KEYS = ("messages", "traj", "steps")
TAU_STOP = "###STOP###"
"""What tau-bench's simulated user writes to end an episode (the harness's own stop signal)."""


def is_message(value: Any) -> bool:
    """True for a chat message object (has a `role`), as opposed to a record that holds messages."""
    return isinstance(value, dict) and "role" in value and not any(k in value for k in _RECORD_KEYS)


def _looks_like_messages(value: Any) -> bool:
    return isinstance(value, list) and (not value or is_message(value[0]))


def _content_id(messages: list[Any]) -> str:
    return "chat-" + digest(messages, n=16)


def _opt_id(record: dict[str, Any], key: str) -> str | None:
    value = record.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise RecordProblem(key, f"{key} must be a non-empty string or integer, got {json_type(value)}")
    return str(value)


def _chat_conversation(value: Any) -> Conversation:
    """One chat record as a Conversation; `RecordProblem` if it is invalid."""
    if isinstance(value, list):
        record: dict[str, Any] = {}
        messages, path = value, ""
    elif isinstance(value, dict):
        record = value
        if "messages" not in record:
            raise RecordProblem("messages", "record has no 'messages' (a list of chat messages)")
        messages, path = record["messages"], "messages"
        if not isinstance(messages, list):
            raise RecordProblem("messages", f"messages must be an array, got {json_type(messages)}")
    else:
        raise RecordProblem(None, f"record must be a message list or an object with 'messages', got {json_type(value)}")
    own_id = _opt_id(record, "id")
    session = _opt_id(record, "session_id")
    user = _opt_id(record, "user_id")
    meta = record.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise RecordProblem("metadata", f"metadata must be an object, got {json_type(meta)}")
    cid = own_id or session or _content_id(messages)
    converted = convert_messages(messages, conversation_id=cid, user_id=user, path=path)
    attrs = dict(converted.attributes)
    attrs["id_source"] = "id" if own_id else "session_id" if session else "content"
    if session is not None:
        attrs["session_id"] = session
    if meta:
        attrs["metadata"] = json_safe(meta)
    ignored = sorted(k for k in record if k not in ("id", "user_id", "session_id", "messages", "metadata"))
    if ignored:
        attrs["ignored_keys"] = ignored
    return Conversation(id=cid, user_id=user, turns=converted.turns, attributes=attrs)


class OpenAIChatAdapter:
    """OpenAI chat-completions message lists, one conversation per record."""

    name = "openai-chat"
    description = "OpenAI chat messages (JSON lines / array): one conversation per message list or {messages} record"
    reads_sources = True

    def sniff(self, head: bytes, path: Path) -> bool:
        """A message list, or an object whose `messages` is one, as the first record."""
        rec = first_record(head, is_item=is_message)
        if isinstance(rec, dict):
            return "traj" not in rec and "steps" not in rec and _looks_like_messages(rec.get("messages"))
        return isinstance(rec, list) and bool(rec) and is_message(rec[0])

    def read(self, source: Source | Path) -> Iterator[AdapterItem]:
        """Stream conversations; bad records become `Quarantine` items."""
        return read_conversations(source, _chat_conversation, kind="conversation", is_item=is_message)


def _tau_conversation(value: Any) -> Conversation:
    """One tau-bench trajectory as a Conversation with its task reward event."""
    if not isinstance(value, dict):
        raise RecordProblem(None, f"trajectory must be an object, got {json_type(value)}")
    for key in ("task_id", "trial"):
        v = value.get(key)
        if v is None:
            raise RecordProblem(key, f"trajectory has no {key!r}")
        if isinstance(v, bool) or not isinstance(v, int | str) or v == "":
            raise RecordProblem(key, f"{key} must be an integer or a non-empty string, got {json_type(v)}")
    if "traj" not in value:
        raise RecordProblem("traj", "trajectory has no 'traj' (its message list)")
    traj = value["traj"]
    if not isinstance(traj, list):
        raise RecordProblem("traj", f"traj must be an array of messages, got {json_type(traj)}")
    reward = value.get("reward")
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)):
        raise RecordProblem("reward", f"reward must be a number, got {json_type(reward)}")
    info = value.get("info")
    if info is not None and not isinstance(info, dict):
        raise RecordProblem("info", f"info must be an object, got {json_type(info)}")
    info = info or {}
    task = info.get("task")
    if task is not None and not isinstance(task, dict):
        raise RecordProblem("info.task", f"info.task must be an object, got {json_type(task)}")
    user = (task or {}).get("user_id")
    if user is not None and not isinstance(user, str):
        raise RecordProblem("info.task.user_id", f"user_id must be a string, got {json_type(user)}")
    termination = info.get("source")
    if termination is not None and not isinstance(termination, str):
        raise RecordProblem("info.source", f"info.source must be a string, got {json_type(termination)}")

    task_id, trial = value["task_id"], value["trial"]
    cid = f"tau-{task_id}-{trial}"
    converted = convert_messages(traj, conversation_id=cid, user_id=user, path="traj")
    turns = _tau_stop(converted.turns, traj)
    attrs = dict(converted.attributes)
    # The customer id is the task's simulated customer, shared by every trial of the task: it names no person,
    # so no session of this "user" follows another (`user_identity`, read by cross-session metrics).
    attrs.update(task_id=task_id, trial=trial, reward=reward, termination=termination,
                 reward_info_present=info.get("reward_info") is not None, user_identity="simulated")
    events: tuple[OutcomeEvent, ...] = ()
    if reward is None:
        # No reward means no label: say so rather than invent a 0.
        attrs["reward_missing"] = True
    else:
        events = (OutcomeEvent(
            id=f"{cid}/task_reward", kind="task_reward", user_id=user, conversation_id=cid, value=float(reward),
            attributes={"task_id": task_id, "trial": trial, "termination": termination},
        ),)
    return Conversation(id=cid, user_id=user, turns=turns, events=events, attributes=attrs)


def _tau_stop(turns: tuple[Turn, ...], traj: list[Any]) -> tuple[Turn, ...]:
    """The last turn as `cut_off` when the episode ended neither on the user's stop nor on an answer.

    A tau-bench record is a whole episode: the harness ends it when the user writes its stop token or a tool
    ends it (a hand-off), or when the agent runs out of steps. So an episode whose last message is a tool
    result, or a user message without the stop token, was stopped by the step limit before the agent answered:
    neither an empty answer nor a request the log cannot judge. A hand-off tool's result is told apart later
    by the pack (`evaluators.provenance.endings`), which turns it into `handed_off`."""
    if not turns or not traj or not isinstance(traj[-1], dict):
        return turns
    last, message = turns[-1], traj[-1]
    role, content = message.get("role"), message.get("content")
    stopped = (role == "tool" and last.delivery == "failed_empty") or (
        role == "user" and last.delivery == "unknown" and last.request is not None
        and not (isinstance(content, str) and TAU_STOP in content))
    if not stopped:
        return turns
    return (*turns[:-1], last.model_copy(update={"delivery": "cut_off"}))


class TauBenchAdapter:
    """tau-bench trajectory files: conversations with their task reward."""

    name = "tau-bench"
    description = "tau-bench trajectories: JSON array of {task_id, trial, reward, info, traj}"
    reads_sources = True

    def sniff(self, head: bytes, path: Path) -> bool:
        """An array (or lines) whose first object has `traj` and `task_id`."""
        rec = first_record(head, is_item=is_message)
        return isinstance(rec, dict) and "traj" in rec and "task_id" in rec

    def read(self, source: Source | Path) -> Iterator[AdapterItem]:
        """Stream trajectories; bad records become `Quarantine` items."""
        return read_conversations(source, _tau_conversation, kind="conversation", is_item=is_message)


__all__ = ["ROLES", "OpenAIChatAdapter", "TauBenchAdapter", "is_message"]
