"""Executors: what runs the kernel's collection over users. Every executor implements `Executor`.

The work item is the user key (a string: picklable, so a process or cluster executor can ship it). An executor
is handed the keys to visit (None: every user) and a `CollectJob`, which knows how to do its work in either of
two places; the executor decides where:

- in this process (`local.LocalExecutor`: users concurrently on one asyncio loop): the job reads the users'
  units here (`units`), runs `work` on each and persists every user's batch (`sink`);
- elsewhere (`process.ProcessExecutor`: forked workers; a Ray executor later, as an optional extra): the job cuts
  the users into `shards` here (picklable pieces of whole users, each with the number of users it starts),
  `collect_shard` runs where the executor works (the shard's units, the work on each, the batches packed to
  travel back), and `take` persists what comes back here, in the order the shards came.

Only `sink` and `take` write the store, and both run in the caller's process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any, Protocol, TypeVar

from agent_factory.evaluators.kernel import DatumBatch, UserUnits

S = TypeVar("S")
P = TypeVar("P")

UnitSource = Callable[[Collection[str] | None], Iterable[UserUnits]]
"""The units of the users with these keys (None: of every user), user by user."""
Work = Callable[[UserUnits], Awaitable[DatumBatch]]
"""One user's collection."""
Sink = Callable[[DatumBatch], None]
"""Where a finished user's batch goes (the runner persists it)."""


class CollectJob(Protocol[S, P]):
    """One collection over users, in the parts an executor places (see the module's docstring). `S` is a shard
    (whole users' rows, picklable), `P` what a shard's collection sends back (picklable)."""

    def units(self, keys: Collection[str] | None) -> Iterable[UserUnits]:
        """Here: the units of the users `keys` (None: all), user by user."""
        ...

    def work(self, u: UserUnits) -> Awaitable[DatumBatch]:
        """Where the executor works: one user's collection."""
        ...

    def sink(self, batch: DatumBatch) -> None:
        """Here: persist one user's batch."""
        ...

    def shards(self, keys: Collection[str] | None) -> Iterable[tuple[S, int]]:
        """Here: the users `keys` (None: all) as shards of whole users, each with the number of users it starts
        (a user cut into pieces counts once)."""
        ...

    def collect_shard(self, shard: S) -> P:
        """Where the executor works: a shard's units collected, packed to travel back."""
        ...

    def take(self, packed: P) -> None:
        """Here: persist what one shard's collection sent back."""
        ...


class Executor(Protocol):
    """Runs a `CollectJob` over the users `keys`; `progress` gets the number of users done so far."""

    progress: Callable[[int], None] | None

    def collect(self, keys: Collection[str] | None, job: CollectJob[Any, Any]) -> int:
        """Visit the users `keys` (None: all) with `job`; the number of users done."""
        ...


__all__ = ["CollectJob", "Executor", "Sink", "UnitSource", "Work"]
