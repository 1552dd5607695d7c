"""Task runs and the task report, as data.

A task run is one trial of one task: imported from a benchmark's trajectories (`agent-factory tasks import`) or,
later, recorded by the task runner. Its conversation enters the store as any source does, so every component
applies to it; the run itself keeps what a task report needs (success, steps, tokens, time). The report's JSON
(`agent-factory tasks report --json`) is the shape issue 35 names:
`{"pass_hat": {"1": ..., "K": ...}, "tasks": [{"id", "trials", "successes", "pass_hat", "dimensions",
"first_deviation", ...}]}`.
"""

from __future__ import annotations

from pydantic import Field

from agent_factory.frozen import Frozen

DIMENSIONS = ("completion", "step_pass_rate", "state_consistency", "error_recovery", "final_quality", "overlap")
"""The per-task dimensions of issue 35 that are one number each, in [0, 1] (efficiency is the runs' steps, tokens,
time and redundant calls). A dimension a task's runs cannot measure is None ("not collected"), never 0: an
imported benchmark file carries only its reward, so it gives completion alone. Their definitions are the pure
functions that measure them: `metrics.step_pass_rate`, `metrics.overlap`, `metrics.error_recovery`,
`state.state_consistency`; final quality is a model's checklist on the final answer
(`factory/tasks/quality.py`)."""

IMPORTED = "an imported benchmark file records its reward only"
"""Why an imported run (`tasks import`) did not collect each dimension but completion (`TaskRun.not_collected`)."""


class TaskRun(Frozen):
    """One trial of one task."""

    suite: str
    """The task suite or benchmark file the task belongs to (an import: the file's name without its suffix)."""
    task_id: str
    """The task's id within its suite."""
    trial: str
    """The trial's id within the task (tau-bench: 0, 1, ...)."""
    success: bool | None
    """Whether the trial succeeded; None when it has no label (a missing reward), which is never a failure."""
    reward: float | None = None
    """The benchmark's reward, as given (tau-bench: success is a reward of 1)."""
    source: str
    """The store's id of the source the run came in with (an imported file's path as given)."""
    source_digest: str
    """sha256 of that source's bytes: the same file imported again adds no run twice."""
    conversation_id: str
    """The run's conversation in the store (tau-bench: `tau-<task>-<trial>`)."""
    steps: int = Field(ge=0)
    """Tool calls the agent made."""
    tokens: int | None = Field(default=None, ge=0)
    """Tokens over the run's model calls; None when the source records none."""
    seconds: float | None = Field(default=None, ge=0)
    """Wall time of the run; None when the source has no timestamps."""
    ended_by: str | None = None
    """How the run ended, as the source says (tau-bench's `info.source`: `user`, a hand-off tool, ...)."""
    dimensions: dict[str, float] = Field(default_factory=dict)
    """This run's measures among `DIMENSIONS` other than completion (the runner's: step pass rate, state
    consistency, ...); one absent was not collected. An import records none."""
    first_deviation: int | None = Field(default=None, ge=1)
    """The first step (from 1) where this run left the expected steps; None when it did not or none are known."""
    agent: str | None = None
    """The agent that ran the trial (the runner's `script:succeed`, a model); None when the source names none (an
    import). `tasks compare` selects runs by it (`agent=script:succeed`)."""
    redundant_calls: int | None = Field(default=None, ge=0)
    """Tool calls identical to an earlier call of the run; None when not counted (an import)."""
    failed_calls: int | None = Field(default=None, ge=0)
    """Tool calls that failed; None when not counted (an import). With none failed, error recovery has nothing
    to measure (its dimension is None) and seed 000's total scores it full."""
    fault: bool | None = None
    """Whether the run was ended by a fault (the agent or the sandbox raised: seed 003's "exception"); None when
    the source does not say (an import)."""
    not_collected: dict[str, str] = Field(default_factory=dict)
    """Dimension -> why this run did not measure it, when a reason is known (final quality: "no model
    configured")."""


class TaskSummary(Frozen):
    """One task over its trials."""

    id: str
    """The task's id (`suite/task` when the store holds tasks of more than one suite)."""
    suite: str
    """Its suite."""
    trials: int = Field(ge=0)
    """Trials run, labelled or not."""
    labelled: int = Field(ge=0)
    """Trials with a success label: the task's n in pass^k."""
    successes: int = Field(ge=0)
    """Successful trials: the task's c in pass^k."""
    pass_hat: dict[str, float]
    """k -> C(c, k) / C(n, k), for k = 1..n (the chance that k trials drawn without replacement all succeed)."""
    dimensions: dict[str, float | None]
    """Each of `DIMENSIONS` -> its value; None when not collected."""
    first_deviation: int | None = None
    """The earliest step (from 1) where one of its runs left the expected steps; None when none did or no
    expected steps are known."""
    steps: float | None = None
    """Mean tool calls per trial."""
    tokens: float | None = None
    """Mean tokens per trial, over the trials that record them."""
    seconds: float | None = None
    """Mean seconds per trial, over the trials that record them."""
    redundant_calls: float | None = None
    """Mean redundant tool calls per trial (identical to an earlier call), over the trials that count them."""
    failed_calls: float | None = None
    """Mean failed tool calls per trial, over the trials that count them."""
    faults: int | None = None
    """Trials ended by a fault (the agent or the sandbox raised), over the trials that say; None when none
    says (an import)."""
    not_collected: dict[str, str] = Field(default_factory=dict)
    """Each dimension that is None -> why, as its runs said (the reasons of different runs joined by "; ")."""


class EndingReason(Frozen):
    """One reason trials of a task run ended without an answer to every message (a limit, a fault), and how many
    did (`agent-factory tasks run`)."""

    ended_by: str
    """How they ended: `step_limit`, `token_limit`, `agent_error`, `sandbox_error`."""
    reason: str | None
    trials: int = Field(ge=1)
    tasks: list[str]
    """The tasks whose trials ended so."""


class TaskReport(Frozen):
    """pass^k over the tasks, and every task."""

    pass_hat: dict[str, float]
    """k -> the mean over tasks of C(c, k) / C(n, k), for k = 1..K; a task of fewer than k labelled trials is
    left out of k's mean (`tasks_counted`)."""
    tasks_counted: dict[str, int]
    """k -> how many tasks k's mean is over."""
    tasks: list[TaskSummary]
    """Every task, worst first (lowest pass^1, then id)."""
    runs: int = Field(ge=0)
    """Task runs in the store."""
    unlabelled: int = Field(ge=0)
    """Runs without a success label, left out of every task's n."""
    suites: list[str]
    """The suites the tasks come from."""


__all__ = ["DIMENSIONS", "IMPORTED", "EndingReason", "TaskReport", "TaskRun", "TaskSummary"]
