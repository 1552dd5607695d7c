"""phi: the collection cascade, a composition of tiers (tiers.py). By default: rules first, a small model when
rules abstain, a cross-family jury when unsure.

For one unit and its definitions (DESIGN.md section 5):
(a) its `applies_when` rule may make it not_applicable;
(b) its rule collects it, or abstains (rules run a definition at a time over a batch of units, `collect_units`,
    and are never cached: recomputing a rule is cheaper than looking it up);
(c) a model-tier item's cached answer is reused when its key is unchanged (looked up once, before the first
    model tier);
(d) every remaining model-tier item of the unit goes to the small model in ONE structured call;
(e) items answered with confidence under `escalate_below`, or demanding a jury, go to each juror in one call
    per juror; the jury's reducer (majority by default) decides, no decision is uncollected ("jury split");
(f) anything still without a value is uncollected with the reason, never guessed.

A second rater is a second collector: `Cascade(tiers=[ModelTier(other)], rater=audit_rater(other))` over a
sample of units; its data carry its rater, and its keys differ from the primary's, whose keys do not move.

Only model answers are cached: never rule data, nor uncollected data a rerun could fix (no model configured,
budget, model errors). A unit's data are written together when the unit is done, and every model answer the
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
from agent_factory.knowledge_packs import KnowledgePack

_RATER = re.compile(r"^(primary|audit:.+)$")


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

        The leading rule tiers decide a definition at a time over all the units; what they leave goes, unit by
        unit and concurrently, to the model tiers (all of a unit's items in one call per tier)."""
        for d in definitions:
            if d.layer != layer:
                raise SpecError(f"{d.id} is a {d.layer}-layer definition; it cannot be collected on {layer} units")
        out = DataColumns()
        left: list[list[Pending]] = [[] for _ in units]
        families = self._families
        if families and families[0][0] == "rule" and all(isinstance(t, RuleTier) for t in families[0][1]):
            rule_tiers: tuple[RuleTier, ...] = families[0][1]  # type: ignore[assignment]
            families = families[1:]
            for i, d in enumerate(definitions):
                todo = list(range(len(units)))
                for t in rule_tiers:
                    if todo and t.accepts(d):
                        chosen = [units[k] for k in todo]
                        kept = t.decide_columns(d, chosen, keys=self.keys, rater=self.rater, layer=layer, pack=pack,
                                                context=context, out=out)
                        todo = [todo[k] for k in kept]
                for k in todo:
                    left[k].append(Pending(i, d))
            self._count_columns(out, 0)
        else:
            for k in range(len(units)):
                left[k] = [Pending(i, d) for i, d in enumerate(definitions)]
        if not any(left):
            return out
        if not families:
            self._no_model(out, layer, units, left)
            return out
        jobs = [(UnitJob(unit_id=u.unit_id, layer=layer, unit=u.unit, pack=pack,
                         injection_ranges=u.injection_ranges, context=context), ps)
                for u, ps in zip(units, left, strict=True) if ps]
        for data in await asyncio.gather(*(self._through(families, job, ps) for job, ps in jobs)):
            out.add_data(data)
        return out

    def _no_model(self, out: DataColumns, layer: Layer, units: Sequence[UnitInput], left: list[list[Pending]]) -> None:
        """What no tier of this collector can take: uncollected, a definition at a time."""
        by_def: dict[int, tuple[DataDefinition, list[str]]] = {}
        for u, ps in zip(units, left, strict=True):
            for p in ps:
                by_def.setdefault(p.index, (p.definition, []))[1].append(u.unit_id)
        for _i, (d, ids) in sorted(by_def.items()):
            model_tiers = [t for t in d.tiers if t != "rule"]
            tier: Tier = model_tiers[0] if model_tiers else "small_model"
            out.add_column(layer=layer, item=d.id, item_version=d.version, collector=self.keys.model_identity(tier),
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
        self, families: Sequence[tuple[KeyFamily, tuple[CollectorTier, ...]]], job: UnitJob, undecided: list[Pending],
    ) -> list[AtomicDatum]:
        """The items of one unit the leading rule tiers left, through the remaining tiers: one datum each."""
        out: dict[int, AtomicDatum] = {}
        reused: set[int] = set()
        for family, group in families:
            entering: list[Pending] = []
            passed: list[Pending] = []
            for p in undecided:
                for t in group:
                    if t.accepts(p.definition):
                        break
                else:
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
            left = await self._run_group(group, job, entering, out) if entering else []
            undecided = sorted(passed + left, key=_index) if passed and left else passed or left
        for p in undecided:
            model_tiers = [t for t in p.definition.tiers if t != "rule"]
            tier: Tier = model_tiers[0] if model_tiers else "small_model"
            out[p.index] = self._record(unit_datum(job, self.rater, p, value="uncollected", reason=NO_MODEL,
                                                   collector=self.keys.model_identity(tier)))
        self._store([d for i, d in out.items() if i not in reused])
        return [out[i] for i in sorted(out)]

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
