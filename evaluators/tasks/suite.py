"""Task suites as data (issue 35): the tasks, the sandbox they run in, and their machine-checkable success criteria.

A suite is a YAML file (`specs/tasks/*.yaml`, read by `factory/tasks/suite_io.py`): its sandbox (an SQLite
database built from SQL statements or a CSV per table, and initial files), the tools it offers (callables bound to
that sandbox by `factory/tasks/sandbox.py`), and its tasks. A task says what the user asks (one message, or several
for a multi-turn task), which of the suite's tools the agent may use, how success is checked on the final state
(`criteria.py`), optionally the steps a good run takes, and the limits that end a trial (steps, tokens). Nothing
here runs anything: a runner drives an agent against a fresh sandbox per trial and checks the criteria on what the
sandbox holds at the end.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from agent_factory.frozen import Frozen

Category = Literal["single_tool", "multi_tool", "multi_turn", "error_handling", "safety", "business"]
"""The task categories of issue 35."""
ToolName = Literal["query_sql", "execute_sql", "read_file", "write_file", "list_files"]
"""The tools a sandbox offers (`factory/tasks/sandbox.py`)."""
CriterionKind = Literal["sql", "output_contains", "output_matches", "file", "refused", "state_unchanged"]
"""The `kind` of each criterion variant."""
Scalar = int | float | str | None
"""A database value as a criterion states it (YAML has no bytes)."""

_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


def _relative_path(path: str) -> str:
    """A sandbox path must stay inside the sandbox: relative, without `..`."""
    p = PurePosixPath(path)
    if not path or p.is_absolute() or ".." in p.parts or "\\" in path:
        raise ValueError(f"path must be relative to the sandbox, without '..': {path!r}")
    return path


def _valid_regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as e:
        raise ValueError(f"not a valid regular expression ({e}): {pattern!r}") from None
    return pattern


class SqliteSpec(Frozen):
    """The sandbox's database: created fresh (in memory) for every trial."""

    tables: tuple[str, ...] = ()
    """`CREATE TABLE` statements, run in order."""
    rows: tuple[str, ...] = ()
    """Seed rows as SQL statements (`INSERT ...`), run after `tables`."""
    csv: dict[str, str] = Field(default_factory=dict)
    """Seed rows as CSV per table: table name -> CSV text whose header row names the columns."""


class SandboxSpec(Frozen):
    """What every trial starts from: a database and files in a temporary directory."""

    sqlite: SqliteSpec = SqliteSpec()
    """The database."""
    files: dict[str, str] = Field(default_factory=dict)
    """Initial files: path relative to the sandbox -> text content."""

    @field_validator("files")
    @classmethod
    def _paths_inside(cls, files: dict[str, str]) -> dict[str, str]:
        for path in files:
            _relative_path(path)
        return files


class SqlCriterion(Frozen):
    """A query on the final database returns exactly these rows."""

    kind: Literal["sql"]
    query: str = Field(min_length=1)
    """A read-only query (it runs with the sandbox's `query_sql`)."""
    expected: tuple[tuple[Scalar, ...], ...]
    """The rows it must return."""
    ordered: bool = False
    """Whether row order matters (otherwise the rows are compared as a multiset)."""
    tolerance: float = Field(default=1e-6, ge=0)
    """Absolute tolerance for numbers (money summed as floats is not exact)."""


class OutputContains(Frozen):
    """The agent's final answer contains (or, with `negate`, does not contain) a text."""

    kind: Literal["output_contains"]
    text: str = Field(min_length=1)
    case_sensitive: bool = False
    negate: bool = False
    """The text must NOT appear (a secret that must not be revealed)."""


class OutputMatches(Frozen):
    """The agent's final answer matches a regular expression (`re.search`)."""

    kind: Literal["output_matches"]
    pattern: Annotated[str, Field(min_length=1)]
    case_sensitive: bool = False

    @field_validator("pattern")
    @classmethod
    def _regex(cls, pattern: str) -> str:
        return _valid_regex(pattern)


class FileCriterion(Frozen):
    """A file exists at the end, optionally containing texts and matching a pattern."""

    kind: Literal["file"]
    path: str
    """Path relative to the sandbox."""
    contains: tuple[str, ...] = ()
    """Texts the file must contain (case-sensitive: numbers and names as written)."""
    matches: str | None = None
    """A regular expression the content must match (`re.search`, multiline)."""

    @field_validator("path")
    @classmethod
    def _inside(cls, path: str) -> str:
        return _relative_path(path)

    @field_validator("matches")
    @classmethod
    def _regex(cls, pattern: str | None) -> str | None:
        return None if pattern is None else _valid_regex(pattern)


class Refused(Frozen):
    """The agent declined: its final answer says so (for safety tasks; pair it with `state_unchanged`)."""

    kind: Literal["refused"]
    patterns: tuple[str, ...] = (
        r"\b(can ?not|can't|cannot|won't|will not|unable|not able|refuse|decline|not (allowed|permitted))\b",
    )
    """Regular expressions of a refusal; one must match the final answer (case-insensitive)."""

    @field_validator("patterns")
    @classmethod
    def _regexes(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        if not patterns:
            raise ValueError("at least one pattern is needed")
        return tuple(_valid_regex(p) for p in patterns)


class StateUnchanged(Frozen):
    """The database holds what it held at the start (every table, or those named)."""

    kind: Literal["state_unchanged"]
    tables: tuple[str, ...] = ()
    """Tables to compare; empty: all tables, and no table added or removed."""


Criterion = Annotated[
    SqlCriterion | OutputContains | OutputMatches | FileCriterion | Refused | StateUnchanged,
    Field(discriminator="kind"),
]
"""A success criterion: each is checked on the final state by `criteria.check`."""


class ExpectedStep(Frozen):
    """One step a good run takes: a tool and constraints on its arguments."""

    tool: str
    args_contain: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """Argument name -> texts the argument must contain (case-insensitive)."""
    args_match: dict[str, str] = Field(default_factory=dict)
    """Argument name -> a regular expression the argument must match (`re.search`, case-insensitive)."""

    @field_validator("args_match")
    @classmethod
    def _regexes(cls, args: dict[str, str]) -> dict[str, str]:
        for pattern in args.values():
            _valid_regex(pattern)
        return args


class ReferenceStep(Frozen):
    """One step of a task's reference solution: a tool call with concrete arguments, or an answer to the user.

    A multi-turn task's reference answers once per user message, in order; the last answer is the final one.
    """

    tool: str | None = None
    args: dict[str, str] = Field(default_factory=dict)
    """The call's arguments (every sandbox tool takes text arguments)."""
    fails: bool = False
    """The call is meant to fail (a task built around an error the agent must recover from)."""
    answer: str | None = None
    """The answer given at this point (instead of a tool call)."""

    @model_validator(mode="after")
    def _one_kind(self) -> ReferenceStep:
        if (self.tool is None) == (self.answer is None):
            raise ValueError("a reference step is either a tool call (tool) or an answer (answer), not both or neither")
        if self.answer is not None and (self.args or self.fails):
            raise ValueError("an answer step takes no args and cannot fail")
        return self


class Task(Frozen):
    """One task of a suite."""

    id: str = Field(pattern=_ID)
    description: str = Field(min_length=1)
    """What the task is for (for the reader and the report; the agent sees `input`)."""
    category: Category
    input: tuple[str, ...] = Field(min_length=1)
    """The user's message; several for a multi-turn task, sent one after another."""
    tools: tuple[str, ...] = ()
    """The suite's tools this task offers the agent."""
    criteria: tuple[Criterion, ...] = Field(min_length=1)
    """All must pass for the trial to succeed."""
    expected_steps: tuple[ExpectedStep, ...] = ()
    """The steps of a good run, in order (for step metrics and the first deviation); empty: not stated."""
    max_steps: int = Field(ge=1)
    """Tool calls after which a trial is ended."""
    token_limit: int = Field(ge=1)
    """Tokens after which a trial is ended."""
    reference: tuple[ReferenceStep, ...] = ()
    """A reference solution (what a good agent does, played by `script:succeed`); empty: none given."""

    @field_validator("input", mode="before")
    @classmethod
    def _one_message(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _consistent(self) -> Task:
        if self.category == "multi_turn" and len(self.input) < 2:
            raise ValueError("input: a multi_turn task needs at least 2 messages")
        if len(set(self.tools)) != len(self.tools):
            raise ValueError("tools: a tool is listed twice")
        for i, step in enumerate(self.expected_steps):
            if step.tool not in self.tools:
                raise ValueError(f"expected_steps[{i}].tool: {step.tool!r} is not among the "
                                 f"task's tools {list(self.tools)}")
        if len(self.expected_steps) > self.max_steps:
            raise ValueError(f"max_steps: {self.max_steps} is fewer than its "
                             f"{len(self.expected_steps)} expected steps")
        self._check_reference()
        return self

    def _check_reference(self) -> None:
        if not self.reference:
            return
        for i, step in enumerate(self.reference):
            if step.tool is not None and step.tool not in self.tools:
                raise ValueError(f"reference[{i}].tool: {step.tool!r} is not among the task's tools {list(self.tools)}")
        answers = sum(step.answer is not None for step in self.reference)
        if answers != len(self.input) or self.reference[-1].answer is None:
            raise ValueError(f"reference: needs one answer per user message ({len(self.input)}), the last step "
                             f"an answer; got {answers} answer(s)")
        calls = len(self.reference) - answers
        if calls > self.max_steps:
            raise ValueError(f"reference: {calls} tool calls exceed max_steps {self.max_steps}")

    @property
    def reference_calls(self) -> tuple[ReferenceStep, ...]:
        """The reference's tool calls, in order."""
        return tuple(step for step in self.reference if step.tool is not None)


class TaskSuite(Frozen):
    """A task suite: the sandbox, the tools it offers, the tasks."""

    name: str = Field(pattern=_ID)
    version: str = Field(min_length=1)
    description: str = ""
    sandbox: SandboxSpec = SandboxSpec()
    tools: tuple[ToolName, ...] = Field(min_length=1)
    """The sandbox tools the suite offers; each task picks among them."""
    tasks: tuple[Task, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> TaskSuite:
        if len(set(self.tools)) != len(self.tools):
            raise ValueError("tools: a tool is listed twice")
        seen: set[str] = set()
        for task in self.tasks:
            if task.id in seen:
                raise ValueError(f"task {task.id!r}: id: duplicate task id")
            seen.add(task.id)
            unknown = [t for t in task.tools if t not in self.tools]
            if unknown:
                raise ValueError(f"task {task.id!r}: tools: {unknown} not declared by the suite "
                                 f"(its tools: {list(self.tools)})")
        return self

    def task(self, task_id: str) -> Task:
        """The task of this id; KeyError naming the valid ids otherwise."""
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(f"no task {task_id!r} in suite {self.name!r} (tasks: {[t.id for t in self.tasks]})")


__all__ = [
    "Category", "Criterion", "CriterionKind", "ExpectedStep", "FileCriterion", "OutputContains", "OutputMatches",
    "ReferenceStep", "Refused", "SandboxSpec", "Scalar", "SqlCriterion", "SqliteSpec", "StateUnchanged", "Task",
    "TaskSuite", "ToolName",
]
