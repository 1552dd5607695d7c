"""The `atomic_data` table: one row per (unit, item, rater); `primary` is the suite's own cascade, a second
rater (`audit:<model-id>`) sits beside it instead of replacing it."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from agent_factory.evaluators.core import AtomicDatum
from agent_factory.evaluators.core.model import PRIMARY_RATER
from agent_factory.factory.store.base import Store
from agent_factory.factory.store.rows import dumps


def datum_row(d: AtomicDatum, *, run_id: str) -> dict[str, Any]:
    """The `atomic_data` row of a datum a run collected (or found in the cache)."""
    return {
        "unit_id": d.unit_id, "item": d.item, "layer": d.layer, "item_version": d.item_version,
        "value": d.value, "fact": dumps(d.fact), "reason": d.reason,
        "evidence": dumps([p.model_dump() for p in d.evidence]), "tier": d.collector.tier,
        "collector": d.collector.name, "family": d.collector.family,
        "collector_version": d.collector.version, "tokens": d.tokens, "cost_usd": d.cost_usd,
        "coverage": d.coverage, "key": d.key, "run_id": run_id, "rater": d.rater,
    }


def drop_items(store: Store, *, keep: Collection[str]) -> int:
    """Delete stored data (of every rater) of items no current definition produces; the number of rows removed."""
    n = store.con.execute("DELETE FROM atomic_data WHERE item NOT IN (SELECT unnest(?))", [sorted(keep)]).fetchone()
    return int(n[0]) if n else 0


def data_counts(store: Store, *, rater: str = PRIMARY_RATER) -> dict[str, dict[str, int]]:
    """`rater`'s stored data per component by value."""
    out: dict[str, dict[str, int]] = {}
    for comp, value, n in store.con.execute(
        "SELECT split_part(item, '.', 1), value, count(*) FROM atomic_data WHERE rater = ? GROUP BY 1, 2"
        " ORDER BY 1, 2", [rater]
    ).fetchall():
        out.setdefault(comp, {})[value] = int(n)
    return out


def count_not_written_by(store: Store, run_id: str) -> int:
    """Stored data rows run `run_id` did not write (kept from earlier runs)."""
    row = store.con.execute("SELECT count(*) FROM atomic_data WHERE run_id IS DISTINCT FROM ?", [run_id]).fetchone()
    return int(row[0]) if row else 0
