"""Executors: what runs the kernel's collection over users.

The work item is the user key (a string: picklable, so a process or cluster executor can ship it). An executor
is handed the keys to visit (None: every user), where units come from (`UnitSource`, called where the work runs
with the keys it got), what to do per user (`Work`: the kernel's `collect_user` bound to a plan and a
collector) and where each user's `DatumBatch` goes (`Sink`, called in the caller's process, so only the caller
writes the store). `local.LocalExecutor` runs users concurrently on one asyncio loop; a Ray executor (later, an
optional extra) would split the keys into shards and call the source on each worker.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Protocol

from agent_factory.evaluators.kernel import DatumBatch, UserUnits

UnitSource = Callable[[Collection[str] | None], Iterable[UserUnits]]
"""The units of the users with these keys (None: of every user), user by user."""
Work = Callable[[UserUnits], Awaitable[DatumBatch]]
"""One user's collection."""
Sink = Callable[[DatumBatch], None]
"""Where a finished user's batch goes (the runner persists it)."""


class Executor(Protocol):
    """Runs `work` over the users `keys` and hands every user's batch to `sink`."""

    def run(self, keys: Collection[str] | None, *, source: UnitSource, work: Work, sink: Sink) -> int:
        """Visit the users `keys` (None: all); the number of users done."""
        ...


__all__ = ["Executor", "Sink", "UnitSource", "Work"]
