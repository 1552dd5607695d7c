"""A run's collection as an executor's job (`RunCollection`, an `executors.CollectJob`), and the counts a run
keeps of what it collected, which every worker keeps of its shards and this process adds up.

In this process (`executors.local.LocalExecutor`), the job reads each user's units from the store, collects them
and queues their data and unit rows for the store as they come. Elsewhere (`executors.process.ProcessExecutor`, a
rules-only run's forked workers), this process reads whole users' stored rows as Arrow (`store.turn_tables`) and
writes what comes back: each shard's `atomic_data` table (made in the worker by `data_table`, as the one-process
path makes it at a flush), its `units` table (`arrow_rows`, made there too: sent as Python rows, they cost this
process, which every worker waits on, 5 s of its 40 at 10x the default simulation) and its counts. The worker
builds the units from the rows (`UnitContext.user_units`) and runs the kernel (`kernel.collect`) with the
collector it inherited at the fork, so the data are those one process writes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa

from agent_factory.errors import UsageError
from agent_factory.evaluators import kernel
from agent_factory.evaluators.collect.reasons import CascadeCounters, reason_category, retry_later
from agent_factory.evaluators.core.columns import DataColumns
from agent_factory.evaluators.kernel import CollectPlan, DatumBatch, UserUnits
from agent_factory.factory.pipeline.units import UnitContext
from agent_factory.factory.store import Batch, Store
from agent_factory.factory.store.data import DataBatch, data_table
from agent_factory.factory.store.rows import arrow_rows, turns_from_rows
from agent_factory.factory.store.turn_tables import TurnChunk, chunk_rows, iter_turn_chunks
from agent_factory.factory.store.units import unit_row

MIN_USERS_FOR_WORKERS = 200
"""Below this many users to visit, a run collects in its own process unless told otherwise (`workers`):
forking and shipping rows cost more than a small run's rules."""
CHUNK_TURNS = 400
"""Turns of whole users per chunk a worker collects: enough chunks to keep every worker busy to the end."""


@dataclass
class Tally:
    """A run's counts of the units it visited and of the data it left uncollected."""

    units: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    uncollected: int = 0
    retry_items: set[str] = field(default_factory=set)

    def add(self, other: Tally) -> None:
        """Add another tally (a worker's, over one chunk)."""
        self.units.update(other.units)
        self.reasons.update(other.reasons)
        self.uncollected += other.uncollected
        self.retry_items |= other.retry_items


def tally(acc: Tally, b: DatumBatch) -> None:
    """Count a batch's units and its data left uncollected, by reason, and the items a rerun could collect."""
    c = b.columns
    for k, value in enumerate(c.value):
        if value == "uncollected":
            reason = c.reason[k]
            acc.uncollected += 1
            acc.reasons[reason_category(reason or "")] += 1
            if retry_later(reason):
                acc.retry_items.add(c.item[k])
    for u in b.units:
        acc.units[u.layer] += 1


@dataclass
class ShardDone:
    """What a worker hands back for one shard."""

    data: pa.Table
    """Its data as an `atomic_data` table."""
    units: pa.Table
    """Its units' `units` rows (`arrow_rows`: made in the worker, as their data are)."""
    tally: Tally
    counts: CascadeCounters
    """The worker's collector counts over the shard (`Cascade.take_counts`)."""


@runtime_checkable
class CountsCollector(kernel.Collector, Protocol):
    """A collector whose counts a worker's copy hands back (a rules-only `evaluators.collect.Cascade`): what a
    collection in other processes needs, so that the run's report counts what the workers collected."""

    def take_counts(self) -> CascadeCounters:
        """The counters so far, reset to zero."""
        ...

    def absorb(self, counts: CascadeCounters) -> None:
        """Add counts a worker's copy made (`take_counts`)."""
        ...


class RunCollection:
    """One run's collection of `plan` (`executors.CollectJob`): units come from `store` (with `context`, the
    events and attributes building them reads), data and unit rows go to `data` and `units` (`flush` at the end),
    and `tally` counts what was collected, here or in the workers."""

    def __init__(self, store: Store, *, plan: CollectPlan, collector: kernel.Collector, context: UnitContext,
                 run_id: str, data: DataBatch, units: Batch) -> None:
        self.store, self.plan, self.collector, self.context = store, plan, collector, context
        self.run_id, self.data, self.unit_rows = run_id, data, units
        self.tally = Tally()

    # ---- in this process ---------------------------------------------------------------------------

    def units(self, keys: Collection[str] | None) -> Iterator[UserUnits]:
        """The units of the users `keys` (None: all), user by user, as `units.iter_user_units` reads them."""
        return self.context.user_units(self.store.iter_segmented_turns(segment=None, order="user", users=keys))

    async def work(self, u: UserUnits) -> DatumBatch:
        """One user's collection; each layer's data go to the store's batches as they are collected (`sink`), as
        one user's would pile up."""
        return await kernel.collect_user(u, self.plan, self.collector, on_unit=self.sink)

    def sink(self, batch: DatumBatch) -> None:
        """Queue one user's units and data for the store, counting what was left uncollected and why."""
        tally(self.tally, batch)
        self.data.add(batch.columns)
        for u in batch.units:
            self.unit_rows.add(unit_row(u, run_id=self.run_id))

    # ---- elsewhere ---------------------------------------------------------------------------------

    def shards(self, keys: Collection[str] | None) -> Iterator[tuple[TurnChunk, int]]:
        """Whole users' stored turns (`CHUNK_TURNS` a shard), as Arrow IPC streams."""
        if not isinstance(self.collector, CountsCollector):
            raise UsageError(f"collecting in other processes needs a collector that hands its counts back "
                             f"(take_counts and absorb, as a rules-only Cascade has); "
                             f"{type(self.collector).__name__} has none: collect with the local executor")
        return iter_turn_chunks(self.store, users=keys, turns=CHUNK_TURNS)

    def collect_shard(self, shard: TurnChunk) -> ShardDone:
        """In a worker: the shard's units built and collected, their data and unit rows made into tables."""
        counting = self._counting()
        counting.take_counts()  # what this process had counted when it was forked
        done = Tally()
        cols = DataColumns()
        rows: list[dict[str, Any]] = []
        for b in kernel.collect(self.context.user_units(turns_from_rows(chunk_rows(shard))), self.plan, counting):
            tally(done, b)
            cols.extend(b.columns)
            rows.extend(unit_row(u, run_id=self.run_id) for u in b.units)
        return ShardDone(data=data_table(cols, run_id=self.run_id), units=arrow_rows("units", rows), tally=done,
                         counts=counting.take_counts())

    def take(self, packed: ShardDone) -> None:
        """Here: a shard's counts added up, its tables queued for the store."""
        self.tally.add(packed.tally)
        self._counting().absorb(packed.counts)
        if packed.data.num_rows:
            self.data.add_table(packed.data)
        if packed.units.num_rows:
            self.unit_rows.add_table(packed.units, unique=True)  # a shard's units: each unit once

    def _counting(self) -> CountsCollector:
        assert isinstance(self.collector, CountsCollector), "checked when the shards were cut"
        return self.collector

    # ---- the end -----------------------------------------------------------------------------------

    def flush(self) -> None:
        """Write what is still queued."""
        self.data.flush()
        self.unit_rows.flush()


__all__ = ["CHUNK_TURNS", "MIN_USERS_FOR_WORKERS", "CountsCollector", "RunCollection", "ShardDone", "Tally", "tally"]
