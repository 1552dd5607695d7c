"""The collector's thresholds are raised inside `bulk_objects` and restored after, even on an error."""

from __future__ import annotations

import gc

import pytest

from agent_factory.heap import BULK_THRESHOLD, bulk_objects


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
