"""The audit's re-collection: a sample of (unit, component) pairs collected again by a second rater.

A second rater is a second collector (`evaluators/collect/cascade.py`): `Cascade(tiers=[ModelTier(spec)],
rater=audit_rater(spec))` over the project's cache, redactor and approved templates, so the rater sees exactly
what the primary's model tier sees (the same projection, redaction and prompts) and its answers are cached as
they arrive under keys of its own (the rater's label enters v). The users' units are built from the store by the
pipeline's own reader and collected by the kernel's `collect_user` under the local executor, as a run collects;
only the sampled units and components are handed to the rater. Its data go to `atomic_data` with rater
`audit:<model>`, beside the primary's, which nothing here writes.

The audit asks the model every judgment of the sampled components, those the suite leaves to rules included (the
audit checks rules against models): an audited definition is the suite's with the small-model tier only. Facts
(measured quantities: latency, turn counts) are no judgment two raters could agree on and are not asked.

A rater of the family of a datum's collector is refused before any call (the jury's rule: a family prefers its
own answers), naming both models.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from pydantic import Field

from agent_factory.adapters.model import EvidencePointer
from agent_factory.errors import SpecError
from agent_factory.evaluators import kernel
from agent_factory.evaluators.collect import Budget, Cascade, DatumCache, ModelConfig, ModelSpec, ModelTier, audit_rater
from agent_factory.evaluators.collect.backends import BackendFactory
from agent_factory.evaluators.collect.redact import Redactor
from agent_factory.evaluators.core import AtomicDatum, ComponentSpec, DataDefinition, EngagementView, Layer, Projection
from agent_factory.evaluators.core.columns import DataColumns, UnitInput
from agent_factory.evaluators.core.memo import run_memos
from agent_factory.evaluators.core.registry import Unit
from agent_factory.evaluators.kernel import CollectPlan, DatumBatch, UserUnits
from agent_factory.factory.executors.local import LocalExecutor
from agent_factory.factory.pipeline.engine import definitions_by_layer
from agent_factory.factory.pipeline.units import iter_user_units
from agent_factory.factory.store import Store
from agent_factory.factory.store.audit import primary_collectors, sampled_units
from agent_factory.factory.store.data import DataBatch
from agent_factory.factory.store.inputs import injection_pointers
from agent_factory.frozen import Frozen
from agent_factory.knowledge_packs import KnowledgePack

VERSION = "1"

NOT_IN_STORE = "unit not in the store's last run (run the suite first)"
"""Why a sampled unit was not re-collected: no run has built it."""
UNKNOWN_COMPONENT = "component not in the suite"
"""Why a sampled pair was not re-collected: the suite has no such component."""
FACT = "a fact (a measured quantity), not a judgment: not asked of a rater"
"""Why a definition is left out of the re-collection."""


class RaterCollection(Frozen):
    """What one audit rater's re-collection did."""

    rater: str
    """`audit:<model-id>`."""
    model_calls: int = Field(ge=0)
    """Requests sent to the model (every attempt; cached answers are none)."""
    tokens: int = Field(ge=0)
    """Tokens the calls reported."""
    written: int = Field(ge=0)
    """Data written to `atomic_data` (uncollected ones included: a missing label, recorded with its reason)."""
    collected: int = Field(ge=0)
    """Of those, values the model gave in this re-collection."""
    reused: int = Field(ge=0)
    """Of those, values found in the cache (an unchanged audit asks nothing again)."""
    uncollected: dict[str, int] = Field(default_factory=dict)
    """Data left uncollected, by reason category (budget, model error, ...)."""


class Recollection(Frozen):
    """What a re-collection did: per rater, and what of the sample it could not take."""

    run_id: str
    """The `run_id` its data were written under."""
    units: int = Field(ge=0)
    """Sampled units re-collected (found in the store)."""
    items: tuple[str, ...] = ()
    """The items asked (every judgment of the sampled components)."""
    raters: tuple[RaterCollection, ...] = ()
    """Per rater, in the order given."""
    not_collected: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """Reason -> the sampled units or items it applies to (units not in the store, components not in the suite,
    facts left out)."""

    @property
    def model_calls(self) -> int:
        """Model calls of every rater."""
        return sum(r.model_calls for r in self.raters)

    @property
    def tokens(self) -> int:
        """Tokens of every rater."""
        return sum(r.tokens for r in self.raters)


RULE_EVIDENCE: dict[str, tuple[str, ...]] = {
    "span": ("input", "output", "error", "request", "answer"),
    "trace": ("request", "answer", "spans.input", "spans.output", "spans.error"),
    "conversation": ("request", "answer", "spans.error"),
    "engagement": ("request", "answer", "spans.error"),
}
"""What a model rater sees of a rule-only item that declares no evidence of its own: what its rule reads (a span's
input, output and error; a turn's spans). A rule needs no projection, so such an item carries the default
(request and answer), which for a span's error or a turn's tool calls shows the model nothing to judge."""


def audit_definition(d: DataDefinition) -> DataDefinition:
    """The definition a second rater answers: the suite's, asked of the small-model tier only (a rule-only item
    too: the audit checks rules against models, shown what the rule reads, `RULE_EVIDENCE`), with no jury
    demanded (the rater is one model) and admitted (retiring an item changes nothing of what the rater is asked,
    so its cached answers stay valid)."""
    update: dict[str, object] = {"tiers": ("small_model",), "demands_jury": False, "admitted": True}
    if d.tiers == ("rule",) and d.projection == Projection():
        update["projection"] = Projection(fields=RULE_EVIDENCE[d.layer])
    return d.model_copy(update=update)


def check_families(raters: Sequence[ModelSpec], collectors: Iterable[tuple[str, str, str]]) -> None:
    """Refuse, in one line naming both, a rater of the family of a model that collected a datum it would audit
    (`collectors`: (item, collector, family), a jury's family its members' joined by commas)."""
    found = list(collectors)
    for spec in raters:
        for item, collector, families in found:
            if spec.family in families.split(","):
                raise SpecError(
                    f"audit rater {spec.name} ({spec.family}) is of the family of {collector} ({families}), which "
                    f"collected the primary data of {item}: a rater must come from another family (a family prefers "
                    f"its own answers); choose another model or give it an explicit `family`")


@dataclass(frozen=True)
class _Sampled:
    """A kernel collector handing the cascade only the sampled units, each with its sampled components' items:
    the kernel builds and visits every unit of a user, the audit asks about a few."""

    cascade: Cascade
    wanted: dict[tuple[Layer, str], frozenset[str]]
    """(layer, unit id) -> the components sampled on it."""

    def _pick(self, layer: Layer, unit_id: str, definitions: Sequence[DataDefinition]) -> list[DataDefinition]:
        comps = self.wanted.get((layer, unit_id), frozenset())
        return [d for d in definitions if d.component in comps]

    async def collect_units(
        self, *, layer: Layer, units: Sequence[UnitInput], definitions: Sequence[DataDefinition],
        pack: KnowledgePack, context: EngagementView | None = None,
    ) -> DataColumns:
        """The sampled units of `units`, grouped by the components sampled on them, through the cascade (a
        conversation's sampled turns still go in one call per group, as the cascade batches them)."""
        groups: dict[frozenset[str], list[UnitInput]] = {}
        for u in units:
            comps = self.wanted.get((layer, u.unit_id))
            if comps:
                groups.setdefault(comps, []).append(u)
        out = DataColumns()
        for comps, us in sorted(groups.items(), key=lambda g: sorted(g[0])):
            ds = [d for d in definitions if d.component in comps]
            if ds:
                out.extend(await self.cascade.collect_units(layer=layer, units=us, definitions=ds, pack=pack,
                                                            context=context))
        return out

    async def collect(
        self, *, unit_id: str, layer: Layer, unit: Unit, definitions: Sequence[DataDefinition],
        pack: KnowledgePack, injection_ranges: Sequence[EvidencePointer] = (),
        context: EngagementView | None = None,
    ) -> list[AtomicDatum]:
        """One unit: its sampled components' items, or nothing when it was not sampled."""
        ds = self._pick(layer, unit_id, definitions)
        if not ds:
            return []
        return await self.cascade.collect(unit_id=unit_id, layer=layer, unit=unit, definitions=ds, pack=pack,
                                          injection_ranges=injection_ranges, context=context)


class _Job:
    """One rater's pass over the sampled users for the local executor: units read here, the kernel's collection
    of each user, each user's data queued for the store as it finishes."""

    def __init__(self, store: Store, *, plan: CollectPlan, collector: _Sampled, window_days: float,
                 data: DataBatch) -> None:
        self.store, self.plan, self.collector, self.data = store, plan, collector, data
        self.window_days = window_days
        self.written = 0

    def units(self, keys: Collection[str] | None) -> Iterable[UserUnits]:
        return iter_user_units(self.store, window_days=self.window_days, horizon=self.store.horizon(), users=keys)

    async def work(self, u: UserUnits) -> DatumBatch:
        return await kernel.collect_user(u, self.plan, self.collector)

    def sink(self, batch: DatumBatch) -> None:
        self.written += len(batch.columns)
        self.data.add(batch.columns)


def recollect(
    store: Store, *, specs: Sequence[ComponentSpec], pack: KnowledgePack, sample: Iterable[tuple[str, str]],
    raters: Sequence[ModelSpec], config: ModelConfig, cache: DatumCache, redactor: Redactor,
    templates: Path | None = None, run_id: str | None = None, backend_factory: BackendFactory | None = None,
) -> Recollection:
    """Re-collect every judgment of the sampled components on the sampled units (`sample`: (unit_id, component)
    pairs) with each rater in `raters`, into `atomic_data` as rater `audit:<model>`.

    `store` is open for writing; `specs` and `pack` are the suite's; `config` gives the retries, concurrency,
    batching and per-rater budget (its models are not used); `cache`, `redactor` and `templates` are the primary
    collector's (`ProjectParts`), so the rater sees what the primary's model tier sees and its answers are cached
    as they arrive. A rater of the family of a model that collected an audited primary datum is refused
    (`SpecError`) before any call. `run_id` (default: a fresh id) is what the data are written under."""
    run_id = run_id or f"audit-{uuid.uuid4().hex[:12]}"
    specs_by_name: dict[str, ComponentSpec] = {s.name: s for s in specs}
    pairs = sorted(set(sample))
    not_collected: dict[str, set[str]] = {}
    for _unit_id, comp in pairs:
        if comp not in specs_by_name:
            not_collected.setdefault(UNKNOWN_COMPONENT, set()).add(comp)
    found = sampled_units(store, (u for u, _c in pairs))
    located: dict[str, list[tuple[Layer, str]]] = {}
    for unit_id, layer, user_key in found:
        located.setdefault(unit_id, []).append((cast(Layer, layer), user_key))
    missing = {u for u, _c in pairs if u not in located}
    if missing:
        not_collected[NOT_IN_STORE] = missing

    by_layer = definitions_by_layer([specs_by_name[c] for c in sorted({c for _u, c in pairs} & set(specs_by_name))],
                                    pack)
    facts = {d.id for comps in by_layer.values() for ds in comps.values() for d in ds if d.kind == "fact"}
    if facts:
        not_collected[FACT] = facts
    defs: dict[Layer, dict[str, list[DataDefinition]]] = {
        layer: {c: [audit_definition(d) for d in ds if d.kind != "fact"] for c, ds in comps.items()}
        for layer, comps in by_layer.items()}
    wanted: dict[tuple[Layer, str], set[str]] = {}
    for unit_id, comp in pairs:
        for layer, _key in located.get(unit_id, ()):
            if defs[layer].get(comp):
                wanted.setdefault((layer, unit_id), set()).add(comp)
    items = sorted({d.id for (layer, _u), comps in wanted.items() for c in comps for d in defs[layer][c]})
    units = sorted({u for _layer, u in wanted})
    check_families(raters, primary_collectors(store, units=units, items=items))

    users = sorted({key for unit_id in units for _layer, key in located[unit_id]})
    plan = CollectPlan(definitions={layer: {c: ds for c, ds in comps.items() if ds} for layer, comps in defs.items()},
                       pack=pack, all_segments=frozenset(s.name for s in specs if s.all_segments),
                       injections=injection_pointers(store))
    chosen = {(layer, u): frozenset(cs) for (layer, u), cs in wanted.items()}
    outcomes: list[RaterCollection] = []
    seen: set[str] = set()
    for spec in raters:
        rater = audit_rater(spec)
        if rater in seen:
            continue
        seen.add(rater)
        cascade = Cascade(config, tiers=[ModelTier(spec, escalate_below=config.escalate_below)], rater=rater,
                          cache=cache, budget=Budget(config.budget), redactor=redactor, templates=templates,
                          backend_factory=backend_factory)
        data = DataBatch(store, run_id=run_id)
        job = _Job(store, plan=plan, collector=_Sampled(cascade, chosen), window_days=pack.thresholds.window_days,
                   data=data)
        if users:
            with run_memos():
                LocalExecutor(concurrency=config.concurrency).run(users, source=job.units, work=job.work,
                                                                  sink=job.sink)
        data.flush()
        outcomes.append(RaterCollection(
            rater=rater, model_calls=cascade.model_calls, tokens=cascade.tokens, written=job.written,
            collected=sum(cascade.collected.values()),
            reused=cascade.reused - sum(cascade.reused_uncollected.values()),
            uncollected=dict(sorted((cascade.uncollected + cascade.reused_uncollected).items()))))
    return Recollection(run_id=run_id, units=len(units), items=tuple(items), raters=tuple(outcomes),
                        not_collected={k: tuple(sorted(v)) for k, v in sorted(not_collected.items())})


__all__ = ["FACT", "NOT_IN_STORE", "UNKNOWN_COMPONENT", "RaterCollection", "Recollection", "audit_definition",
           "check_families", "recollect"]
