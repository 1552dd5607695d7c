"""The `units` table: every unit a run collected, with its user, and the rows analyses read (units joined with
their atomic data of one rater)."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from types import MappingProxyType
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from agent_factory.evaluators.core import Layer, UnitRow, Value
from agent_factory.evaluators.core.model import PRIMARY_RATER
from agent_factory.evaluators.kernel import UnitRecord, row_order
from agent_factory.factory.store.base import Store


def unit_row(u: UnitRecord, *, run_id: str) -> dict[str, Any]:
    """The `units` row of a unit a run visited."""
    return {
        "unit_id": u.unit_id, "layer": u.layer, "user_key": u.user_key, "user_id": u.user_id,
        "conversation_id": u.conversation_id, "idx": u.index,
        "start_epoch": u.start.timestamp() if u.start is not None else None,
        "end_epoch": u.end.timestamp() if u.end is not None else None, "mode": u.mode,
        "analysed": u.analysed, "run_id": run_id,
    }


def drop_users(store: Store, users: Collection[str] | None) -> int:
    """Delete the stored units and data (of every rater) of `users` (None: of everyone); the number of data
    rows removed."""
    con = store.con
    if users is None:
        n = con.execute("DELETE FROM atomic_data").fetchone()
        con.execute("DELETE FROM units")
        return int(n[0]) if n else 0
    if not users:
        return 0
    keys = sorted(users)
    n = con.execute("DELETE FROM atomic_data WHERE unit_id IN"
                    " (SELECT unit_id FROM units WHERE user_key IN (SELECT unnest(?)))", [keys]).fetchone()
    con.execute("DELETE FROM units WHERE user_key IN (SELECT unnest(?))", [keys])
    return int(n[0]) if n else 0


def load_rows(store: Store, *, items: Collection[str], all_segments: bool = False,
              rater: str = PRIMARY_RATER) -> dict[Layer, list[UnitRow]]:
    """The analysed units with `rater`'s values (and facts) of `items`, per layer, in `row_order`; with
    `all_segments`, also the turns of excluded traffic (collected for the components that count them)."""
    # No ORDER BY: DuckDB hands back one row per unit unsorted (a sort would hold them in its buffer pool); each
    # layer is sorted in Python.
    with store.memory_capped():
        return _load_rows(store, items=items, all_segments=all_segments, rater=rater)


_ITEM_SEP, _PAIR_SEP = "\x1f", "\x1e"  # neither occurs in an item id or a value (a fixed vocabulary)
_EMPTY: Mapping[str, Any] = MappingProxyType({})
"""The values and the facts of a unit that has none."""


_BATCH = 50_000
"""Rows per Arrow batch of a load (a batch's Python values are made at once, then dropped)."""


def _shared(col: pa.Array[Any], make: Callable[[Any], Any]) -> list[Any]:
    """The column's cells as Python values, one object per distinct value, made by `make` (None stays None): a
    column of few distinct values (a layer, a user, a unit's values folded into one string) costs one object each."""
    enc = cast("pa.DictionaryArray[Any, Any]", pc.dictionary_encode(col))
    distinct = [None if v is None else make(v) for v in enc.dictionary.to_pylist()]
    return [None if k is None else distinct[k] for k in enc.indices.to_pylist()]


def _load_rows(store: Store, *, items: Collection[str], all_segments: bool, rater: str) -> dict[Layer, list[UnitRow]]:
    # A unit's values come from a small vocabulary over a fixed set of items, so few units differ: 88 distinct
    # value maps among 9,043 traces of the default simulation, 2 among 38,751 spans. DuckDB folds each unit's
    # values into one string; every unit with the same string shares one read-only map, and units without facts
    # share one empty map. At 10x the default simulation (415 distinct maps among 518k units) the rows took
    # 275 MB, against 496 MB with two dicts per unit, and loading and analysing went from 27.7 to 20.1 s.
    # The rows come as Arrow batches (DuckDB's tuples cost a Python object per cell), and every string column
    # holds one object per distinct value (`_shared`); so do the facts (903k facts, 124k distinct, at 10x).
    same: dict[Any, Any] = {}
    one = same.setdefault

    def intern(v: Any) -> Any:
        return one(v, v)

    wanted = sorted(items)
    cur = store.con.cursor()
    facts: dict[tuple[str, str], dict[str, float | str | None]] = {}
    parsed: dict[str, Any] = {}

    def fact_value(text: str) -> Any:
        v = parsed.get(text, parsed)
        if v is parsed:
            v = parsed[text] = json.loads(text)
            if isinstance(v, str):
                v = intern(v)
        return v

    fact_rows = cur.sql(
        "SELECT d.layer, d.unit_id, d.item, d.fact FROM atomic_data d WHERE d.item IN (SELECT unnest(?))"
        " AND d.rater = ? AND d.fact IS NOT NULL AND d.fact <> 'null'", params=[wanted, rater])
    for batch in fact_rows.to_arrow_reader(_BATCH):
        layer, unit, item, fact = (batch.column(k) for k in range(4))
        for key, it, v in zip(zip(_shared(layer, intern), unit.to_pylist(), strict=True), _shared(item, intern),
                              _shared(fact, fact_value), strict=True):
            facts.setdefault(key, {})[it] = v
    unit_rows = cur.sql(
        "SELECT u.unit_id, u.layer, u.user_id, u.conversation_id, u.idx, u.start_epoch, u.end_epoch, u.mode, d.vals"
        " FROM units u LEFT JOIN (SELECT unit_id, layer,"
        f"  string_agg(item || '{_ITEM_SEP}' || value, '{_PAIR_SEP}') AS vals FROM atomic_data"
        "  WHERE item IN (SELECT unnest(?)) AND rater = ? GROUP BY unit_id, layer) d"
        " ON d.unit_id = u.unit_id AND d.layer = u.layer WHERE u.analysed OR ?",
        params=[wanted, rater, all_segments])

    maps: dict[str, Mapping[str, Value]] = {}

    def shared_values(vals: str) -> Mapping[str, Value]:
        m = maps.get(vals)
        if m is None:
            # Sorted: the string's order is DuckDB's, a map's (what iterating it gives) is the items'.
            pairs = sorted(p.split(_ITEM_SEP, 1) for p in vals.split(_PAIR_SEP))
            m = maps[vals] = MappingProxyType({intern(k): intern(v) for k, v in pairs})
        return m

    rows: dict[Layer, list[UnitRow]] = {"span": [], "trace": [], "conversation": [], "engagement": []}
    for batch in unit_rows.to_arrow_reader(_BATCH):
        c = batch.column
        for unit_id, layer, user_id, conv_id, idx, start, end, mode, values in zip(
                c(0).to_pylist(), _shared(c(1), intern), _shared(c(2), intern), _shared(c(3), intern),
                c(4).to_pylist(), c(5).to_pylist(), c(6).to_pylist(), _shared(c(7), intern),
                _shared(c(8), shared_values), strict=True):
            f = facts.pop((layer, unit_id), None)
            if f is not None and len(f) > 1:
                f = dict(sorted(f.items()))
            rows[layer].append(UnitRow(unit_id, layer, user_id, conv_id, idx or 0, start, end, mode,
                                       _EMPTY if values is None else values, _EMPTY if f is None else f))
    for lst in rows.values():
        lst.sort(key=row_order)
    return rows
