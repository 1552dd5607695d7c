"""The evaluation run: units from the store -> collection cascade -> atomic data -> analyses -> results.

This is the only place that joins I/O (store, cache, models through the cascade) with the pure parts (rules,
analyses). Data are written as they are collected; analyses run once over the compact rows of every unit.
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

from pydantic import BaseModel, ConfigDict

from adapters.model import Conversation, EvidencePointer, Turn
from evaluators.core import (
    AtomicDatum,
    ComponentSpec,
    DataDefinition,
    EngagementView,
    Layer,
    Observations,
    Result,
    SpanView,
    UnitRow,
)
from factory.store import Batch, Store, dumps
from factory.units import UserUnits, iter_user_units
from knowledge_packs import KnowledgePack


class Collector(Protocol):
    """What the runner needs of the cascade (evaluators.collect.Cascade)."""

    async def collect(
        self, *, unit_id: str, layer: Layer, unit: Any, definitions: Sequence[DataDefinition],
        pack: KnowledgePack, injection_ranges: Sequence[EvidencePointer] = (),
        context: EngagementView | None = None,
    ) -> list[AtomicDatum]: ...

    @property
    def model_calls(self) -> int: ...

    @property
    def tokens(self) -> int: ...

    @property
    def cost_usd(self) -> float: ...

    @property
    def reused(self) -> int: ...


class RunReport(BaseModel):
    """What one `agent-factory run` did (the `--json` output)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    """Id of the run (results and data rows carry it)."""
    seconds: float
    """Wall time."""
    units: dict[str, int]
    """Units evaluated per layer."""
    model_calls: int
    """Model calls made (0 on a rerun with nothing changed)."""
    tokens: int
    """Model tokens spent."""
    cost_usd: float
    """Cost from litellm's local cost map."""
    items: dict[str, int]
    """Data items: collected (newly), reused (from the cache), uncollected (with a reason)."""
    uncollected_reasons: dict[str, int]
    """Uncollected items by reason."""
    components: dict[str, dict[str, Any]]
    """Per component: data counts by value and the population-level results."""


@dataclass
class _Acc:
    rows: dict[Layer, list[UnitRow]] = field(default_factory=lambda: {"span": [], "trace": [], "conversation": [],
                                                                         "engagement": []})
    units: Counter[str] = field(default_factory=Counter)
    values: dict[str, Counter[str]] = field(default_factory=dict)
    reasons: Counter[str] = field(default_factory=Counter)
    items: Counter[str] = field(default_factory=Counter)


def _epoch(t: datetime | None) -> float | None:
    return t.timestamp() if t is not None else None


def _row(unit_id: str, layer: Layer, data: Iterable[AtomicDatum], *, user: str | None, conv: str | None, index: int,
         start: datetime | None, end: datetime | None, mode: str | None, admitted: set[str]) -> UnitRow:
    values: dict[str, Any] = {}
    facts: dict[str, Any] = {}
    for d in data:
        if d.item not in admitted:
            continue
        values[d.item] = d.value
        if d.fact is not None:
            facts[d.item] = d.fact
    return UnitRow(unit_id, layer, user, conv, index, _epoch(start), _epoch(end), mode, values, facts)


def definitions_by_layer(
    specs: Sequence[ComponentSpec], pack: KnowledgePack,
) -> dict[Layer, dict[str, list[DataDefinition]]]:
    """Layer -> component -> definitions. Components whose data depend on the pack expose `definitions_for`."""
    out: dict[Layer, dict[str, list[DataDefinition]]] = {"span": {}, "trace": {}, "conversation": {},
                                                          "engagement": {}}
    for spec in specs:
        make = spec.extra.get("definitions_for")
        defs = make(pack) if callable(make) else spec.definitions
        for d in defs:
            out[d.layer].setdefault(spec.name, []).append(d)
    return out


class Runner:
    """Runs every component over every unit of the store."""

    def __init__(
        self, store: Store, *, pack: KnowledgePack, collector: Collector, specs: Sequence[ComponentSpec],
        concurrency: int = 8, progress: Callable[[int], None] | None = None,
    ) -> None:
        self.store, self.pack, self.collector, self.specs = store, pack, collector, list(specs)
        self.concurrency = concurrency
        self.progress = progress
        self.defs = definitions_by_layer(self.specs, pack)
        self.admitted = {d.id for layer in self.defs.values() for ds in layer.values() for d in ds if d.admitted}
        self.run_id = uuid.uuid4().hex[:12]
        self.acc = _Acc()
        self.batch = Batch(store.con, "atomic_data")

    async def _collect(self, unit_id: str, layer: Layer, unit: Any, *, only: set[str] | None = None,
                       injections: Sequence[EvidencePointer] = (),
                       context: EngagementView | None = None) -> list[AtomicDatum]:
        out: list[AtomicDatum] = []
        for component, defs in self.defs[layer].items():
            if only is not None and component not in only:
                continue
            data = await self.collector.collect(
                unit_id=unit_id, layer=layer, unit=unit, definitions=defs, pack=self.pack,
                injection_ranges=injections, context=context,
            )
            out.extend(data)
        for d in out:
            self._store(d, component_of=d.item.split(".", 1)[0])
        return out

    def _store(self, d: AtomicDatum, *, component_of: str) -> None:
        self.acc.values.setdefault(component_of, Counter())[d.value] += 1
        if d.value == "uncollected":
            self.acc.reasons[(d.reason or "").split(":")[0]] += 1
        self.batch.add({
            "unit_id": d.unit_id, "item": d.item, "layer": d.layer, "item_version": d.item_version,
            "value": d.value, "fact": dumps(d.fact), "reason": d.reason,
            "evidence": dumps([p.model_dump() for p in d.evidence]), "tier": d.collector.tier,
            "collector": d.collector.name, "family": d.collector.family,
            "collector_version": d.collector.version, "tokens": d.tokens, "cost_usd": d.cost_usd,
            "coverage": d.coverage, "key": d.key, "run_id": self.run_id,
        })

    async def _turn(self, turn: Turn, *, real: bool) -> None:
        # Excluded traffic is seen by Provenance only; everything else reads real traffic.
        only = None if real else {"provenance"}
        data = await self._collect(turn.id, "trace", turn, only=only)
        self.acc.units["trace"] += 1
        if not real:
            return
        self.acc.rows["trace"].append(_row(
            turn.id, "trace", data, user=turn.user_id, conv=turn.conversation_id, index=turn.index,
            start=turn.start, end=turn.end, mode=turn.mode, admitted=self.admitted,
        ))
        if self.defs["span"]:
            for span in turn.spans:
                sdata = await self._collect(span.id, "span", SpanView(span=span, turn=turn))
                self.acc.units["span"] += 1
                self.acc.rows["span"].append(_row(
                    span.id, "span", sdata, user=turn.user_id, conv=turn.conversation_id, index=turn.index,
                    start=span.start, end=span.end, mode=turn.mode, admitted=self.admitted,
                ))

    async def _conversation(self, conv: Conversation, view: EngagementView) -> None:
        data = await self._collect(conv.id, "conversation", conv, context=view)
        self.acc.units["conversation"] += 1
        first = conv.turns[0] if conv.turns else None
        self.acc.rows["conversation"].append(_row(
            conv.id, "conversation", data, user=conv.user_id, conv=conv.id, index=0, start=conv.start,
            end=conv.end, mode=first.mode if first else None, admitted=self.admitted,
        ))

    async def _engagement(self, view: EngagementView) -> None:
        eng = view.engagement
        data = await self._collect(eng.id, "engagement", view)
        self.acc.units["engagement"] += 1
        self.acc.rows["engagement"].append(_row(
            eng.id, "engagement", data, user=eng.user_id, conv=None, index=0, start=eng.window_start,
            end=eng.window_end, mode=None, admitted=self.admitted,
        ))

    async def _user(self, u: UserUnits) -> None:
        tasks = [self._turn(t, real=False) for t in u.excluded]
        if u.view is not None:
            for conv in u.view.conversations:
                tasks += [self._turn(t, real=True) for t in conv.turns]
                tasks.append(self._conversation(conv, u.view))
            tasks.append(self._engagement(u.view))
        await asyncio.gather(*tasks)

    async def _run_users(self) -> None:
        sem = asyncio.Semaphore(self.concurrency)
        pending: set[asyncio.Task[None]] = set()
        done_users = 0

        async def one(u: UserUnits) -> None:
            async with sem:
                await self._user(u)

        for u in iter_user_units(self.store, window_days=self.pack.thresholds.window_days):
            pending.add(asyncio.create_task(one(u)))
            if len(pending) >= self.concurrency * 2:
                finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for f in finished:
                    f.result()
                    done_users += 1
                if self.progress:
                    self.progress(done_users)
        for f in asyncio.as_completed(pending):
            await f
            done_users += 1
        if self.progress:
            self.progress(done_users)

    def _analyse(self) -> list[Result]:
        for rows in self.acc.rows.values():
            # Analyses read rows in (user, time) order whatever order collection finished in.
            rows.sort(key=lambda r: (r.user_id or "", r.start if r.start is not None else 0.0, r.conversation_id
                                     or "", r.index, r.unit_id))
        horizon = self.store.horizon()
        obs = Observations(rows=self.acc.rows, horizon=_epoch(horizon))
        results: list[Result] = []
        for spec in self.specs:
            for analysis in spec.analyses:
                results.extend(analysis.fn(obs, self.pack))
        return results

    def _write_results(self, results: list[Result]) -> None:
        con = self.store.con
        con.execute("DELETE FROM results")
        batch = Batch(con, "results")
        for r in results:
            batch.add({
                "component": r.component, "layer": r.layer, "metric": r.metric, "stratum": r.stratum,
                "unit_id": r.unit_id, "value": dumps(r.value), "low": r.low, "high": r.high, "n": r.n,
                "note": r.note, "analysis": r.analysis, "analysis_version": r.analysis_version,
                "run_id": self.run_id,
            })
        batch.flush()

    def run(self) -> RunReport:
        t0 = time.perf_counter()
        started = datetime.now(UTC)
        asyncio.run(self._run_users())
        self.batch.flush()
        results = self._analyse()
        self._write_results(results)
        components: dict[str, dict[str, Any]] = {}
        for spec in self.specs:
            population = [r for r in results if r.component == spec.name and r.unit_id is None]
            components[spec.name] = {
                "data": dict(self.acc.values.get(spec.name, Counter())),
                "results": sum(1 for r in results if r.component == spec.name),
                "metrics": [
                    {"metric": r.metric, "layer": r.layer, "stratum": r.stratum, "value": r.value, "low": r.low,
                     "high": r.high, "n": r.n} for r in population
                ],
            }
        total = sum(sum(v.values()) for v in self.acc.values.values())
        uncollected = sum(v.get("uncollected", 0) for v in self.acc.values.values())
        reused = self.collector.reused
        report = RunReport(
            run_id=self.run_id, seconds=round(time.perf_counter() - t0, 3), units=dict(self.acc.units),
            model_calls=self.collector.model_calls, tokens=self.collector.tokens,
            cost_usd=round(self.collector.cost_usd, 6),
            items={"collected": total - uncollected - reused, "reused": reused, "uncollected": uncollected},
            uncollected_reasons=dict(self.acc.reasons), components=components,
        )
        self.store.con.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?)",
            [self.run_id, started, datetime.now(UTC), json.dumps(report.model_dump(mode="json"))],
        )
        return report
