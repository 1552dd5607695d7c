"""Model agents for the task runner: a pydantic-ai Agent whose tools are the sandbox's, driven one decision at a
time (issue 35).

The runner owns the tools: it executes every call on the sandbox, records it and enforces the step and token
limits. So the agent's tools are *external* (pydantic-ai's `ExternalToolset`): a run of the pydantic-ai Agent ends
when the model asks for tool calls (its output is `DeferredToolRequests`); the runner executes them, one decision
each; the next run continues the message history with their results (`DeferredToolResults`). A model that answers
in text answers the user (`Answer`). A failed call's error is returned to the model as the call's result, so the
model sees it and may recover, as a scripted agent does.

Models (`model_for`): a litellm model string (`provider/model`: `openai/gpt-4o-mini`, a local server's
`openai/<name>` at the `[agent]` endpoint) through `LitellmModel`; any other string is a pydantic-ai model string
(`openai:gpt-4o`, `test`); in code and tests, a pydantic-ai `Model` object (`FunctionModel`, `TestModel`).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessage, ModelResponse, ThinkingPart, ToolCallPart
from pydantic_ai.models import Model, infer_model
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import ExternalToolset

from agent_factory.evaluators.collect.config import AgentEndpoint, RetryPolicy
from agent_factory.factory.tasks.agents import Answer, Cost, History, ToolCall, ToolOutcome, UserMessage
from agent_factory.factory.tasks.litellm_model import LitellmModel
from agent_factory.factory.tasks.sandbox import Sandbox

TEMPLATES = Path(__file__).parent / "templates"


def tool_definitions(names: Sequence[str]) -> list[ToolDefinition]:
    """The sandbox's tools as the model sees them: each tool's name, its docstring, its (string) parameters."""
    defs = []
    for name in names:
        fn = getattr(Sandbox, name, None)
        if fn is None or name.startswith("_"):
            raise ValueError(f"no sandbox tool {name!r}")
        params = [p.name for p in inspect.signature(fn).parameters.values() if p.name != "self"]
        defs.append(ToolDefinition(
            name=name, description=inspect.getdoc(fn) or name,
            parameters_json_schema={"type": "object", "properties": {p: {"type": "string"} for p in params},
                                    "required": params, "additionalProperties": False}))
    return defs


def system_prompt(suite_description: str) -> str:
    """The agent's system prompt (`templates/agent.j2`) for a suite."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=False,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.get_template("agent.j2").render(suite_description=" ".join(suite_description.split()))


def model_for(name: str, endpoint: AgentEndpoint, retry: RetryPolicy) -> Model:
    """The model a `--agent` string names: `provider/model` through litellm at the endpoint, else pydantic-ai's."""
    if "/" in name.split(":", 1)[0]:
        return LitellmModel(name, api_base=endpoint.api_base, api_key_env=endpoint.api_key_env,
                            timeout_s=endpoint.timeout_s, retry=retry)
    return infer_model(name)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


class ModelAgent:
    """A pydantic-ai Agent over `model`, as the runner's `Agent` (see the module's docstring). One trial at a time:
    a history of one event (the task's first message) starts a new trial. Holds an event loop (the model's HTTP
    clients live on it): `close` it when done, or use it as a context manager."""

    def __init__(self, model: Model, *, name: str, instructions: str) -> None:
        self.model, self._name, self._instructions = model, name, instructions
        self._agents: dict[tuple[str, ...], Agent[None, str | DeferredToolRequests]] = {}
        self._runner: asyncio.Runner | None = None
        self._reset()

    def _reset(self) -> None:
        self._messages: list[ModelMessage] = []
        self._queue: list[ToolCallPart] = []
        self._issued: list[str] = []
        self._results: dict[str, str] = {}
        self._seen = 0

    @property
    def name(self) -> str:
        """The model's name as the run records it."""
        return self._name

    def _agent(self, tools: tuple[str, ...]) -> Agent[None, str | DeferredToolRequests]:
        if tools not in self._agents:
            self._agents[tools] = Agent(self.model, output_type=[str, DeferredToolRequests],
                                        system_prompt=self._instructions,
                                        toolsets=[ExternalToolset(tool_definitions(tools))])
        return self._agents[tools]

    def _read(self, history: History) -> str | None:
        """Take in the events since the last decision: results of the calls handed out, a new user message."""
        if len(history.events) == 1:
            self._reset()
        prompt = None
        for event in history.events[self._seen:]:
            if isinstance(event, ToolOutcome):
                call_id = self._issued.pop(0)
                self._results[call_id] = event.output if event.ok else f"ERROR: {event.error}"
            elif isinstance(event, UserMessage):
                prompt = event.text
        self._seen = len(history.events)
        return prompt

    def act(self, history: History) -> ToolCall | Answer:
        """The next action: a queued tool call of the model's last response, else one run of the Agent."""
        prompt = self._read(history)
        if self._queue:
            return self._hand_out(self._queue.pop(0), cost=None, tokens=None)
        agent = self._agent(tuple(history.task.tools))
        if self._results:
            results, self._results = DeferredToolResults(calls=dict(self._results)), {}
            run = agent.run(message_history=self._messages, deferred_tool_results=results)
        else:
            run = agent.run(prompt, message_history=self._messages or None)
        if self._runner is None:
            self._runner = asyncio.Runner()
        result = self._runner.run(run)
        self._messages = result.all_messages()
        new = [m for m in result.new_messages() if isinstance(m, ModelResponse)]
        usage = result.usage
        reasoning = "\n".join(p.content for m in new for p in m.parts if isinstance(p, ThinkingPart) and p.content)
        cost = Cost(model=next((m.model_name for m in reversed(new) if m.model_name), self._name),
                    requests=usage.requests, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                    reasoning=reasoning or None)
        tokens = usage.input_tokens + usage.output_tokens
        if isinstance(result.output, DeferredToolRequests):
            if not result.output.calls:
                raise ValueError("the model's response asked for no tool call and gave no answer")
            self._queue = list(result.output.calls)
            return self._hand_out(self._queue.pop(0), cost=cost, tokens=tokens)
        return Answer(text=result.output, tokens=tokens, cost=cost)

    def _hand_out(self, call: ToolCallPart, *, cost: Cost | None, tokens: int | None) -> ToolCall:
        self._issued.append(call.tool_call_id)
        args = {k: _as_text(v) for k, v in call.args_as_dict().items()}
        return ToolCall(tool=call.tool_name, args=args, tokens=tokens, cost=cost)

    def close(self) -> None:
        """Close the event loop the model's clients live on, its pending tasks (litellm's logging worker)
        cancelled first, as `asyncio.run` does."""
        if self._runner is not None:
            self._runner.close()
            self._runner = None

    def __enter__(self) -> ModelAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["ModelAgent", "model_for", "system_prompt", "tool_definitions"]
