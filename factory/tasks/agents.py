"""Agents the task runner drives, and the scripted agents that exercise every metric offline (issue 35).

An agent sees the trial so far (`History`: the task, the user's messages, its own calls with their results, its
answers) and decides one action: a tool call or an answer. The scripted agents play the task's reference solution
(`Task.reference`, from the suite) in a fixed way, so each run's outcome is known in advance:

- `script:succeed` plays the reference;
- `script:fail-midway` plays the first half of the reference's tool calls, then answers without finishing;
- `script:recover` makes a failing call (a bad SQL query) before the reference's first call, then plays it;
- `script:loop` repeats the reference's first call for ever (a step limit ends it);
- `script:refuse` answers a refusal without calling a tool.

Scripted agents claim no tokens (they call no model).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

from pydantic import Field

from agent_factory.evaluators.tasks.suite import ReferenceStep, Task
from agent_factory.frozen import Frozen


class Cost(Frozen):
    """What the model requests behind one decision of a model agent said and cost (a decision that continues a
    response's earlier tool calls has none: that response was paid for once)."""

    model: str
    """The model as the response names it."""
    requests: int = Field(ge=0)
    """Model requests the decision took (a model asked again after invalid tool arguments takes more than one)."""
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    reasoning: str | None = None
    """The model's reasoning text (thinking), when it gave any."""


class ToolCall(Frozen):
    """The agent calls a tool."""

    kind: Literal["tool_call"] = "tool_call"
    tool: str
    args: dict[str, str] = Field(default_factory=dict)
    tokens: int | None = None
    """Tokens the decision cost, when the agent reports them."""
    cost: Cost | None = None
    """The model call behind the decision, when a model made it."""


class Answer(Frozen):
    """The agent answers the user (ending its turn)."""

    kind: Literal["answer"] = "answer"
    text: str
    tokens: int | None = None
    """Tokens the decision cost, when the agent reports them."""
    cost: Cost | None = None
    """The model call behind the decision, when a model made it."""


class UserMessage(Frozen):
    """A message from the user (the task's input, one per turn)."""

    kind: Literal["user"] = "user"
    text: str


class ToolOutcome(Frozen):
    """A call the runner executed, with what it gave."""

    kind: Literal["tool_outcome"] = "tool_outcome"
    call: ToolCall
    ok: bool
    output: str = ""
    error: str | None = None


Event = UserMessage | ToolCall | Answer | ToolOutcome
"""One entry of a trial's history (a `ToolCall` appears only inside its `ToolOutcome`)."""


class History(Frozen):
    """The trial so far, as the agent sees it."""

    task: Task
    events: tuple[Event, ...]

    @property
    def actions(self) -> int:
        """The agent's decisions so far (calls made and answers given)."""
        return sum(isinstance(e, ToolOutcome | Answer) for e in self.events)


class Agent(Protocol):
    """What the runner drives: a name (the model, or `script:<name>`) and one decision per call."""

    @property
    def name(self) -> str:
        """The agent's name as the run records it."""
        ...

    def act(self, history: History) -> ToolCall | Answer:
        """The next action given the trial so far; may raise (the runner ends the trial with `agent_error`)."""
        ...


REFUSAL = "I can't help with that request."
GAVE_UP = "I stopped before finishing the task."
_BAD_SQL = "SELEC * FROM no_such_table"
"""A query that fails to parse: the error `script:recover` recovers from."""
_SQL_TOOLS = ("query_sql", "execute_sql")


def _as_action(step: ReferenceStep) -> ToolCall | Answer:
    if step.tool is not None:
        return ToolCall(tool=step.tool, args=dict(step.args))
    assert step.answer is not None  # a reference step is a call or an answer (ReferenceStep's validator)
    return Answer(text=step.answer)


def _no_reference(task: Task, script: str) -> ValueError:
    return ValueError(f"{script}: task {task.id!r} has no reference solution to play")


def _plan_succeed(task: Task) -> list[ToolCall | Answer]:
    if not task.reference:
        raise _no_reference(task, "script:succeed")
    return [_as_action(s) for s in task.reference]


def _plan_fail_midway(task: Task) -> list[ToolCall | Answer]:
    if not task.reference:
        raise _no_reference(task, "script:fail-midway")
    calls = task.reference_calls
    # The first half of the calls (rounded down), then an answer for every user message, none of them finishing.
    return [_as_action(s) for s in calls[: len(calls) // 2]] + [Answer(text=GAVE_UP)] * len(task.input)


def _plan_recover(task: Task) -> list[ToolCall | Answer]:
    plan = _plan_succeed(task)
    first = task.reference_calls[0].tool if task.reference_calls else None
    # The bad query goes to the tool of the first call when it runs SQL (so a later success of that tool recovers);
    # a task whose first call runs no SQL gets it on any SQL tool it offers, or none.
    tool = first if first in _SQL_TOOLS else next((t for t in _SQL_TOOLS if t in task.tools), None)
    return plan if tool is None else [ToolCall(tool=tool, args={"sql": _BAD_SQL}), *plan]


def _plan_loop(task: Task) -> list[ToolCall | Answer]:
    if not task.reference_calls:
        raise _no_reference(task, "script:loop")
    return [_as_action(task.reference_calls[0])]


def _plan_refuse(task: Task) -> list[ToolCall | Answer]:
    return [Answer(text=REFUSAL)] * len(task.input)


class ScriptedAgent:
    """An agent that plays a fixed plan made from the task; past the plan's end it repeats the plan's last action
    for `script:loop` and answers that it stopped otherwise."""

    def __init__(self, script: str, plan: Callable[[Task], list[ToolCall | Answer]]) -> None:
        self.script = script
        self._plan = plan

    @property
    def name(self) -> str:
        """`script:<name>`."""
        return f"script:{self.script}"

    def act(self, history: History) -> ToolCall | Answer:
        """The plan's next action: the one at the count of actions taken so far."""
        plan = self._plan(history.task)
        if self.script == "loop":
            return plan[0]
        done = history.actions
        return plan[done] if done < len(plan) else Answer(text=GAVE_UP)


SCRIPTS: dict[str, Callable[[Task], list[ToolCall | Answer]]] = {
    "succeed": _plan_succeed, "fail-midway": _plan_fail_midway, "recover": _plan_recover, "loop": _plan_loop,
    "refuse": _plan_refuse,
}
"""Script name -> how it makes its plan from a task."""


def scripted_agent(name: str) -> ScriptedAgent:
    """The scripted agent `script:<name>` (or `<name>`); ValueError listing the valid names otherwise."""
    script = name.removeprefix("script:")
    if script not in SCRIPTS:
        raise ValueError(f"unknown scripted agent {name!r} (valid: {', '.join('script:' + s for s in SCRIPTS)})")
    return ScriptedAgent(script, SCRIPTS[script])


__all__ = ["GAVE_UP", "REFUSAL", "SCRIPTS", "Agent", "Answer", "Cost", "Event", "History", "ScriptedAgent", "ToolCall",
           "ToolOutcome", "UserMessage", "scripted_agent"]
