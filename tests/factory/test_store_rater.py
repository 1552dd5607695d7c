"""A rater per datum: `atomic_data` is keyed by (unit, item, rater), so a second rater's datum sits beside the
first; analyses read the primary rater unless asked otherwise; a store of the schema before the rater is refused."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from agent_factory.errors import StoreError
from agent_factory.evaluators.core import AtomicDatum
from agent_factory.evaluators.kernel import UnitRecord
from agent_factory.factory.store import SCHEMA_VERSION, Batch, Store
from agent_factory.factory.store.data import data_counts, datum_row, drop_items
from agent_factory.factory.store.units import load_rows, unit_row

WHO = {"tier": "rule", "name": "r"}


def _datum(value: str, *, rater: str = "primary", item: str = "x.a") -> AtomicDatum:
    return AtomicDatum(unit_id="t1", layer="trace", item=item, item_version="1", value=value,  # type: ignore[arg-type]
                       collector=WHO, rater=rater)  # type: ignore[arg-type]


def _write(st: Store, *data: AtomicDatum, run_id: str = "r1") -> None:
    b = Batch(st, "atomic_data")
    for d in data:
        b.add(datum_row(d, run_id=run_id))
    b.flush()


def test_a_second_rater_never_overwrites_the_first(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as st:
        units = Batch(st, "units")
        units.add(unit_row(UnitRecord(unit_id="t1", layer="trace", user_key="u", user_id="u", conversation_id="c",
                                      index=0, start=None, end=None, mode=None), run_id="r1"))
        units.flush()
        _write(st, _datum("yes"), _datum("no", rater="audit:openai/m"))
        _write(st, _datum("not_applicable"), run_id="r2")  # a rerun of the primary rater replaces its own datum
        rows = st.con.execute("SELECT rater, value, run_id FROM atomic_data ORDER BY rater").fetchall()
        assert rows == [("audit:openai/m", "no", "r1"), ("primary", "not_applicable", "r2")]
        assert load_rows(st, items={"x.a"})["trace"][0].values == {"x.a": "not_applicable"}
        assert load_rows(st, items={"x.a"}, rater="audit:openai/m")["trace"][0].values == {"x.a": "no"}
        assert data_counts(st) == {"x": {"not_applicable": 1}}
        assert drop_items(st, keep={"x.b"}) == 2  # an item gone from the suite goes with every rater's data


def test_a_store_without_the_rater_column_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "v3.duckdb"
    with Store(path):
        pass
    con = duckdb.connect(str(path))
    con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(StoreError) as e:
        Store(path)
    assert SCHEMA_VERSION == 5  # v5: the store's marker and conversation digests (after v4's rater)
    assert "\n" not in str(e.value) and "schema v3" in str(e.value) and f"v{SCHEMA_VERSION}" in str(e.value)
