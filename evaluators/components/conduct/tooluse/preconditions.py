"""Tool-use checks: a write's preconditions over the state earlier tool outputs showed, and refusals of writes.

- `conduct.write_preconditions_hold` (obligation): every database-changing call a pack precondition constrains
  acted on an entity whose fields, as the agent last read them, satisfied the precondition.
- `conduct.refused_write_request` (trigger): the user asked for a write (`tools.intents`) and the agent refused
  (a message of the `refusal` or `deflection` lexicon) or handed off (`pack.handoff.tool_names`) before calling it.
- `conduct.refusal_justified` (obligation): each such refusal is covered by a precondition the state the agent
  had read decides false; a refusal of a write the pack declares `complete` whose preconditions all held (or that
  has none over the state) is a wrong refusal.

Tests are three-valued: true, false, or undecided when the entity was never read, a field is absent or a value
cannot be parsed. A precondition is violated only when the observed fields decide it false; what the state
cannot decide is abstained on with its reason (a model tier may judge it), never passed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from agent_factory.adapters.model import Conversation, EvidencePointer
from agent_factory.evaluators.components.conduct.rules import capped, evidence_text, find, whole
from agent_factory.evaluators.components.conduct.tooluse.state import (
    Step,
    at_path,
    day_end,
    entity,
    lexicon_patterns,
    now_of,
    objects,
    parse_time,
    timeline,
    tool_matches,
)
from agent_factory.evaluators.core.registry import RuleAnswer, RuleContext, rule
from agent_factory.knowledge_packs import KnowledgePack
from agent_factory.knowledge_packs.tools import FieldTest, Precondition, ToolPolicy

Truth = bool | None
"""A three-valued test result: True, False, or None (undecided)."""


# ---- three-valued logic -------------------------------------------------------------------------------------------


def _all(values: Sequence[Truth]) -> Truth:
    if any(v is False for v in values):
        return False
    return True if all(v is True for v in values) else None


def _any(values: Sequence[Truth]) -> Truth:
    if any(v is True for v in values):
        return True
    return False if values and all(v is False for v in values) else None


# ---- values -------------------------------------------------------------------------------------------------------


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.replace(",", "").replace("$", "").strip())
        except ValueError:
            return None
    return None


def _same(a: Any, b: Any) -> bool:
    # Numbers compare as numbers (2 == 2.0 == "2"); everything else as trimmed, case-folded text.
    x, y = _number(a), _number(b)
    if x is not None and y is not None:
        return x == y
    return str(a).strip().lower() == str(b).strip().lower()


@dataclass(frozen=True)
class Operand:
    """The call's arguments as a test reads them: the whole arguments, and the list element that named the
    entity (when the entity argument runs through a list, `payment_methods[].payment_id`)."""

    args: Any = None
    element: Any = None
    prefix: str = ""
    """The entity argument's path up to and including its last `[]` (`payment_methods[]`), or ''."""


def _argument_values(path: str, op: Operand) -> list[Any]:
    # A test argument under the same list as the entity argument reads the element that named the entity:
    # the amount paid with *that* payment method, not every method's.
    if op.prefix and path.startswith(op.prefix + "."):
        return at_path(op.element, path[len(op.prefix) + 1:])
    return at_path(op.args, path) if op.args is not None else []


@dataclass(frozen=True)
class Outcome:
    """One test (or precondition) over one entity: its truth, the leaves that decided it, why it is undecided."""

    truth: Truth
    fields: tuple[tuple[str, Any], ...] = ()
    """(path, value) of the entity's fields the test read."""
    why: str = ""


def _time_test(t: FieldTest, value: Any, now: datetime | None) -> Truth:
    parsed = parse_time(value)
    if parsed is None or now is None:
        return None
    moment, date_only = parsed
    end = day_end(moment) if date_only else moment
    if t.op == "after_now":
        # A date counts as its whole day: a flight dated today has not flown until the day is over.
        return end > now
    hours = _number(t.value)
    if hours is None:
        return None
    start = now - timedelta(hours=hours)
    inside = [start <= m <= now for m in ((moment, end) if date_only else (moment,))]
    return _all(inside) if not date_only or inside[0] == inside[1] else None


def _compare(t: FieldTest, value: Any, operand: Any) -> Truth:
    if t.op in ("equals", "not_equals"):
        if value is None or operand is None:
            return None
        same = _same(value, operand)
        return same if t.op == "equals" else not same
    if t.op in ("in", "not_in"):
        if value is None or not isinstance(operand, tuple):
            return None
        member = any(_same(value, o) for o in operand)
        return member if t.op == "in" else not member
    x, y = _number(value), _number(operand)
    if x is None or y is None:
        return None
    return x >= y if t.op == "at_least" else x <= y


def run_test(t: FieldTest, ent: dict[str, Any], op: Operand, now: datetime | None) -> Outcome:
    """One `FieldTest` on an entity (an object of a tool output), three-valued: undecided when the field is
    absent, a value does not parse, or the compared call argument is missing."""
    if t.op == "count_at_most":
        # `passengers[]` and `passengers` both count the list's elements (an empty list counts 0, an absent one
        # is undecided).
        container = at_path(ent, t.field.removesuffix("[]"))
        if not container or not all(isinstance(c, list | dict) for c in container):
            return Outcome(None, why=f"{t.field} absent or not a list")
        count = sum(len(c) for c in container)
        limit = _number(t.value)
        if limit is None:
            return Outcome(None, why=f"{t.field}: limit {t.value!r} is not a number")
        return Outcome(count <= limit, ((t.field, count),))
    values = at_path(ent, t.field)
    if not values:
        return Outcome(None, why=f"{t.field} absent")
    operand: Any = t.value
    if t.argument is not None:
        got = _argument_values(t.argument, op)
        if not got:
            return Outcome(None, why=f"no call argument {t.argument}")
        if len({json.dumps(g, sort_keys=True, default=str) for g in got}) > 1:
            return Outcome(None, why=f"call argument {t.argument} has several values")
        operand = got[0]
    if t.op in ("within_hours_before_now", "after_now"):
        results = [_time_test(t, v, now) for v in values]
    else:
        results = [_compare(t, v, operand) for v in values]
    truth = _all(results) if t.quantifier == "all" else _any(results)
    why = "" if truth is not None else f"{t.field} {t.op}: cannot be decided from {values!r}" + (
        " (no time called now)" if now is None and t.op in ("within_hours_before_now", "after_now") else "")
    # Cite the values that decided: the failing ones of a false test, the passing one of an `any` test.
    cited = [v for v, r in zip(values, results, strict=True) if r is truth] if truth is not None else values
    return Outcome(truth, tuple((t.field, v) for v in cited), why)


def evaluate(p: Precondition, ent: dict[str, Any], op: Operand, now: datetime | None) -> Outcome:
    """A precondition on an entity: every `all_of` test and, when given, some `any_of` test (three-valued).
    The fields cited are those of the tests that decide the answer."""
    alls = [run_test(t, ent, op, now) for t in p.all_of]
    anys = [run_test(t, ent, op, now) for t in p.any_of]
    truth = _all([_all([o.truth for o in alls]), _any([o.truth for o in anys]) if anys else True])
    if truth is False:
        deciding = [o for o in alls if o.truth is False] or ([o for o in anys] if anys else [])
    elif truth is True:
        deciding = alls + [o for o in anys if o.truth is True][:1]
    else:
        deciding = []
    why = "; ".join(o.why for o in alls + anys if o.truth is None and o.why)
    return Outcome(truth, tuple(f for o in deciding for f in o.fields), why)


# ---- evidence -----------------------------------------------------------------------------------------------------


def _field_pointer(step: Step, ent: dict[str, Any], key: str, path: str, value: Any) -> EvidencePointer:
    """The characters of `"leaf": value` in the tool output that showed the entity (searched from where the
    entity's id is written); the whole output when the text cannot be located."""
    text = step.output_text
    anchor = 0
    ident = ent.get(key)
    if ident is not None:
        m = re.search(rf'"{re.escape(key)}"\s*:\s*{re.escape(json.dumps(ident))}', text)
        if m is not None:
            anchor = m.start()
    leaf = path.split(".")[-1].removesuffix("[]")
    rx = re.compile(rf'"{re.escape(leaf)}"\s*:\s*{re.escape(json.dumps(value, ensure_ascii=False))}')
    m = rx.search(text, anchor) or rx.search(text)
    if m is None:
        return step.output_pointer(0, len(text))
    return step.output_pointer(m.start(), m.end())


def _pointers(step: Step, ent: dict[str, Any], key: str, fields: Sequence[tuple[str, Any]],
              ) -> list[EvidencePointer]:
    out: list[EvidencePointer] = []
    for path, value in fields:
        if path.endswith("[]") or isinstance(value, dict | list):
            out.append(step.output_pointer(0, len(step.output_text)))
        else:
            out.append(_field_pointer(step, ent, key, path, value))
    return list(dict.fromkeys(out))


# ---- the calls' preconditions -------------------------------------------------------------------------------------


def _entity_arguments(args: Any, path: str) -> list[tuple[Any, Operand]]:
    """The entity ids a call names at `path`, each with the operand its tests read (an id under a list carries
    the element it came from)."""
    if "[]" not in path:
        return [(v, Operand(args=args)) for v in at_path(args, path)]
    cut = path.rfind("[]") + 2
    prefix, rest = path[:cut], path[cut + 1:]
    out: list[tuple[Any, Operand]] = []
    for element in at_path(args, prefix):
        for v in (at_path(element, rest) if rest else [element]):
            out.append((v, Operand(args=args, element=element, prefix=prefix)))
    return out


@dataclass(frozen=True)
class Check:
    """One precondition over one entity of one call (or one refused request)."""

    precondition: Precondition
    entity_id: Any
    outcome: Outcome
    source: Step | None = None
    """The call whose output showed the entity (None: never read)."""
    entity: dict[str, Any] | None = None

    def evidence(self) -> list[EvidencePointer]:
        """The characters of the deciding fields in the output that showed the entity."""
        if self.source is None or self.entity is None:
            return []
        return _pointers(self.source, self.entity, self.precondition.entity_key, self.outcome.fields)


def call_checks(steps: Sequence[Step], call: Step, tools: ToolPolicy, now: datetime | None) -> list[Check]:
    """Every precondition of the call's tool, over each entity the call names, as the agent last read it."""
    out: list[Check] = []
    for p in tools.preconditions:
        if not tool_matches(call.name, p.tools):
            continue
        named = _entity_arguments(call.args, p.entity_argument)
        if not named:
            out.append(Check(p, None, Outcome(None, why=f"the call has no argument {p.entity_argument}")))
            continue
        for ident, op in named:
            found = entity(steps, call.position, key=p.entity_key, value=ident)
            if found is None:
                out.append(Check(p, ident, Outcome(
                    None, why=f"{p.entity_key} {ident} was never shown by an earlier tool output")))
                continue
            src, ent = found
            out.append(Check(p, ident, evaluate(p, ent, op, now), src, ent))
    return out


def _declared(tools: ToolPolicy, what: str) -> str | None:
    if not tools.declared:
        return "the pack declares no tools (no `tools` section)"
    if what == "preconditions" and not tools.preconditions:
        return "the pack's tools declare no preconditions"
    if what == "intents" and not tools.intents:
        return "the pack's tools declare no write intents"
    return None


@rule("conduct.write_preconditions_hold", layers=("conversation",),
      reads=("request", "answer", "spans.input", "spans.output"))
def write_preconditions_hold(unit: object, ctx: RuleContext) -> RuleAnswer:
    """Each database-changing call that a pack precondition constrains (`tools.preconditions`) acted on an entity
    whose fields, in the latest earlier tool output showing it, satisfy the precondition.

    `no` when some call's precondition is decided false (evidence: the call's arguments and the deciding
    fields in the output; the fact names the precondition ids); `yes` when every precondition of every call is
    decided true; abstains with the reason when none is violated but some cannot be decided (the entity was
    never read, a field absent). A call that failed changed nothing and is not counted.
    """
    if not isinstance(unit, Conversation):
        return RuleAnswer(None, reason="conduct.write_preconditions_hold needs a conversation unit")
    tools = ctx.pack.tools
    missing = _declared(tools, "preconditions")
    if missing is not None:
        return RuleAnswer(None, reason=missing)
    steps = timeline(unit)
    now = now_of(unit, tools)
    constrained = {t for p in tools.preconditions for t in p.tools}
    bad: list[EvidencePointer] = []
    good: list[EvidencePointer] = []
    violated: list[str] = []
    undecided: list[str] = []
    n = 0
    for call in steps:
        if call.kind != "call" or call.failed or not tool_matches(call.name, sorted(constrained)):
            continue
        n += 1
        checks = call_checks(steps, call, tools, now)
        false = [c for c in checks if c.outcome.truth is False]
        if false:
            bad.append(whole(call.unit_id, "input", call.text))
            for c in false:
                bad.extend(c.evidence())
                violated.append(f"{c.precondition.id} ({call.name} {c.entity_id})")
            continue
        for c in checks:
            if c.outcome.truth is True:
                good.extend(c.evidence())
            else:
                undecided.append(f"{c.precondition.id} on {call.name} {c.entity_id}: {c.outcome.why}")
        if all(c.outcome.truth is True for c in checks):
            good.append(whole(call.unit_id, "input", call.text))
    if n == 0:
        return RuleAnswer("not_applicable", reason="no successful call of a write with preconditions")
    if violated:
        ids = ", ".join(dict.fromkeys(v.split(" ", 1)[0] for v in violated))
        texts = {p.id: p.text for p in tools.preconditions}
        return RuleAnswer("no", fact=ids, evidence=capped(bad),
                          reason=f"precondition violated: {'; '.join(violated)} -- "
                                 + " / ".join(texts[i] for i in ids.split(", ")))
    if undecided:
        return RuleAnswer(None, reason="undecided: " + "; ".join(dict.fromkeys(undecided)))
    return RuleAnswer("yes", evidence=capped(good), reason=f"the preconditions of all {n} write call(s) held")


# ---- refused requests -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Refusal:
    """A user request for a write and the agent's refusal or hand-off of it, before any call of that write."""

    tool: str
    request: Step
    request_pointer: EvidencePointer
    refusal: Step
    refusal_pointer: EvidencePointer


def _deflection(pack: KnowledgePack) -> tuple[str, ...]:
    # A refusal is either kind of "no": declining the action (`refusal`) or the information it needs (`deflection`).
    return lexicon_patterns(pack, "refusal", "deflection")


def _is_handoff(step: Step, pack: KnowledgePack) -> bool:
    return step.kind == "call" and not step.failed and pack.handoff.hands_off(step.name)


def _first(patterns: Sequence[str], step: Step) -> EvidencePointer | None:
    for p in patterns:
        hits = find(p, step.text, unit_id=step.unit_id, field=step.field)
        if hits:
            return hits[0]
    return None


NEGATED_REQUEST = re.compile(
    r"(?:\b(?:do|does|did)\s+not|\b(?:don|doesn|didn)['’]?t|\bnot|\bnever|\bno\s+longer)\s+(?:\w+\s+){0,2}?"
    r"(?:want|need|wish|intend|plan|mean|trying|looking)\b[^.?!\n]*$"
    r"|(?:不想|不要|不用|不需要|没打算|并不是要)[^。？！\n]*$",
    re.IGNORECASE)
"""Before an intent's match, in the same sentence: the user saying they do not want it ("I don't want to cancel my
flight, just the insurance", "我不想取消"). Language, not domain: a request negated is no request."""


def _requested(step: Step, patterns: Sequence[str]) -> EvidencePointer | None:
    for p in patterns:
        for hit in find(p, step.text, unit_id=step.unit_id, field=step.field):
            if NEGATED_REQUEST.search(step.text[:hit.start or 0]) is None:
                return hit
    return None


def refusals(steps: Sequence[Step], pack: KnowledgePack) -> Iterator[Refusal]:
    """Each write the user asked for (a message matching one of its `intents`, not negated) that the agent then
    refused (an assistant message matching the `refusal` or `deflection` lexicon) or handed off (a `handoff` tool
    call), and
    did not call afterwards. A refusal the agent reversed by calling the write later refused nothing: the
    request was served. A request repeated before the refusal is the same request (the latest one is cited)."""
    deflect = _deflection(pack)
    for intent in pack.tools.intents:
        tool = (intent.tool,)
        last_call = max((s.position for s in steps if s.kind == "call" and tool_matches(s.name, tool)), default=-1)
        request: tuple[Step, EvidencePointer] | None = None
        for s in steps:
            if s.position < last_call:
                continue  # a request before the write's last call was served by a call
            if s.kind == "user":
                hit = _requested(s, intent.patterns)
                if hit is not None:
                    request = (s, hit)
            elif request is not None:
                refused = None
                if s.kind == "assistant" and deflect:
                    refused = _first(deflect, s)
                elif _is_handoff(s, pack):
                    refused = whole(s.unit_id, "input", s.text)
                if refused is not None:
                    yield Refusal(intent.tool, request[0], request[1], s, refused)
                    request = None


def _refusal_setup(unit: object, ctx: RuleContext, name: str) -> tuple[Sequence[Step], str | None]:
    if not isinstance(unit, Conversation):
        return (), f"{name} needs a conversation unit"
    missing = _declared(ctx.pack.tools, "intents")
    if missing is not None:
        return (), missing
    if not _deflection(ctx.pack) and not ctx.pack.handoff.tool_names:
        return (), ("the pack has no refusal or deflection lexicon and no hand-off tools: a refusal cannot be "
                    "recognised")
    return timeline(unit), None


@rule("conduct.refused_write_request", layers=("conversation",), reads=("request", "answer", "spans.input"))
def refused_write_request(unit: object, ctx: RuleContext) -> RuleAnswer:
    """The user asked for a database-changing action (a message matching one of the write's `tools.intents`)
    and the agent refused (an assistant message of the `refusal` or `deflection` lexicon) or handed off (a call
    of a `handoff` tool) before calling that write. Evidence: the request's and the refusal's characters."""
    steps, missing = _refusal_setup(unit, ctx, "conduct.refused_write_request")
    if missing is not None:
        return RuleAnswer(None, reason=missing)
    found = list(refusals(steps, ctx.pack))
    if not found:
        return RuleAnswer("no", reason="no request for a write was refused or handed off")
    evidence = [p for r in found for p in (r.request_pointer, r.refusal_pointer)]
    return RuleAnswer("yes", evidence=capped(evidence),
                      reason="refused: " + ", ".join(dict.fromkeys(r.tool for r in found)))


_WORD = "A-Za-z0-9_"


def _names(text: str, ident: str) -> bool:
    # Ids are codes: matched case-sensitively, as whole tokens (`ABC123` is not inside `XABC1234`).
    return re.search(rf"(?<![{_WORD}]){re.escape(ident)}(?![{_WORD}])", text) is not None


def _candidates(steps: Sequence[Step], before: int, key: str) -> dict[str, tuple[Step, dict[str, Any]]]:
    """Every entity with id key `key` the tool outputs before `before` showed, by id, as last shown."""
    out: dict[str, tuple[Step, dict[str, Any]]] = {}
    for s in steps[:before]:
        if s.kind != "call" or s.failed:
            continue
        for obj in objects(s.output):
            v = obj.get(key)
            if isinstance(v, str | int) and not isinstance(v, bool) and str(v).strip():
                out[str(v)] = (s, obj)
    return out


def refused_entities(steps: Sequence[Step], r: Refusal, key: str) -> tuple[list[str], str]:
    """The entities (ids of `key`) a refusal is about, as the conversation had read them before it: those the
    refusal itself names (its message, or the hand-off's arguments); else those named by the latest user
    message (up to the refusal) that names any; else the only one the outputs showed. Several candidates and
    none named: none is chosen (the reason says so) and the refusal's preconditions stay undecided."""
    cands = _candidates(steps, r.refusal.position, key)
    if not cands:
        return [], f"no {key} was shown by a tool output before the refusal"
    named = [c for c in cands if _names(r.refusal.text, c)]
    if named:
        return named, f"named by the refusal: {', '.join(named)}"
    for s in reversed(steps[:r.refusal.position]):
        if s.kind == "user":
            named = [c for c in cands if _names(s.text, c)]
            if named:
                return named, f"named by the user: {', '.join(named)}"
    if len(cands) == 1:
        return list(cands), f"the only {key} shown: {next(iter(cands))}"
    return [], f"{len(cands)} {key}s were shown and none is named by the user or the refusal"


def refusal_checks(steps: Sequence[Step], r: Refusal, tools: ToolPolicy, now: datetime | None,
                   ) -> list[tuple[Precondition, Truth, list[Check], str]]:
    """Each precondition of the refused write over the entities the refusal is about (`refused_entities`):
    true when it holds for all of them, false when it fails for all, else undecided. No call exists, so a test
    comparing with a call argument is undecided."""
    out: list[tuple[Precondition, Truth, list[Check], str]] = []
    for p in tools.preconditions:
        if not tool_matches(r.tool, p.tools):
            continue
        if all(t.argument is not None for t in (*p.all_of, *p.any_of)):
            continue  # it constrains what a call would ask, not the state: a refusal of the request is not its case
        ids, how = refused_entities(steps, r, p.entity_key)
        cands = _candidates(steps, r.refusal.position, p.entity_key)
        checks: list[Check] = []
        for ident in ids:
            src, ent = cands[ident]
            checks.append(Check(p, ident, evaluate(p, ent, Operand(), now), src, ent))
        truths = [c.outcome.truth for c in checks]
        truth: Truth = None
        if truths and all(t is True for t in truths):
            truth = True
        elif truths and all(t is False for t in truths):
            truth = False
        why = how if not checks else "; ".join(f"{c.entity_id}: {c.outcome.why}" for c in checks if c.outcome.why)
        out.append((p, truth, checks, why or how))
    return out


@rule("conduct.refusal_justified", layers=("conversation",),
      reads=("request", "answer", "spans.input", "spans.output"))
def refusal_justified(unit: object, ctx: RuleContext) -> RuleAnswer:
    """Each refused or handed-off request for a write (`conduct.refused_write_request`) is covered by a
    precondition of that write that the state the agent had read decides false.

    The entity is the one the refusal names, else the one the user's latest message naming one names, else the
    only one of its kind the outputs showed. `yes` when every refusal has a precondition decided false; `no`
    when some refusal's preconditions were all decided true (a wrong refusal: evidence the refusal, the request
    and the outputs showing the preconditions held); abstains with the reason when undecided (no precondition
    declared for the write, the entity ambiguous or never read, a field absent). A `no` needs the write among
    `tools.complete` (its declared preconditions are all the policy asks of the state): a write with none over the
    state is then refused wrongly whenever it is refused; a precondition only over the call's arguments is no
    reason to refuse the request before any call."""
    steps, missing = _refusal_setup(unit, ctx, "conduct.refusal_justified")
    if missing is not None:
        return RuleAnswer(None, reason=missing)
    assert isinstance(unit, Conversation)
    tools = ctx.pack.tools
    now = now_of(unit, tools)
    found = list(refusals(steps, ctx.pack))
    if not found:
        return RuleAnswer("not_applicable", reason="no request for a write was refused or handed off")
    wrong: list[EvidencePointer] = []
    covered: list[EvidencePointer] = []
    wrong_why: list[str] = []
    undecided: list[str] = []
    for r in found:
        checks = refusal_checks(steps, r, tools, now)
        complete = tool_matches(r.tool, tools.complete)
        truths = [t for _, t, _, _ in checks]
        if any(t is False for t in truths):
            covered += [r.refusal_pointer, r.request_pointer]
            covered += [e for p, t, cs, _ in checks if t is False for c in cs for e in c.evidence()]
        elif not complete:
            # Held preconditions say nothing if the policy asks more than the pack could declare (a reason).
            undecided.append(f"{r.tool}: the pack does not declare its preconditions complete (`tools.complete`)")
        elif all(t is True for t in truths):
            wrong += [r.refusal_pointer, r.request_pointer]
            wrong += [e for _, _, cs, _ in checks for c in cs for e in c.evidence()]
            held = ", ".join(p.id for p, _, _, _ in checks)
            wrong_why.append(f"{r.tool} refused though {held} held" if checks else
                             f"{r.tool} refused, though the policy sets no condition on the state it could fail")
        else:
            undecided += [f"{r.tool}/{p.id}: {why}" for p, t, _, why in checks if t is None]
    if wrong:
        return RuleAnswer("no", fact=evidence_text(capped(wrong)), evidence=capped(wrong),
                          reason="; ".join(wrong_why))
    if undecided:
        return RuleAnswer(None, reason="undecided: " + "; ".join(dict.fromkeys(undecided)))
    return RuleAnswer("yes", evidence=capped(covered),
                      reason=f"all {len(found)} refusal(s) covered by a precondition the state decided false")


__all__ = ["refusal_justified", "refused_write_request", "write_preconditions_hold"]
