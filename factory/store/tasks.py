"""The task runs' table: one row per trial of a task, the run stored whole as its JSON.

Additive (`schema.TASK_TABLES`, created by `create_tables` on every store opened for writing): a store written
before task runs existed gains the table on its next write, and a read-only open of one reads no runs. A run is
keyed by its source's digest, suite, task and trial, so the same file imported again adds nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_factory.evaluators.tasks.model import TaskRun
from agent_factory.factory.store.base import Store
from agent_factory.factory.store.schema import TASK_TABLES


def record_task_runs(store: Store, runs: Sequence[TaskRun]) -> int:
    """Store the runs not stored yet (same source digest, suite, task and trial); the number of new ones."""
    fresh = {(r.source_digest, r.suite, r.task_id, r.trial): r for r in runs}
    if not fresh:
        return 0
    with store.transaction():
        known = {tuple(k) for k in store.con.execute(
            "SELECT source_digest, suite, task_id, trial FROM task_runs").fetchall()}
        new = [r for key, r in fresh.items() if key not in known]
        if new:
            store.con.executemany("INSERT INTO task_runs VALUES (?, ?, ?, ?, ?)",
                                  [(r.source_digest, r.suite, r.task_id, r.trial, r.model_dump_json()) for r in new])
    return len(new)


def read_task_runs(store: Store) -> list[TaskRun]:
    """Every stored task run, by suite, task and trial as stored; none in a store without the table."""
    if not store.has_table("task_runs"):
        return []
    return [TaskRun.model_validate_json(r) for (r,) in store.con.execute(
        "SELECT run FROM task_runs ORDER BY suite, task_id, trial, source_digest").fetchall()]


__all__ = ["TASK_TABLES", "read_task_runs", "record_task_runs"]
