"""The collector's thresholds are raised inside `bulk_objects` and restored after, even on an error; the pages
of freed objects go back to the system (`release_free_memory`)."""

from __future__ import annotations

import gc

import pytest

from agent_factory.heap import BULK_THRESHOLD, _malloc_trim, bulk_objects, release_free_memory


def test_thresholds_raised_inside_and_restored_after() -> None:
    before = gc.get_threshold()
    with bulk_objects():
        inside = gc.get_threshold()
        assert inside[0] == max(before[0], BULK_THRESHOLD) and inside[1] >= before[1] and inside[2] >= before[2]
        with bulk_objects(threshold=10):  # nested: never lowered
            assert gc.get_threshold() == inside
        assert gc.get_threshold() == inside
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), bulk_objects():
        raise RuntimeError("boom")
    assert gc.get_threshold() == before
    assert gc.isenabled()


def _rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


@pytest.mark.skipif(_malloc_trim() is None, reason="no malloc_trim in this C library")
def test_freed_pages_go_back_to_the_system() -> None:
    # 200 MB of 2 kB objects (glibc's heap, not Python's arenas), one in 50 kept: the heap is all holes, which
    # glibc keeps resident until told.
    blocks = [bytes(2000) + bytes([k % 256]) for k in range(100_000)]
    kept = blocks[::50]
    grown = _rss_mb()
    del blocks
    held = _rss_mb()
    release_free_memory()
    after = _rss_mb()
    assert held > grown - 50  # freeing alone hands little back
    assert after < held - 100, (grown, held, after)
    assert len(kept) == 2000
