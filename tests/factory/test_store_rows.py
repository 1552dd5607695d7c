"""`arrow_dicts`: an Arrow table's rows as `to_pylist` gives them, the timestamps built by adding to the epoch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from agent_factory.factory.store import Store
from agent_factory.factory.store.rows import Batch, append_arrow, arrow_dicts, arrow_rows, table_text


def _same(a: list[dict[str, object]], b: list[dict[str, object]]) -> bool:
    # Equal values of the same type and repr: a datetime's tzinfo object included.
    return a == b and all(type(x[k]) is type(y[k]) and repr(x[k]) == repr(y[k]) for x, y in zip(a, b, strict=True)
                          for k in x)


def test_rows_equal_to_pylist_with_the_zone_pyarrow_gives() -> None:
    times = [datetime(2025, 3, 19, 14, 53, 54, 982893, tzinfo=UTC), None, datetime(1969, 12, 31, 23, 59, 59, 1,
                                                                                    tzinfo=UTC),
             datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), datetime(1, 1, 1, tzinfo=UTC)]
    for tz in ("Etc/UTC", "UTC", "+00:00", None):
        t = pa.table({
            "at": pa.array([x if tz else (x.replace(tzinfo=None) if x else None) for x in times],
                           type=pa.timestamp("us", tz=tz)),
            "n": pa.array([1, None, 3, 4, 5]), "s": pa.array(["a", "b", None, "d", "é"]),
        })
        assert _same(arrow_dicts(t), t.to_pylist())


def test_other_zones_and_units_are_left_to_pyarrow() -> None:
    # A zone with daylight saving: the epoch plus a timedelta would be wall-clock arithmetic, so no fast path.
    at = [datetime(2025, 3, 30, 0, 30, tzinfo=UTC) + timedelta(hours=h) for h in range(4)]
    for typ in (pa.timestamp("us", tz="Europe/Berlin"), pa.timestamp("ms", tz="UTC"), pa.timestamp("s")):
        values = at if typ.tz else [x.replace(tzinfo=None) for x in at]
        t = pa.table({"at": pa.array(values, type=typ)})
        assert _same(arrow_dicts(t), t.to_pylist())


def test_duckdb_timestamps_read_as_arrow_equal_duckdbs_own_rows() -> None:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("CREATE TABLE t AS SELECT i, TIMESTAMPTZ '2024-02-29 12:00:00.123456+00' + i * INTERVAL 37 MINUTE"
                " AS ts FROM range(5000) r(i) UNION ALL SELECT 5000, NULL")
    cur = con.execute("SELECT i, ts FROM t ORDER BY i")
    names = [d[0] for d in cur.description]
    expected = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    got = arrow_dicts(con.sql("SELECT i, ts FROM t ORDER BY i").to_arrow_table())
    assert _same(got, expected)


def test_a_record_batch_and_an_empty_table() -> None:
    t = pa.table({"at": pa.array([datetime(2020, 1, 1, tzinfo=UTC)], type=pa.timestamp("us", tz="UTC"))})
    assert _same(arrow_dicts(t.to_batches()[0]), t.to_pylist())
    assert arrow_dicts(t.slice(0, 0)) == []


@pytest.mark.parametrize("values", [[None, None], []])
def test_a_column_of_nulls(values: list[None]) -> None:
    t = pa.table({"at": pa.array(values, type=pa.timestamp("us", tz="UTC"))})
    assert _same(arrow_dicts(t), t.to_pylist())


def test_appends_keep_the_order_of_their_rows_once_the_table_outgrows_a_batch(tmp_path: Path) -> None:
    # DuckDB's search of the stored keys is a hash join; built on the batch once the table is larger, it handed
    # the new rows on in its hash table's order (rows 20,001 on of the default simulation's spans were shuffled).
    with Store(tmp_path / "s.duckdb") as st:
        written: list[str] = []
        for b in range(8):
            ids = [f"t{(b * 7919 + i * 104729) % 1_000_003:07d}" for i in range(4000)]
            if b == 7:
                ids[:10] = written[:10]  # stored keys: the first write of a key wins, the rest keep their order
            append_arrow(st.con, "turns", arrow_rows("turns", [{"id": i, "conversation_id": "c"} for i in ids]))
            written.extend(i for i in ids if i not in set(written[:10]) or b < 7)
        stored = [r[0] for r in st.con.execute("SELECT id FROM turns ORDER BY rowid").fetchall()]
    assert stored == written


def test_a_table_counts_its_text_as_its_rows_would_one_at_a_time(tmp_path: Path) -> None:
    # What DuckDB's memory must make room for (`Store.fit_vector`) is the text of its widest vector of rows:
    # a worker's table is counted vector by vector, as `add` counts rows, whatever the tables' sizes.
    rows = [{"trace_id": "t", "id": str(i), "input": "x" * (i % 97), "output": None if i % 5 else "é" * 3000,
             "attributes": "{}"} for i in range(9000)]
    with Store(tmp_path / "s.duckdb") as st:
        one = Batch(st, "spans", size=1 << 30, max_bytes=1 << 62)
        for r in rows:
            one.add(r)
        tables = Batch(st, "spans", size=1 << 30, max_bytes=1 << 62)
        for lo, hi in ((0, 5), (5, 2100), (2100, 2101), (2101, 7000), (7000, 9000)):
            tables.add_table(arrow_rows("spans", rows[lo:hi]))
        assert (tables.bytes, tables._widest, tables._vector, tables._vector_rows) == (
            one.bytes, one._widest, one._vector, one._vector_rows)
        assert tables._widest > 0 and list(table_text(arrow_rows("spans", rows[:3]), ("input", "output"))) == [
            3000, 1, 2]


def test_tables_are_appended_in_batches_of_the_size_rows_are(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    # Appends of other sizes than `add` makes left the store a quarter larger in blocks no checkpoint freed
    # (1x ingest by workers: 26.7 MiB against 20.7), so a table is cut where `add` would flush.
    from agent_factory.factory.store import rows as rows_module

    sizes: list[int] = []
    real = rows_module.append_arrow
    monkeypatch.setattr(rows_module, "append_arrow",
                        lambda con, table, arrow, *, fresh=False: (sizes.append(arrow.num_rows),
                                                                   real(con, table, arrow, fresh=fresh)))
    with Store(tmp_path / "s.duckdb") as st:
        b = Batch(st, "staged_spans", size=1000)
        b.add({"trace_id": "t", "id": "r0", "seq": 0})
        for n in (2499, 700):
            b.add_table(arrow_rows("staged_spans", [{"trace_id": "t", "id": f"{n}.{i}", "seq": i} for i in range(n)]))
        b.flush()
        assert sizes == [1000, 1000, 1000, 200]
        assert st.con.execute("SELECT count(*) FROM staged_spans").fetchone() == (3200,)
