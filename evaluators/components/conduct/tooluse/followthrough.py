"""Tool-use checks of follow-through: the agent looked before it gave up, and did what the user agreed to.

- `conduct.deflected_own_records` (trigger): an assistant message deflects (the pack's `deflection` lexicon, any
  language: "I'm unable to access", "I can't provide information about your balances", "check your profile",
  "无法查询") after the user asked about their own records (`tools.subject_patterns`, or an identifier of
  `tools.id_patterns` in the user's message).
- `conduct.looked_before_refusing` (obligation): each such deflection follows a call of a read tool
  (`tools.read`); a deflection with no lookup before it is "gave up without looking".
- `conduct.agreed_action` (trigger): the user explicitly agreed to an action the agent laid out: an assistant
  message asking for the go-ahead (`ask_regex`) that names a write (an intent of `tools.intents` or an identifier
  of `tools.id_patterns` in its text), answered by an explicit yes (`confirm_regex`, not opening with
  `deny_regex`). The agent asking again and the user saying yes again is one agreement: the last yes counts; a
  request asked again and not agreed to withdraws the earlier agreement; one followed by a hand-off is dropped
  (see `agreements`).
- `conduct.agreed_action_done` (obligation): after each agreement a write call follows before the next agreement
  or the end ("said is not done" otherwise); and no write swaps an identifier the agreement named for another of
  its shape: an argument none of whose identifiers of a shape was named, while an identifier of that shape the
  agreement named is absent from the call (another payment method, another reservation than the one confirmed).

Not checked here (no general statement found): "one passenger instead of all" (a list argument shorter than what
the message enumerated needs to know which enumeration a list argument answers), amounts that differ from the
confirmed ones (the grounding checks read amounts), and an agent demanding what its tools could look up (asking
for a reservation id is also how an agent rightly asks for the key a lookup needs).

The confirmation regexes are the defaults of the airline pack's `conduct.confirmed_before_action` too (it imports
them from here); a clause may give its own by params, as for that rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from agent_factory.adapters.model import Conversation, EvidencePointer
from agent_factory.evaluators.components.conduct.rules import (
    capped,
    clause_of,
    clause_param,
    evidence_text,
    find,
    first_match,
)
from agent_factory.evaluators.components.conduct.tooluse.state import (
    Step,
    leaves,
    lexicon_patterns,
    timeline,
    tool_matches,
)
from agent_factory.evaluators.core.registry import RuleAnswer, RuleContext, rule
from agent_factory.knowledge_packs.model import HandoffPolicy
from agent_factory.knowledge_packs.tools import ToolPolicy

# Defaults of the confirmation params (English chat); a pack may replace them per clause.
CONFIRM_REGEX = (
    r"(?:^|[.!?]\s)\W*(?:yes|yeah|yep|yup|sure|ok(?:ay)?|correct|confirm(?:ed)?|absolutely|definitely)\b"
    r"|\bi\s+(?:do\s+)?confirm\b|\bconfirmed\b|\bgo\s+ahead\b|\bproceed\b"
)
"""An explicit yes in the user's message."""
DENY_REGEX = r"^\W*(?:no|nope|not\s+yet|don'?t|do\s+not|wait|hold\s+on|cancel\s+that)\b"
"""A user message that opens with a refusal is never a confirmation, whatever follows."""
ASK_REGEX = (
    r"\bconfirm|\bproceed\b|\bgo\s+ahead\b|\bwould\s+you\s+like\b|\bshall\s+i\b|\bshould\s+i\b|\bdo\s+you\s+want\b"
)
"""The assistant asking for the go-ahead."""
DEFERRAL_REGEX = (
    r"\b(?:when|once|whenever|as\s+soon\s+as|before|after|if|until)\b[^.?!\n]{0,40}?"
    r"\b(?:proceed|go\s+ahead|confirm(?:ed)?)\b"
    r"|(?:等|如果|之后|以后)[^。？！\n]{0,12}(?:确认|继续|办理)"
)
"""A yes word that only defers ("I'll get back to you when I'm ready to proceed", "once I confirm"): language, not
domain; such a message agrees to nothing yet."""

_CONFIRM_PARAMS = {"confirm_regex": "an explicit yes in the user's message", "deny_regex": "a refusal opening it",
                   "ask_regex": "the assistant asking for the go-ahead"}


# ---- shared -----------------------------------------------------------------------------------------------------


def _policy(unit: object, ctx: RuleContext, name: str) -> tuple[Conversation, ToolPolicy] | RuleAnswer:
    """The conversation and the pack's tool declarations, or the abstention that says which is missing."""
    if not isinstance(unit, Conversation):
        return RuleAnswer(None, reason=f"{name} needs a conversation unit")
    tools = ctx.pack.tools
    if not tools.declared:
        return RuleAnswer(None, reason=f"{name}: pack {ctx.pack.name!r} declares no tools (no `tools:` section)")
    return unit, tools


@lru_cache(maxsize=256)
def _id_regex(pattern: str) -> re.Pattern[str]:
    # Identifiers are codes: matched case-sensitively, unlike every other pack regex.
    return re.compile(pattern)


def _ids_in(text: str, tools: ToolPolicy) -> list[tuple[str, str, int, int]]:
    """(id class, value, start, end) of every identifier `tools.id_patterns` finds in a text."""
    return [(name, m.group(), m.start(), m.end())
            for name, p in tools.id_patterns.items() for m in _id_regex(p).finditer(text) if m.end() > m.start()]


def _matches(patterns: Sequence[str], text: str, step: Step) -> list[EvidencePointer]:
    hits: list[EvidencePointer] = []
    for p in patterns:
        hits += find(p, text, unit_id=step.unit_id, field=step.field)
    return sorted(set(hits), key=lambda e: (e.start, e.end))


# ---- gave up without looking ------------------------------------------------------------------------------------


def _subject(step: Step, tools: ToolPolicy) -> EvidencePointer | None:
    """Where a user message is about the user's own records (a subject pattern, else an identifier)."""
    hits = _matches(tools.subject_patterns, step.text, step)
    if hits:
        return hits[0]
    ids = _ids_in(step.text, tools)
    return step.pointer(ids[0][2], ids[0][3]) if ids else None


@dataclass(frozen=True)
class Deflection:
    """An assistant message that deflects after the user asked about their own records."""

    message: EvidencePointer
    """The deflecting characters."""
    request: EvidencePointer
    """The latest user message about their own records before it."""
    lookup: Step | None
    """The first read call before it; None: the agent gave up without looking."""
    never_looked: bool = False
    """No deflecting words: the agent answered about the user's records and never made any lookup (`message` is
    its first reply after the request)."""


NEVER_LOOKED_REPLIES = 2
"""Replies after a request about the user's records, with no lookup anywhere, that make "never looked": one reply
asking for an identifier is how a lookup starts (the user may leave before giving it); a second reply without any
lookup is the agent talking instead of looking."""


def deflections(steps: Sequence[Step], tools: ToolPolicy, patterns: Sequence[str]) -> Iterator[Deflection]:
    """Every deflecting assistant message of a conversation once the user asked about their own records; and,
    when the conversation has no read call at all, its first reply after that request if the agent never looked
    though it could: the user gave an identifier (`tools.id_patterns`), or the agent replied at least
    `NEVER_LOOKED_REPLIES` times without looking."""
    request: EvidencePointer | None = None
    lookup: Step | None = None
    first_reply: Step | None = None
    replies = 0
    identified = deflected = False
    for s in steps:
        if s.kind == "user":
            subject = _subject(s, tools)
            request = subject or request
            identified = identified or (request is not None and bool(_ids_in(s.text, tools)))
        elif s.kind == "call":
            if lookup is None and tool_matches(s.name, tools.read):
                lookup = s
        elif request is not None:
            replies += 1
            first_reply = first_reply or s
            hits = _matches(patterns, s.text, s)
            if hits:
                deflected = True
                yield Deflection(hits[0], request, lookup)
    if request is not None and lookup is None and first_reply is not None and tools.read and not deflected and (
            identified or replies >= NEVER_LOOKED_REPLIES):
        yield Deflection(first_reply.pointer(), request, None, never_looked=True)


def _deflection_setup(unit: object, ctx: RuleContext, name: str) -> list[Deflection] | RuleAnswer:
    got = _policy(unit, ctx, name)
    if isinstance(got, RuleAnswer):
        return got
    conversation, tools = got
    if not tools.subject_patterns and not tools.id_patterns:
        return RuleAnswer(None, reason=f"{name}: the pack's tools declare neither subject_patterns nor id_patterns "
                                       "(what a request about the user's own records looks like)")
    patterns = lexicon_patterns(ctx.pack, "deflection")
    if not patterns:
        return RuleAnswer(None, reason=f"{name}: pack {ctx.pack.name!r} has no `deflection` lexicon")
    return list(deflections(timeline(conversation), tools, patterns))


@rule("conduct.deflected_own_records", layers=("conversation",), reads=("request", "answer", "spans"))
def deflected_own_records(unit: object, ctx: RuleContext) -> RuleAnswer:
    """The agent deflected a request about the user's own records: an assistant message matching the pack's
    `deflection` lexicon (any language) after a user message about their own records (`tools.subject_patterns`,
    or an identifier of `tools.id_patterns`). Cites the deflection and the request."""
    found = _deflection_setup(unit, ctx, "conduct.deflected_own_records")
    if isinstance(found, RuleAnswer):
        return found
    if not found:
        return RuleAnswer("no", reason="no deflection after a request about the user's own records")
    evidence = capped([p for d in found for p in (d.message, d.request)])
    return RuleAnswer("yes", evidence=evidence, reason=f"{len(found)} deflecting message(s)")


@rule("conduct.looked_before_refusing", layers=("conversation",), reads=("request", "answer", "spans"))
def looked_before_refusing(unit: object, ctx: RuleContext) -> RuleAnswer:
    """Each deflection of a request about the user's own records (`conduct.deflected_own_records`) follows a
    call of a read tool (`tools.read`). A violation ("gave up without looking") cites each deflection's
    characters and the user's request; its fact is the number of such deflections. A pass cites the lookup."""
    name = "conduct.looked_before_refusing"
    found = _deflection_setup(unit, ctx, name)
    if isinstance(found, RuleAnswer):
        return found
    if not found:
        return RuleAnswer("not_applicable", reason="no deflection after a request about the user's own records")
    if not ctx.pack.tools.read:
        return RuleAnswer(None, reason=f"{name}: the pack's tools list no read tool (what a lookup is)")
    blind = [d for d in found if d.lookup is None]
    if blind:
        evidence = capped([p for d in blind for p in (d.message, d.request)])
        if all(d.never_looked for d in blind):
            why = ("the user asked about their own records and the agent never called a read tool in the "
                   f"conversation (its first reply and the request: {evidence_text(evidence)})")
        else:
            why = (f"{len(blind)} of {len(found)} deflection(s) with no call of a read tool before them: "
                   f"{evidence_text(evidence)}")
        return RuleAnswer("no", fact=float(len(blind)), evidence=evidence, reason=why)
    looked = [d.lookup for d in found if d.lookup is not None]
    evidence = capped([p for d in found for p in (d.message,)] + [looked[0].pointer()])
    return RuleAnswer("yes", evidence=evidence, reason=f"all {len(found)} deflection(s) follow a lookup "
                                                       f"({looked[0].name})")


_NO_HANDOFF = HandoffPolicy()

# ---- said is not done -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Agreement:
    """An action the agent laid out and the user agreed to (the last yes of a re-confirmation)."""

    message: Step
    """The assistant message that asked for the go-ahead."""
    asked: EvidencePointer
    """Where it names the write (the intent or the identifier)."""
    yes: Step
    """The user's yes."""
    yes_at: EvidencePointer
    named: frozenset[tuple[str, str]]
    """(id class, value) of the identifiers the message and the yes named."""
    writes: tuple[Step, ...]
    """The write calls that followed it (see `agreements`)."""


def _names_write(step: Step, tools: ToolPolicy) -> EvidencePointer | None:
    for intent in tools.intents:
        hits = _matches(intent.patterns, step.text, step)
        if hits:
            return hits[0]
    ids = _ids_in(step.text, tools)
    return step.pointer(ids[0][2], ids[0][3]) if ids else None


def agreements(steps: Sequence[Step], tools: ToolPolicy, *, confirm: str, deny: str, ask: str,
               handoff: HandoffPolicy = _NO_HANDOFF) -> list[Agreement]:
    """Every agreement of a conversation, with the writes that followed it (module docstring).

    An agreement's writes are the write calls after its yes up to the user's next message that is not itself a
    yes; when none came by then, the first write after it (the user may first have answered a question the write
    needs, such as a reason or a payment method). It stays open until a write, the next agreement or the end:
    one with no write by then was not done. The agent asking for the go-ahead on a write again before any write
    replaces it: a yes to the new request is the agreement (a re-confirmation: the last yes counts), anything
    else withdraws it (the user revised the plan). An agreement followed by a hand-off (`handoff`: the pack's
    hand-off tools) before any write was to the hand-off, and the conversation left the agent's hands: it is
    dropped."""
    out: list[Agreement] = []
    last_message: Step | None = None
    pending: Agreement | None = None
    writes: list[Step] = []
    answered = False  # a message of the user that is not a yes came after the pending agreement's yes

    def close() -> None:
        nonlocal pending
        if pending is not None:
            out.append(Agreement(pending.message, pending.asked, pending.yes, pending.yes_at, pending.named,
                                 tuple(writes)))
        pending = None
        writes.clear()

    for s in steps:
        if s.kind == "assistant":
            last_message = s
        elif s.kind == "call":
            if pending is not None and tool_matches(s.name, tools.write) and not (answered and writes):
                writes.append(s)
            elif pending is not None and not writes and handoff.hands_off(s.name):
                pending = None
        else:
            refused = first_match(deny, s.text, unit_id=s.unit_id, field=s.field) is not None
            yes = None if refused else first_match(confirm, s.text, unit_id=s.unit_id, field=s.field)
            if yes is not None and any(d.start <= yes.start < d.end for d in
                                       find(DEFERRAL_REGEX, s.text, unit_id=s.unit_id, field=s.field)):
                yes = None
            asked = None
            if last_message is not None and \
                    first_match(ask, last_message.text, unit_id=last_message.unit_id, field=last_message.field):
                asked = _names_write(last_message, tools)
            if asked is not None and pending is not None and not writes:
                # Asked again before anything was done: this answer decides (the last yes counts).
                pending = None
            if yes is not None and asked is not None and last_message is not None:
                close()
                named = frozenset((c, v) for c, v, _, _ in _ids_in(last_message.text, tools) + _ids_in(s.text, tools))
                pending = Agreement(last_message, asked, s, yes, named, ())
                answered = False
            elif yes is None and pending is not None:
                if writes:
                    close()
                answered = True
            last_message = None
    close()
    return out


def _confirm_setup(unit: object, ctx: RuleContext, name: str) -> tuple[list[Agreement], ToolPolicy] | RuleAnswer:
    got = _policy(unit, ctx, name)
    if isinstance(got, RuleAnswer):
        return got
    conversation, tools = got
    if not tools.write:
        return RuleAnswer(None, reason=f"{name}: the pack's tools list no write tool (what an action is)")
    clause = clause_of(ctx)
    found = agreements(timeline(conversation), tools,
                       confirm=clause_param(clause, "confirm_regex", CONFIRM_REGEX),
                       deny=clause_param(clause, "deny_regex", DENY_REGEX),
                       ask=clause_param(clause, "ask_regex", ASK_REGEX), handoff=ctx.pack.handoff)
    return found, tools


@rule("conduct.agreed_action", layers=("conversation",), params=_CONFIRM_PARAMS, reads=("request", "answer", "spans"))
def agreed_action(unit: object, ctx: RuleContext) -> RuleAnswer:
    """The user explicitly agreed to an action the agent laid out: an assistant message asking for the go-ahead
    (`ask_regex`) that names a write (an intent of `tools.intents` or an identifier of `tools.id_patterns`),
    answered by an explicit yes (`confirm_regex`, not opening with `deny_regex`). Cites the message and the yes."""
    got = _confirm_setup(unit, ctx, "conduct.agreed_action")
    if isinstance(got, RuleAnswer):
        return got
    found, _ = got
    if not found:
        return RuleAnswer("no", reason="no agreed action (no go-ahead naming a write answered by a yes)")
    return RuleAnswer("yes", evidence=capped([p for a in found for p in (a.asked, a.yes_at)]),
                      reason=f"{len(found)} agreed action(s)")


def _shape(value: str, tools: ToolPolicy) -> frozenset[str]:
    """The id classes whose pattern a value matches in full (patterns may overlap: a payment id can also have
    the shape of a user name)."""
    return frozenset(name for name, p in tools.id_patterns.items() if _id_regex(p).fullmatch(value))


def _arg_values(args: Any, tools: ToolPolicy) -> dict[str, list[tuple[frozenset[str], str]]]:
    """Argument path -> (shape, value) of every string argument that is an identifier in full."""
    out: dict[str, list[tuple[frozenset[str], str]]] = {}
    for path, v in leaves(args):
        if isinstance(v, str):
            shape = _shape(v, tools)
            if shape:
                out.setdefault(path, []).append((shape, v))
    return out


def _value_pointer(call: Step, value: str) -> EvidencePointer:
    quoted = json.dumps(value)
    at = call.text.find(quoted)
    return call.pointer(at, at + len(quoted)) if at >= 0 else call.pointer()


def swapped(call: Step, named: frozenset[tuple[str, str]], tools: ToolPolicy) -> list[str]:
    """The identifier values of a write's arguments that replace one the agreement named.

    That is: the values at an argument none of whose identifiers of one shape (the set of id classes a value
    matches) was named, while an identifier of that shape the agreement named is absent from the call. A path
    holding a named identifier is what was agreed, whatever else it carries (a flight change lists the kept
    flights too)."""
    by_path = _arg_values(call.args, tools)
    in_call = {v for values in by_path.values() for _, v in values}
    named_shapes: dict[frozenset[str], set[str]] = {}
    for _, v in named:
        shape = _shape(v, tools)
        if shape:
            named_shapes.setdefault(shape, set()).add(v)
    bad: list[str] = []
    for values in by_path.values():
        for shape in {sh for sh, _ in values}:
            mine = [v for sh, v in values if sh == shape]
            agreed = named_shapes.get(shape, set())
            if agreed and not any(v in agreed for v in mine) and agreed - in_call:
                bad += [v for v in mine if v not in bad]
    return bad


@rule("conduct.agreed_action_done", layers=("conversation",), params=_CONFIRM_PARAMS,
      reads=("request", "answer", "spans"))
def agreed_action_done(unit: object, ctx: RuleContext) -> RuleAnswer:
    """After each agreed action (`conduct.agreed_action`), a write call follows before the next agreement or the
    end, and no write swaps an identifier the agreement named for another of its shape. A violation cites the
    agreed message and the yes ("said is not done"), or the swapped argument's characters and the message. A pass
    cites the writes."""
    got = _confirm_setup(unit, ctx, "conduct.agreed_action_done")
    if isinstance(got, RuleAnswer):
        return got
    found, tools = got
    if not found:
        return RuleAnswer("not_applicable", reason="no agreed action")
    bad: list[EvidencePointer] = []
    good: list[EvidencePointer] = []
    undone = swaps = 0
    for a in found:
        if not a.writes:
            undone += 1
            bad += [a.asked, a.yes_at]
            continue
        ok = True
        for call in a.writes:
            for value in swapped(call, a.named, tools):
                ok = False
                bad += [_value_pointer(call, value), a.asked]
        if ok:
            good += [w.pointer() for w in a.writes]
        else:
            swaps += 1
    if bad:
        parts = ([f"{undone} agreed action(s) with no write after the yes (said is not done)"] if undone else []) + \
                ([f"{swaps} with a write whose identifier differs from the agreed one"] if swaps else [])
        return RuleAnswer("no", fact=evidence_text(capped(bad)), evidence=capped(bad),
                          reason=f"{'; '.join(parts)} of {len(found)} agreed action(s)")
    return RuleAnswer("yes", evidence=capped(good), reason=f"all {len(found)} agreed action(s) done as agreed")


__all__ = ["agreed_action", "agreed_action_done", "deflected_own_records", "looked_before_refusing"]
