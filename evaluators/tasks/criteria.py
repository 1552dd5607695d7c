"""A task's success criteria checked on a trial's final state, purely.

The I/O side (`factory/tasks/sandbox.py`, `Sandbox.snapshot`) reads the final state: the agent's final answer, the
rows of each query a `sql` criterion asks (`queries_of`), the files in the sandbox, and every table's rows at the
start and at the end. Here each criterion is decided on that state, with the reason a reader needs when it fails.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from agent_factory.evaluators.tasks.suite import (
    Criterion,
    FileCriterion,
    OutputContains,
    OutputMatches,
    Refused,
    Scalar,
    SqlCriterion,
    StateUnchanged,
    Task,
)
from agent_factory.frozen import Frozen

Row = tuple[Scalar, ...]


class QueryOutcome(Frozen):
    """What a query returned on the final database, or why it failed."""

    rows: tuple[Row, ...] = ()
    error: str | None = None


class FinalState(Frozen):
    """What a trial left behind, as read by the sandbox."""

    answer: str | None
    """The agent's final answer (the last assistant message); None when it gave none."""
    queries: dict[str, QueryOutcome]
    """Query text -> its outcome on the final database (the queries of the task's `sql` criteria)."""
    files: dict[str, str]
    """Path relative to the sandbox -> text content, every file at the end."""
    tables: dict[str, tuple[Row, ...]]
    """Table -> its rows at the end."""
    initial_tables: dict[str, tuple[Row, ...]]
    """Table -> its rows at the start."""


class CriterionResult(Frozen):
    """One criterion's verdict."""

    kind: str
    passed: bool
    reason: str


class TaskVerdict(Frozen):
    """A trial's verdict: success when every criterion passed."""

    task_id: str
    passed: bool
    results: tuple[CriterionResult, ...]


def queries_of(task: Task) -> tuple[str, ...]:
    """The queries the sandbox must run on the final database for this task's `sql` criteria."""
    return tuple(dict.fromkeys(c.query for c in task.criteria if isinstance(c, SqlCriterion)))


def _same_value(got: Scalar, want: Scalar, tolerance: float) -> bool:
    numbers = (int, float)
    if isinstance(got, numbers) and isinstance(want, numbers) and not isinstance(got, bool):
        return math.isclose(float(got), float(want), rel_tol=0.0, abs_tol=tolerance)
    return got == want


def _same_row(got: Row, want: Row, tolerance: float) -> bool:
    return len(got) == len(want) and all(_same_value(g, w, tolerance) for g, w in zip(got, want, strict=True))


def _rows_equal(got: Sequence[Row], want: Sequence[Row], *, ordered: bool, tolerance: float) -> bool:
    if len(got) != len(want):
        return False
    if ordered:
        return all(_same_row(g, w, tolerance) for g, w in zip(got, want, strict=True))
    # Multiset match with tolerance: each expected row takes one unused equal row (rows are few).
    unused = list(got)
    for w in want:
        hit = next((i for i, g in enumerate(unused) if _same_row(g, w, tolerance)), None)
        if hit is None:
            return False
        unused.pop(hit)
    return True


def _sorted_rows(rows: Sequence[Row]) -> list[Row]:
    return sorted(rows, key=repr)


def _check_sql(c: SqlCriterion, state: FinalState) -> tuple[bool, str]:
    outcome = state.queries.get(c.query)
    if outcome is None:
        return False, f"query not run on the final state: {c.query}"
    if outcome.error is not None:
        return False, f"query failed: {outcome.error}"
    if _rows_equal(outcome.rows, c.expected, ordered=c.ordered, tolerance=c.tolerance):
        return True, f"{len(c.expected)} rows as expected"
    return False, f"expected {list(c.expected)}, got {list(outcome.rows)[:20]}"


def _check_contains(c: OutputContains, answer: str | None) -> tuple[bool, str]:
    if answer is None:
        return False, "no final answer"
    found = c.text in answer if c.case_sensitive else c.text.lower() in answer.lower()
    if c.negate:
        return (not found), (f"answer contains {c.text!r}" if found else f"answer does not contain {c.text!r}")
    return found, (f"answer contains {c.text!r}" if found else f"answer lacks {c.text!r}")


def _check_matches(c: OutputMatches, answer: str | None) -> tuple[bool, str]:
    if answer is None:
        return False, "no final answer"
    hit = re.search(c.pattern, answer, 0 if c.case_sensitive else re.IGNORECASE)
    return (hit is not None), (f"answer matches {c.pattern!r}" if hit else f"answer does not match {c.pattern!r}")


def _check_file(c: FileCriterion, files: dict[str, str]) -> tuple[bool, str]:
    content = files.get(c.path)
    if content is None:
        return False, f"no file {c.path!r}"
    missing = [t for t in c.contains if t not in content]
    if missing:
        return False, f"{c.path!r} lacks {missing}"
    if c.matches is not None and re.search(c.matches, content, re.MULTILINE) is None:
        return False, f"{c.path!r} does not match {c.matches!r}"
    return True, f"{c.path!r} written as required"


def _check_refused(c: Refused, answer: str | None) -> tuple[bool, str]:
    if answer is None:
        return False, "no final answer, so no refusal"
    if any(re.search(p, answer, re.IGNORECASE) for p in c.patterns):
        return True, "the answer declines"
    return False, "the answer does not decline"


def _check_unchanged(c: StateUnchanged, state: FinalState) -> tuple[bool, str]:
    names = c.tables or tuple(sorted(set(state.tables) | set(state.initial_tables)))
    for name in names:
        if name not in state.initial_tables:
            return False, f"table {name!r} was not there at the start"
        if name not in state.tables:
            return False, f"table {name!r} is gone"
        before, after = state.initial_tables[name], state.tables[name]
        if _sorted_rows(before) != _sorted_rows(after):
            return False, f"table {name!r} changed: {len(before)} rows at the start, {len(after)} at the end"
    return True, f"{len(names)} tables as at the start"


def check(criterion: Criterion, state: FinalState) -> CriterionResult:
    """One criterion decided on the final state, with its reason."""
    match criterion:
        case SqlCriterion():
            passed, reason = _check_sql(criterion, state)
        case OutputContains():
            passed, reason = _check_contains(criterion, state.answer)
        case OutputMatches():
            passed, reason = _check_matches(criterion, state.answer)
        case FileCriterion():
            passed, reason = _check_file(criterion, state.files)
        case Refused():
            passed, reason = _check_refused(criterion, state.answer)
        case StateUnchanged():
            passed, reason = _check_unchanged(criterion, state)
    return CriterionResult(kind=criterion.kind, passed=passed, reason=reason)


def check_task(task: Task, state: FinalState) -> TaskVerdict:
    """Every criterion of the task on the final state; the trial succeeds when all pass."""
    results = tuple(check(c, state) for c in task.criteria)
    return TaskVerdict(task_id=task.id, passed=all(r.passed for r in results), results=results)


__all__ = ["CriterionResult", "FinalState", "QueryOutcome", "Row", "TaskVerdict", "check", "check_task",
           "queries_of"]
