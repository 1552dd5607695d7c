"""Fewer passes of Python's cyclic garbage collector while a command builds many small, long-lived objects.

A run keeps hundreds of thousands of rule answers, pointers and memoized matches alive; the collector's
default thresholds (700 allocations) make it walk that growing heap again and again, about a sixth of a
rules-only run's CPU and some 40% of reading a store's flag rows. Nothing here changes what is computed:
reference counting still frees everything that is not in a cycle, and the thresholds are restored after.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

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
