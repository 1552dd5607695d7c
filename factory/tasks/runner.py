"""The task runner (issue 35): an agent against a fresh sandbox per task and trial, until it answers or a limit or
fault ends the trial, with every decision and tool call recorded and the task's criteria checked on the end state.

A trial ends, with its reason (`ended_by`), when the agent has answered every user message (`answered`), asks for
a tool call beyond the task's `max_steps` (`step_limit`), has claimed more tokens than its `token_limit`
(`token_limit`), raises or returns something that is no action (`agent_error`), or when the sandbox cannot be built
or a tool raises (`sandbox_error`). A failing tool call is not a fault: tools return their error, and the agent sees
it and may recover. Nothing ends the run: every trial gives a `TrialResult`. The process metrics are the pure
functions of `evaluators/tasks/metrics.py`.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import Field

from agent_factory.evaluators.tasks import metrics
from agent_factory.evaluators.tasks.criteria import Row, TaskVerdict, check_task, queries_of
from agent_factory.evaluators.tasks.model import EndingReason, TaskReport
from agent_factory.evaluators.tasks.state import state_consistency
from agent_factory.evaluators.tasks.suite import SandboxSpec, Task, TaskSuite
from agent_factory.factory.tasks.agents import Agent, Answer, Event, History, ToolCall, ToolOutcome, UserMessage
from agent_factory.factory.tasks.quality import QualityJudge
from agent_factory.factory.tasks.sandbox import Sandbox, ToolResult
from agent_factory.frozen import Frozen

EndedBy = Literal["answered", "step_limit", "token_limit", "agent_error", "sandbox_error"]
"""How a trial ended."""
Clock = Callable[[], int]
"""Wall-clock time in nanoseconds since the epoch (`time.time_ns`): span timestamps."""


class Decision(Frozen):
    """One decision of the agent, with when it was made and what it cost."""

    action: ToolCall | Answer
    start_ns: int
    end_ns: int


class CallRecord(Frozen):
    """One executed tool call: its arguments, what it gave, when."""

    step: int
    """Its position among the trial's calls, from 1."""
    tool: str
    args: dict[str, str]
    ok: bool
    output: str
    error: str | None
    start_ns: int
    end_ns: int


class TrialResult(Frozen):
    """One trial of one task: how it ended, what it did, whether it succeeded, its process metrics."""

    suite: str
    task_id: str
    trial: int
    agent: str
    ended_by: EndedBy
    reason: str | None = None
    """What ended it, when not an answer (the limit reached, the fault's message)."""
    answers: tuple[str, ...] = ()
    """The agent's answers, one per user message answered; the last is the final answer."""
    decisions: tuple[Decision, ...] = ()
    calls: tuple[CallRecord, ...] = ()
    verdict: TaskVerdict | None = None
    """The criteria checked on the final state; None when the sandbox failed before it could be read."""
    success: bool
    """Answered, and every criterion passed."""
    steps: int
    tokens: int | None
    """Tokens the agent claimed over its decisions; None when it claimed none."""
    start_ns: int
    end_ns: int
    first_deviation: int | None
    step_pass_rate: float | None
    error_recovery: float | None
    recoveries: int
    failed_calls: int
    redundant_calls: int
    tables_before: dict[str, tuple[Row, ...]] = Field(default_factory=dict)
    tables_after: dict[str, tuple[Row, ...]] = Field(default_factory=dict)
    overlap: float | None = None
    """Share of the expected steps met anywhere in the run (`metrics.overlap`); None when none are expected."""
    state_consistency: float | None = None
    """Share of the state checks that hold at the end (`state.state_consistency`); None when the task has no
    state criterion or the sandbox could not be read."""
    final_quality: float | None = None
    """The judge's checklist on the final answer (`quality.QualityJudge`); None when not collected."""
    not_collected: dict[str, str] = Field(default_factory=dict)
    """Dimension -> why it is None, when a reason is known (final quality: "no model configured")."""

    @property
    def seconds(self) -> float:
        """Wall time of the trial."""
        return (self.end_ns - self.start_ns) / 1e9


def ending_reasons(results: Sequence[TrialResult]) -> list[EndingReason]:
    """The distinct (ending, reason) of the trials not answered, most frequent first, then by ending."""
    grouped: dict[tuple[EndedBy, str | None], list[TrialResult]] = {}
    for r in results:
        if r.ended_by != "answered":
            grouped.setdefault((r.ended_by, r.reason), []).append(r)
    found = [EndingReason(ended_by=how, reason=why, trials=len(rs), tasks=sorted({r.task_id for r in rs}))
             for (how, why), rs in grouped.items()]
    return sorted(found, key=lambda e: (-e.trials, e.ended_by, e.reason or ""))


class TaskRunReport(TaskReport):
    """What `tasks run` did (its `--json`): the report's shape (pass^k, every task) over this run's trials, and
    where they went."""

    file: str
    """The OTLP/JSON file the trials' traces were written to and ingested from."""
    agent: str
    trials: int
    """Trials per task."""
    ended_by: dict[str, int]
    """How the trials ended -> how many."""
    reasons: list[EndingReason] = Field(default_factory=list)
    """Why the trials not answered ended (a limit, a fault), each distinct reason once, most frequent first."""
    new_runs: int
    """Task runs stored."""
    spans_ingested: int
    """Spans the traces added to the store (one conversation per trial)."""


def _execute(tools: dict[str, Callable[..., ToolResult]], call: ToolCall) -> ToolResult:
    """The call run on the sandbox; a call the tool cannot take (unknown tool, wrong arguments) is an error result
    the agent sees, as a tool's own failure is. A tool that raises still raises: the runner's `sandbox_error`."""
    fn = tools.get(call.tool)
    if fn is None:
        return ToolResult(tool=call.tool, ok=False, error=f"{call.tool}: no such tool for this task "
                                                          f"(tools: {sorted(tools)})")
    try:
        inspect.signature(fn).bind(**call.args)
    except TypeError as e:
        return ToolResult(tool=call.tool, ok=False, error=f"{call.tool}: bad arguments: {e}")
    return fn(**call.args)


class _Trial:
    """The mutable state of one trial while it runs."""

    def __init__(self, task: Task, clock: Clock) -> None:
        self.task, self.clock = task, clock
        self.events: list[Event] = [UserMessage(text=task.input[0])]
        self.decisions: list[Decision] = []
        self.calls: list[CallRecord] = []
        self.answers: list[str] = []
        self.tokens: int | None = None

    def play(self, agent: Agent, tools: dict[str, Callable[..., ToolResult]]) -> tuple[EndedBy, str | None]:
        """Drive the agent until the trial ends; how it ended and why."""
        task = self.task
        while True:
            start = self.clock()
            try:
                # Typed loosely: an agent outside the type checker (a model adapter) may return anything.
                action: object = agent.act(History(task=task, events=tuple(self.events)))
            except Exception as e:  # noqa: BLE001 - an agent's fault ends its trial, never the run
                return "agent_error", f"{agent.name}: {type(e).__name__}: {e}"
            if not isinstance(action, ToolCall | Answer):
                return "agent_error", f"{agent.name}: returned {type(action).__name__}, not a ToolCall or Answer"
            self.decisions.append(Decision(action=action, start_ns=start, end_ns=self.clock()))
            if action.tokens is not None:
                self.tokens = (self.tokens or 0) + action.tokens
                if self.tokens > task.token_limit:
                    return "token_limit", f"{self.tokens} tokens exceed the task's token_limit {task.token_limit}"
            if isinstance(action, Answer):
                self.events.append(action)
                self.answers.append(action.text)
                if len(self.answers) == len(task.input):
                    return "answered", None
                self.events.append(UserMessage(text=task.input[len(self.answers)]))
                continue
            if len(self.calls) >= task.max_steps:
                return "step_limit", f"a tool call beyond the task's max_steps {task.max_steps}"
            start = self.clock()
            try:
                result = _execute(tools, action)
            except Exception as e:  # noqa: BLE001 - a tool that raises ends its trial, never the run
                return "sandbox_error", f"{action.tool}: {type(e).__name__}: {e}"
            self.calls.append(CallRecord(step=len(self.calls) + 1, tool=action.tool, args=action.args, ok=result.ok,
                                         output=result.output, error=result.error, start_ns=start,
                                         end_ns=self.clock()))
            self.events.append(ToolOutcome(call=action, ok=result.ok, output=result.output, error=result.error))


def run_trial(suite: TaskSuite, task: Task, agent: Agent, trial: int, *, clock: Clock = time.time_ns,
              sandbox: Callable[[SandboxSpec], Sandbox] = Sandbox, judge: QualityJudge | None = None
              ) -> TrialResult:
    """One trial of `task` from a fresh sandbox (`sandbox` builds it: tests pass a faulty one); `judge` judges
    its final answer (None: final quality is not collected, "no model configured")."""
    run = _Trial(task, clock)
    start = clock()
    verdict: TaskVerdict | None = None
    before: dict[str, tuple[Row, ...]] = {}
    after: dict[str, tuple[Row, ...]] = {}
    consistency: float | None = None
    try:
        box = sandbox(suite.sandbox)
    except Exception as e:  # noqa: BLE001 - a sandbox that cannot be built ends its trial, never the run
        ended_by: EndedBy = "sandbox_error"
        reason: str | None = f"sandbox: {type(e).__name__}: {e}"
    else:
        with box:
            before = box.initial_tables
            ended_by, reason = run.play(agent, box.tools(task.tools))
            state = box.snapshot(run.answers[-1] if run.answers else None, queries_of(task))
            verdict, after = check_task(task, state), state.tables
            consistency = state_consistency(task, state, suite.sandbox.files)
    calls = [metrics.Call(tool=c.tool, args=c.args, ok=c.ok) for c in run.calls]
    quality = (judge or QualityJudge(None))(task, run.answers)
    return TrialResult(
        suite=suite.name, task_id=task.id, trial=trial, agent=agent.name, ended_by=ended_by, reason=reason,
        answers=tuple(run.answers), decisions=tuple(run.decisions), calls=tuple(run.calls), verdict=verdict,
        success=ended_by == "answered" and verdict is not None and verdict.passed, steps=len(run.calls),
        tokens=run.tokens, start_ns=start, end_ns=clock(),
        first_deviation=metrics.first_deviation(calls, task.expected_steps),
        step_pass_rate=metrics.step_pass_rate(calls, task.expected_steps),
        error_recovery=metrics.error_recovery(calls), recoveries=metrics.recoveries(calls),
        failed_calls=metrics.failed_calls(calls), redundant_calls=metrics.redundant_calls(calls),
        tables_before=before, tables_after=after, overlap=metrics.overlap(calls, task.expected_steps),
        state_consistency=consistency, final_quality=quality.value,
        not_collected={} if quality.value is not None else {"final_quality": quality.reason},
    )


def run_suite(suite: TaskSuite, agent: Agent, *, trials: int, tasks: Sequence[str] | None = None,
              clock: Clock = time.time_ns, sandbox: Callable[[SandboxSpec], Sandbox] = Sandbox,
              judge: QualityJudge | None = None) -> list[TrialResult]:
    """Every task (or those named) for `trials` trials each, each trial from a fresh sandbox; task by task;
    `judge` judges each trial's final answer (`run_trial`)."""
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    chosen = suite.tasks if tasks is None else tuple(suite.task(t) for t in tasks)
    return [run_trial(suite, task, agent, trial, clock=clock, sandbox=sandbox, judge=judge)
            for task in chosen for trial in range(trials)]


__all__ = ["CallRecord", "Clock", "Decision", "EndedBy", "TaskRunReport", "TrialResult",
           "ending_reasons", "run_suite", "run_trial"]
