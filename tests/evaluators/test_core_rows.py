"""`LayerRows`: a layer's unit rows held as columns read back exactly as the rows they were made from."""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
import pyarrow as pa
import pytest

from agent_factory.evaluators import kernel
from agent_factory.evaluators.core import UnitRow
from agent_factory.evaluators.core.rows import _CHUNK, Coded, FactColumns, LayerRows

SHARED = MappingProxyType({"x.a": "yes", "x.b": "no"})


def _rows(n: int) -> list[UnitRow]:
    out = []
    for k in range(n):
        out.append(UnitRow(
            unit_id=f"t{k:05d}", layer="trace", user_id=None if k % 7 == 0 else f"u{k % 5}",
            conversation_id=f"c{k % 11}" if k % 3 else None, position=k % 4,
            start=None if k % 13 == 0 else 1_700_000_000.25 + k, end=None if k % 2 else 1_700_000_001.5 + k,
            mode="normal" if k % 2 else None, values=SHARED if k % 2 else {"x.a": "uncollected"},
            facts={"x.f": float(k), "x.g": "text"} if k % 5 == 0 else {}))
    return out


def test_rows_read_back_as_made_across_chunks() -> None:
    rows = _rows(2 * _CHUNK + 17)
    lr = LayerRows.from_rows("trace", rows)
    assert len(lr) == len(rows)
    back = list(lr)
    assert back == rows and all(type(r) is UnitRow for r in back)
    # None stays None (a time is held as NaN), and a shared value map is still one object.
    assert back[0].start is None and back[0].user_id is None and back[1].end is None
    assert back[1].values is SHARED and back[3].values is SHARED
    assert lr == rows and lr == tuple(rows) and lr != rows[:-1] and lr != [*rows[:-1], rows[0]]


def test_indexing_and_slices() -> None:
    rows = _rows(_CHUNK + 5)
    lr = LayerRows.from_rows("trace", rows)
    assert lr[0] == rows[0] and lr[-1] == rows[-1] and lr[_CHUNK] == rows[_CHUNK]
    assert lr[10:20] == rows[10:20] and lr[::1000] == rows[::1000] and lr[5:2] == []
    with pytest.raises(IndexError, match="row 4101 of a layer of 4101"):
        lr[len(rows)]
    assert rows[7] in lr and lr.index(rows[9]) == 9


def test_rows_of_another_layer_or_columns_of_another_length_are_refused() -> None:
    with pytest.raises(ValueError, match="a row of another layer"):
        LayerRows.from_rows("span", _rows(3))
    one = Coded(np.zeros(1, dtype=np.int32), (None,))
    with pytest.raises(ValueError, match="columns of unequal length"):
        LayerRows("trace", unit_id=pa.array(["a", "b"]), user_id=one, conversation_id=one,
                  position=np.zeros(2, dtype=np.int64), start=np.zeros(2), end=np.zeros(2), mode=one, values=one,
                  facts=[{}, {}])


def test_empty_layer() -> None:
    lr = LayerRows.from_rows("span", [])
    assert len(lr) == 0 and list(lr) == [] and lr == () and lr[0:3] == []


def test_coded_values_tuples_stay_whole() -> None:
    # A value that is itself a sequence is one cell, not a row of cells.
    c = Coded.of([("a", "b"), None, ("a", "b")])
    assert c.vocab == (("a", "b"), None) and c.cells(0, 3) == [("a", "b"), None, ("a", "b")]


def test_freeze_orders_rows_and_keeps_layer_rows_as_given() -> None:
    rows = _rows(50)
    obs = kernel.freeze({"trace": list(reversed(rows))}, horizon=None)
    assert list(obs.layer("trace")) == sorted(rows, key=kernel.row_order)
    assert isinstance(obs.layer("span"), LayerRows) and len(obs.layer("span")) == 0
    given = LayerRows.from_rows("trace", rows)
    assert kernel.freeze({"trace": given}, horizon=None).layer("trace") is given


def test_fact_columns_read_back_as_the_maps_they_were_made_from() -> None:
    # Items every row of a chunk has, items few rows have, rows with none; a fact keeps its own type (1, 1.0 and
    # True are one dict key) and None; each map iterates its items sorted, as the store's rows always did.
    n = 2 * _CHUNK + 9
    maps: list[dict[str, float | str | None]] = []
    for k in range(n):
        f: dict[str, float | str | None] = {}
        if k >= _CHUNK:  # dense from the second chunk on
            f["b.dense"] = [1, 1.0, True, "1"][k % 4]  # type: ignore[assignment]
        if k % 97 == 0:
            f["a.sparse"] = None if k % 2 else f"s{k}"
        if k % 1000 == 3:
            f["c.rare"] = k / 3
        maps.append(f)
    cols = FactColumns.of(maps)
    assert len(cols) == n and list(cols.items) == ["a.sparse", "b.dense", "c.rare"]
    for lo, hi in ((0, _CHUNK), (_CHUNK, 2 * _CHUNK), (2 * _CHUNK, n), (5, 6), (_CHUNK - 3, _CHUNK + 3), (7, 7)):
        got = cols.cells(lo, hi)
        assert got == maps[lo:hi]
        assert [[(i, type(v), v) for i, v in g.items()] for g in got] == [
            [(i, type(v), v) for i, v in sorted(m.items())] for m in maps[lo:hi]]
        assert all(list(g) == sorted(g) for g in got)
    none = cols.cells(1, 3)
    assert none[0] is none[1] and isinstance(none[0], MappingProxyType)  # rows with no fact share one map
    assert FactColumns.of([{}, {}]).cells(0, 2) == [{}, {}]
