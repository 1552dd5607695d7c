"""The process executor: chunks of work done by forked worker processes, their results taken in here in order.

Rules are CPU-bound Python and a machine has more than one core; model calls wait on the network, and one
event loop already overlaps them (`local.LocalExecutor`). So only work with no model in it comes here: a
rules-only run's users (`factory.pipeline.parallel`, `Cascade.rules_only`) and a large file's staged traces
at ingest (`factory.ingest.writer`).

This process keeps the store: it reads plain rows (cheap to pickle) and cuts them into chunks of whole groups
(`whole_groups`: users, traces); the workers, forked before the first chunk is read, inherit the plan, the
collector and the pack instead of unpickling them, and return plain results, which `sink` writes here in the
order the chunks came. At most two chunks per worker are in flight, so memory stays bounded whatever the store
holds.

A run's collection comes in through `collect`, the `Executor` protocol's method (the job's shards are the chunks,
`factory.pipeline.parallel.RunCollection`); ingest and the analyses call `run`, the same pool over chunks of their
own.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Generic, TypeVar

from agent_factory.errors import CollectionError
from agent_factory.factory.executors import CollectJob

C = TypeVar("C")
T = TypeVar("T")
R = TypeVar("R")

MAX_WORKERS = 4
"""Workers a run starts by default at most (`default_workers`): beyond that the store's reader and writer in
this process are the bottleneck."""

_NO_KEY = object()
_WORK: Callable[[Any], Any] | None = None  # set before the workers fork; they inherit it


def _run_chunk(chunk: Any) -> Any:
    assert _WORK is not None, "process executor worker started without its work"
    return _WORK(chunk)


def _die_with_parent(parent: int) -> None:
    """A worker's initializer: the worker is killed when the process that forked it dies. A killed run's workers
    otherwise live on, asleep: each holds its own copy of the queue's pipe, so it never reads the end of it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (Linux, where workers fork)
    except (AttributeError, OSError):  # no prctl: the worker outlives a killed parent, as it did
        return
    if os.getppid() != parent:  # the parent died before the call above
        os._exit(1)
    # Ctrl-C reaches the whole process group: the parent stops the run and says so once; a worker's traceback
    # for the same key press would bury that line.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


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


def whole_groups(batches: Iterable[list[T]], *, key: Callable[[T], Hashable], size: int,
                 weight: Callable[[T], int] | None = None, max_weight: int = 0) -> Iterator[list[list[T]]]:
    """Rows that come grouped (every row of a key together: a user's turns, a trace's spans), in batches, re-cut
    into chunks of whole groups holding at least `size` rows each, or, with `weight`, at least `max_weight` of
    it (the last chunk may hold less)."""
    chunk: list[list[T]] = []
    group: list[T] = []
    rows = weighed = 0
    last: Hashable = _NO_KEY
    for batch in batches:
        for row in batch:
            k = key(row)
            if group and k != last:
                chunk.append(group)
                rows += len(group)
                group = []
                if rows >= size or (weight is not None and weighed >= max_weight):
                    yield chunk
                    chunk, rows, weighed = [], 0, 0
            last = k
            group.append(row)
            if weight is not None:
                weighed += weight(row)
    if group:
        chunk.append(group)
    if chunk:
        yield chunk


def _stop(pool: ProcessPoolExecutor | None) -> None:
    """End a pool's workers now, their queued and running chunks dropped."""
    if pool is None:
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())  # the stdlib keeps no public list
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        if p.is_alive():
            p.kill()


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

    def collect(self, keys: Collection[str] | None, job: CollectJob[C, R]) -> int:
        """`Executor.collect`: the job's shards cut here, each collected in a worker (`collect_shard`), what
        comes back taken here in shard order (`take`). The workers are forked before the first shard is read, so
        they inherit the job (its plan, collector, pack and unit context) instead of unpickling it."""
        return self.run(job.shards(keys), work=job.collect_shard, sink=job.take)

    def run(self, chunks: Iterable[tuple[C, int]], *, work: Callable[[C], R], sink: Callable[[R], None]) -> int:
        """Run `work` on every chunk (with the number of things it holds) in a worker, `sink` on each result
        here; the number of things done."""
        global _WORK
        _WORK = work
        done_users = 0
        pool: ProcessPoolExecutor | None = None
        try:
            with ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("fork"),
                                     initializer=_die_with_parent, initargs=(os.getpid(),)) as pool:
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
        except KeyboardInterrupt:
            _stop(pool)  # the workers ignore Ctrl-C (`_die_with_parent`): their chunks are dropped, not awaited
            raise
        except BrokenProcessPool as e:
            raise CollectionError(
                "a worker process died before it finished (killed, or out of memory?); what it was collecting "
                "was not written: rerun, or rerun with --workers 1 to stay in one process") from e
        finally:
            _WORK = None
        return done_users
