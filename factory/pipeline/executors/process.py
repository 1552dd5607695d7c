"""The process executor: a rules-only run's users collected by forked worker processes.

Rules are CPU-bound Python and a machine has more than one core; model calls wait on the network, and one
event loop already overlaps them (`local.LocalExecutor`). So only a run with no model tier goes here
(`Cascade.rules_only`): no model answer to cache, no budget or rate limit to share between processes.

This process keeps the store: it reads the stored rows of whole users (`Store.iter_turn_rows`, plain values,
cheap to pickle) and writes what comes back. Workers are forked once the run is planned, so they inherit the
plan, the collector and the pack instead of unpickling them; each gets chunks of rows, builds the units
(`UnitContext.user_units`, pure), runs the kernel on them and returns the chunk's data as an Arrow table with
its unit rows. At most two chunks per worker are in flight, so memory stays bounded whatever the store holds.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, Generic, TypeVar

from agent_factory.factory.store.rows import TurnRows

Chunk = list[TurnRows]
"""The stored rows of whole users (one user's turns together, never split across chunks)."""

R = TypeVar("R")

MAX_WORKERS = 4
"""Workers a run starts by default at most (`default_workers`): beyond that the store's reader and writer in
this process are the bottleneck."""

_WORK: Callable[[Chunk], Any] | None = None  # set before the workers fork; they inherit it


def _run_chunk(chunk: Chunk) -> Any:
    assert _WORK is not None, "process executor worker started without its work"
    return _WORK(chunk)


def can_fork() -> bool:
    """Whether workers can be forked here (not on Windows; macOS has fork, though it is not its default)."""
    return "fork" in multiprocessing.get_all_start_methods()


def default_workers() -> int:
    """One worker per core this process may use, at most `MAX_WORKERS`; 1 (no workers) on one core."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_WORKERS))


def user_key_of(row: dict[str, Any]) -> str:
    """A stored turn's user key (`factory.units.user_key`): the user id, else the conversation id."""
    return str(row["user_id"] if row["user_id"] is not None else row["conversation_id"])


def user_chunks(batches: Iterable[list[TurnRows]], *, turns: int) -> Iterator[tuple[Chunk, int]]:
    """Batches of rows in user order re-cut into chunks of at least `turns` turns (a user is never split), each
    with its number of users."""
    chunk: Chunk = []
    users = 0
    last: str | None = None
    for batch in batches:
        for tr in batch:
            key = user_key_of(tr[0])
            if key != last:
                if len(chunk) >= turns:
                    yield chunk, users
                    chunk, users = [], 0
                users += 1
                last = key
            chunk.append(tr)
    if chunk:
        yield chunk, users


class ProcessExecutor(Generic[R]):
    """`workers` forked processes run `work` over chunks of users' rows; `sink` takes each chunk's result here,
    in the order chunks finish. `progress` gets the number of users done so far."""

    def __init__(self, *, workers: int, progress: Callable[[int], None] | None = None) -> None:
        if workers < 2:
            raise ValueError(f"a process executor needs at least 2 workers; got {workers} (use the local executor)")
        self.workers = workers
        self.progress = progress

    def run(self, chunks: Iterable[tuple[Chunk, int]], *, work: Callable[[Chunk], R],
            sink: Callable[[R], None]) -> int:
        """Run `work` on every chunk in a worker, `sink` on each result here; the number of users done."""
        global _WORK
        _WORK = work
        done_users = 0
        try:
            with ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("fork")) as pool:
                pending: dict[Future[R], int] = {}

                def drain(futures: set[Future[R]]) -> None:
                    nonlocal done_users
                    for f in futures:
                        sink(f.result())
                        done_users += pending.pop(f)
                    if self.progress:
                        self.progress(done_users)

                for chunk, users in chunks:
                    pending[pool.submit(_run_chunk, chunk)] = users
                    if len(pending) >= self.workers * 2:
                        finished, _ = wait(set(pending), return_when=FIRST_COMPLETED)
                        drain(finished)
                while pending:
                    finished, _ = wait(set(pending), return_when=FIRST_COMPLETED)
                    drain(finished)
        finally:
            _WORK = None
        return done_users
