"""The `runs` table: one row per finished `agent-factory run`, with its report."""

from __future__ import annotations

from datetime import datetime

from agent_factory.factory.store.base import Store


def record_run(store: Store, *, run_id: str, started: datetime, finished: datetime, report_json: str) -> None:
    """Record a finished run and its report (the `run --json` document)."""
    store.con.execute("INSERT INTO runs VALUES (?, ?, ?, ?)", [run_id, started, finished, report_json])


def last_finished(store: Store) -> datetime | None:
    """When the last recorded run finished (UTC); None before any run."""
    row = store.con.execute("SELECT max(finished_at) FROM runs").fetchone()
    return row[0] if row else None
