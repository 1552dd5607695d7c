"""Tool-use checks: grounding. What the agent states and what it writes must come from what it was shown.

- `conduct.states_amounts_or_terms` (trigger): an assistant message states an amount (a number written with a
  currency sign or word) or a value of one of the pack's attribute vocabularies (`tools.terms`) said of the user's
  records ("as a gold member", "your membership is silver", "您是金卡会员").
- `conduct.claims_grounded` (obligation): every such amount equals a number an earlier tool output showed, or one of
  the policy's amounts (`tools.constants`), or follows from them by one of the `DERIVATIONS`; every such term was a
  value in an earlier tool output. An amount only the user said is not grounded: the agent took it on trust.
- `conduct.write_arguments_grounded` (obligation of a clause triggered by the writes): every scalar argument of a
  write was seen before the call, in a tool output or a user message (numbers also as in `DERIVATIONS`). A value
  seen nowhere was invented: the payment id, the sum, the seat the tool then rejects, or worse, accepts.

Pure: functions of the conversation and the pack (`state.timeline`); no domain names in code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from agent_factory.adapters.model import Conversation, EvidencePointer
from agent_factory.evaluators.components.conduct.rules import capped, clause_of
from agent_factory.evaluators.components.conduct.tooluse.state import (
    Step,
    json_numbers,
    leaves,
    numbers,
    timeline,
    tool_matches,
)
from agent_factory.evaluators.core.registry import RuleAnswer, RuleContext, rule
from agent_factory.knowledge_packs.tools import ToolPolicy

# ---- what a claim is --------------------------------------------------------------------------------------------

_NUM = r"(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?"
_SIGN = r"(?:US\$|\$|€|£|¥|￥|USD|EUR|GBP|CNY|RMB)"
_WORD = r"(?:USD|EUR|GBP|CNY|RMB|dollars?|euros?|pounds?|yuan|元|块|美元|欧元|英镑)"
AMOUNT = re.compile(
    rf"{_SIGN}\s?{_NUM}(?!\d)|(?<![\w.,]){_NUM}\s?{_WORD}(?![A-Za-z])", re.IGNORECASE)
"""An amount of money as written: a number with a currency sign before it (`$1,234.50`, `¥300`) or a currency word
after it (`50 dollars`, `300元`). A bare number is not an amount: counts, times and dates are not claims of money."""

SECOND_PERSON = (
    r"\b(?:as|being)\s+an?\s+(?:[\w-]+\s+)?{t}\b",
    r"\byou(?:'re|’re|\s+are|'ve|’ve|\s+have|\s+hold)\s+(?:[\w-]+\s+){{0,2}}{t}\b",
    r"\byour\s+(?:[\w-]+\s+)?{t}\b",
    r"\byour\s+(?:[\w-]+\s+){{0,3}}(?:is|are|was|were|:)\s+(?:[\w-]+\s+){{0,2}}{t}\b",
    r"[您你][^。！？?!.\n]{{0,8}}?{t}",
)
"""A term said of the user's records: `{t}` is the term. "as a gold member", "you are currently a gold member",
"your gold membership", "your membership level is gold", "您是金卡会员". A term in a question ("would you like
economy?") states nothing, and one said of an option ("you can upgrade to business") is not of these shapes."""

HYPOTHETICAL = re.compile(r"\b(?:if|whether|unless|once)\b|如果|若|是否", re.IGNORECASE)
"""A condition states nothing: "if you are a silver or gold member" is not a claim about the user's records."""
PROPOSAL = re.compile(
    r"\b(?:will|would|shall|can|could|new|want|wish|like|prefer|choose|chose|select|selected|book|booking)\b"
    r"|'ll|’ll|\b(?:to|into)\s+(?:[\w-]+\s+){0,2}$|将|想|要|可以|改为|升级", re.IGNORECASE)
"""Before the term, what is proposed or to come ("your new business class trip", "upgrade to business", "you
will be in economy") is not the records as they stand, which is what a tool output shows. Searched in the
sentence up to the term (`to` / `into` only just before it: "change to economy")."""

_SENTENCE = re.compile(r"[^.!?。！？\n]+(?:[.!?。！？]+|$)")


@dataclass(frozen=True)
class Claim:
    """A value an assistant message states: an amount (`cents`) or a term (`term`), at `start:end` of its text."""

    step: Step
    start: int
    end: int
    cents: int | None = None
    term: str | None = None

    @property
    def text(self) -> str:
        """The characters of the claim."""
        return self.step.text[self.start:self.end]

    def pointer(self) -> EvidencePointer:
        """Evidence: the claim's characters in its message."""
        return self.step.pointer(self.start, self.end)


def _cents(value: float) -> int:
    return round(value * 100)


def _amounts(step: Step) -> Iterator[Claim]:
    for m in AMOUNT.finditer(step.text):
        whole, frac = (m.group(1), m.group(2)) if m.group(1) is not None else (m.group(3), m.group(4))
        value = float(whole.replace(",", "") + (frac or ""))
        yield Claim(step, m.start(), m.end(), cents=_cents(value))


def _term_regex(term: str) -> str:
    # `_`, `-` and spaces alike: "basic_economy" is said "basic economy".
    return r"[\s_-]+".join(re.escape(p) for p in re.split(r"[\s_-]+", term.strip()) if p)


def _term_patterns(tools: ToolPolicy) -> list[tuple[str, re.Pattern[str]]]:
    out = []
    for values in tools.terms.values():
        for v in values:
            t = _term_regex(v)
            if t:
                out.append((v, re.compile("|".join(f"(?:{p.format(t=f'(?P<t{i}>{t})')})"
                                                   for i, p in enumerate(SECOND_PERSON)), re.IGNORECASE)))
    return out


def _terms(step: Step, patterns: Sequence[tuple[str, re.Pattern[str]]]) -> Iterator[Claim]:
    for sm in _SENTENCE.finditer(step.text):
        sentence = sm.group(0)
        if sentence.rstrip().endswith(("?", "？")) or HYPOTHETICAL.search(sentence):
            continue
        for term, rx in patterns:
            for m in rx.finditer(sentence):
                group = next(g for g in m.groupdict() if m.group(g) is not None)
                a, b = m.span(group)
                if PROPOSAL.search(sentence[:a]):
                    continue
                yield Claim(step, sm.start() + a, sm.start() + b, term=term)


def _claims_of(step: Step, patterns: Sequence[tuple[str, re.Pattern[str]]]) -> list[Claim]:
    terms = list(_terms(step, patterns))
    # "economy" inside "basic economy" is not a claim of its own: keep the longest term at a place.
    terms = [c for c in terms if not any(o is not c and o.start <= c.start and c.end <= o.end
                                         and o.end - o.start > c.end - c.start for o in terms)]
    # Two spellings of one term ("basic economy", "basic_economy") match the same characters: one claim.
    unique = {(c.start, c.end): c for c in terms}
    return sorted([*_amounts(step), *unique.values()], key=lambda c: c.start)


def claims(steps: Sequence[Step], tools: ToolPolicy) -> list[Claim]:
    """Every amount and term the assistant's messages state, in order."""
    patterns = _term_patterns(tools)
    return [c for s in steps if s.kind == "assistant" for c in _claims_of(s, patterns)]


# ---- what was shown, and what follows from it -------------------------------------------------------------------

COUNTS = range(2, 10)
"""The counts an amount is multiplied by (passengers, bags, nights): a small whole number the conversation showed,
as the length of a list in a tool output (a reservation's passengers) or a number the user said ("for 3 of us",
"two bags"). Any count 2-9 would do too much: multiples of a long output's prices cover most amounts."""
_COUNT_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                "both": 2, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_COUNT = re.compile(r"(?<![\w.,])[2-9](?!\d|[.,]\d)|\b(?:two|three|four|five|six|seven|eight|nine|both)\b"
                    r"|[两二三四五六七八九]", re.IGNORECASE)
MONEY_PATH = re.compile(r"price|amount|cost|fee|fare|total|balance|paid|refund|charge|compensation|value|"
                        r"subtotal|tax|surcharge", re.IGNORECASE)
"""The fields whose numbers are money, by the words any domain's schema names them with (a path holding one:
`prices.economy`, `payment_history[].amount`); a bare number output (a calculator's result) is one too. Seat
counts, zip codes and card digits are numbers too, but nobody adds them up into a price."""
DERIVATIONS = (
    "equal: any number an earlier tool output showed, or a policy amount (`tools.constants`)",
    "total: the sum of the money numbers one output holds at one path (each flight's price, each payment)",
    "times: a money number, a total or a policy amount times a count the conversation showed (`COUNTS`)",
    "plus or minus fees: one of the above plus or minus a policy amount, once or times a count shown (a fare plus "
    "bag fees and insurance, a refund less a fee)",
    "arithmetic on what the agent stated: a grounded amount it stated earlier plus or minus another such amount or "
    "a money value above, times a count shown, or the total of up to MAX_RUN amounts it listed just before in the same "
    "message (`$105 + $190 = $295`, `Total: $725`)",
)
"""How an agent gets an amount from what it was shown, and so what `claims_grounded` and
`write_arguments_grounded` accept. Only money numbers (`MONEY_PATH`) and policy amounts enter a derivation: with
every number of a long search output as an operand, sums of two would ground almost any amount and the check
would say nothing. Checking a value is one set lookup per derived value, linear in the money numbers shown. NOT
derivable: a sum of three or more numbers from different outputs, a percentage or rate (a 10% fee), a product of
two shown numbers, rounding, anything from a number that is not money (a seat count) or that only the user said;
an agent that computes such a value with a tool (a calculator) is grounded by that tool's output."""


MAX_RUN = 8
"""How many amounts listed just before a total may add up to it."""


@dataclass
class Shown:
    """What tool outputs (and the user) had shown up to a point of the conversation."""

    constants: frozenset[int]
    numbers: dict[int, Step] = field(default_factory=dict)
    """Cents of every number an output showed -> the (latest) call that showed it."""
    money: dict[int, Step] = field(default_factory=dict)
    """Cents of the money numbers and per-path totals (`MONEY_PATH`) -> the call that showed them."""
    tool_text: list[str] = field(default_factory=list)
    user_text: list[str] = field(default_factory=list)
    user_cents: set[int] = field(default_factory=set)
    counts: set[int] = field(default_factory=set)
    """The counts 2-9 shown (`COUNTS`)."""
    stated: list[int] = field(default_factory=list)
    """The grounded amounts the agent had stated, in order: operands of its arithmetic (`DERIVATIONS`)."""
    values: set[str] = field(default_factory=set)
    """Every scalar of every output, normalized (`_norm`)."""
    _level1: dict[int, Step | None] | None = None

    def add_output(self, step: Step, *, read: bool = False) -> None:
        """A call's output; with `read`, a read call that answered (no error, something found) also confirms the
        strings it was asked about: flights searched on a date are flights on that date."""
        self._level1 = None
        self.tool_text.append(_norm(step.output_text))
        if read and not step.failed and step.output not in (None, [], {}, "") and step.args is not None:
            self.values.update(_norm(v) for _, v in leaves(step.args) if isinstance(v, str))
        if step.output is None:
            for n, _, _ in numbers(step.output_text):
                self.numbers[_cents(n)] = step
            return
        totals: dict[str, float] = {}
        self.counts.update(len(o) for o in _lists(step.output) if len(o) in COUNTS)
        for path, v in leaves(step.output):
            if isinstance(v, str | int | float) and not isinstance(v, bool):
                self.values.add(_norm(str(v)))
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
                self.numbers[_cents(float(v))] = step
                if not path or MONEY_PATH.search(path):
                    self.money[_cents(float(v))] = step
                    totals[path] = totals.get(path, 0.0) + float(v)
        for n in json_numbers(step.output):
            self.numbers.setdefault(_cents(n), step)
        for t in totals.values():
            self.money.setdefault(_cents(t), step)

    def add_user(self, text: str) -> None:
        """A user message: its words, numbers and counts."""
        self.user_text.append(_norm(text))
        self.user_cents.update(_cents(n) for n, _, _ in numbers(text))
        for m in _COUNT.finditer(text):
            word = m.group(0).lower()
            self.counts.add(_COUNT_WORDS.get(word) or int(word))
        self._level1 = None

    def level1(self) -> dict[int, Step | None]:
        """The money values and policy amounts, and their multiples by a count."""
        if self._level1 is None:
            base: dict[int, Step | None] = {c: None for c in self.constants}
            base.update(self.money)
            out = dict(base)
            for c, src in base.items():
                for n in self.counts:
                    out.setdefault(c * n, src)
            self._level1 = out
        return self._level1

    def source(self, cents: int) -> tuple[bool, Step | None]:
        """Whether an amount follows from what was shown (`DERIVATIONS`), and a call it came from (None: the
        policy's constants)."""
        if cents in self.numbers:
            return True, self.numbers[cents]
        one = self.level1()
        if cents in one:
            return True, one[cents]
        fees = self.fees()
        for v, src in one.items():
            if cents - v in fees or v - cents in fees:
                return True, src
        return False, None

    def from_stated(self, cents: int, run: Sequence[int] = ()) -> bool:
        """Whether an amount is arithmetic on grounded amounts the agent had stated (`DERIVATIONS`): one of them
        plus or minus another or a shown value, one of them times a count shown, or the total of the last few
        amounts stated before it in the same message (`run`)."""
        one = self.level1()
        operands = [*self.stated, *run]
        known = set(operands)
        for p in operands:
            for q in (cents - p, p - cents):
                if q in known or q in one:
                    return True
            if any(p * n == cents for n in self.counts):
                return True
        total = 0
        for k, p in enumerate(reversed(run)):
            total += p
            if k > 0 and total == cents:
                return True
            if k >= MAX_RUN:
                break
        return False

    def fees(self) -> frozenset[int]:
        """The policy amounts and their multiples by a count shown: what is added to or taken off a price."""
        return frozenset(c * n for c in self.constants for n in (1, *self.counts))

    def seen_string(self, value: str) -> bool:
        """Whether a string was in a tool output or a user message (case, `_`, `-` and spaces alike)."""
        v = _norm(value)
        if not v:
            return True
        if v in self.values:
            return True
        rx = re.compile(rf"(?<![0-9a-z]){re.escape(v)}(?![0-9a-z])")
        texts = [*self.tool_text, *self.user_text]
        if any(rx.search(t) for t in texts):
            return True
        return any(any(f in t for f in _date_forms(value)) for t in self.user_text)


def _lists(value: Any) -> Iterator[list[Any]]:
    if isinstance(value, list):
        yield value
        for v in value:
            yield from _lists(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _lists(v)


def _norm(text: str) -> str:
    return re.sub(r"[\s_-]+", " ", text.lower()).strip()


_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")


def _date_forms(value: str) -> tuple[str, ...]:
    """How a user says an ISO date (`2024-05-27`): "may 27", "27 may", "5/27", "5月27"; () when not a date."""
    m = re.fullmatch(r"\s*(\d{4})-(\d{2})-(\d{2})\s*", value)
    if m is None:
        return ()
    try:
        d = date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return ()
    month = _MONTHS[d.month - 1]
    forms = []
    for name in (month, month[:3]):
        for day in (f"{d.day}", f"{d.day}th", f"{d.day}st", f"{d.day}nd", f"{d.day}rd"):
            forms += [f"{name} {day}", f"{day} {name}", f"{day} of {name}"]
    return (*forms, f"{d.month}/{d.day}", f"{d.month}月{d.day}")


def shown_by_step(steps: Sequence[Step], tools: ToolPolicy) -> Iterator[tuple[Step, Shown, list[Verdict]]]:
    """Each step with what had been shown strictly before it (one `Shown`, updated in place: use it before
    advancing) and, for an assistant message, the verdict on each amount or term it states. An error a tool
    returned is something it showed ("total price is 375")."""
    shown = Shown(constants=frozenset(_cents(c) for c in tools.constants))
    patterns = _term_patterns(tools)
    for s in steps:
        verdicts = _judge(s, shown, patterns) if s.kind == "assistant" else []
        yield s, shown, verdicts
        if s.kind == "user":
            shown.add_user(s.text)
        elif s.kind == "call":
            shown.add_output(s, read=tool_matches(s.name, tools.read))
        shown.stated += [v.claim.cents for v in verdicts if v.ok and v.claim.cents is not None]


@dataclass(frozen=True)
class Verdict:
    """Whether a stated value is grounded, and the call it came from (None: the policy, or the agent's own
    arithmetic on grounded amounts)."""

    claim: Claim
    ok: bool
    source: Step | None = None


def _judge(step: Step, shown: Shown, patterns: Sequence[tuple[str, re.Pattern[str]]]) -> list[Verdict]:
    out: list[Verdict] = []
    run: list[int] = []
    for c in _claims_of(step, patterns):
        if c.cents is None:
            out.append(Verdict(c, _norm(c.term or "") in shown.values))
            continue
        ok, src = shown.source(c.cents)
        if not ok:
            ok = shown.from_stated(c.cents, run)
        out.append(Verdict(c, ok, src))
        if ok:
            run.append(c.cents)
    return out


# ---- the rules --------------------------------------------------------------------------------------------------


def _undeclared(tools: ToolPolicy) -> RuleAnswer | None:
    if tools.declared:
        return None
    return RuleAnswer(None, reason="the pack declares no tools (`tools:`): amounts and terms cannot be checked "
                                   "against its constants and vocabularies")


@rule("conduct.states_amounts_or_terms", layers=("conversation",), reads=("answer", "spans"))
def states_amounts_or_terms(unit: object, ctx: RuleContext) -> RuleAnswer:
    """An assistant message states an amount of money (a number with a currency sign or word) or a value of one of
    the pack's attribute vocabularies (`tools.terms`) said of the user's records ("as a gold member"). Cites each
    claim's characters."""
    if not isinstance(unit, Conversation):
        return RuleAnswer(None, reason="conduct.states_amounts_or_terms needs a conversation unit")
    tools = ctx.pack.tools
    if (gap := _undeclared(tools)) is not None:
        return gap
    found = claims(timeline(unit), tools)
    if not found:
        return RuleAnswer("no", reason="no assistant message states an amount or a term of the user's records")
    return RuleAnswer("yes", evidence=capped([c.pointer() for c in found]),
                      reason=f"{len(found)} amount(s) or term(s) stated")


@rule("conduct.claims_grounded", layers=("conversation",), reads=("request", "answer", "spans"))
def claims_grounded(unit: object, ctx: RuleContext) -> RuleAnswer:
    """Every amount the agent states equals a number an earlier tool output showed or a policy amount
    (`tools.constants`), or follows from them by one of `DERIVATIONS`; every term of the user's records it states
    (`tools.terms`) was a value in an earlier tool output. An amount or term only the user said is ungrounded.
    `no` cites each ungrounded claim; `yes` cites grounded claims with the output each came from."""
    if not isinstance(unit, Conversation):
        return RuleAnswer(None, reason="conduct.claims_grounded needs a conversation unit")
    tools = ctx.pack.tools
    if (gap := _undeclared(tools)) is not None:
        return gap
    bad: list[Claim] = []
    good: list[EvidencePointer] = []
    n = 0
    for _s, _shown, verdicts in shown_by_step(timeline(unit), tools):
        for v in verdicts:
            n += 1
            if not v.ok:
                bad.append(v.claim)
                continue
            good.append(v.claim.pointer())
            if v.source is not None:
                good.append(v.source.output_pointer(0, len(v.source.output_text)))
    if n == 0:
        return RuleAnswer("not_applicable", reason="no amount or term of the user's records stated")
    if bad:
        quoted = ", ".join(f"{c.text!r}" for c in bad[:10])
        return RuleAnswer("no", fact=f"{len(bad)} of {n} stated value(s) in no earlier tool output: {quoted}",
                          evidence=capped([c.pointer() for c in bad]),
                          reason=f"{len(bad)} of {n} stated amount(s)/term(s) appear in no earlier tool output, "
                                 "policy amount or sum of them")
    return RuleAnswer("yes", evidence=capped(good), reason=f"all {n} stated amount(s)/term(s) grounded")


_VOCABULARY = re.compile(r"[a-z]+(?:[ _-][a-z]+)*")
"""A lowercase word or snake_case token without digits (`round_trip`, `no longer needed`): a value of an
enumeration the tool's schema fixes (a kind, a reason, a cabin), not information an agent could invent. Names,
ids, codes and dates carry capitals or digits."""


def _skipped(value: Any, terms: frozenset[str]) -> bool:
    """Arguments that carry no invented information: none, booleans, counts 0-9, vocabulary values."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int | float):
        return float(value).is_integer() and 0 <= value <= 9
    if isinstance(value, str):
        return not value.strip() or _VOCABULARY.fullmatch(value) is not None or _norm(value) in terms
    return True


def _seen(value: Any, shown: Shown) -> bool:
    if isinstance(value, int | float):
        if not math.isfinite(value):
            return False
        return _amount_seen(_cents(float(value)), shown)
    text = str(value)
    if shown.seen_string(text):
        return True
    try:
        f = float(text.replace(",", ""))
    except ValueError:
        return False
    return math.isfinite(f) and _amount_seen(_cents(f), shown)


def _amount_seen(cents: int, shown: Shown) -> bool:
    # The user's numbers count as seen for an argument (they asked for it); for a claim they do not.
    return cents in shown.user_cents or shown.source(cents)[0] or shown.from_stated(cents) or cents in shown.stated


def _locate(step: Step, value: Any) -> EvidencePointer:
    """The characters of an argument's value in the call's input (the whole input when not found)."""
    text = step.text
    for needle in (f'"{value}"', str(value)) if isinstance(value, str) else (str(value),):
        i = text.find(needle)
        if i >= 0:
            return step.pointer(i, i + len(needle))
    return step.pointer(0, len(text))


@rule("conduct.write_arguments_grounded", layers=("conversation",), needs_trigger_tools=True,
      reads=("request", "spans"))
def write_arguments_grounded(unit: object, ctx: RuleContext) -> RuleAnswer:
    """Every scalar argument of every write call (the clause trigger's tools, else the pack's `tools.write`) was
    seen before the call: a string (id, name, date; case, `_`, `-` and spaces alike) in an earlier tool output or
    user message (or asked of a read tool that answered), a number there or following from tool outputs by one of
    `DERIVATIONS`. Booleans, counts 0-9 and
    lowercase vocabulary values (an enumeration the tool fixes) carry nothing invented and are skipped. `no` cites
    each invented value's characters in the call's input; `yes` cites the calls. A call the tool rejected changed
    nothing and is Execution's event already (`execution.span_error`): one event, one flag, so only writes that
    took effect are read."""
    if not isinstance(unit, Conversation):
        return RuleAnswer(None, reason="conduct.write_arguments_grounded needs a conversation unit")
    tools = ctx.pack.tools
    clause = clause_of(ctx)
    names = (clause.trigger.tool_names if clause is not None else ()) or tools.write
    if not names:
        return RuleAnswer(None, reason="neither the clause's trigger nor the pack's tools name a write tool")
    terms = frozenset(_norm(v) for values in tools.terms.values() for v in values)
    bad: list[EvidencePointer] = []
    good: list[EvidencePointer] = []
    what: list[str] = []
    n = unreadable = violating = 0
    for s, shown, _ in shown_by_step(timeline(unit), tools):
        if s.kind != "call" or s.failed or not tool_matches(s.name, names):
            continue
        n += 1
        if not isinstance(s.args, dict):
            unreadable += 1
            continue
        invented = [(p, v) for p, v in leaves(s.args) if not _skipped(v, terms) and not _seen(v, shown)]
        if not invented:
            good.append(s.pointer(0, len(s.text)))
            continue
        violating += 1
        for p, v in invented:
            bad.append(_locate(s, v))
            what.append(f"{s.name}.{p}={v!r}")
    if n == 0:
        return RuleAnswer("not_applicable", reason="no write call took effect")
    if violating:
        listed = ", ".join(what[:10])
        return RuleAnswer("no", fact=f"{len(what)} argument value(s) seen in no earlier tool output or user "
                                     f"message: {listed}", evidence=capped(bad),
                          reason=f"{violating} of {n} write call(s) carry a value seen nowhere before: {listed}")
    if unreadable:
        return RuleAnswer(None, reason=f"{unreadable} of {n} write call(s) with unreadable JSON arguments")
    return RuleAnswer("yes", evidence=capped(good), reason=f"all {n} write call(s) use only values seen before")


__all__ = ["claims_grounded", "states_amounts_or_terms", "write_arguments_grounded"]
