"""Conduct rules: the generic clause conditions, and rules for obligations a condition cannot state.

Rules are pure and deterministic. Every answer cites evidence: the matched characters of a request or answer,
a tool span's arguments (`input`), an assistant message's `output` or its `attributes.tool_calls`. For chat
sources each span and turn carries the index of its source message (`message_index`), and `message_index()`
resolves a pointer back to it.

Registered rules:

- `conduct.clause_trigger`, `conduct.clause_obligation`: a clause's built-in condition (lexicon, regex,
  tool names, attributes present or equal to a value, the agent's mode) on a span, turn or conversation.
- `conduct.one_tool_call_per_message`, `conduct.no_reply_with_tool_call` (turn or conversation).

Domain rules (the airline pack's confirmation and booking limits) live with their pack, as a plugin: see
`knowledge_packs/airline/rules.py`. The helpers here (`match_condition`, `clause_of`, `verdict`, ...) are what
such a plugin builds on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

from agent_factory.adapters.model import FAILED_STATES, Conversation, EvidencePointer, Span, Turn
from agent_factory.evaluators.components.conduct.definitions import clause_id_of
from agent_factory.evaluators.core.memo import memos
from agent_factory.evaluators.core.registry import RuleAnswer, RuleContext, SpanView, Unit, get_rule, rule
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


def spans_of(unit: object) -> Iterator[Span]:
    """The spans of a unit: the span itself, or every span of its turns."""
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


@lru_cache(maxsize=4096)
def _normalized(text: str) -> _norm.Normalized:
    # One text is matched by every pattern of every clause that searches its field: normalize it once.
    return _norm.normalize(text)


_BACKREF = re.compile(r"\\[1-9]|\(\?P=|\(\?\(")


@lru_cache(maxsize=4096)
def _combined(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One alternation of `patterns` (compiled as packs compile theirs), to tell in one pass that none of them
    matches a text: where any pattern matches at a position, the alternation does too. None where joining
    would change a pattern's meaning (group references, which count across the joined groups) or is not
    valid (global inline flags, repeated group names): those texts are matched pattern by pattern."""
    if len(patterns) < 2 or any(_BACKREF.search(p) for p in patterns):
        return None
    try:
        return compile_pattern("|".join(f"(?:{p})" for p in patterns))
    except re.error:
        return None


@lru_cache(maxsize=8192)
def match_ranges(pattern: str, text: str) -> tuple[tuple[int, int], ...]:
    """Where a pack regex matches `text`: each non-empty match on the normalized text, as its range in the
    original. Memoized: a clause's trigger is matched by its trigger and its obligation items, and a lexicon
    by every clause that names it, over the same texts."""
    norm = _normalized(text)
    spans = [m.span() for m in compile_pattern(pattern).finditer(norm.text)]
    return tuple(norm.original_ranges([(a, b) for a, b in spans if b > a]))


def find(pattern: str, text: str, *, unit_id: str, field: str) -> list[EvidencePointer]:
    """Pointers to every match of a pack regex in `text` (matched on normalized text, cited in the original)."""
    return pointers([(unit_id, field, a, b) for a, b in match_ranges(pattern, text)])


def first_match(pattern: str, text: str | None, *, unit_id: str, field: str) -> EvidencePointer | None:
    """A pointer to the first match of a pack regex in `text`; None when it does not match (or no text)."""
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


Hit = tuple[str, str, int, int]
"""An evidence pointer as a plain tuple (unit id, field, start, end): matched often, cited at most MAX_EVIDENCE
times, so pointers are built only for what is cited."""


@lru_cache(maxsize=65536)
def _pointer(unit_id: str, field: str, start: int, end: int) -> EvidencePointer:
    # Memoized (pointers are frozen): a clause's trigger is cited by its trigger and its obligation items.
    return EvidencePointer(unit_id=unit_id, field=field, start=start, end=end)


def pointers(hits: Sequence[Hit]) -> list[EvidencePointer]:
    """The pointers of `hits`."""
    return [_pointer(*h) for h in hits]


def match_condition(cond: ClauseCondition, unit: object, pack: KnowledgePack) -> list[EvidencePointer]:
    """Evidence of every built-in matcher of `cond` that holds in `unit`, in source order; empty: it does not."""
    return pointers(condition_hits(cond, unit, pack))


def condition_hits(cond: ClauseCondition, unit: object, pack: KnowledgePack) -> list[Hit]:
    """`match_condition` as `Hit` tuples (what the clause rules count, citing the first MAX_EVIDENCE)."""
    return condition_matches(cond, unit, pack, limit=None)[1]


def condition_matches(cond: ClauseCondition, unit: object, pack: KnowledgePack, *,
                      limit: int | None = MAX_EVIDENCE) -> tuple[int, list[Hit]]:
    """(how many distinct hits `condition_hits` gives, the first `limit` of them; all when None): a clause
    rule counts every match and cites the first few, so the tuples of the others are never built."""
    texts = list(_texts(unit, cond.fields)) if cond.lexicon is not None or cond.regex is not None else []
    patterns = _patterns(cond, pack) if texts else ()
    ranges = [_text_ranges(patterns, text) for _, _, text in texts]
    others = _other_hits(cond, unit)
    keys = {(unit_id, field) for unit_id, field, _ in texts}
    if len(keys) < len(texts) or any((o[0], o[1]) in keys for o in others):
        # Two searched texts under one (unit, field), or a tool span's whole input beside a match in it: a
        # hit may repeat across them, so deduplicate them all together as one list.
        hits = [(u, f, a, b) for (u, f, _), rs in zip(texts, ranges, strict=True) for a, b in rs] + others
        hits = list(dict.fromkeys(hits))
        return len(hits), hits if limit is None else hits[:limit]
    others = list(dict.fromkeys(others))
    total = sum(map(len, ranges)) + len(others)
    cited: list[Hit] = []
    cap = total if limit is None else limit
    for (unit_id, field, _), rs in zip(texts, ranges, strict=True):
        if len(cited) >= cap:
            break
        cited += [(unit_id, field, a, b) for a, b in rs[:cap - len(cited)]]
    cited += others[:max(0, cap - len(cited))]
    return total, cited


def _patterns(cond: ClauseCondition, pack: KnowledgePack) -> tuple[str, ...]:
    """The regexes a condition's lexicon and regex stand for in `pack`, in the order they are matched: once per
    condition and pack object (both frozen) in a run (`evaluators.core.memo`)."""
    return memos().identity("conduct.patterns", max_entries=4096).get(None, cond, pack,
                                                                       lambda: _make_patterns(cond, pack))


def _make_patterns(cond: ClauseCondition, pack: KnowledgePack) -> tuple[str, ...]:
    patterns = [cond.regex] if cond.regex is not None else []
    if cond.lexicon is not None:
        lexicons = [getattr(pack.lexicons[lang], cond.lexicon) for lang in sorted(pack.lexicons)]
        patterns += [e.pattern for entries in lexicons for e in entries]
    return tuple(patterns)


@lru_cache(maxsize=8192)
def _text_ranges(patterns: tuple[str, ...], text: str) -> tuple[tuple[int, int], ...]:
    """Every distinct range any of `patterns` matches in `text`, sorted: one text's hits in citing order.
    Memoized: a clause's trigger is matched by its trigger and its obligation items over the same texts."""
    combined = _combined(patterns)
    if combined is not None and combined.search(_normalized(text).text) is None:
        return ()  # most texts match none of a lexicon's patterns: one pass tells
    return tuple(dict.fromkeys(sorted(r for p in patterns for r in match_ranges(p, text))))


def _other_hits(cond: ClauseCondition, unit: object) -> list[Hit]:
    """Hits of a condition's tool names, attributes present and attributes equal to a value, in that order."""
    hits: list[Hit] = []
    if cond.tool_names:
        hits += [(s.id, "input", 0, len(s.input or "")) for s in spans_of(unit) if is_tool_call(s, cond.tool_names)]
    if not (cond.attribute_present or cond.attribute_equals):
        return hits
    owners: list[tuple[str, dict[str, Any]]] = [(t.id, t.attributes) for t in _turns(unit)]
    owners += [(s.id, s.attributes) for s in spans_of(unit)]
    for key in cond.attribute_present:
        for owner, attrs in owners:
            value = lookup(attrs, key)
            if value is not _MISSING and value is not None:
                hits.append((owner, f"attributes.{key}", 0, len(str(value))))
    for key, wanted in cond.attribute_equals.items():
        values: list[tuple[str, str, Any]] = [
            (t.id, "mode", t.mode) for t in _turns(unit) if key == MODE_KEY and t.mode is not None
        ]
        values += [(owner, f"attributes.{key}", lookup(attrs, key)) for owner, attrs in owners]
        hits += [(owner, field, 0, len(str(value))) for owner, field, value in values if _equals(value, wanted)]
    return hits


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


def clause_param(clause: Clause | None, key: str, default: str) -> str:
    """A string parameter of the clause's obligation (a regex a pack overrides), else `default`."""
    value = clause.obligation.params.get(key) if clause is not None else None
    return value if isinstance(value, str) else default


def missing_clause(ctx: RuleContext) -> RuleAnswer:
    """The answer of a clause rule whose clause is not in the context's pack."""
    return RuleAnswer("uncollected", reason=f"{ctx.definition.id}: no such clause in pack {ctx.pack.name!r}")


def capped(pointers: list[EvidencePointer]) -> tuple[EvidencePointer, ...]:
    """The first `MAX_EVIDENCE` pointers."""
    return tuple(pointers[:MAX_EVIDENCE])


def evidence_text(pointers: tuple[EvidencePointer, ...] | list[EvidencePointer]) -> str:
    """Pointers as one compact string (`unit#field[start:end]; ...`), the fact a violation carries."""
    return "; ".join(f"{p.unit_id}#{p.field}[{p.start}:{p.end}]" for p in pointers)


# ---- generic clause rules ------------------------------------------------------------------------------


def trigger_answer(clause: Clause, unit: Unit, ctx: RuleContext) -> RuleAnswer:
    """Whether the clause's trigger occurred in `unit`."""
    if clause.trigger.rule is not None:
        return get_rule(clause.trigger.rule)(unit, ctx)
    total, hits = condition_matches(clause.trigger, unit, ctx.pack)
    if not total:
        return RuleAnswer("no", reason=f"no {', '.join(clause.trigger.matchers())} match")
    return RuleAnswer("yes", evidence=tuple(pointers(hits)), reason=f"{total} match(es)")


@rule("conduct.clause_trigger")
def clause_trigger(unit: Unit, ctx: RuleContext) -> RuleAnswer:
    """A clause's trigger condition (see `match_condition`)."""
    clause = clause_of(ctx)
    return missing_clause(ctx) if clause is None else trigger_answer(clause, unit, ctx)


@rule("conduct.clause_obligation")
def clause_obligation(unit: Unit, ctx: RuleContext) -> RuleAnswer:
    """Given the trigger, whether the obligation held: the condition holds (`must`, `only_if`, `before`) or
    is absent (`must_not`). A violation cites the forbidden text, or else where the trigger fired."""
    clause = clause_of(ctx)
    if clause is None:
        return missing_clause(ctx)
    trig = trigger_answer(clause, unit, ctx)
    if trig.value != "yes":
        return RuleAnswer("not_applicable", reason="trigger did not occur")
    ob = clause.obligation
    if ob.rule is not None:
        return get_rule(ob.rule)(unit, ctx)
    if not ob.rule_checkable():
        return RuleAnswer(None, reason="obligation is judged by a model")
    if (isinstance(unit, Turn) and unit.delivery in FAILED_STATES and clause.kind != "must_not"
            and "answer" in ob.fields):
        # What an answer must contain cannot be missing from an answer that was never delivered: Execution
        # counts the failed turn; a forbidden text a cut answer still showed is judged below.
        return RuleAnswer("not_applicable", reason=f"the answer was not delivered ({unit.delivery})")
    hits = pointers(condition_matches(ob, unit, ctx.pack)[1])
    held = not hits if clause.kind == "must_not" else bool(hits)
    if held:
        evidence = capped(hits) if hits else trig.evidence
        return RuleAnswer("yes", evidence=evidence, reason=f"{clause.kind}: obligation held")
    # A `must` text that is missing is cited as the whole text it is missing from (the answer), not where the
    # trigger fired (a mode attribute says nothing about what the answer lacks); an `only_if` violation cites
    # the behaviour, which is where its trigger fired.
    missing = [whole(u, f, t) for u, f, t in _texts(unit, ob.fields)] if (
        clause.kind == "must" and not hits and (ob.lexicon is not None or ob.regex is not None)) else []
    evidence = capped(hits) if hits else capped(missing) or trig.evidence
    what = "forbidden condition present" if clause.kind == "must_not" else f"no {describe_matchers(ob)}"
    return RuleAnswer("no", fact=evidence_text(evidence), evidence=evidence, reason=f"{clause.kind}: {what}")


def describe_matchers(cond: ClauseCondition) -> str:
    """What a clause condition matches on, for a reason text (`regex/tools match`)."""
    return "/".join(cond.matchers()) + " match"


# ---- rules for tool-calling chat agents ----------------------------------------------------


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


def verdict(
    instances: int, violating: int, bad: list[EvidencePointer], good: list[EvidencePointer], what: str
) -> RuleAnswer:
    """The answer of a rule over `instances` things (`what`) of which `violating` break it, citing `bad` or
    `good`; not applicable when there are none."""
    if instances == 0:
        return RuleAnswer("not_applicable", reason=f"no {what}")
    if violating:
        return RuleAnswer("no", fact=evidence_text(capped(bad)), evidence=capped(bad),
                          reason=f"{violating} of {instances} {what} violate")
    return RuleAnswer("yes", evidence=capped(good), reason=f"all {instances} {what} comply")


@rule("conduct.one_tool_call_per_message", layers=("trace", "conversation"))
def one_tool_call_per_message(unit: object, ctx: RuleContext) -> RuleAnswer:
    """Every assistant message makes at most one tool call. A violation cites the message's tool calls."""
    bad: list[EvidencePointer] = []
    good: list[EvidencePointer] = []
    n = 0
    for _turn, msg, calls in _messages(unit):
        if calls:
            n += 1
            (bad if calls > 1 else good).append(calls_pointer(msg, calls))
    return verdict(n, len(bad), bad, good, "assistant message(s) with tool calls")


@rule("conduct.no_reply_with_tool_call", layers=("trace", "conversation"))
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
    return verdict(n, len(bad), bad, good, "assistant message(s) with tool calls")
