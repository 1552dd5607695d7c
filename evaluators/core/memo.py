"""The memo tables of one run: results remembered for speed, kept in a per-run context, not in module globals.

Several rules read the same provenance of a turn, every span of a turn hashes the same turn, a clause's patterns
are the same for every unit, every field of a trace repeats texts another field had: each of these is computed
once per run and looked up after. The tables live in a `RunMemos`, which `run_memos()` makes current for a block
(a `contextvars.ContextVar`: the block's asyncio tasks see it, another thread or run does not), so two runs in
one process (two suites, the gate's recomputations) never share an entry, and a forked worker takes its parent's
run along. Code outside any run (an ingest, a test calling a rule) uses the process's own `RunMemos`, made on
first use; importing makes none.

Every table is bounded (emptied when full: a miss only costs the computation it would have done anyway) and
keeps only what depends on nothing but its key, so a memo changes nothing but time. `stats()` counts hits and
misses per table: what the tests of run isolation compare.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")


class IdentityMemo:
    """Results keyed by the identity of one or two frozen objects (a turn and a pack, a module) and a label of
    what was computed. The objects are held with their result, so an id is never reused while its entry stands."""

    __slots__ = ("max_entries", "hits", "misses", "_kept")

    def __init__(self, *, max_entries: int) -> None:
        self.max_entries = max_entries
        self.hits = self.misses = 0
        self._kept: dict[tuple[Hashable, int, int], tuple[object, object, object]] = {}

    def get(self, what: Hashable, a: object, b: object, make: Callable[[], T]) -> T:
        """`make()` the first time `what` is asked of these very objects (`b` None for one), the kept result
        after."""
        key = (what, id(a), id(b))
        hit = self._kept.get(key)
        if hit is not None and hit[0] is a and hit[1] is b:
            self.hits += 1
            return hit[2]  # type: ignore[return-value]
        self.misses += 1
        value = make()
        if len(self._kept) >= self.max_entries:
            self._kept.clear()
        self._kept[key] = (a, b, value)
        return value

    def __len__(self) -> int:
        return len(self._kept)


class TextMemo:
    """Results computed from one text (and a key for what else they depend on): the same text is read once.
    Holds at most `max_entries` texts and `max_chars` characters of them; a text over a quarter of that is not
    kept (it would evict everything else for nothing)."""

    __slots__ = ("max_entries", "max_chars", "hits", "misses", "_chars", "_kept")

    def __init__(self, *, max_entries: int = 50_000, max_chars: int = 8_000_000) -> None:
        self.max_entries, self.max_chars = max_entries, max_chars
        self.hits = self.misses = self._chars = 0
        self._kept: dict[tuple[Hashable, str], object] = {}

    def get(self, key: Hashable, text: str, make: Callable[[], T]) -> T:
        """The result for `text` under `key`: `make()` the first time, the kept result after."""
        k = (key, text)
        hit = self._kept.get(k, _NONE)
        if hit is not _NONE:
            self.hits += 1
            return hit  # type: ignore[return-value]
        self.misses += 1
        value = make()
        if len(text) > self.max_chars // 4:
            return value
        if len(self._kept) >= self.max_entries or self._chars + len(text) > self.max_chars:
            self._kept.clear()
            self._chars = 0
        self._kept[k] = value
        self._chars += len(text)
        return value

    def __len__(self) -> int:
        return len(self._kept)


_NONE = object()


class RunMemos:
    """The memo tables of one run, by name (`<module>.<what>`), each made on its first use."""

    __slots__ = ("_tables",)

    def __init__(self) -> None:
        self._tables: dict[str, IdentityMemo | TextMemo] = {}

    def identity(self, name: str, *, max_entries: int) -> IdentityMemo:
        """The run's identity-keyed table `name` (holding at most `max_entries` results)."""
        table = self._tables.get(name)
        if not isinstance(table, IdentityMemo):
            table = self._tables[name] = IdentityMemo(max_entries=max_entries)
        return table

    def text(self, name: str, *, max_entries: int = 50_000, max_chars: int = 8_000_000) -> TextMemo:
        """The run's text-keyed table `name`."""
        table = self._tables.get(name)
        if not isinstance(table, TextMemo):
            table = self._tables[name] = TextMemo(max_entries=max_entries, max_chars=max_chars)
        return table

    def stats(self) -> dict[str, tuple[int, int]]:
        """Table name -> (hits, misses) so far."""
        return {name: (t.hits, t.misses) for name, t in sorted(self._tables.items())}


_CURRENT: ContextVar[RunMemos | None] = ContextVar("agent_factory.memos", default=None)
"""The run `run_memos` made current in this context (None: outside any run)."""


class _Process:
    """The memos of code outside any run, made on first use (importing makes none)."""

    memos: RunMemos | None = None


def memos() -> RunMemos:
    """The current run's memo tables; outside any run, the process's own."""
    current = _CURRENT.get()
    if current is not None:
        return current
    if _Process.memos is None:
        _Process.memos = RunMemos()
    return _Process.memos


def current_run() -> RunMemos | None:
    """The memos of the run in this context, None outside any run."""
    return _CURRENT.get()


def process_memos_made() -> bool:
    """Whether code outside any run has made the process's own memos yet."""
    return _Process.memos is not None


@contextmanager
def run_memos(run: RunMemos | None = None) -> Iterator[RunMemos]:
    """Make `run` (default: fresh tables) the memos of every computation inside the block, and of the tasks it
    starts; what was current before is current again after."""
    run = run if run is not None else RunMemos()
    token = _CURRENT.set(run)
    try:
        yield run
    finally:
        _CURRENT.reset(token)

