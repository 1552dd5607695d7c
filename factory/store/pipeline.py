"""What the pipeline keeps in the store between runs, and the queries that turn a change into work (all SQL of
the `factory.store` package).

- `pipeline_nodes`: the fingerprints of the last *complete* run (written last, in one transaction, so a killed
  run leaves the previous state and the next run redoes what it had not finished);
- `pipeline_sources`: the files that run had seen, so new files give the users whose units must be rebuilt;
- `units`: every unit a run collected, with its user, so a user's stale data can be dropped and analyses can
  read stored data without rebuilding units.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from agent_factory.factory.store.base import Store

GRAPH_VERSION_KEY = "pipeline.graph_version"
HORIZON_KEY = "pipeline.horizon"
WINDOW_KEY = "pipeline.window_days"
RETRY_KEY = "pipeline.retry"


@dataclass(frozen=True)
class Previous:
    """The last complete run as the pipeline recorded it."""

    fingerprints: dict[str, str]
    sources: frozenset[str]
    horizon: float | None
    window_days: float | None
    """The engagement window the units were built with."""
    retry: frozenset[str] = frozenset()
    """Definitions with data that run could not collect but a rerun could (budget, provider errors)."""


def load_previous(store: Store, *, graph_version: str) -> Previous | None:
    """The last complete run's state; None if there is none (or it was made by another graph version)."""
    if store.get_meta(GRAPH_VERSION_KEY) != graph_version:
        return None
    nodes = dict(store.con.execute("SELECT node, fp FROM pipeline_nodes").fetchall())
    if not nodes:
        return None
    sources = frozenset(r[0] for r in store.con.execute("SELECT source_id FROM pipeline_sources").fetchall())
    horizon, window, retry = store.get_meta(HORIZON_KEY), store.get_meta(WINDOW_KEY), store.get_meta(RETRY_KEY)
    return Previous(fingerprints=nodes, sources=sources, horizon=float(horizon) if horizon else None,
                    window_days=float(window) if window else None,
                    retry=frozenset(json.loads(retry)) if retry else frozenset())


def save_state(
    store: Store, *, fingerprints: Mapping[str, str], sources: Iterable[str], horizon: float | None, run_id: str,
    graph_version: str, window_days: float, retry: Iterable[str] = (),
) -> None:
    """Record a complete run (replacing the previous record); `retry`: the definitions the next run recollects
    although their fingerprints match (`Previous.retry`)."""
    con = store.con
    with store.transaction():
        con.execute("DELETE FROM pipeline_nodes")
        con.executemany("INSERT INTO pipeline_nodes VALUES (?, ?, ?)",
                        [(n, fp, run_id) for n, fp in sorted(fingerprints.items())])
        con.execute("DELETE FROM pipeline_sources")
        con.executemany("INSERT INTO pipeline_sources VALUES (?)", [(s,) for s in sorted(sources)])
        store.set_meta(HORIZON_KEY, repr(horizon) if horizon is not None else "")
        store.set_meta(WINDOW_KEY, repr(window_days))
        store.set_meta(RETRY_KEY, json.dumps(sorted(retry)))
        store.set_meta(GRAPH_VERSION_KEY, graph_version)


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
