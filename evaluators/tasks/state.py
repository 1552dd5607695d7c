"""State consistency of one task trial, purely, from the sandbox's state at the start and at the end (issue 35).

Seed 000 names state consistency among its six dimensions: whether the agent kept the task's state right (the
set of orders, the file paths, ...), and says that rules, not a model, check "whether the state is as expected".
Its sample scorer only copies the step pass rate into it, which measures the calls, not the state. Here the state
is the sandbox's (its tables and files), and what is expected of it is what the task's criteria say about it, so
a trial's state consistency is the share of these state checks that hold at the end:

- each of the task's *state criteria*: `sql` (a query on the final database), `file` (a file written) and
  `state_unchanged` (tables as at the start), decided as `criteria.check` decides them;
- one more check, *no stray change*: no table or file that no state criterion concerns was added, removed or
  changed. A change the task did not call for is a side effect (seed 000's "keeps acting after the task is done",
  rows deleted, a file overwritten), which the criteria alone would not see.

A criterion concerns the tables its query reads (the names after FROM and JOIN) or that it names (every table
for a `state_unchanged` without names), or the file at its path. The answer criteria (`output_contains`,
`output_matches`, `refused`) judge the answer, not the state, and do not count. A task without a state criterion
says nothing about what its state should be, so its trials' state consistency is None (not collected), never 0.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from agent_factory.evaluators.tasks.criteria import CriterionResult, FinalState, Row, check
from agent_factory.evaluators.tasks.suite import FileCriterion, SqlCriterion, StateUnchanged, Task

STATE_KINDS = ("sql", "file", "state_unchanged")
"""The criterion kinds that judge the sandbox's final state."""
_READS = re.compile(r"""\b(?:from|join)\s+["`\[]?([A-Za-z_][A-Za-z0-9_]*)""", re.IGNORECASE)


def concerned_tables(task: Task, tables: Iterable[str]) -> frozenset[str]:
    """The tables (among `tables`, as named there) some state criterion of the task concerns."""
    known = {t.lower(): t for t in tables}
    found: set[str] = set()
    for c in task.criteria:
        if isinstance(c, SqlCriterion):
            found.update(known[n.lower()] for n in _READS.findall(c.query) if n.lower() in known)
        elif isinstance(c, StateUnchanged):
            names = c.tables or tuple(known.values())
            found.update(known.get(n.lower(), n) for n in names)
    return frozenset(found)


def concerned_files(task: Task) -> frozenset[str]:
    """The paths the task's `file` criteria name."""
    return frozenset(c.path for c in task.criteria if isinstance(c, FileCriterion))


def _rows(rows: Iterable[Row]) -> list[Row]:
    # Tables are compared as multisets of rows: the order SQLite returns them in is no change.
    return sorted(rows, key=repr)


def stray_changes(task: Task, state: FinalState, initial_files: Mapping[str, str]) -> tuple[str, ...]:
    """Each table and file no state criterion concerns that was added, removed or changed, described."""
    out: list[str] = []
    names = set(state.initial_tables) | set(state.tables)
    concerned = concerned_tables(task, names)
    for name in sorted(names - concerned):
        before, after = state.initial_tables.get(name), state.tables.get(name)
        if before is None:
            out.append(f"table {name!r} added")
        elif after is None:
            out.append(f"table {name!r} removed")
        elif _rows(before) != _rows(after):
            out.append(f"table {name!r} changed: {len(before)} rows at the start, {len(after)} at the end")
    paths = set(initial_files) | set(state.files)
    for path in sorted(paths - concerned_files(task)):
        before_text, after_text = initial_files.get(path), state.files.get(path)
        if before_text is None:
            out.append(f"file {path!r} added")
        elif after_text is None:
            out.append(f"file {path!r} removed")
        elif before_text != after_text:
            out.append(f"file {path!r} changed")
    return tuple(out)


def state_checks(task: Task, state: FinalState, initial_files: Mapping[str, str]) -> tuple[CriterionResult, ...]:
    """The state checks of a trial: each state criterion's verdict, then `no_stray_change`; empty when the task
    has no state criterion."""
    results = [check(c, state) for c in task.criteria if c.kind in STATE_KINDS]
    if not results:
        return ()
    stray = stray_changes(task, state, initial_files)
    reason = "; ".join(stray) if stray else "nothing changed that the task did not call for"
    return (*results, CriterionResult(kind="no_stray_change", passed=not stray, reason=reason))


def state_consistency(task: Task, state: FinalState, initial_files: Mapping[str, str]) -> float | None:
    """The share of the trial's state checks (`state_checks`) that hold; None when the task has no state
    criterion. `initial_files`: the sandbox's files at the start (its spec's `files`)."""
    checks = state_checks(task, state, initial_files)
    return sum(c.passed for c in checks) / len(checks) if checks else None


__all__ = ["STATE_KINDS", "concerned_files", "concerned_tables", "state_checks", "state_consistency",
           "stray_changes"]
