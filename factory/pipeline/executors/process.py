"""The process executor: a rules-only run's users collected by forked worker processes.

Rules are CPU-bound Python and a machine has more than one core; model calls wait on the network, and one
event loop already overlaps them (`local.LocalExecutor`). So only a run with no model tier goes here
(`Cascade.rules_only`): no model answer to cache, no budget or rate limit to share between processes.

This process keeps the store: it reads the stored rows of whole users (`Store.iter_turn_rows`, plain values,
cheap to pickle) and writes what comes back. Workers are forked once the run is planned, so they inherit the
plan, the collector and the pack instead of unpickling them; each gets chunks of rows, builds the units
(`UnitContext.user_units`, pure), runs the kernel on them and returns the chunk's data as an Arrow table with
its unit rows, written in the order the chunks came. At most two chunks per worker are in flight, so memory
stays bounded whatever the store holds.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Generic, TypeVar

from agent_factory.errors import CollectionError
from agent_factory.factory.store.rows import TurnRows

Chunk = list[TurnRows]
"""The stored rows of whole users (one user's turns together, never split across chunks)."""

C = TypeVar("C")
R = TypeVar("R")

MAX_WORKERS = 4
"""Workers a run starts by default at most (`default_workers`): beyond that the store's reader and writer in
this process are the bottleneck."""

_WORK: Callable[[Any], Any] | None = None  # set before the workers fork; they inherit it


def _run_chunk(chunk: Any) -> Any:
    assert _WORK is not None, "process executor worker started without its work"
    return _WORK(chunk)


def can_fork() -> bool:
    """Whether workers are forked here: on Linux only (macOS has fork, but its system libraries are not safe to
    use in a forked child, which is why Python no longer forks there by default; Windows has none)."""
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


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


def _ready() -> int:
    return os.getpid()


class ProcessExecutor(Generic[C, R]):
    """`workers` forked processes run `work` over chunks (a run's: whole users' rows; an ingest's: traces'
    staged spans); `sink` takes each chunk's result here, in the order the chunks came (so what is written does
    not depend on which worker was faster). `progress` gets the number of things (users) done so far."""

    def __init__(self, *, workers: int, progress: Callable[[int], None] | None = None) -> None:
        if workers < 2:
            raise ValueError(f"a process executor needs at least 2 workers; got {workers} (use the local executor)")
        self.workers = workers
        self.progress = progress

    def run(self, chunks: Iterable[tuple[C, int]], *, work: Callable[[C], R], sink: Callable[[R], None]) -> int:
        """Run `work` on every chunk (with the number of things it holds) in a worker, `sink` on each result
        here; the number of things done."""
        global _WORK
        _WORK = work
        done_users = 0
        try:
            with ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("fork")) as pool:
                # Every worker is forked now, before `chunks` starts a query: no store cursor is open in the fork.
                pool.submit(_ready).result()
                pending: deque[tuple[Future[R], int]] = deque()

                def oldest() -> None:
                    nonlocal done_users
                    future, users = pending.popleft()
                    sink(future.result())
                    done_users += users
                    if self.progress:
                        self.progress(done_users)

                for chunk, users in chunks:
                    pending.append((pool.submit(_run_chunk, chunk), users))
                    if len(pending) >= self.workers * 2:
                        oldest()
                while pending:
                    oldest()
        except BrokenProcessPool as e:
            raise CollectionError(
                "a worker process died before it finished (killed, or out of memory?); what it was collecting "
                "was not written: rerun, or rerun with --workers 1 to stay in one process") from e
        finally:
            _WORK = None
        return done_users
