"""State consistency (`evaluators.tasks.state`) on hand-built final states: the share of the state checks (the
task's state criteria and `no_stray_change`) that hold, each value counted by hand; None without a state
criterion."""

from __future__ import annotations

from typing import Any

import pytest

from agent_factory.evaluators.tasks.criteria import FinalState, QueryOutcome, Row
from agent_factory.evaluators.tasks.state import (
    concerned_files,
    concerned_tables,
    state_checks,
    state_consistency,
    stray_changes,
)
from agent_factory.evaluators.tasks.suite import Task

ORDERS: tuple[Row, ...] = ((1, "North", 100.0), (2, "South", 80.0))
START = {"orders": ORDERS, "regions": ((1, "North"), (2, "South"))}
FILES = {"README.md": "Q1 data.\n"}
SUMMARY_Q = "SELECT region, orders, revenue FROM region_summary"


def task(*criteria: dict[str, Any]) -> Task:
    return Task.model_validate({"id": "t", "description": "d", "category": "business", "input": "go",
                                "tools": ["query_sql"], "criteria": list(criteria), "max_steps": 5,
                                "token_limit": 100})


SUMMARY = task({"kind": "sql", "query": SUMMARY_Q, "expected": [["North", 1, 100.0]]},
               {"kind": "file", "path": "reports/q1.md", "contains": ["North"]},
               {"kind": "output_contains", "text": "done"})


def final(*, tables: dict[str, tuple[Row, ...]] | None = None, files: dict[str, str] | None = None,
          summary: tuple[Row, ...] | None = None) -> FinalState:
    queries = {SUMMARY_Q: QueryOutcome(rows=summary) if summary is not None
               else QueryOutcome(error="OperationalError: no such table: region_summary")}
    return FinalState(answer="done", queries=queries, files=FILES if files is None else files,
                      tables=START if tables is None else tables, initial_tables=START)


DONE_TABLES = {**START, "region_summary": (("North", 1, 100.0),)}
DONE_FILES = {**FILES, "reports/q1.md": "North 1 100"}


def test_what_the_criteria_concern() -> None:
    # The tables after FROM and JOIN, not a column that shares a table's name (`orders` here).
    assert concerned_tables(SUMMARY, ["orders", "regions", "region_summary"]) == {"region_summary"}
    joined = task({"kind": "sql", "query": 'SELECT r.name FROM "Orders" o JOIN regions r ON r.id = o.region_id',
                   "expected": []})
    assert concerned_tables(joined, ["orders", "regions", "other"]) == {"orders", "regions"}
    assert concerned_tables(task({"kind": "state_unchanged"}), ["orders", "regions"]) == {"orders", "regions"}
    assert concerned_tables(task({"kind": "state_unchanged", "tables": ["orders"]}), ["orders", "regions"]) == {
        "orders"}
    assert concerned_files(SUMMARY) == {"reports/q1.md"}


def test_a_task_done_as_asked_is_consistent() -> None:
    checks = state_checks(SUMMARY, final(tables=DONE_TABLES, files=DONE_FILES, summary=(("North", 1, 100.0),)),
                          FILES)
    # The sql and file criteria, then no stray change; the answer criterion is not a state check.
    assert [(c.kind, c.passed) for c in checks] == [("sql", True), ("file", True), ("no_stray_change", True)]
    assert state_consistency(SUMMARY, final(tables=DONE_TABLES, files=DONE_FILES, summary=(("North", 1, 100.0),)),
                             FILES) == 1.0


def test_nothing_done_keeps_only_the_no_stray_change_check() -> None:
    # sql fails (no table), file fails (none written), no stray change holds: 1 of 3.
    assert state_consistency(SUMMARY, final(), FILES) == pytest.approx(1 / 3)


def test_a_change_the_task_did_not_call_for_is_a_failed_check() -> None:
    deleted = {**DONE_TABLES, "orders": ORDERS[:1]}
    scratch = {**DONE_FILES, "notes.txt": "x", "README.md": "edited"}
    state = final(tables=deleted, files=scratch, summary=(("North", 1, 100.0),))
    assert stray_changes(SUMMARY, state, FILES) == (
        "table 'orders' changed: 2 rows at the start, 1 at the end", "file 'README.md' changed",
        "file 'notes.txt' added")
    # sql and file hold, the stray check fails: 2 of 3.
    assert state_consistency(SUMMARY, state, FILES) == pytest.approx(2 / 3)
    dropped = {k: v for k, v in DONE_TABLES.items() if k != "regions"}
    assert stray_changes(SUMMARY, final(tables=dropped, files={}), FILES) == (
        "table 'regions' removed", "file 'README.md' removed")


def test_reordered_rows_are_no_change() -> None:
    assert stray_changes(SUMMARY, final(tables={**START, "orders": ORDERS[::-1]}), FILES) == ()


def test_state_unchanged_is_not_counted_twice() -> None:
    keep = task({"kind": "refused"}, {"kind": "state_unchanged"})
    deleted = final(tables={**START, "orders": ORDERS[:1]})
    # state_unchanged fails; the deleted rows are its concern, so no stray change holds: 1 of 2.
    assert [(c.kind, c.passed) for c in state_checks(keep, deleted, FILES)] == [
        ("state_unchanged", False), ("no_stray_change", True)]
    assert state_consistency(keep, deleted, FILES) == 0.5
    assert state_consistency(keep, final(), FILES) == 1.0
    # A new file is no table's change, but a stray change all the same.
    assert state_consistency(keep, final(files={**FILES, "x.md": "y"}), FILES) == 0.5


def test_no_state_criterion_is_not_collected() -> None:
    answer_only = task({"kind": "output_matches", "pattern": "5"}, {"kind": "refused"})
    assert state_checks(answer_only, final(), FILES) == ()
    # Not 0 and not 1, even when the agent changed the state: the task says nothing about it.
    assert state_consistency(answer_only, final(tables={"orders": ()}), FILES) is None
