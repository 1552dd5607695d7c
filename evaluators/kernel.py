"""The evaluation kernel, pure and store-free: units in, atomic data out (`collect`); observations in, results out
(`analyse`). Nothing here reads or writes a store, a cache or a file: the collector it is handed does whatever
I/O its tiers need (a rule tier none). The runner (`factory.pipeline.engine`) wraps it with the store; the audit
(a second collector over a sample) and the gate (thousands of in-memory recomputations) call it directly.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, Protocol

from agent_factory.adapters.model import Conversation, EvidencePointer, Turn
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
from agent_factory.evaluators.core.model import PRIMARY_RATER
from agent_factory.knowledge_packs import KnowledgePack

LAYERS: tuple[Layer, ...] = ("span", "trace", "conversation", "engagement")

Definitions = Mapping[Layer, Mapping[str, Sequence[DataDefinition]]]
"""Layer -> component -> the definitions collected on that layer's units."""


class Collector(Protocol):
    """What the kernel needs of a collector (evaluators.collect.Cascade is one)."""

    def collect(
        self, *, unit_id: str, layer: Layer, unit: Any, definitions: Sequence[DataDefinition],
        pack: KnowledgePack, injection_ranges: Sequence[EvidencePointer] = (),
        context: EngagementView | None = None,
    ) -> Awaitable[list[AtomicDatum]]:
        """Collect `definitions` over one unit: one datum per definition."""


@dataclass(frozen=True)
class UnitCall:
    """One unit of a batch handed to `ConversationCollector.collect_many`."""

    unit_id: str
    unit: Any
    definitions: Sequence[DataDefinition]
    """What to collect on it (every definition has the batch's layer)."""
    injection_ranges: Sequence[EvidencePointer] = ()
    """Text of this unit flagged as addressed to an evaluator."""


class ConversationCollector(Collector, Protocol):
    """A collector that can also take the turns of one conversation together (`batch = "conversation"`)."""

    @property
    def batch(self) -> str:
        """`unit` (one collect per unit) or `conversation` (a conversation's turns in one `collect_many`)."""

    def collect_many(
        self, *, batch_id: str, layer: Layer, units: Sequence[UnitCall], pack: KnowledgePack,
    ) -> Awaitable[list[list[AtomicDatum]]]:
        """Collect several units of one layer (the turns of conversation `batch_id`) together: each unit's data,
        in the order of `units`, exactly as `collect` would give them."""


def conversation_batch(collector: Collector) -> ConversationCollector | None:
    """The collector, when it batches a conversation's turns; None when it collects unit by unit."""
    if getattr(collector, "batch", "unit") == "conversation" and hasattr(collector, "collect_many"):
        return collector  # type: ignore[return-value]  # checked structurally just above
    return None


@dataclass(frozen=True)
class UserUnits:
    """One user's units: the engagement view over real traffic, and their excluded turns."""

    user_key: str
    """The user id, or the conversation id when the source names no user."""
    view: EngagementView | None
    """Sessions of real traffic (None if the user has none)."""
    excluded: tuple[Turn, ...]
    """Turns of excluded segments (internal, cached clicks, synthetic)."""


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


@dataclass(frozen=True)
class DatumBatch:
    """One user's collection: the units visited and their atomic data, in the order collection finished."""

    user_key: str
    units: tuple[UnitRecord, ...]
    data: tuple[AtomicDatum, ...]


UnitSink = Callable[[DatumBatch], None]
"""Takes each unit's data as soon as it is collected (one unit per batch)."""


@dataclass
class _UserCollection:
    plan: CollectPlan
    defs: Definitions
    collector: Collector
    user_key: str
    on_unit: UnitSink | None = None
    units: list[UnitRecord] = field(default_factory=list)
    data: list[AtomicDatum] = field(default_factory=list)

    async def unit(self, unit_id: str, layer: Layer, unit: Any, *, only: frozenset[str] | None = None,
                   injections: Sequence[EvidencePointer] = (),
                   context: EngagementView | None = None) -> tuple[AtomicDatum, ...]:
        # Every component's definitions in one collect: the unit's model-tier items go to a model in one call.
        ds = self.definitions(layer, only)
        if not ds:
            return ()
        return tuple(await self.collector.collect(
            unit_id=unit_id, layer=layer, unit=unit, definitions=ds, pack=self.plan.pack,
            injection_ranges=injections, context=context,
        ))

    def definitions(self, layer: Layer, only: frozenset[str] | None = None) -> list[DataDefinition]:
        """The layer's definitions of every component (of `only`, when given), in component order: the data
        come back in this order, as they did when each component was collected apart."""
        return [d for component, ds in self.defs.get(layer, {}).items() if only is None or component in only
                for d in ds]

    def keep(self, data: tuple[AtomicDatum, ...], unit_id: str, layer: Layer, *, user: str | None,
             conv: str | None, index: int, start: datetime | None, end: datetime | None, mode: str | None,
             analysed: bool = True) -> None:
        """A visited unit with its data: handed on at once (`on_unit`), or kept for the user's batch."""
        rec = UnitRecord(unit_id=unit_id, layer=layer, user_key=self.user_key, user_id=user, conversation_id=conv,
                         index=index, start=start, end=end, mode=mode, analysed=analysed)
        if self.on_unit is not None:
            self.on_unit(DatumBatch(user_key=self.user_key, units=(rec,), data=data))
        else:
            self.units.append(rec)
            self.data.extend(data)

    def flags(self, turns: Iterable[Turn]) -> tuple[EvidencePointer, ...]:
        return tuple(p for t in turns for p in self.plan.injections.get(t.id, ()))

    def keep_turn(self, data: tuple[AtomicDatum, ...], turn: Turn, *, real: bool) -> None:
        self.keep(data, turn.id, "trace", user=turn.user_id, conv=turn.conversation_id, index=turn.index,
                  start=turn.start, end=turn.end, mode=turn.mode, analysed=real)

    async def turn(self, turn: Turn, *, real: bool) -> None:
        # Excluded traffic is seen by the components that count it only; everything else reads real traffic.
        only = None if real else self.plan.all_segments
        flags = self.flags((turn,))
        if data := await self.unit(turn.id, "trace", turn, only=only, injections=flags):
            self.keep_turn(data, turn, real=real)
        if real:
            await self.spans(turn, flags)

    async def turns(self, conv: Conversation, collector: ConversationCollector) -> None:
        """A conversation's turns with `batch = "conversation"`: their turn-layer data in one collect (one
        model call for all of them), then each turn's spans."""
        ds = self.definitions("trace")
        if ds and conv.turns:
            calls = [UnitCall(unit_id=t.id, unit=t, definitions=ds, injection_ranges=self.flags((t,)))
                     for t in conv.turns]
            batch = await collector.collect_many(batch_id=conv.id, layer="trace", units=calls, pack=self.plan.pack)
            for t, data in zip(conv.turns, batch, strict=True):
                if data:
                    self.keep_turn(tuple(data), t, real=True)
        await asyncio.gather(*(self.spans(t, self.flags((t,))) for t in conv.turns))

    async def spans(self, turn: Turn, flags: tuple[EvidencePointer, ...]) -> None:
        if not self.defs.get("span"):
            return
        for span in turn.spans:
            if data := await self.unit(span.id, "span", SpanView(span=span, turn=turn), injections=flags):
                self.keep(data, span.id, "span", user=turn.user_id, conv=turn.conversation_id, index=turn.index,
                          start=span.start, end=span.end, mode=turn.mode)

    async def conversation(self, conv: Conversation, view: EngagementView) -> None:
        if data := await self.unit(conv.id, "conversation", conv, context=view, injections=self.flags(conv.turns)):
            first = conv.turns[0] if conv.turns else None
            self.keep(data, conv.id, "conversation", user=conv.user_id, conv=conv.id, index=0, start=conv.start,
                      end=conv.end, mode=first.mode if first else None)

    async def engagement(self, view: EngagementView) -> None:
        eng = view.engagement
        flags = self.flags(t for conv in view.conversations for t in conv.turns)
        if data := await self.unit(eng.id, "engagement", view, injections=flags):
            self.keep(data, eng.id, "engagement", user=eng.user_id, conv=None, index=0, start=eng.window_start,
                      end=eng.window_end, mode=None)


async def collect_user(u: UserUnits, plan: CollectPlan, collector: Collector, *,
                       on_unit: UnitSink | None = None) -> DatumBatch:
    """Collect one user's units (their turns, spans, conversations and engagement concurrently): the user's
    batch, or, with `on_unit`, each unit's data handed on as soon as it is collected (memory then holds no
    user's data, only the unit in flight) and an empty batch returned."""
    defs = plan.for_user(u.user_key)
    if defs is None:
        return DatumBatch(user_key=u.user_key, units=(), data=())
    c = _UserCollection(plan=plan, defs=defs, collector=collector, user_key=u.user_key, on_unit=on_unit)
    tasks = [c.turn(t, real=False) for t in u.excluded]
    batched = conversation_batch(collector)
    if u.view is not None:
        for conv in u.view.conversations:
            if batched is not None:
                tasks.append(c.turns(conv, batched))
            else:
                tasks += [c.turn(t, real=True) for t in conv.turns]
            tasks.append(c.conversation(conv, u.view))
        tasks.append(c.engagement(u.view))
    await asyncio.gather(*tasks)
    return DatumBatch(user_key=u.user_key, units=tuple(c.units), data=tuple(c.data))


def collect(units: Iterable[UserUnits], plan: CollectPlan, collector: Collector) -> Iterator[DatumBatch]:
    """Collect `plan` over `units`, one user after another, on one private event loop (an executor runs users
    concurrently instead: `factory.pipeline.executors`)."""
    loop = asyncio.new_event_loop()
    try:
        for u in units:
            yield loop.run_until_complete(collect_user(u, plan, collector))
    finally:
        loop.close()


def _epoch(t: datetime | None) -> float | None:
    return t.timestamp() if t is not None else None


def row_order(r: UnitRow) -> tuple[Any, ...]:
    """The order analyses read rows in: (user, time), whatever order collection finished in."""
    return (r.user_id or "", r.start if r.start is not None else 0.0, r.conversation_id or "", r.position, r.unit_id)


def freeze(rows: Mapping[Layer, Iterable[UnitRow]], *, horizon: float | None) -> Observations:
    """Observations no analysis can change: each layer a tuple in `row_order`, the layers a read-only map."""
    return Observations(rows=MappingProxyType({layer: tuple(sorted(rows.get(layer, ()), key=row_order))
                                               for layer in LAYERS}), horizon=horizon)


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
        data.extend(d for d in b.data if d.item in wanted and d.rater == rater)
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
        results.extend(analysis.fn(obs, pack))
    return results
