"""A rules-only run's collection by forked worker processes (`executors.process.ProcessExecutor`), and the
counts a run keeps of what it collected, which every worker keeps of its chunks and this process adds up.

This process reads whole users' stored rows as Arrow (`store.turn_tables`) and writes what comes back: each chunk's
`atomic_data` table (made in the worker by `data_table`, as the one-process path makes it at a flush), its `units`
table (`arrow_rows`, made there too: sent as Python rows, they cost this process, which every worker waits on,
5 s of its 40 at 10x the default simulation) and its counts. The worker builds the units from the rows
(`UnitContext.user_units`) and runs the kernel (`kernel.collect`) with the collector it inherited at the fork, so
the data are those one process writes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from agent_factory.evaluators import kernel
from agent_factory.evaluators.collect.reasons import CascadeCounters, reason_category, retry_later
from agent_factory.evaluators.core.columns import DataColumns
from agent_factory.evaluators.kernel import CollectPlan, DatumBatch
from agent_factory.factory.executors.process import ProcessExecutor
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
class _ChunkDone:
    """What a worker hands back for one chunk."""

    data: pa.Table
    """Its data as an `atomic_data` table."""
    units: pa.Table
    """Its units' `units` rows (`arrow_rows`: made in the worker, as their data are)."""
    tally: Tally
    counts: CascadeCounters | None
    """The worker's collector counts over the chunk (`Cascade.take_counts`)."""


def collect_in_workers(
    store: Store, *, users: Collection[str] | None, plan: CollectPlan, collector: Any, context: UnitContext,
    run_id: str, workers: int, progress: Callable[[int], None] | None, acc: Tally, data: DataBatch, units: Batch,
) -> None:
    """Collect `plan` over the users `users` (None: all) in `workers` forked processes; each chunk's data and
    units go to `data` and `units` (flushed at the end), its counts to `acc` and to `collector` (which must have
    `take_counts` and `absorb`, as a rules-only `Cascade` does)."""

    def work(chunk: TurnChunk) -> _ChunkDone:
        collector.take_counts()  # what this process had counted when it was forked
        done = _ChunkDone(data=pa.table({}), units=pa.table({}), tally=Tally(), counts=None)
        cols = DataColumns()
        rows: list[dict[str, Any]] = []
        for b in kernel.collect(context.user_units(turns_from_rows(chunk_rows(chunk))), plan, collector):
            tally(done.tally, b)
            cols.extend(b.columns)
            rows.extend(unit_row(u, run_id=run_id) for u in b.units)
        done.data = data_table(cols, run_id=run_id)
        done.units = arrow_rows("units", rows)
        done.counts = collector.take_counts()
        return done

    def sink(done: _ChunkDone) -> None:
        acc.add(done.tally)
        collector.absorb(done.counts)
        if done.data.num_rows:
            data.add_table(done.data)
        if done.units.num_rows:
            units.add_table(done.units, unique=True)  # a chunk's units: each unit once

    executor: ProcessExecutor[TurnChunk, _ChunkDone] = ProcessExecutor(workers=workers, progress=progress)
    executor.run(iter_turn_chunks(store, users=users, turns=CHUNK_TURNS), work=work, sink=sink)
    data.flush()
    units.flush()
