"""`load_rows`: each layer's units with their values and facts, read back as the data were written, in
`row_order`, each distinct set of values one shared map (a bitmap over the layer's (item, value) pairs, in as
many 64-bit words as the pairs need)."""

from __future__ import annotations

from pathlib import Path

from agent_factory.evaluators.core import AtomicDatum
from agent_factory.evaluators.kernel import UnitRecord, row_order
from agent_factory.factory.store import Batch, Store
from agent_factory.factory.store.data import datum_row
from agent_factory.factory.store.units import load_rows, unit_row

WHO = {"tier": "rule", "name": "r"}


def _datum(unit: str, item: str, value: str, fact: object = None) -> AtomicDatum:
    return AtomicDatum(unit_id=unit, layer="trace", item=item, item_version="1", value=value,  # type: ignore[arg-type]
                       collector=WHO, rater="primary", fact=fact)  # type: ignore[arg-type]


def test_values_over_many_words_read_back_as_written(tmp_path: Path) -> None:
    # 70 items of two values each: 140 pairs, three words of the bitmap.
    items = [f"x.i{k:02d}" for k in range(70)]
    written: dict[str, dict[str, str]] = {
        "t1": {i: "yes" for i in items},
        "t2": {i: ("no" if k % 3 else "yes") for k, i in enumerate(items) if k % 5},
        "t3": {i: "yes" for i in items},  # as t1: the same map object
        "t4": {},  # no values
        "t5": {items[69]: "no"},  # only the last pair
    }
    with Store(tmp_path / "s.duckdb") as st:
        units = Batch(st, "units")
        for n, uid in enumerate(sorted(written, reverse=True)):
            units.add(unit_row(UnitRecord(unit_id=uid, layer="trace", user_key=f"u{n % 2}", user_id=f"u{n % 2}",
                                          conversation_id="c", index=n, start=None, end=None, mode=None),
                               run_id="r1"))
        units.flush()
        data = Batch(st, "atomic_data")
        for uid, vals in written.items():
            for item, value in vals.items():
                data.add(datum_row(_datum(uid, item, value, fact=1.5 if item == items[0] else None), run_id="r1"))
        data.add(datum_row(_datum("t1", "y.other", "yes"), run_id="r1"))  # an item not asked for
        data.flush()
        rows = load_rows(st, items=set(items))
    trace = list(rows["trace"])
    assert [r.unit_id for r in trace] == [r.unit_id for r in sorted(trace, key=row_order)]
    got = {r.unit_id: r for r in trace}
    assert {uid: dict(r.values) for uid, r in got.items()} == written
    assert all(list(r.values) == sorted(r.values) for r in trace)  # a map iterates its items in order
    assert got["t1"].values is got["t3"].values and got["t4"].values is not got["t1"].values
    assert got["t1"].facts == {items[0]: 1.5} and got["t5"].facts == {}
    assert len(rows["span"]) == len(rows["conversation"]) == len(rows["engagement"]) == 0
