"""Conduct rules: the generic clause conditions, and rules for obligations a condition cannot state.

Rules are pure and deterministic. Every answer cites evidence: the matched characters of a request or answer,
a tool span's arguments (`input`), an assistant message's `output` or its `attributes.tool_calls`. For chat
sources each span and turn carries the index of its source message (`message_index`), and `message_index()`
resolves a pointer back to it.

Registered rules:

- `conduct.clause_trigger`, `conduct.clause_obligation`: a clause's built-in condition (lexicon, regex,
  tool names, attributes present or equal to a value, the agent's mode) on a span, turn or conversation.
- `conduct.confirmed_before_action` (conversation layer): every call of the trigger's tools follows an explicit
  user yes, given right after an assistant message that asked to confirm.
- `conduct.one_tool_call_per_message`, `conduct.no_reply_with_tool_call` (turn or conversation).
- `conduct.booking_limits` (turn or conversation): passengers and payment methods of a booking within limits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from agent_factory.adapters.model import Conversation, EvidencePointer, Span, Turn
from agent_factory.evaluators.components.conduct.definitions import clause_id_of
from agent_factory.evaluators.core.registry import RuleAnswer, RuleContext, SpanView, get_rule, rule
from agent_factory.evaluators.provenance import normalize as _norm
from agent_factory.evaluators.provenance.segments import lookup
from agent_factory.knowledge_packs import KnowledgePack, compile_pattern
from agent_factory.knowledge_packs.model import Clause, ClauseCondition

VERSION = f"1+norm{_norm.VERSION}"
"""Version of the conduct rules, including the text normalization lexicons and regexes match on."""

MAX_EVIDENCE = 20
"""Pointers kept per answer: enough to check a judgment without copying a whole conversation."""

_MISSING = lookup({}, "?")  # the sentinel `lookup` returns for an absent key
MODE_KEY = "agent.mode"
"""The attribute key of the agent's mode: adapters normalise it into `Turn.mode`, which a condition reads first."""
_FIELD_OF = {"request": "request", "answer": "answer", "spans.input": "input", "spans.output": "output"}


# ---- helpers ----------------------------------------------------------------------------------------------


def _turns(unit: object) -> tuple[Turn, ...]:
    if isinstance(unit, Conversation):
        return unit.turns
    if isinstance(unit, Turn):
        return (unit,)
    if isinstance(unit, SpanView):
        return (unit.turn,)
    return ()


def _spans(unit: object) -> Iterator[Span]:
    if isinstance(unit, SpanView):
        yield unit.span
        return
    for turn in _turns(unit):
        yield from turn.spans


def _texts(unit: object, fields: tuple[str, ...]) -> Iterator[tuple[str, str, str]]:
    """(unit id, field, text) of every searched text of the unit, in source order."""
    if isinstance(unit, SpanView):
        for f in fields:
            text = getattr(unit.span, _FIELD_OF[f]) if f.startswith("spans.") else None
            if text:
                yield unit.span.id, _FIELD_OF[f], text
        return
    for turn in _turns(unit):
        for f in ("request", "answer"):
            text = getattr(turn, f)
            if f in fields and text:
                yield turn.id, f, text
        for span in turn.spans:
            for f in ("spans.input", "spans.output"):
                text = getattr(span, _FIELD_OF[f])
                if f in fields and text:
                    yield span.id, _FIELD_OF[f], text


def find(pattern: str, text: str, *, unit_id: str, field: str) -> list[EvidencePointer]:
    """Pointers to every match of a pack regex in `text` (matched on normalized text, cited in the original)."""
    norm = _norm.normalize(text)
    out = []
    for m in compile_pattern(pattern).finditer(norm.text):
        if m.end() > m.start():
            start, end = norm.original_range(m.start(), m.end())
            out.append(EvidencePointer(unit_id=unit_id, field=field, start=start, end=end))
    return out


def _first(pattern: str, text: str | None, *, unit_id: str, field: str) -> EvidencePointer | None:
    if not text:
        return None
    hits = find(pattern, text, unit_id=unit_id, field=field)
    return hits[0] if hits else None


def whole(unit_id: str, field: str, text: str | None) -> EvidencePointer:
    """A pointer to a whole field."""
    return EvidencePointer(unit_id=unit_id, field=field, start=0, end=len(text or ""))


def calls_pointer(message: Span, calls: int) -> EvidencePointer:
    """A pointer to an assistant message's tool calls (the range counts calls, not characters)."""
    return EvidencePointer(unit_id=message.id, field="attributes.tool_calls", start=0, end=calls)


def tool_name(span: Span) -> str:
    """The tool a span calls: the `tool.name` attribute when the source records one, else the span name."""
    name = lookup(span.attributes, "tool.name")
    return name if isinstance(name, str) and name else span.name


def is_tool_call(span: Span, names: tuple[str, ...]) -> bool:
    """A tool span whose tool is one of `names` (`*`: any tool)."""
    return span.kind == "tool" and ("*" in names or tool_name(span) in names)


def match_condition(cond: ClauseCondition, unit: object, pack: KnowledgePack) -> list[EvidencePointer]:
    """Evidence of every built-in matcher of `cond` that holds in `unit`, in source order; empty: it does not."""
    hits: list[EvidencePointer] = []
    if cond.lexicon is not None or cond.regex is not None:
        patterns = [cond.regex] if cond.regex is not None else []
        if cond.lexicon is not None:
            lexicons = [getattr(pack.lexicons[lang], cond.lexicon) for lang in sorted(pack.lexicons)]
            patterns += [e.pattern for entries in lexicons for e in entries]
        for unit_id, field, text in _texts(unit, cond.fields):
            found = [h for p in patterns for h in find(p, text, unit_id=unit_id, field=field)]
            hits += sorted(found, key=lambda h: (h.start, h.end))
    if cond.tool_names:
        hits += [whole(s.id, "input", s.input) for s in _spans(unit) if is_tool_call(s, cond.tool_names)]
    owners: list[tuple[str, dict[str, Any]]] = [(t.id, t.attributes) for t in _turns(unit)]
    owners += [(s.id, s.attributes) for s in _spans(unit)]
    for key in cond.attribute_present:
        for owner, attrs in owners:
            value = lookup(attrs, key)
            if value is not _MISSING and value is not None:
                hits.append(whole(owner, f"attributes.{key}", str(value)))
    for key, wanted in cond.attribute_equals.items():
        values: list[tuple[str, str, Any]] = [
            (t.id, "mode", t.mode) for t in _turns(unit) if key == MODE_KEY and t.mode is not None
        ]
        values += [(owner, f"attributes.{key}", lookup(attrs, key)) for owner, attrs in owners]
        hits += [whole(owner, field, str(value)) for owner, field, value in values if _equals(value, wanted)]
    return list(dict.fromkeys(hits))  # the same range found by two patterns is cited once


def _canon(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value).strip().casefold()


def _equals(observed: Any, wanted: Any) -> bool:
    """Attribute equality as segmentation rules compare: any of the wanted values, strings case-insensitively."""
    if isinstance(observed, list | tuple):
        return any(_equals(o, wanted) for o in observed)
    if observed is _MISSING or observed is None or isinstance(observed, dict):
        return False
    return _canon(observed) in {_canon(w) for w in (wanted if isinstance(wanted, tuple) else (wanted,))}


def message_index(conversation: Conversation, pointer: EvidencePointer) -> int | None:
    """The source message a pointer cites, for chat sources (spans and turns record their message index)."""
    for turn in conversation.turns:
        if turn.id == pointer.unit_id:
            key = {"request": "request_message_index", "answer": "answer_message_index"}.get(pointer.field)
            value = turn.attributes.get(key) if key else None
            return value if isinstance(value, int) else None
        for span in turn.spans:
            if span.id == pointer.unit_id:
                value = span.attributes.get("message_index")
                return value if isinstance(value, int) else None
    return None


def clause_of(ctx: RuleContext) -> Clause | None:
    """The clause a conduct definition was generated from, found in the context's pack."""
    cid = clause_id_of(ctx.definition.id)
    return ctx.pack.clause(cid) if cid is not None else None


def _missing_clause(ctx: RuleContext) -> RuleAnswer:
    return RuleAnswer("uncollected", reason=f"{ctx.definition.id}: no such clause in pack {ctx.pack.name!r}")


def _capped(pointers: list[EvidencePointer]) -> tuple[EvidencePointer, ...]:
    return tuple(pointers[:MAX_EVIDENCE])


def evidence_text(pointers: tuple[EvidencePointer, ...] | list[EvidencePointer]) -> str:
    """Pointers as one compact string (`unit#field[start:end]; ...`), the fact a violation carries."""
    return "; ".join(f"{p.unit_id}#{p.field}[{p.start}:{p.end}]" for p in pointers)


# ---- generic clause rules ------------------------------------------------------------------------------


def trigger_answer(clause: Clause, unit: object, ctx: RuleContext) -> RuleAnswer:
    """Whether the clause's trigger occurred in `unit`."""
    if clause.trigger.rule is not None:
        return get_rule(clause.trigger.rule)(unit, ctx)
    hits = match_condition(clause.trigger, unit, ctx.pack)
    if not hits:
        return RuleAnswer("no", reason=f"no {', '.join(clause.trigger.matchers())} match")
    return RuleAnswer("yes", evidence=_capped(hits), reason=f"{len(hits)} match(es)")


@rule("conduct.clause_trigger")
def clause_trigger(unit: object, ctx: RuleContext) -> RuleAnswer:
    """A clause's trigger condition (see `match_condition`)."""
    clause = clause_of(ctx)
    return _missing_clause(ctx) if clause is None else trigger_answer(clause, unit, ctx)


@rule("conduct.clause_obligation")
def clause_obligation(unit: object, ctx: RuleContext) -> RuleAnswer:
    """Given the trigger, whether the obligation held: the condition holds (`must`, `only_if`, `before`) or
    is absent (`must_not`). A violation cites the forbidden text, or else where the trigger fired."""
    clause = clause_of(ctx)
    if clause is None:
        return _missing_clause(ctx)
    trig = trigger_answer(clause, unit, ctx)
    if trig.value != "yes":
        return RuleAnswer("not_applicable", reason="trigger did not occur")
    ob = clause.obligation
    if ob.rule is not None:
        return get_rule(ob.rule)(unit, ctx)
    if not ob.rule_checkable():
        return RuleAnswer(None, reason="obligation is judged by a model")
    hits = match_condition(ob, unit, ctx.pack)
    held = not hits if clause.kind == "must_not" else bool(hits)
    if held:
        evidence = _capped(hits) if hits else trig.evidence
        return RuleAnswer("yes", evidence=evidence, reason=f"{clause.kind}: obligation held")
    evidence = _capped(hits) if hits else trig.evidence
    what = "forbidden condition present" if clause.kind == "must_not" else f"no {describe_matchers(ob)}"
    return RuleAnswer("no", fact=evidence_text(evidence), evidence=evidence, reason=f"{clause.kind}: {what}")


def describe_matchers(cond: ClauseCondition) -> str:
    """What a clause condition matches on, for a reason text (`regex/tools match`)."""
    return "/".join(cond.matchers()) + " match"


# ---- airline-style rules (tool-calling chat agents) ----------------------------------------------------


def _tool_calls_of(message: Span, turn: Turn) -> int:
    calls = message.attributes.get("tool_calls")
    if isinstance(calls, list):
        return len(calls)
    return sum(1 for s in turn.spans if s.kind == "tool" and s.parent_id == message.id)


def _messages(unit: object) -> Iterator[tuple[Turn, Span, int]]:
    """Each assistant message (llm span) with its turn and the number of tool calls it makes."""
    for turn in _turns(unit):
        for span in turn.spans:
            if span.kind == "llm":
                yield turn, span, _tool_calls_of(span, turn)


def _verdict(
    instances: int, violating: int, bad: list[EvidencePointer], good: list[EvidencePointer], what: str
) -> RuleAnswer:
    if instances == 0:
        return RuleAnswer("not_applicable", reason=f"no {what}")
    if violating:
        return RuleAnswer("no", fact=evidence_text(_capped(bad)), evidence=_capped(bad),
                          reason=f"{violating} of {instances} {what} violate")
    return RuleAnswer("yes", evidence=_capped(good), reason=f"all {instances} {what} comply")


@rule("conduct.one_tool_call_per_message")
def one_tool_call_per_message(unit: object, ctx: RuleContext) -> RuleAnswer:
    """Every assistant message makes at most one tool call. A violation cites the message's tool calls."""
    bad: list[EvidencePointer] = []
    good: list[EvidencePointer] = []
    n = 0
    for _turn, msg, calls in _messages(unit):
        if calls:
            n += 1
            (bad if calls > 1 else good).append(calls_pointer(msg, calls))
    return _verdict(n, len(bad), bad, good, "assistant message(s) with tool calls")


@rule("conduct.no_reply_with_tool_call")
def no_reply_with_tool_call(unit: object, ctx: RuleContext) -> RuleAnswer:
    """No assistant message both calls a tool and answers the user. A violation cites the message's text."""
    bad, good, n = [], [], 0
    for _turn, msg, calls in _messages(unit):
        if calls:
            n += 1
            if msg.output and msg.output.strip():
                bad.append(whole(msg.id, "output", msg.output))
            else:
                good.append(calls_pointer(msg, calls))
    return _verdict(n, len(bad), bad, good, "assistant message(s) with tool calls")


# Defaults of the confirmation rule's params (English chat); a pack may replace them per clause.
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


def _param(clause: Clause | None, key: str, default: str) -> str:
    value = clause.obligation.params.get(key) if clause is not None else None
    return value if isinstance(value, str) else default


@rule("conduct.confirmed_before_action")
def confirmed_before_action(unit: object, ctx: RuleContext) -> RuleAnswer:
    """Each call of the clause trigger's tools follows an explicit user confirmation.

    The user message the call answers (its turn's request) must match `confirm_regex` (an explicit yes) and
    not open with `deny_regex`, and
    the assistant's last reply before that message (the previous turn's answer) must match `ask_regex` (it
    laid out the action and asked to confirm). Several calls after one yes all rest on it. Needs the
    conversation layer: a turn alone does not show the previous reply. A violation cites the call's
    arguments and the user message it followed.
    """
    if not isinstance(unit, Conversation):
        return RuleAnswer("uncollected", reason="conduct.confirmed_before_action needs a conversation unit")
    clause = clause_of(ctx)
    names = clause.trigger.tool_names if clause is not None else ()
    if not names:
        return RuleAnswer("uncollected", reason="the clause's trigger lists no tool names (the actions to confirm)")
    confirm, ask = _param(clause, "confirm_regex", CONFIRM_REGEX), _param(clause, "ask_regex", ASK_REGEX)
    deny = _param(clause, "deny_regex", DENY_REGEX)
    bad: list[EvidencePointer] = []
    good: list[EvidencePointer] = []
    n = violating = 0
    for k, turn in enumerate(unit.turns):
        calls = [s for s in turn.spans if is_tool_call(s, names)]
        if not calls:
            continue
        n += len(calls)
        refused = _first(deny, turn.request, unit_id=turn.id, field="request") is not None
        yes = None if refused else _first(confirm, turn.request, unit_id=turn.id, field="request")
        prev = unit.turns[k - 1] if k > 0 else None
        asked = _first(ask, prev.answer, unit_id=prev.id, field="answer") if prev is not None else None
        if yes is not None and asked is not None:
            good += [asked, yes, *(whole(s.id, "input", s.input) for s in calls)]
            continue
        violating += len(calls)
        for s in calls:
            bad.append(whole(s.id, "input", s.input))
            if turn.request is not None:
                bad.append(whole(turn.id, "request", turn.request))
    return _verdict(n, violating, bad, good, "database-changing call(s)")


@rule("conduct.booking_limits")
def booking_limits(unit: object, ctx: RuleContext) -> RuleAnswer:
    """Each call of the trigger's tools stays within the clause's limits on its JSON arguments.

    Params: `max_passengers` (length of `passengers`), and `max_<kind>` for payment methods whose
    `payment_id` starts with `<kind>_` (e.g. `max_gift_card: 3`). A call with unreadable arguments cannot be
    checked; if no call violates and one is unreadable, the datum is uncollected.
    """
    clause = clause_of(ctx)
    if clause is None:
        return _missing_clause(ctx)
    params = clause.obligation.params
    limits = {k.removeprefix("max_"): v for k, v in params.items() if k.startswith("max_") and isinstance(v, int)}
    bad: list[EvidencePointer] = []
    good: list[EvidencePointer] = []
    unreadable = n = 0
    for span in _spans(unit):
        if not is_tool_call(span, clause.trigger.tool_names):
            continue
        n += 1
        try:
            args = json.loads(span.input or "")
        except ValueError:
            args = None
        if not isinstance(args, dict):
            unreadable += 1
            continue
        counts = {"passengers": len(args.get("passengers") or [])}
        for pm in args.get("payment_methods") or []:
            pid = pm.get("payment_id") if isinstance(pm, dict) else None
            for kind in limits:
                if isinstance(pid, str) and pid.startswith(f"{kind}_"):
                    counts[kind] = counts.get(kind, 0) + 1
        over = any(counts.get(kind, 0) > limit for kind, limit in limits.items())
        (bad if over else good).append(whole(span.id, "input", span.input))
    if not bad and unreadable:
        return RuleAnswer("uncollected", reason=f"{unreadable} call(s) with unreadable JSON arguments")
    return _verdict(n, len(bad), bad, good, "booking call(s)")
