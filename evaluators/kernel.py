"""The evaluation kernel, pure and store-free: units in, atomic data out (`collect`); observations in, results out
(`analyse`). Nothing here reads or writes a store, a cache or a file: the collector it is handed does whatever
I/O its tiers need (a rule tier none). The runner (`factory.pipeline.engine`) wraps it with the store; the audit
(a second collector over a sample) and the gate (thousands of in-memory recomputations) call it directly.

What rules remember for speed lives in the run's memo tables (`evaluators.core.memo`), never in module globals:
a caller that runs several suites, or one suite many times, passes each run its own (`collect(..., memos=)`) or
opens `run_memos()` around it, and the runs share no entry (`tests/kernel/test_two_suites.py`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, Protocol, cast

from agent_factory import plugins
from agent_factory.adapters.model import EvidencePointer, Turn
from agent_factory.evaluators.core import (
    Analysis,
    AtomicDatum,
    DataDefinition,
    EngagementView,
    Layer,
    Observations,
    Result,
    SpanView,
    UnitRow,
)
from agent_factory.evaluators.core.columns import DataColumns, UnitInput
from agent_factory.evaluators.core.memo import RunMemos, current_run, run_memos
from agent_factory.evaluators.core.model import PRIMARY_RATER
from agent_factory.evaluators.core.registry import Unit
from agent_factory.evaluators.core.rows import LayerRows
from agent_factory.knowledge_packs import KnowledgePack

LAYERS: tuple[Layer, ...] = ("span", "trace", "conversation", "engagement")

Definitions = Mapping[Layer, Mapping[str, Sequence[DataDefinition]]]
"""Layer -> component -> the definitions collected on that layer's units."""


class Collector(Protocol):
    """What the kernel needs of a collector (evaluators.collect.Cascade is one): one unit at a time. A collector
    that also has `collect_units` (as `Cascade` does) is handed a layer's units at once instead (`BatchCollector`)."""

    def collect(
        self, *, unit_id: str, layer: Layer, unit: Unit, definitions: Sequence[DataDefinition],
        pack: KnowledgePack, injection_ranges: Sequence[EvidencePointer] = (),
        context: EngagementView | None = None,
    ) -> Awaitable[list[AtomicDatum]]:
        """Collect `definitions` over one unit: one datum per definition."""


class BatchCollector(Collector, Protocol):
    """A collector that takes a batch of units of one layer and answers in columns (rules a column at a time)."""

    def collect_units(
        self, *, layer: Layer, units: Sequence[UnitInput], definitions: Sequence[DataDefinition],
        pack: KnowledgePack, context: EngagementView | None = None,
    ) -> Awaitable[DataColumns]:
        """Collect `definitions` over every unit of `units`: one datum per unit and definition."""


@dataclass(frozen=True)
class UnitCall:
    """One unit of a batch handed to `Cascade.collect_many` (each unit with its own definitions)."""

    unit_id: str
    unit: Unit
    definitions: Sequence[DataDefinition]
    """What to collect on it (every definition has the batch's layer)."""
    injection_ranges: Sequence[EvidencePointer] = ()
    """Text of this unit flagged as addressed to an evaluator."""


async def collect_units(
    collector: Collector, *, layer: Layer, units: Sequence[UnitInput], definitions: Sequence[DataDefinition],
    pack: KnowledgePack, context: EngagementView | None = None,
) -> DataColumns:
    """`definitions` over `units` through `collector`: in one batch when its class has `collect_units`, else a
    unit at a time (concurrently), as a collector written for the one-unit protocol expects."""
    if getattr(type(collector), "collect_units", None) is not None:
        batch = cast(BatchCollector, collector)
        return await batch.collect_units(layer=layer, units=units, definitions=definitions, pack=pack,
                                         context=context)
    out = DataColumns()
    for data in await asyncio.gather(*(collector.collect(
            unit_id=u.unit_id, layer=layer, unit=u.unit, definitions=definitions, pack=pack,
            injection_ranges=u.injection_ranges, context=context) for u in units)):
        out.add_data(data)
    return out


@dataclass(frozen=True)
class UserUnits:
    """One user's units: the engagement view over real traffic, and their excluded turns."""

    user_key: str
    """The user id, or the conversation id when the source names no user."""
    view: EngagementView | None
    """Sessions of real traffic (None if the user has none)."""
    excluded: tuple[Turn, ...]
    """Turns of excluded segments (internal, cached clicks, synthetic)."""
    piece: int = 0
    """Which piece of the user this is: a user's excluded turns may come in several (each a unit alone, they
    need no other turn), the real ones always in the last; the user counts once, at piece 0."""


@dataclass(frozen=True)
class CollectPlan:
    """What to collect on whose units."""

    definitions: Definitions
    """Every definition, collected on the units of rebuilt users."""
    pack: KnowledgePack
    changed: Definitions | None = None
    """The definitions collected on the units of users not rebuilt (None: those users get nothing)."""
    rebuilt: frozenset[str] | None = None
    """User keys whose units get every definition (None: every user)."""
    all_segments: frozenset[str] = frozenset()
    """Components that also read turns of excluded traffic (Provenance counts them)."""
    injections: Mapping[str, tuple[EvidencePointer, ...]] = field(default_factory=dict)
    """Turn id -> text provenance flagged as addressed to an evaluator, marked in every prompt that shows it."""

    def for_user(self, user_key: str) -> Definitions | None:
        """The definitions to collect on this user's units."""
        if self.rebuilt is None or user_key in self.rebuilt:
            return self.definitions
        return self.changed


@dataclass(frozen=True)
class UnitRecord:
    """A unit a collection visited: what analyses read besides the data, and which user owns it."""

    unit_id: str
    layer: Layer
    user_key: str
    user_id: str | None
    conversation_id: str | None
    index: int
    start: datetime | None
    end: datetime | None
    mode: str | None
    analysed: bool = True
    """False for turns of excluded traffic (seen by the components that count them only)."""


@dataclass(frozen=True, init=False)
class DatumBatch:
    """One user's collection (or a part of it): the units visited and their atomic data, as columns."""

    user_key: str
    units: tuple[UnitRecord, ...]
    columns: DataColumns

    def __init__(self, *, user_key: str, units: tuple[UnitRecord, ...], data: Iterable[AtomicDatum] = (),
                 columns: DataColumns | None = None) -> None:
        cols = columns if columns is not None else DataColumns()
        if data:
            cols.add_data(data)
        object.__setattr__(self, "user_key", user_key)
        object.__setattr__(self, "units", units)
        object.__setattr__(self, "columns", cols)

    @property
    def data(self) -> tuple[AtomicDatum, ...]:
        """The data as `AtomicDatum` objects (built on each call: the store reads the columns)."""
        return self.columns.data()


UnitSink = Callable[[DatumBatch], None]
"""Takes each layer's data of a user as soon as they are collected."""


@dataclass
class _Group:
    """Units of one layer of one user, collected together: their inputs and the records analyses read."""

    layer: Layer
    only: frozenset[str] | None
    """The components whose definitions apply (None: every component)."""
    context: EngagementView | None = None
    inputs: list[UnitInput] = field(default_factory=list)
    records: list[UnitRecord] = field(default_factory=list)


def _groups(u: UserUnits, plan: CollectPlan, defs: Definitions) -> list[_Group]:
    """The user's units by layer: excluded turns (for the components that count them), real turns, their spans,
    conversations and the engagement."""
    key = u.user_key

    def flags(turns: Iterable[Turn]) -> tuple[EvidencePointer, ...]:
        return tuple(p for t in turns for p in plan.injections.get(t.id, ()))

    def turn_record(t: Turn, *, analysed: bool) -> UnitRecord:
        return UnitRecord(unit_id=t.id, layer="trace", user_key=key, user_id=t.user_id,
                          conversation_id=t.conversation_id, index=t.index, start=t.start, end=t.end, mode=t.mode,
                          analysed=analysed)

    # Excluded traffic is seen by the components that count it only; everything else reads real traffic.
    excluded = _Group("trace", plan.all_segments)
    for t in u.excluded:
        excluded.inputs.append(UnitInput(t.id, t, flags((t,))))
        excluded.records.append(turn_record(t, analysed=False))
    turns, spans = _Group("trace", None), _Group("span", None)
    convs = _Group("conversation", None, context=u.view)
    eng = _Group("engagement", None)
    if u.view is not None:
        for conv in u.view.conversations:
            for t in conv.turns:
                f = flags((t,))
                turns.inputs.append(UnitInput(t.id, t, f))
                turns.records.append(turn_record(t, analysed=True))
                if defs.get("span"):
                    for span in t.spans:
                        spans.inputs.append(UnitInput(span.id, SpanView(span=span, turn=t), f))
                        spans.records.append(UnitRecord(
                            unit_id=span.id, layer="span", user_key=key, user_id=t.user_id,
                            conversation_id=t.conversation_id, index=t.index, start=span.start, end=span.end,
                            mode=t.mode))
            first = conv.turns[0] if conv.turns else None
            convs.inputs.append(UnitInput(conv.id, conv, flags(conv.turns)))
            convs.records.append(UnitRecord(
                unit_id=conv.id, layer="conversation", user_key=key, user_id=conv.user_id, conversation_id=conv.id,
                index=0, start=conv.start, end=conv.end, mode=first.mode if first else None))
        e = u.view.engagement
        eng.inputs.append(UnitInput(e.id, u.view, flags(t for c in u.view.conversations for t in c.turns)))
        eng.records.append(UnitRecord(unit_id=e.id, layer="engagement", user_key=key, user_id=e.user_id,
                                      conversation_id=None, index=0, start=e.window_start, end=e.window_end,
                                      mode=None))
    return [g for g in (excluded, turns, spans, convs, eng) if g.inputs]


async def collect_user(u: UserUnits, plan: CollectPlan, collector: Collector, *, on_unit: UnitSink | None = None,
                       memos: RunMemos | None = None, registry: plugins.Registry | None = None) -> DatumBatch:
    """Collect one user's units, a layer at a time (each layer's units in one batch, the layers concurrently):
    the user's batch, or, with `on_unit`, each layer's data handed on as soon as they are collected (memory then
    holds no user's data beyond the layers in flight) and an empty batch returned. `memos`: the run's memo tables
    (`evaluators.core.memo`); None: the current run's (`run_memos`), or outside any run the process's own.
    `registry`: where rules are looked up (None: `plugins.registry()`, the one in use)."""
    if registry is not None:
        with plugins.using(registry):  # the layers' tasks copy this context: they look names up there
            return await collect_user(u, plan, collector, on_unit=on_unit, memos=memos)
    if memos is not None:
        with run_memos(memos):  # likewise: they see the run's tables
            return await collect_user(u, plan, collector, on_unit=on_unit)
    defs = plan.for_user(u.user_key)
    if defs is None:
        return DatumBatch(user_key=u.user_key, units=())
    units: list[UnitRecord] = []
    data = DataColumns()

    async def group(g: _Group) -> None:
        ds = [d for comp, cds in defs.get(g.layer, {}).items() if g.only is None or comp in g.only for d in cds]
        if not ds:
            return
        cols = await collect_units(collector, layer=g.layer, units=g.inputs, definitions=ds, pack=plan.pack,
                                   context=g.context)
        if on_unit is not None:
            on_unit(DatumBatch(user_key=u.user_key, units=tuple(g.records), columns=cols))
        else:
            units.extend(g.records)
            data.extend(cols)

    await asyncio.gather(*(group(g) for g in _groups(u, plan, defs)))
    return DatumBatch(user_key=u.user_key, units=tuple(units), columns=data)


def collect(units: Iterable[UserUnits], plan: CollectPlan, collector: Collector, *,
            memos: RunMemos | None = None, registry: plugins.Registry | None = None) -> Iterator[DatumBatch]:
    """Collect `plan` over `units`, one user after another, on one private event loop (an executor runs users
    concurrently instead: `factory.pipeline.executors`). `memos`: the run's memo tables, for every user; None: the
    current run's when the first user is collected (`run_memos`), or outside any run the process's own. `registry`:
    where rules are looked up (None: the one in use then, `plugins.registry()`). Two of these generators may be
    advanced in turn: each user's task runs under its own run's tables and registry (the generator holds no context
    variable across its yields)."""
    run = memos if memos is not None else current_run()
    reg = registry if registry is not None else plugins.registry()
    loop = asyncio.new_event_loop()
    try:
        for u in units:
            yield loop.run_until_complete(collect_user(u, plan, collector, memos=run, registry=reg))
    finally:
        loop.close()


def _epoch(t: datetime | None) -> float | None:
    return t.timestamp() if t is not None else None


def row_order(r: UnitRow) -> tuple[Any, ...]:
    """The order analyses read rows in: (user, time), whatever order collection finished in."""
    return (r.user_id or "", r.start if r.start is not None else 0.0, r.conversation_id or "", r.position, r.unit_id)


def freeze(rows: Mapping[Layer, Iterable[UnitRow]], *, horizon: float | None) -> Observations:
    """Observations no analysis can change: each layer a `LayerRows` in `row_order` (one given as `LayerRows`, as
    the store's loader makes them, is in that order already), the layers a read-only map."""
    def frozen(layer: Layer) -> LayerRows:
        got = rows.get(layer, ())
        return got if isinstance(got, LayerRows) else LayerRows.from_rows(layer, sorted(got, key=row_order))

    return Observations(rows=MappingProxyType({layer: frozen(layer) for layer in LAYERS}), horizon=horizon)


def observations(batches: Iterable[DatumBatch], *, items: Iterable[str], horizon: float | None,
                 all_segments: bool = False, rater: str = PRIMARY_RATER) -> Observations:
    """What analyses read, from data held in memory: the analysed units (every unit with `all_segments`) with
    their values and facts of `items` by `rater`, exactly as the store would give them back."""
    wanted = set(items)
    units: dict[tuple[str, str], UnitRow] = {}
    data: list[AtomicDatum] = []
    for b in batches:
        for u in b.units:
            if u.analysed or all_segments:
                units[(u.layer, u.unit_id)] = UnitRow(u.unit_id, u.layer, u.user_id, u.conversation_id, u.index,
                                                      _epoch(u.start), _epoch(u.end), u.mode, {}, {})
        data.extend(d for d in b.columns.iter_data() if d.item in wanted and d.rater == rater)
    # By item (stable: of two data of one key the later still wins): the store's rows iterate their values and
    # facts in item order, and an analysis that iterates them (adjudication does) must see the same order.
    data.sort(key=lambda d: d.item)
    for d in data:
        row = units.get((d.layer, d.unit_id))
        if row is None:
            continue
        row.values[d.item] = d.value  # type: ignore[index]
        if d.fact is not None:
            # The store keeps facts as JSON; a fact read back from memory must be the same value.
            row.facts[d.item] = json.loads(json.dumps(d.fact))  # type: ignore[index]
    by_layer: dict[Layer, list[UnitRow]] = {layer: [] for layer in LAYERS}
    for row in units.values():
        by_layer[row.layer].append(row)
    return freeze(by_layer, horizon=horizon)


def analyse(obs: Observations, analyses: Sequence[Analysis], pack: KnowledgePack) -> list[Result]:
    """Every analysis over the same observations, results in the order of `analyses`."""
    results: list[Result] = []
    for analysis in analyses:
        results.extend(analysis.fn(obs.only(analysis.layers), pack))
    return results
