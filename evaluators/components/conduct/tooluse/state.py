"""The observed state of a tool-calling conversation: its messages and calls in order, each call's arguments and
output parsed once, and what had been seen before any step. Pure: a function of the conversation and the pack.

Every tool-use check (`tooluse.*`) reads a conversation through `timeline(conversation)`: a tuple of `Step`s in
source order. A user message is a step (`user`, the turn's request); an assistant message with text is a step
(`assistant`); a tool call is a step (`call`) with its parsed arguments and output. The answer of a turn is the
text of its last assistant message; an adapter that records the answer without a message span gets one step for
it. Evidence pointers name the turn (`request`, `answer`) or the span (`input`, `output`) and the characters.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from agent_factory.adapters.model import Conversation, EvidencePointer, Span
from agent_factory.knowledge_packs import KnowledgePack
from agent_factory.knowledge_packs.tools import ToolPolicy

StepKind = Literal["user", "assistant", "call"]


@dataclass(frozen=True)
class Step:
    """One message or tool call of a conversation."""

    kind: StepKind
    position: int
    """Its place in the conversation (0, 1, ...)."""
    turn_index: int
    unit_id: str
    """The turn (user message, answer) or span (assistant message, call) the step is."""
    field: str
    """The field its text is in: `request`, `answer`, `output` (assistant text), `input` (a call's arguments)."""
    text: str = ""
    name: str = ""
    """A call's tool name."""
    args: Any = None
    """A call's arguments, parsed (None when not JSON)."""
    output_text: str = ""
    """A call's result as recorded."""
    output: Any = None
    """A call's result, parsed (None when not JSON)."""
    failed: bool = False
    """A call whose result is an error."""
    span: Span | None = None

    def pointer(self, start: int | None = None, end: int | None = None) -> EvidencePointer:
        """The step's text (or the characters `start:end` of it)."""
        return EvidencePointer(unit_id=self.unit_id, field=self.field, start=start or 0,
                               end=len(self.text) if end is None else end)

    def output_pointer(self, start: int | None = None, end: int | None = None) -> EvidencePointer:
        """A call's result (or the characters `start:end` of it)."""
        return EvidencePointer(unit_id=self.unit_id, field="output", start=start or 0,
                               end=len(self.output_text) if end is None else end)


def _json(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def timeline(conversation: Conversation) -> tuple[Step, ...]:
    """The conversation's user messages, assistant messages and tool calls in source order."""
    out: list[Step] = []

    def add(**kw: Any) -> None:
        out.append(Step(position=len(out), **kw))

    for k, turn in enumerate(conversation.turns):
        if turn.request:
            add(kind="user", turn_index=k, unit_id=turn.id, field="request", text=turn.request)
        answered = False
        for span in turn.spans:
            if span.kind == "tool":
                add(kind="call", turn_index=k, unit_id=span.id, field="input", text=span.input or "",
                    name=span.name, args=_json(span.input), output_text=span.output or "",
                    output=_json(span.output), failed=span.status == "error", span=span)
            elif span.kind == "llm" and span.output:
                answered = answered or span.output == turn.answer
                add(kind="assistant", turn_index=k, unit_id=span.id, field="output", text=span.output, span=span)
        if turn.answer and not answered:
            add(kind="assistant", turn_index=k, unit_id=turn.id, field="answer", text=turn.answer)
    return tuple(out)


def tool_matches(name: str, names: Sequence[str]) -> bool:
    """Whether a tool name is one of `names` (`*` a glob)."""
    from fnmatch import fnmatchcase

    return any(fnmatchcase(name, n) for n in names)


def lexicon_patterns(pack: KnowledgePack, *categories: str) -> tuple[str, ...]:
    """The regexes of the pack's lexicon `categories` in every language (languages in order, as conditions match)."""
    return tuple(p.pattern for lang in sorted(pack.lexicons) for c in categories
                 for p in getattr(pack.lexicons[lang], c))


def calls(steps: Sequence[Step], names: Sequence[str] | None = None) -> Iterator[Step]:
    """The call steps, of the tools `names` when given."""
    for s in steps:
        if s.kind == "call" and (names is None or tool_matches(s.name, names)):
            yield s


# ---- values -----------------------------------------------------------------------------------------------------


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, scalar) of every scalar in a JSON value; list elements as `name[]`."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for v in value:
            yield from leaves(v, f"{path}[]")
    else:
        yield path, value


def at_path(value: Any, path: str) -> list[Any]:
    """The values a `FieldPath` reaches (`flights[].date`: each flight's date); [] when none."""
    current = [value]
    for part in path.split("."):
        many = part.endswith("[]")
        key = part.removesuffix("[]")
        nxt: list[Any] = []
        for v in current:
            if isinstance(v, dict) and key in v:
                got = v[key]
                if many:
                    if isinstance(got, list):
                        nxt.extend(got)
                    elif isinstance(got, dict):
                        nxt.extend(got.values())
                else:
                    nxt.append(got)
        current = nxt
    return current


def objects(value: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object in a value, outermost first."""
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from objects(v)
    elif isinstance(value, list):
        for v in value:
            yield from objects(v)


def entity(steps: Sequence[Step], before: int, *, key: str, value: Any) -> tuple[Step, dict[str, Any]] | None:
    """The most recent object in a tool output before position `before` whose `key` equals `value` (the entity
    as the agent last read it), with the call that returned it."""
    want = str(value).strip().lower()
    for s in reversed(steps[:before]):
        if s.kind != "call" or s.failed:
            continue
        for obj in objects(s.output):
            got = obj.get(key)
            if got is not None and str(got).strip().lower() == want:
                return s, obj
    return None


NUMBER = re.compile(r"(?<![\w.])[-+]?\$?\s?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w])")
"""A number as people write it: `1,234.50`, `$50`, `12`; not the digits inside an id (`HAT012`, `gift_card_7`)."""


def numbers(text: str) -> Iterator[tuple[float, int, int]]:
    """(value, start, end) of every number written in a text."""
    for m in NUMBER.finditer(text):
        digits = m.group(1).replace(",", "") + (m.group(2) or "")
        try:
            yield float(digits), m.start(), m.end()
        except ValueError:
            continue


def json_numbers(value: Any) -> Iterator[float]:
    """Every number in a JSON value (booleans excluded; numeric strings included)."""
    for _, v in leaves(value):
        if isinstance(v, bool):
            continue
        if isinstance(v, int | float) and math.isfinite(v):
            yield float(v)
        elif isinstance(v, str):
            try:
                f = float(v.replace(",", ""))
            except ValueError:
                continue
            if math.isfinite(f):
                yield f


@dataclass
class Seen:
    """What a conversation had shown before a step: text of user messages and tool outputs, numbers of tool
    outputs. Built incrementally by `seen_before` so each check pays once per conversation."""

    user_text: list[str] = field(default_factory=list)
    tool_text: list[str] = field(default_factory=list)
    tool_numbers: set[float] = field(default_factory=set)


def seen_before(steps: Sequence[Step]) -> list[Seen]:
    """For each step, what was seen strictly before it (a fresh `Seen` per step, sharing no lists)."""
    out: list[Seen] = []
    user: list[str] = []
    tool: list[str] = []
    nums: set[float] = set()
    for s in steps:
        out.append(Seen(user_text=list(user), tool_text=list(tool), tool_numbers=set(nums)))
        if s.kind == "user":
            user.append(s.text)
        elif s.kind == "call" and not s.failed:
            tool.append(s.output_text)
            nums.update(json_numbers(s.output))
    return out


# ---- time -------------------------------------------------------------------------------------------------------


def now_of(conversation: Conversation, tools: ToolPolicy) -> datetime | None:
    """The time the policy calls now (`tools.now`), else the conversation's start, else its first turn's."""
    if tools.now is not None:
        return _aware(tools.now)
    start = conversation.start or next((t.start for t in conversation.turns if t.start is not None), None)
    return _aware(start) if start is not None else None


def _aware(d: datetime) -> datetime:
    return d if d.tzinfo is not None else d.replace(tzinfo=UTC)


def parse_time(value: Any) -> tuple[datetime, bool] | None:
    """A date-time or a date in a tool output: (the moment, whether it was a date alone); None when not one."""
    if not isinstance(value, str):
        return None
    text = value.strip().replace("Z", "+00:00")
    try:
        if len(text) == 10:
            d = datetime.fromisoformat(text)
            return _aware(d), True
        return _aware(datetime.fromisoformat(text.replace(" ", "T", 1))), False
    except ValueError:
        return None


def day_end(d: datetime) -> datetime:
    """The end of a date's day (a flight on a date has flown only once the day is over)."""
    return d + timedelta(days=1)


def pack_tools(pack: KnowledgePack) -> ToolPolicy:
    """The pack's tool declarations."""
    return pack.tools


__all__ = ["Seen", "Step", "StepKind", "at_path", "calls", "day_end", "entity", "json_numbers", "leaves",
           "lexicon_patterns",
           "now_of", "numbers", "objects", "pack_tools", "parse_time", "seen_before", "timeline", "tool_matches"]
