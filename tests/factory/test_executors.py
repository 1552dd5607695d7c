"""The local executor: every user's batch reaches the sink once, at most `concurrency` users run at a time, and
units are read ahead by at most twice that."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterator

from agent_factory.evaluators.kernel import DatumBatch, UserUnits
from agent_factory.factory.pipeline.executors import Executor
from agent_factory.factory.pipeline.executors.local import LocalExecutor


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
