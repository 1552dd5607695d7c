"""The evaluation run, step by step: plan (what changed), execute (the kernel's collection over the users to
visit, through an executor), persist (each user's batch into the store), analyse (the kernel's analyses over the
stored data), merge (results into the store), report.

This is the only place that joins I/O (store, cache, models through the collector) with the pure parts (the
kernel, rules, analyses, the graph). Data are written as each user finishes; analyses read every analysed unit's
stored data, so a run that visits a few users still analyses everyone.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import pyarrow as pa

from agent_factory.evaluators import kernel
from agent_factory.evaluators.core import Analysis, ComponentSpec, DataDefinition, Layer
from agent_factory.evaluators.core.memo import run_memos
from agent_factory.evaluators.kernel import CollectPlan
from agent_factory.factory.executors import Executor
from agent_factory.factory.executors.local import LocalExecutor
from agent_factory.factory.executors.process import ProcessExecutor, can_fork, default_workers
from agent_factory.factory.pipeline.analyses import analyse_group
from agent_factory.factory.pipeline.graph import VERSION as GRAPH_VERSION
from agent_factory.factory.pipeline.graph import TracesState, build_graph, describe, fingerprints, reads_component
from agent_factory.factory.pipeline.parallel import MIN_USERS_FOR_WORKERS, RunCollection, ShardDone, Tally
from agent_factory.factory.pipeline.plan import Plan, make_plan
from agent_factory.factory.pipeline.report import ComponentReport, MetricReport, PlanReport, RunReport
from agent_factory.factory.pipeline.units import unit_context
from agent_factory.factory.store import Batch, Store
from agent_factory.factory.store.data import DataBatch, count_not_written_by, data_counts, drop_items
from agent_factory.factory.store.inputs import RunInputs
from agent_factory.factory.store.pipeline import save_state
from agent_factory.factory.store.results import merge_results, population_metrics, result_table
from agent_factory.factory.store.runs import record_run
from agent_factory.factory.store.turn_tables import TurnChunk
from agent_factory.factory.store.units import drop_users, load_rows
from agent_factory.heap import bulk_objects, release_free_memory
from agent_factory.knowledge_packs import KnowledgePack


class Collector(kernel.Collector, Protocol):
    """What the runner needs of the cascade (evaluators.collect.Cascade): the kernel's collector, with counters."""

    @property
    def model_calls(self) -> int:
        """Requests sent to model providers so far."""

    def definition_version(self, d: DataDefinition, pack: KnowledgePack) -> str:
        """v of a definition: it changes exactly when the keys of its data do."""

    @property
    def tokens(self) -> int:
        """Tokens the model calls reported so far."""

    @property
    def cost_usd(self) -> float:
        """What the model calls cost so far."""

    @property
    def reused(self) -> int:
        """Data found in the cache so far."""

    @property
    def reused_uncollected(self) -> Counter[str]:
        """Data found in the cache as `uncollected`, by reason."""

    @property
    def collected(self) -> Counter[str]:
        """Data collected afresh, by tier."""


@dataclass(frozen=True)
class _Tally:
    """The collector's counters at one moment: a collector may outlive a run, so a report counts differences."""

    model_calls: int
    tokens: int
    cost_usd: float
    collected: int
    """Values decided by rules or models (uncollected data excluded)."""
    reused: int
    """Values found in the cache (data cached as uncollected excluded: the runner counts those as uncollected)."""

    @classmethod
    def of(cls, c: Collector) -> _Tally:
        return cls(model_calls=c.model_calls, tokens=c.tokens, cost_usd=c.cost_usd,
                   collected=sum(c.collected.values()), reused=c.reused - sum(c.reused_uncollected.values()))


_Defs = dict[Layer, dict[str, list[DataDefinition]]]


def definitions_by_layer(specs: Sequence[ComponentSpec], pack: KnowledgePack) -> _Defs:
    """Layer -> component -> definitions (`ComponentSpec.definitions_for`: Conduct's come from the clauses)."""
    out: _Defs = {"span": {}, "trace": {}, "conversation": {}, "engagement": {}}
    for spec in specs:
        for d in spec.definitions_for(pack):
            out[d.layer].setdefault(spec.name, []).append(d)
    return out


def _restrict(defs: _Defs, items: frozenset[str]) -> _Defs:
    """Only the definitions `items`, every layer kept (possibly empty)."""
    return {layer: {c: [d for d in ds if d.id in items] for c, ds in comps.items() if any(d.id in items for d in ds)}
            for layer, comps in defs.items()}


def analysis_groups(specs: Sequence[ComponentSpec], *, names: frozenset[str], admitted: set[str],
                    component_of: dict[str, str]) -> list[tuple[bool, set[str], list[Analysis]]]:
    """The analyses `names` grouped by what they read: (all segments?, the admitted items they read, analyses).
    Components that count excluded traffic (Provenance) read every segment's turns; the rest, real ones."""
    wanted = [(spec, a) for spec in specs for a in spec.analyses if a.name in names]
    out = []
    for all_segments in (False, True):
        group = [(spec, a) for spec, a in wanted if spec.all_segments == all_segments]
        if group:
            items = {i for i in admitted
                     if any(reads_component(a.reads, spec.name, component_of[i]) for spec, a in group)}
            out.append((all_segments, items, [a for _s, a in group]))
    return out


def read_layers(analyses: Sequence[Analysis]) -> set[Layer] | None:
    """The layers whose rows `analyses` read together (`Analysis.layers`); None when one may read any."""
    if any(a.layers is None for a in analyses):
        return None
    return {layer for a in analyses for layer in a.layers or ()}


class Runner:
    """Runs the pipeline graph over the store: collects what changed, reruns the analyses that read it.

    A first run (or `full=True`) collects every definition on every unit. Later runs compare the graph's
    fingerprints with the last complete run's: units of users touched by new files are rebuilt, definitions
    whose v changed are recollected on every unit, and only analyses downstream of a change rerun. With
    nothing changed, nothing is collected or analysed.

    `inputs` is what the run reads of the store before it plans (`store.inputs.read_run_inputs`), read by whoever
    assembles the run (`Project`): the constructor reads no store.
    """

    def __init__(
        self, store: Store, *, pack: KnowledgePack, collector: Collector, specs: Sequence[ComponentSpec],
        inputs: RunInputs, concurrency: int = 8, progress: Callable[[int], None] | None = None,
        full: bool = False, executor: Executor | None = None, started: float | None = None,
        workers: int | None = None,
    ) -> None:
        # `time.perf_counter()` when the work began: a report's seconds are the wall time a user waited.
        self.started = started if started is not None else time.perf_counter()
        self.store, self.pack, self.collector, self.specs = store, pack, collector, list(specs)
        # The executor of a run that stays in this process; a rules-only run over many users gets a
        # `ProcessExecutor` instead when it executes (`_executor`), unless an executor was given.
        self.executor: Executor = executor or LocalExecutor(concurrency=concurrency, progress=progress)
        self._own_executor = executor is None
        self._progress = progress
        # Worker processes for a rules-only run (`ProcessExecutor`); None: one per core (`default_workers`).
        self.workers = workers
        self.workers_used = 0
        """Processes that collected this run (1: this one; 0: nothing was collected)."""
        self.full = full
        self.defs = definitions_by_layer(self.specs, pack)
        self.by_id = {d.id: d for layer in self.defs.values() for ds in layer.values() for d in ds}
        self.component_of = {d.id: c for layer in self.defs.values() for c, ds in layer.items() for d in ds}
        # An item an audit retired (at its current version) leaves the analyses; its data stay stored, so
        # reinstating it, or approving a rewrite (a new version), needs no recollection of what is there.
        self.retired = frozenset(i for i, d in self.by_id.items() if inputs.retired.get(i) == d.version)
        self.admitted = {i for i, d in self.by_id.items() if d.admitted and i not in self.retired}
        self.run_id = uuid.uuid4().hex[:12]
        self.acc = Tally()
        self.batch = DataBatch(store, run_id=self.run_id)
        self.unit_batch = Batch(store, "units")
        by_component: dict[str, list[DataDefinition]] = {}
        for i, d in self.by_id.items():
            by_component.setdefault(self.component_of[i], []).append(d)
        self.inputs = inputs
        self.sources = self.inputs.sources
        self.injections = self.inputs.injections
        self.horizon_at = self.inputs.horizon_at
        self.horizon = self.inputs.horizon
        self.traces = TracesState(sources=self.sources, window_days=pack.thresholds.window_days)
        self.graph = build_graph(
            specs=self.specs, definitions=by_component, pack=pack, traces=self.traces,
            versions={i: collector.definition_version(d, pack) for i, d in self.by_id.items()},
            retired=self.retired,
        )
        self._plan: Plan | None = None

    @property
    def progress(self) -> Callable[[int], None] | None:
        """Called with the number of users done so far (a command's progress bar sets it after planning)."""
        return self._progress

    @progress.setter
    def progress(self, fn: Callable[[int], None] | None) -> None:
        self._progress = fn
        self.executor.progress = fn

    # ---- plan ------------------------------------------------------------------------------------

    def plan(self) -> Plan:
        """Compare the graph with the last complete run's and decide what to recompute."""
        if self._plan is None:
            self._plan = make_plan(self.store, self.graph, traces=self.traces, horizon=self.horizon, full=self.full)
        return self._plan

    def users_to_visit(self) -> int:
        """How many users this run visits (all of them when the plan says so)."""
        p = self.plan()
        if p.visit_all or p.users is None:
            return p.users_total
        return len(p.users)

    def collect_plan(self, plan: Plan) -> CollectPlan:
        """The kernel's plan: every definition for rebuilt users, the changed ones for everyone else."""
        return CollectPlan(
            definitions=self.defs, pack=self.pack, rebuilt=plan.users,
            changed=_restrict(self.defs, plan.dirty.items) if plan.dirty.items else None,
            all_segments=frozenset(s.name for s in self.specs if s.all_segments), injections=self.injections,
        )

    # ---- execute and persist ----------------------------------------------------------------------

    def execute_plan(self, plan: Plan) -> None:
        """Collect over the users the plan visits, persisting each user's batch (or each worker's shard) as it
        finishes."""
        job = RunCollection(
            self.store, plan=self.collect_plan(plan), collector=self.collector, run_id=self.run_id,
            context=unit_context(self.store, window_days=self.pack.thresholds.window_days, horizon=self.horizon_at),
            data=self.batch, units=self.unit_batch)
        self._executor(plan).collect(None if plan.visit_all else plan.users, job)
        job.flush()
        self.acc.add(job.tally)

    def _executor(self, plan: Plan) -> Executor:
        """This run's collection's executor: forked workers (`_workers`) or the runner's own."""
        workers = self.workers_used = self._workers(plan)
        if workers > 1:
            return ProcessExecutor[TurnChunk, ShardDone](workers=workers, progress=self.progress)
        return self.executor

    def _workers(self, plan: Plan) -> int:
        """Worker processes for this run's collection: more than one only for a rules-only collector, with no
        executor given, where fork exists, and over enough users to pay for starting them."""
        if not self._own_executor:
            return 1
        if self.workers is None and self.users_to_visit() < MIN_USERS_FOR_WORKERS:
            return 1
        return self._analysis_workers()

    # ---- analyse and merge -------------------------------------------------------------------------

    def analyse(self, names: frozenset[str]) -> tuple[list[pa.Table], set[str]]:
        """Rerun the analyses `names` over the stored data of the components they read: their results as
        `results` rows, one table per analysis, and the analyses that ran."""
        versions = {a.name: a.content_version for s in self.specs for a in s.analyses}
        workers = self._analysis_workers()
        tables: list[pa.Table] = []
        ran: set[str] = set()
        for all_segments, items, analyses in analysis_groups(self.specs, names=names, admitted=self.admitted,
                                                             component_of=self.component_of):
            # What the last phase freed (the collection's batches, the last group's rows) leaves the heap first.
            release_free_memory()
            obs = kernel.freeze(load_rows(self.store, items=items, all_segments=all_segments,
                                          layers=read_layers(analyses)), horizon=self.horizon)
            tables.extend(analyse_group(
                obs, analyses, self.pack, workers=workers,
                to_table=lambda results: result_table(results, run_id=self.run_id, versions=versions)))
            del obs  # one group's rows in memory at a time: the next group's load would otherwise sit beside it
            ran.update(a.name for a in analyses)
        return tables, ran

    def _analysis_workers(self) -> int:
        """Processes for the analyses: those of the collection's rules-only runs (analyses never call a model, but
        a run that did has the model client's threads, which a fork would copy mid-flight)."""
        if not (getattr(self.collector, "rules_only", False) and can_fork()):
            return 1
        return self.workers if self.workers is not None else default_workers()

    def merge(self, tables: list[pa.Table], ran: set[str]) -> dict[str, int]:
        """Merge the rerun analyses' results into the store (unchanged rows stay as they were)."""
        return merge_results(self.store, tables, analyses=ran,
                             keep_analyses={a.name for s in self.specs for a in s.analyses})

    def save(self, plan: Plan) -> None:
        """Record the run's fingerprints; data a rerun could still collect (budget, provider errors) keep their
        definitions dirty (`retry`: the next plan counts them changed)."""
        if not plan.dirty.nothing or self.full:
            save_state(self.store, fingerprints=fingerprints(self.graph), sources=self.sources, horizon=self.horizon,
                       run_id=self.run_id, graph_version=GRAPH_VERSION, window_days=self.traces.window_days,
                       retry=self.acc.retry_items)

    # ---- report ----------------------------------------------------------------------------------

    def _components(self) -> dict[str, ComponentReport]:
        counts = data_counts(self.store)
        out: dict[str, ComponentReport] = {}
        for spec in self.specs:
            n, rows = population_metrics(self.store, spec.name)
            out[spec.name] = ComponentReport(
                data=counts.get(spec.name, {}), results=n,
                metrics=tuple(MetricReport(metric=m, layer=la, stratum=st, value=json.loads(v), low=lo, high=hi, n=nn)
                              for m, la, st, v, lo, hi, nn in rows),
            )
        return out

    def report(self, plan: Plan, *, seconds: float, before: _Tally, merged: dict[str, int]) -> RunReport:
        """What this run did."""
        d = plan.dirty
        after = _Tally.of(self.collector)
        return RunReport(
            run_id=self.run_id, seconds=seconds,
            plan=PlanReport(
                trigger=plan.trigger,
                users_visited=self.users_to_visit() if not d.nothing else 0, users_total=plan.users_total,
                users_rebuilt=plan.users_total if plan.users is None else len(plan.users),
                definitions_recollected=len(d.items), definitions_total=len(self.by_id),
                analyses_rerun=len(d.analyses), analyses_total=sum(len(s.analyses) for s in self.specs),
                graph=describe(self.graph), retry_next_run=tuple(sorted(self.acc.retry_items)),
                workers=self.workers_used,
            ),
            units=dict(self.acc.units),
            model_calls=after.model_calls - before.model_calls, tokens=after.tokens - before.tokens,
            cost_usd=round(after.cost_usd - before.cost_usd, 6),
            # Rows this run did not write; a row it rewrote (a rebuilt user, a changed definition) is not kept.
            items={"collected": after.collected - before.collected, "reused": after.reused - before.reused,
                   "kept": count_not_written_by(self.store, self.run_id), "uncollected": self.acc.uncollected},
            uncollected_reasons=dict(self.acc.reasons), results=merged, components=self._components(),
        )

    # ---- the run ---------------------------------------------------------------------------------

    def run(self) -> RunReport:
        """Plan, execute and persist, analyse, merge, save the state and report one run."""
        # A run's memo tables are its own (a second run in this process, the gate's recomputations, share none);
        # forked workers take them along at the fork.
        with run_memos(), bulk_objects():  # a run keeps ~10^5 small objects alive: fewer collector passes over them
            return self._run()

    def _run(self) -> RunReport:
        started = datetime.now(UTC)
        before = _Tally.of(self.collector)
        plan = self.plan()
        d = plan.dirty
        merged = {"added": 0, "removed": 0, "unchanged": self.store.count_rows("results")}
        if not d.nothing:
            drop_items(self.store, keep=self.by_id)
            drop_users(self.store, plan.users)
            # Every unit this run writes had its data and unit row deleted just now, unless a changed definition
            # is recollected on users kept as they were: only then can a write meet a stored key.
            self.batch.fresh = self.unit_batch.fresh = plan.users is None or not d.items
            if plan.users is None or plan.users or d.items:
                # The collection only appends what it writes, and reads what it reads once: pages DuckDB kept
                # of either would add to the peak and save nothing (at 10x the default simulation, 467 MB
                # against 591, in the same time).
                with self.store.memory_capped():
                    self.execute_plan(plan)
            tables, ran = self.analyse(d.analyses)
            release_free_memory()
            merged = self.merge(tables, ran)
        self.save(plan)
        report = self.report(plan, seconds=round(time.perf_counter() - self.started, 3), before=before, merged=merged)
        record_run(self.store, run_id=self.run_id, started=started, finished=datetime.now(UTC),
                   report_json=json.dumps(report.model_dump(mode="json")))
        return report
