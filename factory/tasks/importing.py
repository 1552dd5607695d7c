"""A benchmark's trajectories as task runs (`agent-factory tasks import FILE --format tau-bench`).

The file is read by the format's own adapter (`adapters.chat.TauBenchAdapter`), the same parse `ingest` makes, and
each conversation it yields becomes one `TaskRun` from its attributes (task id, trial, reward, how it ended) and its
spans (tool calls, tokens). The conversations themselves enter the store through `Project.ingest`, as any source.

Success follows tau-bench's convention: a trial succeeds when its reward is 1 (tau-bench's `is_successful`, within
1e-6); a missing reward is no label (success None), never a failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from agent_factory.adapters.base import Quarantine
from agent_factory.adapters.chat import TauBenchAdapter
from agent_factory.adapters.model import Conversation
from agent_factory.adapters.source import FileSource
from agent_factory.errors import AgentFactoryError
from agent_factory.evaluators.tasks.model import DIMENSIONS, IMPORTED, TaskRun
from agent_factory.frozen import Frozen

FORMATS = ("tau-bench",)
"""The formats `tasks import` reads."""
SUCCESS_TOLERANCE = 1e-6
"""tau-bench's `is_successful`: a reward within this of 1 is a success."""


class TaskImport(Frozen):
    """What `tasks import` did (its `--json`)."""

    file: str
    """The file, as given."""
    format: str
    """Its format."""
    suite: str
    """The suite its tasks were filed under."""
    trajectories: int
    """Trajectories read: one task run each."""
    tasks: int
    """Distinct tasks among them."""
    new_runs: int
    """Task runs stored now (0 when the same file was imported before)."""
    unlabelled: int
    """Trajectories without a reward: runs without a success label."""
    conversations_stored: int
    """Conversations `ingest` stored now (0 when the store held them already)."""


def tau_success(reward: float | None) -> bool | None:
    """tau-bench's success of a reward: at least 1 (within `SUCCESS_TOLERANCE`); None without a reward."""
    return None if reward is None else reward >= 1 - SUCCESS_TOLERANCE


def _tokens(conv: Conversation) -> int | None:
    """Tokens over the conversation's spans that record them; None when none does."""
    totals = [s.tokens.total if s.tokens.total is not None else (s.tokens.input or 0) + (s.tokens.output or 0)
              for t in conv.turns for s in t.spans if s.tokens is not None]
    return sum(totals) if totals else None


def _seconds(conv: Conversation) -> float | None:
    """From the first turn's start to the last turn's end; None without both timestamps."""
    if not conv.turns or conv.turns[0].start is None or conv.turns[-1].end is None:
        return None
    return max(0.0, (conv.turns[-1].end - conv.turns[0].start).total_seconds())


def tau_run(conv: Conversation, *, suite: str, source: str, digest: str) -> TaskRun:
    """One tau-bench conversation (`adapters.chat`: attributes task_id, trial, reward, termination) as a run."""
    attrs = conv.attributes
    reward = attrs.get("reward")
    value = None if reward is None else float(reward)
    return TaskRun(
        suite=suite, task_id=str(attrs["task_id"]), trial=str(attrs["trial"]), success=tau_success(value),
        reward=value, source=source, source_digest=digest, conversation_id=conv.id,
        steps=sum(1 for t in conv.turns for s in t.spans if s.kind == "tool"), tokens=_tokens(conv),
        seconds=_seconds(conv), ended_by=attrs.get("termination"),
        not_collected={d: IMPORTED for d in DIMENSIONS if d != "completion"},
    )


def _first_problem(items: Iterable[object]) -> Quarantine | None:
    return next((i for i in items if isinstance(i, Quarantine)), None)


def read_task_runs(path: Path, *, fmt: str = "tau-bench", suite: str | None = None) -> list[TaskRun]:
    """The task runs of a benchmark file, one per trajectory; `suite` defaults to the file's name without its
    suffix. A bad record fails the whole file with one line naming the file, the record and the field, before
    anything is stored (a task report over part of a benchmark would misstate pass^k)."""
    if fmt not in FORMATS:
        raise AgentFactoryError(f"tasks import: unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    if not path.is_file():
        raise AgentFactoryError(f"{path}: no such file")
    source = FileSource(path=path)
    items = list(TauBenchAdapter().read(source))
    problem = _first_problem(items)
    if problem is not None:
        raise AgentFactoryError(f"tasks import: {problem.line()}")
    convs = [i for i in items if isinstance(i, Conversation)]
    if not convs:
        raise AgentFactoryError(f"{path}: no trajectory in the file (tau-bench: a JSON array of "
                                "{task_id, trial, reward, info, traj})")
    digest = source.digest()
    name = suite or path.name.split(".")[0]
    return [tau_run(c, suite=name, source=source.id, digest=digest) for c in convs]


__all__ = ["FORMATS", "SUCCESS_TOLERANCE", "TaskImport", "read_task_runs", "tau_run", "tau_success"]
