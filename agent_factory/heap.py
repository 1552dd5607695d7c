"""Fewer passes of Python's cyclic garbage collector while a command builds many small, long-lived objects, and
the heap's free pages handed back between the phases of a run.

A run keeps hundreds of thousands of rule answers, pointers and memoized matches alive; the collector's
default thresholds (700 allocations) make it walk that growing heap again and again, about a sixth of a
rules-only run's CPU and some 40% of reading a store's flag rows. Nothing here changes what is computed:
reference counting still frees everything that is not in a cycle, and the thresholds are restored after.
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache

BULK_THRESHOLD = 100_000
"""Allocations between two young-generation passes while bulk work runs (Python's default: 700)."""


@contextmanager
def bulk_objects(*, threshold: int = BULK_THRESHOLD) -> Iterator[None]:
    """Raise the collector's thresholds for the duration of the block, then restore them."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], threshold), max(old[1], 50), max(old[2], 1000))
    try:
        yield
    finally:
        gc.set_threshold(*old)


@lru_cache(maxsize=1)
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where the C library has none (musl, macOS, Windows)."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
        return trim
    except (AttributeError, OSError, TypeError):
        return None


def release_free_memory() -> None:
    """Collect cyclic garbage and hand the allocator's free pages back to the system (`malloc_trim`). Between
    two phases that each build many objects and drop them (a group of analyses' rows, then the next group's):
    glibc keeps freed small objects' pages resident, so the next phase's peak sits on top of the last one's (at
    10x the default simulation a run's peak 477 -> 449 MB). A no-op beyond the collection where there is no
    `malloc_trim`."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
