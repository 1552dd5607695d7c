"""The `units` table: every unit a run collected, with its user, and the rows analyses read (units joined with
their atomic data of one rater)."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any, cast

from agent_factory.evaluators.core import Layer, UnitRow
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
    # No ORDER BY: DuckDB streams the join instead of sorting millions of rows in its buffer pool; each unit's
    # row is made once and filled in place (its dicts are mutable), then each layer is sorted in Python.
    with store.memory_capped():
        return _load_rows(store, items=items, all_segments=all_segments, rater=rater)


def _load_rows(store: Store, *, items: Collection[str], all_segments: bool, rater: str) -> dict[Layer, list[UnitRow]]:
    units: dict[tuple[str, str], UnitRow] = {}
    # DuckDB hands back a new str per cell: millions of copies of a few item names, values, layers and user ids.
    # One object per distinct string keeps the rows' memory to what they hold (a third less at 10x the default
    # simulation); the values compare and hash as before.
    same: dict[str, str] = {}
    one = same.setdefault
    cur = store.con.cursor()
    cur.execute(
        "SELECT u.unit_id, u.layer, u.user_id, u.conversation_id, u.idx, u.start_epoch, u.end_epoch, u.mode,"
        " d.item, d.value, d.fact FROM units u LEFT JOIN (SELECT unit_id, layer, item, value, fact FROM atomic_data"
        "  WHERE item IN (SELECT unnest(?)) AND rater = ?) d ON d.unit_id = u.unit_id AND d.layer = u.layer"
        " WHERE u.analysed OR ?",
        [sorted(items), rater, all_segments])
    while chunk := cur.fetchmany(50_000):
        for r in chunk:
            row = units.get((r[1], r[0]))
            if row is None:
                layer = cast(Layer, one(r[1], r[1]))
                row = units[(layer, r[0])] = UnitRow(
                    r[0], layer, r[2] if r[2] is None else one(r[2], r[2]), r[3] if r[3] is None else one(r[3], r[3]),
                    r[4] or 0, r[5], r[6], r[7] if r[7] is None else one(r[7], r[7]), {}, {})
            if r[8] is None:
                continue
            item = one(r[8], r[8])
            row.values[item] = one(r[9], r[9])  # type: ignore[index]
            if r[10] is not None and r[10] != "null":
                row.facts[item] = json.loads(r[10])  # type: ignore[index]
    rows: dict[Layer, list[UnitRow]] = {"span": [], "trace": [], "conversation": [], "engagement": []}
    for row in units.values():
        rows[row.layer].append(row)
    units.clear()
    for lst in rows.values():
        lst.sort(key=row_order)
    return rows
