"""The local executor: every user's batch reaches the sink once, at most `concurrency` users run at a time, and
units are read ahead by at most twice that."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Collection, Iterator

import pytest

from agent_factory.errors import CollectionError
from agent_factory.evaluators.kernel import DatumBatch, UserUnits
from agent_factory.factory.executors import Executor
from agent_factory.factory.executors.local import LocalExecutor
from agent_factory.factory.executors.process import ProcessExecutor, whole_groups


def test_the_local_executor_bounds_users_in_flight_and_reports_progress() -> None:
    read: list[str] = []
    in_flight, peak, ahead = 0, 0, 0
    done: list[str] = []

    def source(keys: Collection[str] | None) -> Iterator[UserUnits]:
        nonlocal ahead
        for k in sorted(keys) if keys is not None else []:
            read.append(k)
            ahead = max(ahead, len(read) - len(done))
            yield UserUnits(user_key=k, view=None, excluded=())

    async def work(u: UserUnits) -> DatumBatch:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.001 * (hash(u.user_key) % 3))
        in_flight -= 1
        return DatumBatch(user_key=u.user_key, units=(), data=())

    progress: list[int] = []
    executor: Executor = LocalExecutor(concurrency=3, progress=progress.append)
    keys = {f"u{i:02d}" for i in range(20)}
    n = executor.run(keys, source=source, work=work, sink=lambda b: done.append(b.user_key))
    assert n == 20 and sorted(done) == sorted(keys) and len(done) == 20
    assert peak == 3 and ahead <= 2 * 3 + 1
    assert progress[-1] == 20 and progress == sorted(progress)


def test_a_user_in_pieces_counts_once() -> None:
    def source(keys: Collection[str] | None) -> Iterator[UserUnits]:
        for k in ("a", "b", "c"):
            for piece in range(3 if k == "b" else 1):
                yield UserUnits(user_key=k, view=None, excluded=(), piece=piece)

    async def work(u: UserUnits) -> DatumBatch:
        return DatumBatch(user_key=u.user_key, units=(), data=())

    done: list[str] = []
    progress: list[int] = []
    n = LocalExecutor(concurrency=1, progress=progress.append).run(
        None, source=source, work=work, sink=lambda b: done.append(b.user_key))
    assert n == 3 and done == ["a", "b", "b", "b", "c"] and progress[-1] == 3


def _pid_and_turns(chunk: list) -> tuple[int, int]:
    if len(chunk) == 13:
        raise ValueError("a rule failed on chunk 13")
    if len(chunk) == 14:
        os._exit(9)  # as the kernel's OOM killer would end it
    return os.getpid(), len(chunk)


def test_the_process_executor_runs_chunks_in_workers_and_sinks_each_here_in_order() -> None:
    chunks = [([({"user_id": f"u{i}", "conversation_id": "c"}, [])] * i, 1) for i in range(1, 11)]
    got: list[tuple[int, int]] = []
    progress: list[int] = []
    n = ProcessExecutor(workers=2, progress=progress.append).run(chunks, work=_pid_and_turns, sink=got.append)
    assert n == 10 and [t for _, t in got] == list(range(1, 11))  # sunk in the order the chunks came
    pids = {p for p, _ in got}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert progress[-1] == 10 and progress == sorted(progress)
    with pytest.raises(ValueError, match="chunk 13"):
        ProcessExecutor(workers=2).run([([({}, [])] * 13, 1)], work=_pid_and_turns, sink=got.append)
    with pytest.raises(CollectionError, match="worker process died"):
        ProcessExecutor(workers=2).run([([({}, [])] * 14, 1)], work=_pid_and_turns, sink=got.append)
    with pytest.raises(ValueError, match="at least 2 workers"):
        ProcessExecutor(workers=1)


def test_whole_groups_cut_at_a_count_of_rows_or_a_weight_and_never_inside_a_group() -> None:
    rows = [("a", 1), ("a", 1), ("b", 5), ("c", 1), ("c", 1), ("c", 1), ("d", 9), ("e", 1)]
    batches = [rows[:3], rows[3:5], rows[5:]]  # batches cut inside groups

    def cut(**kw: object) -> list[list[str]]:
        return [[g[0][0] for g in chunk] for chunk in whole_groups(iter(batches), key=lambda r: r[0], **kw)]

    assert cut(size=3) == [["a", "b"], ["c"], ["d", "e"]]
    assert cut(size=100, weight=lambda r: r[1], max_weight=6) == [["a", "b"], ["c", "d"], ["e"]]
    assert cut(size=100, weight=lambda r: r[1], max_weight=1) == [["a"], ["b"], ["c"], ["d"], ["e"]]
    assert [r for chunk in whole_groups(iter(batches), key=lambda r: r[0], size=2) for g in chunk for r in g] == rows


_USERS = [f"u{i:02d}" for i in range(10)]


class _Job:
    """A `CollectJob` over ten users whose collection is their key upper-cased: where the executor ran it is
    what differs, never what it collects."""

    def __init__(self) -> None:
        self.got: list[str] = []
        self.pids: set[int] = set()

    def units(self, keys: Collection[str] | None) -> Iterator[UserUnits]:
        for k in sorted(keys) if keys is not None else _USERS:
            yield UserUnits(user_key=k, view=None, excluded=())

    async def work(self, u: UserUnits) -> DatumBatch:
        return DatumBatch(user_key=u.user_key.upper(), units=())

    def sink(self, batch: DatumBatch) -> None:
        self.got.append(batch.user_key)
        self.pids.add(os.getpid())

    def shards(self, keys: Collection[str] | None) -> Iterator[tuple[list[str], int]]:
        ks = sorted(keys) if keys is not None else _USERS
        for i in range(0, len(ks), 3):
            yield ks[i:i + 3], len(ks[i:i + 3])

    def collect_shard(self, shard: list[str]) -> tuple[list[str], int]:
        return [asyncio.run(self.work(u)).user_key for u in self.units(shard)], os.getpid()

    def take(self, packed: tuple[list[str], int]) -> None:
        keys, pid = packed
        self.got.extend(keys)
        self.pids.add(pid)


def test_every_executor_runs_the_same_job_behind_the_one_protocol() -> None:
    # The local executor works here, user by user; the process executor cuts shards here and collects them in
    # forked workers: the same job, the same users done, the same collection.
    executors: list[Executor] = [LocalExecutor(concurrency=2), ProcessExecutor(workers=2)]
    for keys in (None, {"u03", "u07", "u01", "u09"}):
        runs = []
        for executor in executors:
            progress: list[int] = []
            executor.progress = progress.append
            job = _Job()
            n = executor.collect(keys, job)
            runs.append((n, sorted(job.got), job.pids))
            assert progress[-1] == n
        (local_n, local_got, local_pids), (proc_n, proc_got, proc_pids) = runs
        expected = sorted(k.upper() for k in (keys if keys is not None else _USERS))
        assert local_n == proc_n == len(expected) and local_got == proc_got == expected
        assert local_pids == {os.getpid()} and os.getpid() not in proc_pids


def test_a_run_collected_in_workers_needs_a_collector_that_hands_its_counts_back() -> None:
    # A worker's copy of the collector counts what it collected; without `take_counts`/`absorb` the report would
    # miss those counts, so the job refuses before any worker is forked (and before the store is read).
    from agent_factory.errors import UsageError
    from agent_factory.factory.pipeline.parallel import RunCollection

    class Uncounted:
        async def collect_units(self, *args: object, **kwargs: object) -> None:
            raise AssertionError("never called")

    job = RunCollection(None, plan=None, collector=Uncounted(), context=None, run_id="r",  # type: ignore[arg-type]
                        data=None, units=None)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"take_counts and absorb.*Uncounted has none: collect with the local"):
        ProcessExecutor(workers=2).collect(None, job)
