"""phi: the collection cascade, a composition of tiers (tiers.py). By default: rules first, a small model when
rules abstain, a cross-family jury when unsure.

For one unit and its definitions (docs/method.md section 5):
(a) its `applies_when` rule may make it not_applicable;
(b) its rule collects it, or abstains (rules run a definition at a time over a batch of units, `collect_units`,
    and are never cached: recomputing a rule is cheaper than looking it up);
(c) a model-tier item's cached answer is reused when its key is unchanged (looked up once, before the first
    model tier);
(d) every remaining model-tier item of the unit (of every turn of the conversation, with
    `batch = "conversation"`) goes to the small model in ONE structured call;
(e) items answered with confidence under `escalate_below`, or demanding a jury, go to each juror in one call
    per juror; the jury's reducer (majority by default) decides, no decision is uncollected ("jury split");
(f) anything still without a value is uncollected with the reason, never guessed.

A second rater is a second collector: `Cascade(tiers=[ModelTier(other)], rater=audit_rater(other))` over a
sample of units; its data carry its rater, and its keys differ from the primary's, whose keys do not move.

Only model answers are cached: never rule data, nor uncollected data a rerun could fix (no model configured,
budget, model errors). A user's data of one layer are written together when collected, and every model answer the
moment it arrives, so a killed run repeats no answered call and ends with the same data.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent_factory.adapters.model import EvidencePointer
from agent_factory.errors import SpecError
from agent_factory.evaluators.collect.backends import BackendFactory
from agent_factory.evaluators.collect.budget import Budget
from agent_factory.evaluators.collect.cache import DatumCache
from agent_factory.evaluators.collect.caller import ModelCaller
from agent_factory.evaluators.collect.config import ModelConfig, ModelSpec, check_jury
from agent_factory.evaluators.collect.keys import CollectorKeys
from agent_factory.evaluators.collect.model_tiers import JuryTier, ModelTier
from agent_factory.evaluators.collect.project import project
from agent_factory.evaluators.collect.prompt import BATCH_UNIT
from agent_factory.evaluators.collect.reasons import NO_JURY, NO_MODEL, CascadeCounters, is_transient, reason_category
from agent_factory.evaluators.collect.redact import Redactor, load_redactor
from agent_factory.evaluators.collect.tiers import (
    CollectorTier,
    KeyFamily,
    Pending,
    RuleTier,
    TierRun,
    UnitJob,
    unit_datum,
)
from agent_factory.evaluators.core.columns import DataColumns, UnitInput
from agent_factory.evaluators.core.model import PRIMARY_RATER, AtomicDatum, DataDefinition, Layer, Tier
from agent_factory.evaluators.core.registry import EngagementView
from agent_factory.evaluators.kernel import UnitCall
from agent_factory.knowledge_packs import KnowledgePack

_RATER = re.compile(r"^(primary|audit:.+)$")
MAX_BATCH_ITEMS = 60
"""Most items one batched call asks about: a longer conversation's turns go in several calls of consecutive
turns (a turn's items are never split), so an answer stays well inside a small model's output limit."""


def audit_rater(spec: ModelSpec) -> str:
    """The rater label of a second collector answering with `spec`: `audit:<model-id>`."""
    return f"audit:{spec.name}"


def default_tiers(config: ModelConfig) -> tuple[CollectorTier, ...]:
    """The suite's cascade: rules, then the small model and the jury that `config` names."""
    tiers: list[CollectorTier] = [RuleTier()]
    if config.small is not None:
        tiers.append(ModelTier(config.small, escalate_below=config.escalate_below))
    if config.jury:
        tiers.append(JuryTier(config.jury))
    return tuple(tiers)


def _effective(config: ModelConfig, tiers: Sequence[CollectorTier]) -> ModelConfig:
    """The config the keys and identities describe: the models the tiers actually hold."""
    kinds = Counter(t.kind for t in tiers)
    twice = sorted(k for k, n in kinds.items() if n > 1)
    if twice:
        raise SpecError(f"a collector takes at most one tier of each kind; got several: {', '.join(twice)}")
    small = next((t for t in tiers if isinstance(t, ModelTier)), None)
    jury = next((t for t in tiers if isinstance(t, JuryTier)), None)
    return config.model_copy(update={
        "small": small.spec if small else None,
        "jury": jury.members if jury else (),
        "escalate_below": small.escalate_below if small else config.escalate_below,
    })


def _families(tiers: Sequence[CollectorTier]) -> list[tuple[KeyFamily, tuple[CollectorTier, ...]]]:
    """Consecutive tiers of one key family, in order: each group shares one cache lookup."""
    groups: list[tuple[KeyFamily, list[CollectorTier]]] = []
    for t in tiers:
        if groups and groups[-1][0] == t.family:
            groups[-1][1].append(t)
        else:
            groups.append((t.family, [t]))
    return [(f, tuple(ts)) for f, ts in groups]


def _first_model_tier(d: DataDefinition) -> Tier:
    """The model tier a datum nobody could collect is recorded under: the definition's first, else the small
    model."""
    return next((t for t in d.tiers if t != "rule"), "small_model")


def _index(p: Pending) -> int:
    return p.index


def _onward(later: Sequence[CollectorTier]) -> Callable[[DataDefinition], bool]:
    def accepted(d: DataDefinition) -> bool:
        return any(t.accepts(d) for t in later)

    return accepted


class Cascade:
    """The collector phi for one run: its tiers, rater, cache, budget and redactor."""

    def __init__(
        self,
        config: ModelConfig | None = None,
        *,
        tiers: Sequence[CollectorTier] | None = None,
        rater: str = PRIMARY_RATER,
        cache: DatumCache | None = None,
        budget: Budget | None = None,
        redactor: Redactor | None = None,
        backend_factory: BackendFactory | None = None,
        templates: Path | None = None,
    ) -> None:
        config = config if config is not None else ModelConfig()
        check_jury(config.jury)
        if not _RATER.match(rater):
            raise SpecError(f"rater must be `primary` or `audit:<model-id>`; got {rater!r}")
        self.tiers: tuple[CollectorTier, ...] = tuple(tiers) if tiers is not None else default_tiers(config)
        """The composition, in order."""
        self.config = _effective(config, self.tiers) if tiers is not None else config
        """The models, limits and options in effect (the tiers' models, when tiers are given)."""
        self.rater = rater
        """Who the data are from: `primary`, or `audit:<model-id>` for a second collector."""
        self.templates = templates
        """The prompt templates: a suite's approved copy (what a person reviewed); None: the package's."""
        self.cache = cache if cache is not None else DatumCache(None)
        self.budget = budget if budget is not None else Budget(self.config.budget)
        self.redactor = redactor if redactor is not None else load_redactor(self.config.redactor)
        jury = next((t for t in self.tiers if isinstance(t, JuryTier)), None)
        self.keys = CollectorKeys(self.config, self.redactor, templates=templates, rater=rater,
                                  reducer=jury.reducer_name if jury else "majority")
        self.caller = ModelCaller(cache=self.cache, budget=self.budget, retry=self.config.retry,
                                  concurrency=self.config.concurrency, redactor=self.redactor,
                                  templates=templates, backend_factory=backend_factory)
        self._families = _families(self.tiers)
        self._counts = CascadeCounters()

    # ---- counters -------------------------------------------------------------------------------

    @property
    def model_calls(self) -> int:
        """Requests sent to model providers (every attempt, retries included)."""
        return self.caller.counters.model_calls

    @property
    def tokens(self) -> int:
        """Tokens the model calls reported."""
        return self.caller.counters.tokens

    @property
    def cost_usd(self) -> float:
        """What the model calls cost, as litellm prices them."""
        return self.caller.counters.cost_usd

    @property
    def reused(self) -> int:
        """Data found in the cache (whatever their value)."""
        return self._counts.reused

    @property
    def reused_uncollected(self) -> Counter[str]:
        """Of the reused data, those cached as uncollected, by reason category."""
        return self._counts.reused_uncollected

    def definition_version(self, d: DataDefinition, pack: KnowledgePack) -> str:
        """v of a definition in this cascade (every key of its data changes exactly when this does)."""
        return self.keys.definition_version(d, pack)

    @property
    def collected(self) -> Counter[str]:
        """Newly collected data by tier (rule / small_model / jury)."""
        return self._counts.collected

    @property
    def uncollected(self) -> Counter[str]:
        """Newly uncollected data by reason category."""
        return self._counts.uncollected

    @property
    def rules_only(self) -> bool:
        """No model tier: every datum is a rule's or recorded uncollected (no model configured), so a run may
        collect in worker processes (no model answer to cache, no budget to share)."""
        return all(family == "rule" for family, _tiers in self._families)

    def take_counts(self) -> CascadeCounters:
        """The counters so far, reset to zero (a worker process hands its part of a run's counts back)."""
        counts, self._counts = self._counts, CascadeCounters()
        return counts

    def absorb(self, counts: CascadeCounters) -> None:
        """Add counts a worker's copy of this cascade made (`take_counts`)."""
        self._counts.reused += counts.reused
        self._counts.reused_uncollected.update(counts.reused_uncollected)
        self._counts.collected.update(counts.collected)
        self._counts.uncollected.update(counts.uncollected)

    def _record(self, datum: AtomicDatum, *, reused: bool = False) -> AtomicDatum:
        """Count a datum returned by this run."""
        if reused:
            self._counts.reused += 1
            if datum.value == "uncollected":
                self._counts.reused_uncollected[reason_category(datum.reason or "")] += 1
        elif datum.value == "uncollected":
            self._counts.uncollected[reason_category(datum.reason or "")] += 1
        else:
            self._counts.collected[datum.collector.tier] += 1
        return datum

    def _store(self, fresh: Sequence[AtomicDatum]) -> None:
        """Cache a unit's new model answers at once (not rule data, nor data no model was asked for, nor
        uncollected data a rerun could collect)."""
        keep = [d for d in fresh if d.key and d.collector.tier != "rule"
                and not (d.value == "uncollected" and is_transient(d.reason))]
        if keep:
            self.cache.put_data(keep)

    def _count_columns(self, cols: DataColumns, start: int) -> None:
        """Count the data appended to `cols` from row `start` on (none of them reused)."""
        for tier, value, reason in zip(cols.tier[start:], cols.value[start:], cols.reason[start:], strict=True):
            if value == "uncollected":
                self._counts.uncollected[reason_category(reason or "")] += 1
            else:
                self._counts.collected[tier] += 1

    # ---- the composition ------------------------------------------------------------------------

    async def collect_units(
        self,
        *,
        layer: Layer,
        units: Sequence[UnitInput],
        definitions: Sequence[DataDefinition],
        pack: KnowledgePack,
        context: EngagementView | None = None,
    ) -> DataColumns:
        """Every definition on every unit of one layer (one user's: `context` is their window), as columns.

        The leading rule tiers decide a definition at a time over all the units; what they leave goes to the
        model tiers: all of a unit's items in one call per tier, or, with `batch = "conversation"`, all the
        items of a conversation's turns in one call per tier."""
        for d in definitions:
            if d.layer != layer:
                raise SpecError(f"{d.id} is a {d.layer}-layer definition; it cannot be collected on {layer} units")
        out = DataColumns()
        families, left = self._rules(layer, units, definitions, pack=pack, context=context, out=out)
        if not any(left):
            return out
        if not families:
            self._no_model(out, layer, units, left)
            return out
        jobs = [(UnitJob(unit_id=u.unit_id, layer=layer, unit=u.unit, pack=pack,
                         injection_ranges=u.injection_ranges, context=context), ps)
                for u, ps in zip(units, left, strict=True) if ps]
        batches: dict[str, list[tuple[UnitJob, list[Pending]]]] = {}
        for job, ps in jobs:
            conv = getattr(job.unit, "conversation_id", None) if self.batch == "conversation" else None
            batches.setdefault(conv if isinstance(conv, str) and layer in BATCH_UNIT else job.unit_id,
                               []).append((job, ps))
        done = await asyncio.gather(*(self._through(families, bid, [j for j, _ in b], [ps for _, ps in b])
                                      for bid, b in batches.items()))
        for batch in done:
            for data in batch:
                out.add_data(data)
        return out

    def _rules(
        self, layer: Layer, units: Sequence[UnitInput], definitions: Sequence[DataDefinition], *,
        pack: KnowledgePack, context: EngagementView | None, out: DataColumns,
    ) -> tuple[Sequence[tuple[KeyFamily, tuple[CollectorTier, ...]]], list[list[Pending]]]:
        """The leading rule tiers over the units, a definition at a time, into `out`: the families left, and
        each unit's items they left undecided."""
        families = self._families
        if not (families and families[0][0] == "rule" and all(isinstance(t, RuleTier) for t in families[0][1])):
            return families, [[Pending(i, d) for i, d in enumerate(definitions)] for _ in units]
        start = len(out)
        rule_tiers: tuple[RuleTier, ...] = families[0][1]  # type: ignore[assignment]
        left: list[list[Pending]] = [[] for _ in units]
        for i, d in enumerate(definitions):
            todo = list(range(len(units)))
            for t in rule_tiers:
                if todo and t.accepts(d):
                    kept = t.decide_columns(d, [units[k] for k in todo], keys=self.keys, rater=self.rater,
                                            layer=layer, pack=pack, context=context, out=out)
                    todo = [todo[k] for k in kept]
            for k in todo:
                left[k].append(Pending(i, d))
        self._count_columns(out, start)
        return families[1:], left

    def _no_model(self, out: DataColumns, layer: Layer, units: Sequence[UnitInput], left: list[list[Pending]]) -> None:
        """What no tier of this collector can take: uncollected, a definition at a time."""
        by_def: dict[int, tuple[DataDefinition, list[str]]] = {}
        for u, ps in zip(units, left, strict=True):
            for p in ps:
                by_def.setdefault(p.index, (p.definition, []))[1].append(u.unit_id)
        for _i, (d, ids) in sorted(by_def.items()):
            out.add_column(layer=layer, item=d.id, item_version=d.version,
                           collector=self.keys.model_identity(_first_model_tier(d)),
                           rater=self.rater, unit_ids=ids, values=["uncollected"] * len(ids), facts=[None] * len(ids),
                           reasons=[NO_MODEL] * len(ids), evidence=[()] * len(ids))
            self._counts.uncollected[NO_MODEL] += len(ids)

    async def collect(
        self,
        *,
        unit_id: str,
        layer: Layer,
        unit: Any,
        definitions: Sequence[DataDefinition],
        pack: KnowledgePack,
        injection_ranges: Sequence[EvidencePointer] = (),
        context: EngagementView | None = None,
    ) -> list[AtomicDatum]:
        """One datum per definition, in order: `collect_units` over this one unit. `context` is the user's window,
        for rules (Results) that judge a session by what followed it."""
        cols = await self.collect_units(layer=layer, units=(UnitInput(unit_id, unit, injection_ranges),),
                                        definitions=definitions, pack=pack, context=context)
        order = {d.id: i for i, d in reversed(list(enumerate(definitions)))}
        return sorted(cols.iter_data(), key=lambda x: order[x.item])

    async def _through(
        self, families: Sequence[tuple[KeyFamily, tuple[CollectorTier, ...]]], batch_id: str,
        jobs: Sequence[UnitJob], undecided: list[list[Pending]],
    ) -> list[list[AtomicDatum]]:
        """The items the leading rule tiers left on several units of one layer (one unit, or the turns of
        conversation `batch_id`), through the remaining tiers: each unit's data, in item order. Each tier asks
        one call (per juror) about the items of all the units, each answer keyed by its unit."""
        outs: list[dict[int, AtomicDatum]] = [{} for _ in jobs]
        reused: list[set[int]] = [set() for _ in jobs]
        for family, group in families:
            admitted = [self._admit(family, group, job, todo, out, seen)
                        for job, todo, out, seen in zip(jobs, undecided, outs, reused, strict=True)]
            if all(hasattr(t, "decide_many") for t in group):
                lefts = await self._run_group_many(group, batch_id, jobs, [e for e, _ in admitted], outs)
            else:
                lefts = [await self._run_group(group, job, entering, out) if entering else []
                         for job, (entering, _), out in zip(jobs, admitted, outs, strict=True)]
            undecided = [sorted(passed + left, key=_index) if passed and left else passed or left
                         for (_, passed), left in zip(admitted, lefts, strict=True)]
        data: list[list[AtomicDatum]] = []
        for job, todo, out, seen in zip(jobs, undecided, outs, reused, strict=True):
            for p in todo:
                out[p.index] = self._record(unit_datum(
                    job, self.rater, p, value="uncollected", reason=NO_MODEL,
                    collector=self.keys.model_identity(_first_model_tier(p.definition))))
            self._store([d for i, d in out.items() if i not in seen])
            data.append([out[i] for i in sorted(out)])
        return data

    def _admit(
        self, family: KeyFamily, group: Sequence[CollectorTier], job: UnitJob, undecided: list[Pending],
        out: dict[int, AtomicDatum], reused: set[int],
    ) -> tuple[list[Pending], list[Pending]]:
        """A family's entry for one unit: (the items entering the group, keyed and, for a model family, not in the
        cache; the items no tier of the group takes); what the cache or the keying decides goes to `out`."""
        entering: list[Pending] = []
        passed: list[Pending] = []
        for p in undecided:
            if not any(t.accepts(p.definition) for t in group):
                passed.append(p)
                continue
            keyed = self._enter(family, group, job, p)
            if isinstance(keyed, Pending) and family == "model":
                hit = self.cache.get_datum(keyed.key)
                if hit is None:
                    entering.append(keyed)
                    continue
                out[p.index] = self._record(hit, reused=True)
                reused.add(p.index)
            elif isinstance(keyed, Pending):
                entering.append(keyed)
            else:
                out[p.index] = self._record(keyed)
        return entering, passed

    def _enter(
        self, family: KeyFamily, group: Sequence[CollectorTier], job: UnitJob, p: Pending,
    ) -> Pending | AtomicDatum:
        """The item keyed for this family (with its evidence for the model family), or the datum saying why no
        tier of the family can collect it."""
        d = p.definition
        if family == "rule":
            return p
        if d.demands_jury and not any(t.kind == "jury" and t.accepts(d) for t in group):
            return unit_datum(job, self.rater, p, value="uncollected", reason=NO_JURY,
                              collector=self.keys.model_identity("jury"))
        evidence = project(job.unit, job.layer, d.projection)
        return Pending(p.index, d, key=self.keys.model_key(d, evidence, job.injection_ranges), evidence=evidence,
                       opinions=p.opinions, tokens=p.tokens, cost_usd=p.cost_usd)

    async def _run_group(
        self, group: Sequence[CollectorTier], job: UnitJob, items: list[Pending], out: dict[int, AtomicDatum],
    ) -> list[Pending]:
        """Each tier of the group decides what it can; the items no tier decided, for the next group.

        A tier gets the items it accepts in order; what it leaves undecided goes after the items it was not
        given, so the next tier's prompt lists the items handed on last (as it always has: prompts, and so the
        answers' call keys, stay the same)."""
        for n, tier in enumerate(group):
            mine: list[Pending] = []
            others: list[Pending] = []
            for p in items:
                (mine if tier.accepts(p.definition) else others).append(p)
            if not mine:
                continue
            run = TierRun(job=job, keys=self.keys, caller=self.caller, rater=self.rater,
                          onward=_onward(group[n + 1:]))
            decisions = await tier.decide(run, mine)
            handed: list[Pending] = []
            for p in mine:
                answer = decisions.get(p.index)
                if isinstance(answer, AtomicDatum):
                    out[p.index] = self._record(answer)
                else:
                    handed.append(answer if answer is not None else p)
            items = others + handed
        return items

    # ---- several units in one call (`batch = "conversation"`) ----------------------------------------------

    @property
    def batch(self) -> str:
        """`unit` or `conversation` (the config's `batch`): whether the kernel hands over a conversation's turns
        together, through `collect_many`."""
        return self.config.batch

    async def collect_many(
        self, *, batch_id: str, layer: Layer, units: Sequence[UnitCall], pack: KnowledgePack,
    ) -> list[list[AtomicDatum]]:
        """`collect` over several units of one layer (the turns of conversation `batch_id`), each with its own
        definitions: each unit's data in order, with the keys, cache and counts `collect` gives them, but each
        model tier asks ONE call (per juror) about the items all the units hand it, each answer keyed by its
        unit (`turn_3.<item id>`) and judged on that unit's evidence. A batch of one is a unit."""
        for u in units:
            for d in u.definitions:
                if d.layer != layer:
                    raise SpecError(f"{d.id} is a {d.layer}-layer definition; it cannot be collected on {layer} "
                                    f"{u.unit_id}")
        if len(units) <= 1 or layer not in BATCH_UNIT:
            return [await self.collect(unit_id=u.unit_id, layer=layer, unit=u.unit, definitions=u.definitions,
                                       pack=pack, injection_ranges=u.injection_ranges) for u in units]
        ruled: list[DataColumns] = []
        lefts: list[list[Pending]] = []
        families: Sequence[tuple[KeyFamily, tuple[CollectorTier, ...]]] = self._families
        for u in units:
            cols = DataColumns()
            families, (left,) = self._rules(layer, (UnitInput(u.unit_id, u.unit, u.injection_ranges),),
                                            u.definitions, pack=pack, context=None, out=cols)
            ruled.append(cols)
            lefts.append(left)
        if families:
            jobs = [UnitJob(unit_id=u.unit_id, layer=layer, unit=u.unit, pack=pack,
                            injection_ranges=u.injection_ranges) for u in units]
            modelled = await self._through(families, batch_id, jobs, lefts)
        else:
            modelled = [[] for _ in units]
            for k, u in enumerate(units):
                self._no_model(ruled[k], layer, (UnitInput(u.unit_id, u.unit),), [lefts[k]])
        out: list[list[AtomicDatum]] = []
        for u, cols, data in zip(units, ruled, modelled, strict=True):
            order = {d.id: i for i, d in reversed(list(enumerate(u.definitions)))}
            out.append(sorted([*cols.iter_data(), *data], key=lambda x: order[x.item]))
        return out

    async def _run_group_many(
        self, group: Sequence[CollectorTier], batch_id: str, jobs: Sequence[UnitJob], items: list[list[Pending]],
        outs: list[dict[int, AtomicDatum]],
    ) -> list[list[Pending]]:
        """`_run_group` over several units at once: each tier decides the items of every unit in one
        `decide_many` (per run of consecutive units holding at most MAX_BATCH_ITEMS items)."""
        for n, tier in enumerate(group):
            mine: list[list[Pending]] = []
            others: list[list[Pending]] = []
            for its in items:
                mine.append([p for p in its if tier.accepts(p.definition)])
                others.append([p for p in its if not tier.accepts(p.definition)])
            asked = [j for j, m in enumerate(mine) if m]
            if not asked:
                continue
            onward = _onward(group[n + 1:])
            runs = {j: TierRun(job=jobs[j], keys=self.keys, caller=self.caller, rater=self.rater, onward=onward)
                    for j in asked}
            chunks = _chunks(asked, [len(m) for m in mine])
            decided = await asyncio.gather(*(
                tier.decide_many(batch_id, [(runs[j], mine[j]) for j in chunk])  # type: ignore[attr-defined]
                for chunk in chunks))
            handed: dict[int, list[Pending]] = {}
            for chunk, decisions in zip(chunks, decided, strict=True):
                for j, dec in zip(chunk, decisions, strict=True):
                    handed[j] = []
                    for p in mine[j]:
                        answer = dec.get(p.index)
                        if isinstance(answer, AtomicDatum):
                            outs[j][p.index] = self._record(answer)
                        else:
                            handed[j].append(answer if answer is not None else p)
            items = [others[j] + handed.get(j, []) for j in range(len(items))]
        return items


def _chunks(asked: Sequence[int], sizes: Sequence[int]) -> list[list[int]]:
    """Consecutive runs of the asked units whose items add up to at most MAX_BATCH_ITEMS (a bigger unit alone)."""
    chunks: list[list[int]] = []
    total = 0
    for j in asked:
        if chunks and total + sizes[j] <= MAX_BATCH_ITEMS:
            chunks[-1].append(j)
            total += sizes[j]
        else:
            chunks.append([j])
            total = sizes[j]
    return chunks
