"""The rows every flag is decided from: the last run's units, the primary rater's data of the flags' items and
the per-unit results, read for `factory.views.findings` (which hands them to the pure `evaluators.findings`).

With a `user`, each read keeps that user's units only: `show UNIT_ID` reads one user's flags, and filtering the
rows by unit id keeps it quick on a large store.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from functools import lru_cache
from typing import Any, cast

from agent_factory.evaluators.core.model import Layer
from agent_factory.evaluators.findings import DatumRow, ResultRow, UnitKey
from agent_factory.factory.store.base import Store

_OF_USER = " AND unit_id IN (SELECT unit_id FROM units WHERE user_id = ?)"
"""The filter of a read to one user's units (its one parameter: the user id)."""


@lru_cache(maxsize=65536)
def decode_fact(raw: str | None) -> float | str | None:
    """A stored JSON fact or result value as a flag reads it: a number or a string; anything else is None."""
    # Cached: the result values and facts read are few distinct strings (`"violated"`, `null`, labels) over
    # hundreds of thousands of rows; decoding each again took 2 of the 12 s of `show --worst` on the quick start.
    if raw is None:
        return None
    v: Any = json.loads(raw)
    return v if isinstance(v, int | float | str) and not isinstance(v, bool) else None


def unit_keys(store: Store, *, user: str | None = None) -> list[UnitKey]:
    """The units of the last run (of `user` only, when given), in (layer, unit id) order."""
    where, args = (" WHERE user_id = ?", [user]) if user is not None else ("", [])
    rows = store.con.execute(
        "SELECT unit_id, layer, conversation_id, user_id, coalesce(idx, 0) FROM units" + where
        + " ORDER BY layer, unit_id", args).fetchall()
    return [UnitKey(u, cast(Layer, layer), c, owner, int(i)) for u, layer, c, owner, i in rows]


def flag_data(store: Store, *, items: Collection[str], with_fact: Collection[str],
              user: str | None = None) -> list[DatumRow]:
    """The primary rater's data of `items` (of `user`'s units only, when given); the fact is read and decoded
    only for the items of `with_fact` (decoding every datum's JSON fact cost most of the read)."""
    mine, extra = (_OF_USER, [user]) if user is not None else ("", [])
    rows = store.con.execute(
        "SELECT unit_id, item, value, CASE WHEN item IN (SELECT unnest(?)) THEN fact END FROM atomic_data"
        " WHERE rater = 'primary' AND item IN (SELECT unnest(?))" + mine,
        [sorted(with_fact), sorted(items), *extra]).fetchall()
    return [DatumRow(u, i, v, decode_fact(f) if f is not None else None) for u, i, v, f in rows]


def flag_results(store: Store, *, metrics: Collection[tuple[str, str]], user: str | None = None) -> list[ResultRow]:
    """The per-unit results of `metrics` ((component, metric) pairs), of `user`'s units only when given."""
    mine, extra = (_OF_USER, [user]) if user is not None else ("", [])
    wanted = {f"{c}/{m}" for c, m in metrics}
    rows = store.con.execute(
        "SELECT unit_id, component, metric, value FROM results WHERE unit_id IS NOT NULL" + mine, extra).fetchall()
    return [ResultRow(u, c, m, decode_fact(v)) for u, c, m, v in rows if f"{c}/{m}" in wanted]
