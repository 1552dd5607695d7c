"""The evaluation run: the pipeline graph decides what changed; units from the store -> collection cascade ->
atomic data (store) -> analyses over the stored data -> results merged into the store.

This is the only place that joins I/O (store, cache, models through the cascade) with the pure parts (rules,
analyses, the graph). Data are written as they are collected; analyses read every analysed unit's stored data.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import networkx as nx

from agent_factory.adapters.model import Conversation, EvidencePointer, Turn
from agent_factory.evaluators.collect.reasons import reason_category, retry_later
from agent_factory.evaluators.core import (
    AtomicDatum,
    ComponentSpec,
    DataDefinition,
    EngagementView,
    Layer,
    Observations,
    Result,
    SpanView,
)
from agent_factory.evaluators.provenance import ProvenanceRecord
from agent_factory.factory.pipeline.graph import VERSION as GRAPH_VERSION
from agent_factory.factory.pipeline.graph import TracesState, build_graph, describe, fingerprints, reads_component
from agent_factory.factory.pipeline.plan import Plan, make_plan
from agent_factory.factory.pipeline.state import (
    count_rows,
    current_sources,
    data_counts,
    drop_items,
    drop_users,
    load_rows,
    merge_results,
    save_state,
)
from agent_factory.factory.store import Batch, Store, dumps
from agent_factory.factory.units import UserUnits, iter_user_units
from agent_factory.frozen import Frozen
from agent_factory.knowledge_packs import KnowledgePack


class Collector(Protocol):
    """What the runner needs of the cascade (evaluators.collect.Cascade)."""

    async def collect(
        self, *, unit_id: str, layer: Layer, unit: Any, definitions: Sequence[DataDefinition],
        pack: KnowledgePack, injection_ranges: Sequence[EvidencePointer] = (),
        context: EngagementView | None = None,
    ) -> list[AtomicDatum]:
        """Collect `definitions` over one unit: one datum per definition."""

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


class RunReport(Frozen):
    """What one `agent-factory run` did (the `--json` output)."""

    run_id: str
    """Id of the run (results and data rows it wrote carry it)."""
    seconds: float
    """Wall time."""
    plan: dict[str, Any]
    """What the pipeline found changed since the last complete run and therefore recomputed: `trigger`
    (first run / full / new traces / suite change / nothing changed), users visited of all, definitions
    recollected of all, analyses rerun of all."""
    units: dict[str, int]
    """Units collected per layer by this run (0 when nothing changed)."""
    model_calls: int
    """Model calls made (0 on a rerun with nothing changed)."""
    tokens: int
    """Model tokens spent."""
    cost_usd: float
    """Cost from litellm's local cost map."""
    items: dict[str, int]
    """Data items, each counted once: collected (a value decided by this run's rules or models), reused (a
    value found in the cache under an unchanged key), uncollected (this run's data without a value, with a
    reason, whether decided now or found so in the cache), kept (stored data of unchanged definitions on
    unchanged units, not revisited). collected + reused + uncollected are the data this run wrote; with kept,
    the data stored."""
    uncollected_reasons: dict[str, int]
    """This run's uncollected items by reason (they sum to `items.uncollected`)."""
    results: dict[str, int]
    """Stored results: added, removed, unchanged (byte-identical rows, left as they were)."""
    components: dict[str, dict[str, Any]]
    """Per component: stored data counts by value and the population-level results."""


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


@dataclass
class _Acc:
    units: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    uncollected: int = 0
    retry_items: set[str] = field(default_factory=set)


def _epoch(t: datetime | None) -> float | None:
    return t.timestamp() if t is not None else None


def injection_pointers(store: Store) -> dict[str, tuple[EvidencePointer, ...]]:
    """Turn id -> where provenance flagged text addressed to an evaluator in it (stored at ingest), so that every
    prompt showing that text marks it as flagged."""
    rows = store.con.execute("SELECT turn_id, record FROM provenance WHERE injections > 0").fetchall()
    return {tid: tuple(f.pointer for f in ProvenanceRecord.model_validate_json(rec).injections) for tid, rec in rows}


def definitions_by_layer(
    specs: Sequence[ComponentSpec], pack: KnowledgePack,
) -> dict[Layer, dict[str, list[DataDefinition]]]:
    """Layer -> component -> definitions (`ComponentSpec.definitions_for`: Conduct's come from the clauses)."""
    out: dict[Layer, dict[str, list[DataDefinition]]] = {"span": {}, "trace": {}, "conversation": {},
                                                          "engagement": {}}
    for spec in specs:
        for d in spec.definitions_for(pack):
            out[d.layer].setdefault(spec.name, []).append(d)
    return out


_Defs = dict[Layer, dict[str, list[DataDefinition]]]


def _restrict(defs: _Defs, items: frozenset[str]) -> _Defs:
    """Only the definitions `items`, every layer kept (possibly empty)."""
    return {layer: {c: [d for d in ds if d.id in items] for c, ds in comps.items() if any(d.id in items for d in ds)}
            for layer, comps in defs.items()}


class Runner:
    """Runs the pipeline graph over the store: collects what changed, reruns the analyses that read it.

    A first run (or `full=True`) collects every definition on every unit. Later runs compare the graph's
    fingerprints with the last complete run's: units of users touched by new files are rebuilt, definitions
    whose v changed are recollected on every unit, and only analyses downstream of a change rerun. With
    nothing changed, nothing is collected or analysed.
    """

    def __init__(
        self, store: Store, *, pack: KnowledgePack, collector: Collector, specs: Sequence[ComponentSpec],
        concurrency: int = 8, progress: Callable[[int], None] | None = None, full: bool = False,
    ) -> None:
        self.store, self.pack, self.collector, self.specs = store, pack, collector, list(specs)
        self.concurrency = concurrency
        self.progress = progress
        self.full = full
        self.defs = definitions_by_layer(self.specs, pack)
        self.by_id = {d.id: d for layer in self.defs.values() for ds in layer.values() for d in ds}
        self.component_of = {d.id: c for layer in self.defs.values() for c, ds in layer.items() for d in ds}
        self.admitted = {i for i, d in self.by_id.items() if d.admitted}
        self.run_id = uuid.uuid4().hex[:12]
        self.acc = _Acc()
        self.batch = Batch(store.con, "atomic_data")
        self.unit_batch = Batch(store.con, "units")
        by_component: dict[str, list[DataDefinition]] = {}
        for i, d in self.by_id.items():
            by_component.setdefault(self.component_of[i], []).append(d)
        self.sources = current_sources(store)
        self.injections = injection_pointers(store)
        self.horizon_at = store.horizon()
        self.horizon = _epoch(self.horizon_at)
        self.traces = TracesState(sources=self.sources, window_days=pack.thresholds.window_days)
        self.graph = build_graph(
            specs=self.specs, definitions=by_component, pack=pack, traces=self.traces,
            versions={i: collector.definition_version(d, pack) for i, d in self.by_id.items()},
        )
        self._plan: Plan | None = None

    # ---- planning ----------------------------------------------------------------------------

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

    # ---- collection ----------------------------------------------------------------------------

    async def _collect(self, defs: _Defs, unit_id: str, layer: Layer, unit: Any, *, only: set[str] | None = None,
                       injections: Sequence[EvidencePointer] = (),
                       context: EngagementView | None = None) -> bool:
        """Collect `defs` of the unit's layer; False when there was nothing to collect."""
        out: list[AtomicDatum] = []
        for component, ds in defs[layer].items():
            if only is not None and component not in only:
                continue
            data = await self.collector.collect(
                unit_id=unit_id, layer=layer, unit=unit, definitions=ds, pack=self.pack,
                injection_ranges=injections, context=context,
            )
            out.extend(data)
        for d in out:
            self._store(d)
        return bool(out)

    def _store(self, d: AtomicDatum) -> None:
        if d.value == "uncollected":
            self.acc.uncollected += 1
            self.acc.reasons[reason_category(d.reason or "")] += 1
            if retry_later(d.reason):
                self.acc.retry_items.add(d.item)
        self.batch.add({
            "unit_id": d.unit_id, "item": d.item, "layer": d.layer, "item_version": d.item_version,
            "value": d.value, "fact": dumps(d.fact), "reason": d.reason,
            "evidence": dumps([p.model_dump() for p in d.evidence]), "tier": d.collector.tier,
            "collector": d.collector.name, "family": d.collector.family,
            "collector_version": d.collector.version, "tokens": d.tokens, "cost_usd": d.cost_usd,
            "coverage": d.coverage, "key": d.key, "run_id": self.run_id,
        })

    def _unit(self, unit_id: str, layer: Layer, *, user_key: str, user: str | None, conv: str | None, index: int,
              start: datetime | None, end: datetime | None, mode: str | None, analysed: bool = True) -> None:
        self.acc.units[layer] += 1
        self.unit_batch.add({
            "unit_id": unit_id, "layer": layer, "user_key": user_key, "user_id": user, "conversation_id": conv,
            "idx": index, "start_epoch": _epoch(start), "end_epoch": _epoch(end), "mode": mode,
            "analysed": analysed, "run_id": self.run_id,
        })

    def _flags(self, turns: Iterable[Turn]) -> tuple[EvidencePointer, ...]:
        return tuple(p for t in turns for p in self.injections.get(t.id, ()))

    async def _turn(self, defs: _Defs, key: str, turn: Turn, *, real: bool) -> None:
        # Excluded traffic is seen by Provenance only; everything else reads real traffic.
        only: set[str] | None = None if real else {s.name for s in self.specs if s.all_segments}
        flags = self._flags((turn,))
        if await self._collect(defs, turn.id, "trace", turn, only=only, injections=flags):
            self._unit(turn.id, "trace", user_key=key, user=turn.user_id, conv=turn.conversation_id,
                       index=turn.index, start=turn.start, end=turn.end, mode=turn.mode, analysed=real)
        if not real or not defs["span"]:
            return
        for span in turn.spans:
            if await self._collect(defs, span.id, "span", SpanView(span=span, turn=turn), injections=flags):
                self._unit(span.id, "span", user_key=key, user=turn.user_id, conv=turn.conversation_id,
                           index=turn.index, start=span.start, end=span.end, mode=turn.mode)

    async def _conversation(self, defs: _Defs, key: str, conv: Conversation, view: EngagementView) -> None:
        if await self._collect(defs, conv.id, "conversation", conv, context=view, injections=self._flags(conv.turns)):
            first = conv.turns[0] if conv.turns else None
            self._unit(conv.id, "conversation", user_key=key, user=conv.user_id, conv=conv.id, index=0,
                       start=conv.start, end=conv.end, mode=first.mode if first else None)

    async def _engagement(self, defs: _Defs, key: str, view: EngagementView) -> None:
        eng = view.engagement
        flags = self._flags(t for conv in view.conversations for t in conv.turns)
        if await self._collect(defs, eng.id, "engagement", view, injections=flags):
            self._unit(eng.id, "engagement", user_key=key, user=eng.user_id, conv=None, index=0,
                       start=eng.window_start, end=eng.window_end, mode=None)

    async def _user(self, u: UserUnits, defs: _Defs) -> None:
        tasks = [self._turn(defs, u.user_key, t, real=False) for t in u.excluded]
        if u.view is not None:
            for conv in u.view.conversations:
                tasks += [self._turn(defs, u.user_key, t, real=True) for t in conv.turns]
                tasks.append(self._conversation(defs, u.user_key, conv, u.view))
            tasks.append(self._engagement(defs, u.user_key, u.view))
        await asyncio.gather(*tasks)

    async def _run_users(self, plan: Plan) -> None:
        sem = asyncio.Semaphore(self.concurrency)
        pending: set[asyncio.Task[None]] = set()
        done_users = 0
        changed = _restrict(self.defs, plan.dirty.items) if plan.dirty.items else None

        async def one(u: UserUnits) -> None:
            rebuilt = plan.users is None or u.user_key in plan.users
            async with sem:
                await self._user(u, self.defs if rebuilt else changed)  # type: ignore[arg-type]

        which = None if plan.visit_all else plan.users
        for u in iter_user_units(self.store, window_days=self.pack.thresholds.window_days, users=which,
                                 horizon=self.horizon_at):
            pending.add(asyncio.create_task(one(u)))
            if len(pending) >= self.concurrency * 2:
                finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for f in finished:
                    f.result()
                    done_users += 1
                if self.progress:
                    self.progress(done_users)
        for rest in asyncio.as_completed(pending):
            await rest
            done_users += 1
        if self.progress:
            self.progress(done_users)

    # ---- analyses ------------------------------------------------------------------------------

    def _analyse(self, names: frozenset[str]) -> tuple[list[Result], set[str]]:
        """Rerun the analyses `names` over the stored data of the components they read."""
        wanted = [(spec, a) for spec in self.specs for a in spec.analyses if a.name in names]
        if not wanted:
            return [], set()
        results: list[Result] = []
        # Components that count excluded traffic (Provenance) read every segment's turns; the rest, real ones.
        for all_segments in (False, True):
            group = [(spec, a) for spec, a in wanted if spec.all_segments == all_segments]
            if not group:
                continue
            items = {i for i in self.admitted
                     if any(reads_component(a.reads, spec.name, self.component_of[i]) for spec, a in group)}
            rows = load_rows(self.store, items=items, all_segments=all_segments)
            obs = Observations(rows=rows, horizon=self.horizon)
            for _spec, analysis in group:
                results.extend(analysis.fn(obs, self.pack))
        return results, {a.name for _s, a in wanted}

    def _result_rows(self, results: Iterable[Result]) -> list[dict[str, Any]]:
        # A stored result names the code that made it: its analysis's content version (label + digest).
        versions = {a.name: a.content_version for s in self.specs for a in s.analyses}
        return [{
            "component": r.component, "layer": r.layer, "metric": r.metric, "stratum": r.stratum,
            "unit_id": r.unit_id, "value": dumps(r.value), "low": r.low, "high": r.high, "n": r.n, "note": r.note,
            "analysis": r.analysis, "analysis_version": versions.get(r.analysis, r.analysis_version),
            "run_id": self.run_id,
        } for r in results]

    def _components(self) -> dict[str, dict[str, Any]]:
        counts = data_counts(self.store)
        out: dict[str, dict[str, Any]] = {}
        for spec in self.specs:
            rows = self.store.con.execute(
                "SELECT metric, layer, stratum, value, low, high, n FROM results WHERE component = ?"
                " AND unit_id IS NULL ORDER BY analysis, metric, layer, stratum", [spec.name]).fetchall()
            n = self.store.con.execute("SELECT count(*) FROM results WHERE component = ?", [spec.name]).fetchone()
            out[spec.name] = {
                "data": counts.get(spec.name, {}),
                "results": int(n[0]) if n else 0,
                "metrics": [{"metric": m, "layer": la, "stratum": st, "value": json.loads(v), "low": lo, "high": hi,
                             "n": nn} for m, la, st, v, lo, hi, nn in rows],
            }
        return out

    # ---- the run -------------------------------------------------------------------------------

    def run(self) -> RunReport:
        """Plan, collect, analyse and record one run; what it did."""
        t0 = time.perf_counter()
        started = datetime.now(UTC)
        before = _Tally.of(self.collector)
        plan = self.plan()
        d = plan.dirty
        merged = {"added": 0, "removed": 0, "unchanged": count_rows(self.store, "results")}
        if not d.nothing:
            drop_items(self.store, keep=self.by_id)
            drop_users(self.store, plan.users)
            if plan.users is None or plan.users or d.items:
                asyncio.run(self._run_users(plan))
            self.batch.flush()
            self.unit_batch.flush()
            results, ran = self._analyse(d.analyses)
            merged = merge_results(self.store, self._result_rows(results), analyses=ran,
                                   keep_analyses={a.name for s in self.specs for a in s.analyses})
        # Data a rerun could still collect (budget, provider errors) keep their definitions dirty.
        fps = fingerprints(self.graph)
        for item in self.acc.retry_items:
            for node in (f"definition:{item}", *nx.descendants(self.graph, f"definition:{item}")):
                fps[node] = "retry"
        if not d.nothing or self.full:
            save_state(self.store, fingerprints=fps, sources=self.sources, horizon=self.horizon,
                       run_id=self.run_id, graph_version=GRAPH_VERSION, window_days=self.traces.window_days)
        after = _Tally.of(self.collector)
        # Rows this run did not write; a row it rewrote (a rebuilt user, a changed definition) is not kept.
        kept = self.store.con.execute(
            "SELECT count(*) FROM atomic_data WHERE run_id IS DISTINCT FROM ?", [self.run_id]).fetchone()
        report = RunReport(
            run_id=self.run_id, seconds=round(time.perf_counter() - t0, 3),
            plan={
                "trigger": plan.trigger,
                "users_visited": self.users_to_visit() if not d.nothing else 0, "users_total": plan.users_total,
                "users_rebuilt": plan.users_total if plan.users is None else len(plan.users),
                "definitions_recollected": len(d.items), "definitions_total": len(self.by_id),
                "analyses_rerun": len(d.analyses),
                "analyses_total": sum(len(s.analyses) for s in self.specs),
                "graph": describe(self.graph), "retry_next_run": sorted(self.acc.retry_items),
            },
            units=dict(self.acc.units),
            model_calls=after.model_calls - before.model_calls, tokens=after.tokens - before.tokens,
            cost_usd=round(after.cost_usd - before.cost_usd, 6),
            items={"collected": after.collected - before.collected, "reused": after.reused - before.reused,
                   "kept": int(kept[0]) if kept else 0, "uncollected": self.acc.uncollected},
            uncollected_reasons=dict(self.acc.reasons), results=merged, components=self._components(),
        )
        self.store.con.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?)",
            [self.run_id, started, datetime.now(UTC), json.dumps(report.model_dump(mode="json"))],
        )
        return report
