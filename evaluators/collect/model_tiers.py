"""The model tiers: a small model (all its items of a unit in ONE structured call) and a cross-family jury
(each juror once per unit over the items handed to it, the votes combined by a reducer).

`ModelTier` abstains on an item, handing its answer on, when a later tier would take it and the answer is
unsure (confidence under `escalate_below`) or the definition demands a jury; otherwise it decides, noting a
low confidence nobody can review. `JuryTier(members, reducer="majority")` decides every item it gets: the
reduced value with the agreeing votes, a split (no value, every juror answered) as uncollected, or the first
juror's failure when a failure leaves no decision.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace

from agent_factory.adapters.model import EvidencePointer
from agent_factory.errors import SpecError
from agent_factory.evaluators.collect.caller import ModelCaller, Outcome, pointer, shown
from agent_factory.evaluators.collect.config import ModelSpec, check_jury
from agent_factory.evaluators.collect.reasons import JURY_SPLIT
from agent_factory.evaluators.collect.schema import ItemAnswer
from agent_factory.evaluators.collect.tiers import Decisions, KeyFamily, Opinion, Pending, TierRun
from agent_factory.evaluators.core.model import AtomicDatum, DataDefinition, Tier, Value

Reducer = Callable[[Sequence[Value], int], "Value | None"]
"""Combines the votes received (a failed juror casts none) and the number of seats into a value, or None."""


def majority(votes: Sequence[Value], seats: int) -> Value | None:
    """The value more than half of all seats voted for (a failed juror's seat counts against every value)."""
    top = Counter(votes).most_common(1)
    return top[0][0] if top and top[0][1] * 2 > seats else None


def unanimous(votes: Sequence[Value], seats: int) -> Value | None:
    """The value every seat voted for."""
    return votes[0] if len(votes) == seats and len(set(votes)) == 1 else None


REDUCERS: dict[str, Reducer] = {"majority": majority, "unanimous": unanimous}
"""The reducers a jury can be given by name."""


def model_datum(
    run: TierRun, p: Pending, *, value: Value, tier: Tier, reason: str | None,
    evidence: tuple[EvidencePointer, ...] = (), tokens: int = 0, cost: float = 0.0,
) -> AtomicDatum:
    """A model tier's datum about `p`: the tier's identity, the shown coverage and the model key."""
    return run.datum(p, value=value, reason=reason or None, evidence=evidence,
                     collector=run.keys.model_identity(tier), tokens=tokens, cost_usd=cost,
                     coverage=shown(p).coverage, key=p.key)


def run_caller(batch: Sequence[tuple[TierRun, Sequence[Pending]]]) -> ModelCaller:
    """The one caller of a batch's runs (they belong to one collector)."""
    callers = {id(run.caller) for run, _ in batch}
    if len(callers) != 1:
        raise AssertionError(f"a batch's units are collected by one collector; got {len(callers)} callers")
    return batch[0][0].caller


class ModelTier:
    """The small model: one structured call per unit over every item it gets."""

    kind: Tier = "small_model"
    family: KeyFamily = "model"

    def __init__(self, spec: ModelSpec, *, escalate_below: float = 0.7) -> None:
        if not 0 <= escalate_below <= 1:
            raise SpecError(f"escalate_below must be within [0, 1]; got {escalate_below}")
        self.spec = spec
        self.escalate_below = escalate_below

    def accepts(self, d: DataDefinition) -> bool:
        """A definition that allows the small-model tier."""
        return "small_model" in d.tiers

    async def decide(self, run: TierRun, items: Sequence[Pending]) -> Decisions:
        """The small model's answers; unsure ones (and those demanding a jury) handed on when a jury follows."""
        return self.judge(run, items, await run.caller.ask("checklist", self.spec, run.job, items))

    async def decide_many(self, batch_id: str, batch: Sequence[tuple[TierRun, Sequence[Pending]]]) -> list[Decisions]:
        """`decide` for several units of one layer in ONE call (each unit's decisions, in order)."""
        outcomes = await run_caller(batch).ask_many("checklist", self.spec, batch_id,
                                                    [(run.job, items) for run, items in batch])
        return [self.judge(run, items, o) for (run, items), o in zip(batch, outcomes, strict=True)]

    def judge(self, run: TierRun, items: Sequence[Pending], outcome: Outcome) -> Decisions:
        """The decisions the call's outcome gives about the unit's items."""
        if outcome.answers is None:
            return {p.index: model_datum(run, p, value="uncollected", tier="small_model", reason=outcome.failure)
                    for p in items}
        out: dict[int, AtomicDatum | Pending] = {}
        for p, (tok, cost) in zip(items, outcome.shares(len(items)), strict=True):
            answer = outcome.answers[p.definition.id]
            unsure = answer.confidence < self.escalate_below
            if run.onward(p.definition) and (unsure or p.definition.demands_jury):
                out[p.index] = replace(p, opinions=(*p.opinions, Opinion(f"small {self.spec.name}", answer)),
                                       tokens=p.tokens + tok, cost_usd=p.cost_usd + cost)
                continue
            evidence, note = pointer(answer, shown(p))
            notes = [answer.reason.strip(), note]
            if unsure:
                notes.append(f"low confidence {answer.confidence:.2f} < {self.escalate_below:.2f}, "
                             "no jury for this item")
            out[p.index] = model_datum(run, p, value=answer.value, tier="small_model",
                                       reason="; ".join(n for n in notes if n), evidence=evidence,
                                       tokens=p.tokens + tok, cost=p.cost_usd + cost)
        return out


class JuryTier:
    """A cross-family jury: every juror once per unit, in parallel; the reducer turns votes into a value."""

    kind: Tier = "jury"
    family: KeyFamily = "model"

    def __init__(self, members: Sequence[ModelSpec], *, reducer: str | Reducer = "majority") -> None:
        self.members = tuple(members)
        check_jury(self.members)
        if not self.members:
            raise SpecError("a jury needs at least two members of different families; got none")
        if isinstance(reducer, str):
            if reducer not in REDUCERS:
                raise SpecError(f"unknown jury reducer {reducer!r}; known: {', '.join(sorted(REDUCERS))}")
            self.reducer_name, self.reduce = reducer, REDUCERS[reducer]
        else:
            self.reducer_name = f"{reducer.__module__}.{reducer.__qualname__}"
            self.reduce = reducer

    def accepts(self, d: DataDefinition) -> bool:
        """A definition that allows the jury tier."""
        return "jury" in d.tiers

    async def decide(self, run: TierRun, items: Sequence[Pending]) -> Decisions:
        """Every item decided: the reduced vote, a split, or a juror's failure."""
        outcomes = await asyncio.gather(*(run.caller.ask("jury", m, run.job, items) for m in self.members))
        return self.judge(run, items, outcomes)

    async def decide_many(self, batch_id: str, batch: Sequence[tuple[TierRun, Sequence[Pending]]]) -> list[Decisions]:
        """`decide` for several units of one layer: each juror ONE call over all of them, in parallel."""
        jobs = [(run.job, items) for run, items in batch]
        caller = run_caller(batch)
        by_juror = await asyncio.gather(*(caller.ask_many("jury", m, batch_id, jobs) for m in self.members))
        return [self.judge(run, items, [o[n] for o in by_juror]) for n, (run, items) in enumerate(batch)]

    def judge(self, run: TierRun, items: Sequence[Pending], outcomes: Sequence[Outcome]) -> Decisions:
        """The decisions the jurors' outcomes (one per member, in order) give about the unit's items."""
        seats = len(self.members)
        shares = [o.shares(len(items)) for o in outcomes]
        out: dict[int, AtomicDatum | Pending] = {}
        for k, p in enumerate(items):
            tokens, cost = p.tokens, p.cost_usd
            votes: list[tuple[ModelSpec, ItemAnswer]] = []
            for m, o, share in zip(self.members, outcomes, shares, strict=True):
                if o.answers is not None:
                    votes.append((m, o.answers[p.definition.id]))
                    tokens += share[k][0]
                    cost += share[k][1]
            prior = [f"{op.label}: {op.answer.value} @ {op.answer.confidence:.2f}" for op in p.opinions]
            detail = ", ".join([*prior, *(f"{m.name}: {a.value}" for m, a in votes)])
            value = self.reduce([a.value for _, a in votes], seats)
            if value is not None:
                agreeing = [a for _, a in votes if a.value == value]
                pointers: list[EvidencePointer] = []
                notes: list[str] = []
                for a in agreeing:
                    found, note = pointer(a, shown(p))
                    pointers += [q for q in found if q not in pointers]
                    if note and note not in notes:
                        notes.append(note)
                reason = "; ".join([f"jury {len(agreeing)}/{seats} ({detail})",
                                    *(a.reason.strip() for a in agreeing[:1] if a.reason.strip()), *notes])
                out[p.index] = model_datum(run, p, value=value, tier="jury", reason=reason,
                                           evidence=tuple(pointers), tokens=tokens, cost=cost)
            elif len(votes) == seats:
                out[p.index] = model_datum(run, p, value="uncollected", tier="jury",
                                           reason=f"{JURY_SPLIT}: {detail}", tokens=tokens, cost=cost)
            else:
                failure = next(o.failure for o in outcomes if o.answers is None)
                out[p.index] = model_datum(run, p, value="uncollected", tier="jury", reason=failure,
                                           tokens=tokens, cost=cost)
        return out
