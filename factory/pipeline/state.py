"""What the pipeline keeps in the store between runs, and the queries that turn a change into work.

- `pipeline_nodes`: the fingerprints of the last *complete* run (written last, in one transaction, so a killed
  run leaves the previous state and the next run redoes what it had not finished);
- `pipeline_sources`: the files that run had seen, so new files give the users whose units must be rebuilt;
- `units`: every unit a run collected, with its user, so a user's stale data can be dropped and analyses can
  read stored data without rebuilding units.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_factory.evaluators.core import Layer, UnitRow
from agent_factory.factory.store import Store, arrow_rows

GRAPH_VERSION_KEY = "pipeline.graph_version"
HORIZON_KEY = "pipeline.horizon"
WINDOW_KEY = "pipeline.window_days"


@dataclass(frozen=True)
class Previous:
    """The last complete run as the pipeline recorded it."""

    fingerprints: dict[str, str]
    sources: frozenset[str]
    horizon: float | None
    window_days: float | None
    """The engagement window the units were built with."""


def load_previous(store: Store, *, graph_version: str) -> Previous | None:
    """The last complete run's state; None if there is none (or it was made by another graph version)."""
    if store.get_meta(GRAPH_VERSION_KEY) != graph_version:
        return None
    nodes = dict(store.con.execute("SELECT node, fp FROM pipeline_nodes").fetchall())
    if not nodes:
        return None
    sources = frozenset(r[0] for r in store.con.execute("SELECT source_id FROM pipeline_sources").fetchall())
    horizon, window = store.get_meta(HORIZON_KEY), store.get_meta(WINDOW_KEY)
    return Previous(fingerprints=nodes, sources=sources, horizon=float(horizon) if horizon else None,
                    window_days=float(window) if window else None)


def save_state(
    store: Store, *, fingerprints: Mapping[str, str], sources: Iterable[str], horizon: float | None, run_id: str,
    graph_version: str, window_days: float,
) -> None:
    """Record a complete run (replacing the previous record)."""
    con = store.con
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM pipeline_nodes")
        con.executemany("INSERT INTO pipeline_nodes VALUES (?, ?, ?)",
                        [(n, fp, run_id) for n, fp in sorted(fingerprints.items())])
        con.execute("DELETE FROM pipeline_sources")
        con.executemany("INSERT INTO pipeline_sources VALUES (?)", [(s,) for s in sorted(sources)])
        store.set_meta(HORIZON_KEY, repr(horizon) if horizon is not None else "")
        store.set_meta(WINDOW_KEY, repr(window_days))
        store.set_meta(GRAPH_VERSION_KEY, graph_version)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def current_sources(store: Store) -> frozenset[str]:
    """Ids of the files ingested into the store."""
    return frozenset(r[0] for r in store.con.execute("SELECT source_id FROM sources").fetchall())


def all_user_keys(store: Store) -> int:
    """Number of user keys (the user id, or the conversation id when a source names no user)."""
    row = store.con.execute("SELECT count(DISTINCT coalesce(user_id, conversation_id)) FROM turns").fetchone()
    return int(row[0]) if row else 0


def users_touched(
    store: Store, *, new_sources: Collection[str], old_horizon: float | None, new_horizon: float | None,
    window_days: float,
) -> set[str]:
    """User keys whose units new files can change: users with a turn, event or conversation record of a new file,
    and, when the horizon moved, users whose engagement window the old horizon had cut short."""
    con = store.con
    users: set[str] = set()
    if new_sources:
        src = sorted(new_sources)
        users.update(r[0] for r in con.execute(
            "SELECT DISTINCT coalesce(user_id, conversation_id) FROM turns WHERE source_id IN (SELECT unnest(?))",
            [src]).fetchall())
        users.update(r[0] for r in con.execute(
            "SELECT DISTINCT coalesce(t.user_id, t.conversation_id) FROM turns t JOIN ("
            "  SELECT conversation_id AS cid FROM events WHERE source_id IN (SELECT unnest(?))"
            "  UNION SELECT id AS cid FROM conversations WHERE source_id IN (SELECT unnest(?))"
            ") c ON t.conversation_id = c.cid", [src, src]).fetchall())
        users.update(r[0] for r in con.execute(
            "SELECT DISTINCT user_id FROM events WHERE user_id IS NOT NULL AND source_id IN (SELECT unnest(?))",
            [src]).fetchall())
    if old_horizon is not None and new_horizon != old_horizon:
        users.update(r[0] for r in con.execute(
            "SELECT coalesce(user_id, conversation_id) FROM turns GROUP BY 1"
            " HAVING epoch(max(coalesce(end_time, start_time))) + ? > ?",
            [window_days * 86400.0, old_horizon]).fetchall())
    users.discard(None)
    return users


def drop_users(store: Store, users: Collection[str] | None) -> int:
    """Delete the stored units and data of `users` (None: of everyone); the number of data rows removed."""
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


def drop_items(store: Store, *, keep: Collection[str]) -> int:
    """Delete stored data of items no current definition produces; the number of rows removed."""
    n = store.con.execute("DELETE FROM atomic_data WHERE item NOT IN (SELECT unnest(?))", [sorted(keep)]).fetchone()
    return int(n[0]) if n else 0


def count_rows(store: Store, table: str) -> int:
    """Number of rows in `table`."""
    row = store.con.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0



def data_counts(store: Store) -> dict[str, dict[str, int]]:
    """Stored data per component by value."""
    out: dict[str, dict[str, int]] = {}
    for comp, value, n in store.con.execute(
        "SELECT split_part(item, '.', 1), value, count(*) FROM atomic_data GROUP BY 1, 2 ORDER BY 1, 2"
    ).fetchall():
        out.setdefault(comp, {})[value] = int(n)
    return out


def row_order(r: UnitRow) -> tuple[Any, ...]:
    """The order analyses read rows in: (user, time), whatever order collection finished in."""
    return (r.user_id or "", r.start if r.start is not None else 0.0, r.conversation_id or "", r.position, r.unit_id)


def load_rows(store: Store, *, items: Collection[str], all_segments: bool = False) -> dict[Layer, list[UnitRow]]:
    """The analysed units with their values (and facts) of `items`, per layer, in `row_order`; with
    `all_segments`, also the turns of excluded traffic (collected for the components that count them)."""
    # No ORDER BY: DuckDB streams the join instead of sorting millions of rows in its buffer pool; each unit's
    # row is made once and filled in place (its dicts are mutable), then each layer is sorted in Python.
    with store.memory_capped():
        return _load_rows(store, items=items, all_segments=all_segments)


def _load_rows(store: Store, *, items: Collection[str], all_segments: bool) -> dict[Layer, list[UnitRow]]:
    units: dict[tuple[str, str], UnitRow] = {}
    cur = store.con.cursor()
    cur.execute(
        "SELECT u.unit_id, u.layer, u.user_id, u.conversation_id, u.idx, u.start_epoch, u.end_epoch, u.mode,"
        " d.item, d.value, d.fact FROM units u LEFT JOIN (SELECT unit_id, layer, item, value, fact FROM atomic_data"
        "  WHERE item IN (SELECT unnest(?))) d ON d.unit_id = u.unit_id AND d.layer = u.layer WHERE u.analysed OR ?",
        [sorted(items), all_segments])
    while chunk := cur.fetchmany(50_000):
        for r in chunk:
            row = units.get((r[1], r[0]))
            if row is None:
                row = units[(r[1], r[0])] = UnitRow(r[0], r[1], r[2], r[3], r[4] or 0, r[5], r[6], r[7], {}, {})
            if r[8] is None:
                continue
            row.values[r[8]] = r[9]  # type: ignore[index]
            if r[10] is not None and r[10] != "null":
                row.facts[r[8]] = json.loads(r[10])  # type: ignore[index]
    rows: dict[Layer, list[UnitRow]] = {"span": [], "trace": [], "conversation": [], "engagement": []}
    for row in units.values():
        rows[row.layer].append(row)
    units.clear()
    for lst in rows.values():
        lst.sort(key=row_order)
    return rows


_RESULT_CONTENT = ("component", "layer", "metric", "stratum", "unit_id", "value", "low", "high", "n", "note",
                   "analysis")
"""What makes two result rows the same; `run_id` and `analysis_version` (the analysis's content version) say
which run and which code first produced the row, so a rerun that reproduces it leaves it as it was."""


def merge_results(store: Store, rows: Sequence[dict[str, Any]], *, analyses: Collection[str],
                  keep_analyses: Collection[str]) -> dict[str, int]:
    """Replace the results of `analyses` by `rows`, leaving every row whose content is unchanged as it is
    (with the run id that first produced it), and drop results of analyses no longer in the suite
    (`keep_analyses`: every analysis of the suite). Counts: added, removed, and unchanged (every stored
    result this merge left as it was, whether its analysis reran or not)."""
    con = store.con
    fresh = arrow_rows("results", list(rows))  # noqa: F841 - scanned by name below
    same = " AND ".join(f"r.{c} IS NOT DISTINCT FROM f.{c}" for c in _RESULT_CONTENT)
    names = sorted(analyses)
    con.execute("BEGIN TRANSACTION")
    try:
        removed = con.execute(
            f"DELETE FROM results r WHERE r.analysis IN (SELECT unnest(?)) AND NOT EXISTS"
            f" (SELECT 1 FROM fresh f WHERE {same})", [names]).fetchone()
        added = con.execute(
            f"INSERT INTO results SELECT * FROM fresh f WHERE NOT EXISTS"
            f" (SELECT 1 FROM results r WHERE r.analysis IN (SELECT unnest(?)) AND {same})", [names]).fetchone()
        gone = con.execute("DELETE FROM results WHERE analysis NOT IN (SELECT unnest(?))",
                           [sorted(keep_analyses)]).fetchone()
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    n_removed, n_added = (int(x[0]) if x else 0 for x in (removed, added))
    total = con.execute("SELECT count(*) FROM results").fetchone()
    return {"added": n_added, "removed": n_removed + (int(gone[0]) if gone else 0),
            "unchanged": (int(total[0]) if total else 0) - n_added}
