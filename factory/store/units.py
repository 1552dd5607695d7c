"""The `units` table: every unit a run collected, with its user, and the rows analyses read (units joined with
their atomic data of one rater)."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from types import MappingProxyType
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from agent_factory.evaluators.core import LAYERS, Layer, Value
from agent_factory.evaluators.core.model import PRIMARY_RATER
from agent_factory.evaluators.core.rows import Coded, FactColumns, LayerRows
from agent_factory.evaluators.kernel import UnitRecord
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


def layer_counts(store: Store) -> dict[str, int]:
    """The number of units of the last run per layer, in layer name order."""
    rows = store.con.execute("SELECT layer, count(*) FROM units GROUP BY layer ORDER BY layer").fetchall()
    return {str(layer): int(n) for layer, n in rows}


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
              rater: str = PRIMARY_RATER, layers: Collection[Layer] | None = None) -> dict[Layer, LayerRows]:
    """The analysed units with `rater`'s values (and facts) of `items`, per layer, in `row_order`; with
    `all_segments`, also the turns of excluded traffic (collected for the components that count them).
    `layers`: only these (None: every layer), in `LAYERS` order."""
    with store.memory_capped():
        return {layer: _load_layer(store, layer, items=sorted(items), all_segments=all_segments, rater=rater)
                for layer in LAYERS if layers is None or layer in layers}


_EMPTY: Mapping[str, Any] = MappingProxyType({})
"""The values of a unit that has none (its facts: `FactColumns`)."""


_BATCH = 50_000
"""Rows per Arrow batch of a load (a batch's Python values are made at once, then dropped)."""


def _coded(col: pa.ChunkedArray[Any] | pa.Array[Any], make: Callable[[Any], Any]) -> Coded:
    """A column of few distinct values as codes, each distinct value made once by `make` (None stays None)."""
    enc = cast("pa.DictionaryArray[Any, Any]", pc.dictionary_encode(
        col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col))
    vocab = [None if v is None else make(v) for v in enc.dictionary.to_pylist()]
    codes = enc.indices.fill_null(len(vocab)).to_numpy(zero_copy_only=False).astype(np.int32)
    return Coded(codes, (*vocab, None))


def _epochs(col: Any) -> npt.NDArray[np.float64]:
    """Epoch seconds, a missing time as NaN (how `LayerRows` holds it)."""
    filled = col.cast(pa.float64()).fill_null(float("nan"))
    return cast("npt.NDArray[np.float64]", filled.to_numpy().astype(np.float64))


def _load_layer(store: Store, layer: Layer, *, items: list[str], all_segments: bool, rater: str) -> LayerRows:
    # One layer at a time, each held as columns (`LayerRows`). At 10x the default simulation the largest group's
    # 502k rows held 161 MB of Python objects as tuples, 77 MB as columns with one facts map per unit, and hold
    # 51 MB with the facts as columns too (`_load_facts`); DuckDB's aggregate of one layer's values is smaller
    # than that of all four. A unit's values come from a small vocabulary over a fixed set of items, so few units
    # differ: 88 distinct value maps among 9,043 traces of the default simulation, 2 among 38,751 spans. Every
    # unit with the same values shares one read-only map (below). The facts' values are made once per distinct
    # value too (903k facts, 124k distinct, at 10x).
    same: dict[Any, Any] = {}
    one = same.setdefault

    def intern(v: Any) -> Any:
        return one(v, v)

    cur = store.con.cursor()
    parsed: dict[str, Any] = {}

    def fact_value(text: str) -> Any:
        v = parsed.get(text, parsed)
        if v is parsed:
            v = parsed[text] = json.loads(text)
            if isinstance(v, str):
                v = intern(v)
        return v

    # A unit's values as a bitmap over the layer's distinct (item, value) pairs, in 64-bit words: DuckDB's state
    # per unit is a few words, not the string of its values (at 10x the default simulation, 117 MB of aggregate
    # and Arrow batches for the traces' strings), and every unit with the same bitmap shares one read-only map.
    pairs = cur.sql(
        "SELECT DISTINCT item, value FROM atomic_data WHERE layer = ? AND item IN (SELECT unnest(?)) AND rater = ?"
        " AND value IS NOT NULL ORDER BY item, value", params=[layer, items, rater]).to_arrow_table()
    words = max(1, -(-pairs.num_rows // 64))
    cur.register("value_pairs", pa.table({"item": pairs["item"], "value": pairs["value"],
                                          "pid": pa.array(range(pairs.num_rows), pa.int64())}))
    bits = ", ".join(f"bit_or(CASE WHEN p.pid // 64 = {w} THEN 1::UBIGINT << (p.pid % 64) END) AS w{w}"
                     for w in range(words))
    # No ORDER BY: DuckDB would hold the rows in its buffer pool to sort them; Arrow sorts the columns below.
    table: Any = cur.sql(
        "SELECT u.unit_id, u.user_id, u.conversation_id, coalesce(u.idx, 0) AS idx, u.start_epoch, u.end_epoch,"
        f" u.mode, {', '.join(f'v.w{w}' for w in range(words))} FROM units u LEFT JOIN (SELECT d.unit_id, {bits}"
        "  FROM atomic_data d JOIN value_pairs p ON p.item = d.item AND p.value = d.value"
        "  WHERE d.layer = ? AND d.rater = ? GROUP BY d.unit_id) v"
        " ON v.unit_id = u.unit_id WHERE u.layer = ? AND (u.analysed OR ?)",
        params=[layer, rater, layer, all_segments]).to_arrow_table()
    cur.unregister("value_pairs")
    bitmap = np.stack([table[f"w{w}"].fill_null(0).to_numpy().astype(np.uint64) for w in range(words)], axis=1)
    table = table.drop_columns([f"w{w}" for w in range(words)])
    distinct, codes = np.unique(bitmap, axis=0, return_inverse=True)
    del bitmap
    names = [intern(v) for v in pairs["item"].to_pylist()]
    values_of = [intern(v) for v in pairs["value"].to_pylist()]

    def value_map(row: npt.NDArray[np.uint64]) -> Mapping[str, Value]:
        pids = [w * 64 + b for w, word in enumerate(row.tolist()) for b in range(64) if word >> b & 1]
        # In pid order, which is (item, value) order: a map iterates its items sorted, as stored rows always did.
        return MappingProxyType({names[k]: values_of[k] for k in pids}) if pids else _EMPTY

    # `row_order`: (user or "", start or 0, conversation or "", position, unit id); Arrow orders strings by their
    # UTF-8 bytes, which is Python's order of their code points.
    keys: dict[str, Any] = {
        "u": table["user_id"].fill_null(""), "s": table["start_epoch"].cast(pa.float64()).fill_null(0.0),
        "c": table["conversation_id"].fill_null(""), "p": table["idx"], "id": table["unit_id"]}
    order = pc.sort_indices(pa.table(keys), sort_keys=[(k, "ascending") for k in keys])
    table = table.take(order)
    values = Coded(codes.reshape(-1).astype(np.int32)[order.to_numpy()], tuple(value_map(r) for r in distinct))
    del order, codes
    unit_id = table["unit_id"].combine_chunks()
    facts = _load_facts(cur, layer, unit_id, items=items, rater=rater, make=fact_value)
    return LayerRows(
        layer, unit_id=unit_id, user_id=_coded(table["user_id"], intern),
        conversation_id=_coded(table["conversation_id"], intern),
        position=table["idx"].to_numpy().astype(np.int64), start=_epochs(table["start_epoch"]),
        end=_epochs(table["end_epoch"]), mode=_coded(table["mode"], intern), values=values, facts=facts)


def _load_facts(cur: Any, layer: Layer, unit_id: pa.Array[Any], *, items: list[str], rater: str,
                make: Callable[[Any], Any]) -> FactColumns:
    """The facts of the units `unit_id` (a layer's, in its rows' order) as columns. DuckDB joins each fact to
    its row's position, so what comes back is a number, the item and the fact's text, not the unit id; each
    distinct text of an item is parsed once (`make`)."""
    cur.register("unit_pos", pa.table({"unit_id": unit_id, "pos": pa.array(np.arange(len(unit_id)), pa.int64())}))
    rel = cur.sql(
        "SELECT p.pos, d.item, d.fact FROM atomic_data d JOIN unit_pos p ON p.unit_id = d.unit_id"
        " WHERE d.layer = ? AND d.item IN (SELECT unnest(?)) AND d.rater = ? AND d.fact IS NOT NULL"
        " AND d.fact <> 'null'", params=[layer, items, rater])
    parts: dict[str, list[tuple[npt.NDArray[np.int64], pa.Array[Any]]]] = {}
    for batch in rel.to_arrow_reader(_BATCH):
        pos, item, fact = (batch.column(k) for k in range(3))
        enc = cast("pa.DictionaryArray[Any, Any]", pc.dictionary_encode(item))
        codes = enc.indices.to_numpy(zero_copy_only=False)
        positions = pos.to_numpy(zero_copy_only=False)
        for k, name in enumerate(enc.dictionary.to_pylist()):
            mask = codes == k
            parts.setdefault(str(name), []).append((positions[mask], fact.filter(pa.array(mask))))
    cur.unregister("unit_pos")
    columns: dict[str, tuple[npt.NDArray[np.int64], Coded]] = {}
    for name in sorted(parts):
        pos = np.concatenate([p for p, _ in parts[name]]).astype(np.int64)
        order = np.argsort(pos, kind="stable")
        text = pa.concat_arrays([t for _, t in parts[name]]).take(order)
        columns[name] = (pos[order], _coded(text, make))
    return FactColumns(len(unit_id), columns)
