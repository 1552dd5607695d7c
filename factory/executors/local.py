"""The local executor: users collected concurrently on one asyncio event loop in this process."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection
from typing import Any

from agent_factory.evaluators.kernel import UserUnits
from agent_factory.factory.executors import CollectJob, Sink, UnitSource, Work


class LocalExecutor:
    """Up to `concurrency` users at a time; units are read ahead by at most twice that, so memory stays bounded
    by a few users whatever the store holds. `progress` gets the number of users done so far."""

    def __init__(self, *, concurrency: int = 8, progress: Callable[[int], None] | None = None) -> None:
        self.concurrency = concurrency
        self.progress = progress

    def collect(self, keys: Collection[str] | None, job: CollectJob[Any, Any]) -> int:
        """`Executor.collect`: the job's units read here, its work on each here, every batch to its sink."""
        return self.run(keys, source=job.units, work=job.work, sink=job.sink)

    def run(self, keys: Collection[str] | None, *, source: UnitSource, work: Work, sink: Sink) -> int:
        """Visit the users `keys` (None: all); the number of users done."""
        return asyncio.run(self._run(keys, source=source, work=work, sink=sink))

    async def _run(self, keys: Collection[str] | None, *, source: UnitSource, work: Work, sink: Sink) -> int:
        sem = asyncio.Semaphore(self.concurrency)
        pending: set[asyncio.Task[int]] = set()
        done_users = 0

        async def one(u: UserUnits) -> int:
            async with sem:
                sink(await work(u))
            return 1 if u.piece == 0 else 0  # a user cut into pieces counts once

        for u in source(keys):
            pending.add(asyncio.create_task(one(u)))
            if len(pending) >= self.concurrency * 2:
                finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for f in finished:
                    done_users += f.result()
                if self.progress:
                    self.progress(done_users)
        for rest in asyncio.as_completed(pending):
            done_users += await rest
        if self.progress:
            self.progress(done_users)
        return done_users
