"""A pydantic-ai `Model` over litellm: any litellm model string (`openai/gpt-4o-mini`, `anthropic/claude-...`, a
local OpenAI-compatible server's `openai/<name>` at an `api_base`) as the model of a pydantic-ai Agent.

pydantic-ai speaks to providers through their own SDKs; the task runner's model agents go through litellm, as the
collectors do (`evaluators/collect/backends.py`), so one model string names a model everywhere in the project. One
request is one `litellm.acompletion` call with the agent's tools as OpenAI function tools; transient failures
(timeouts, 429, 5xx, connection errors: the collectors' classification) are retried under tenacity with the run's
retry policy, and litellm's and the OpenAI client's own retries are off, so every attempt is one request the
provider counts. Anything else raises, and the runner ends the trial with its reason.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import (
    FinishReason,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import RequestUsage

from agent_factory.evaluators.collect.backends import endpoint_kwargs, litellm_completion, load_litellm, retrying
from agent_factory.evaluators.collect.config import RetryPolicy

_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length", "tool_calls": "tool_call",
                                    "function_call": "tool_call", "content_filter": "content_filter"}


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(c if isinstance(c, str) else json.dumps(c, default=str) for c in content)
    return json.dumps(content, default=str)


def openai_messages(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """pydantic-ai's message history as OpenAI chat messages (thinking is not sent back)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            if message.instructions:
                out.append({"role": "system", "content": message.instructions})
            for part in message.parts:
                if isinstance(part, SystemPromptPart):
                    out.append({"role": "system", "content": part.content})
                elif isinstance(part, UserPromptPart):
                    out.append({"role": "user", "content": _text(part.content)})
                elif isinstance(part, ToolReturnPart):
                    out.append({"role": "tool", "tool_call_id": part.tool_call_id,
                                "content": part.model_response_str()})
                elif isinstance(part, RetryPromptPart):
                    if part.tool_name is None:
                        out.append({"role": "user", "content": part.model_response()})
                    else:
                        out.append({"role": "tool", "tool_call_id": part.tool_call_id,
                                    "content": part.model_response()})
            continue
        text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
        calls = [{"id": p.tool_call_id, "type": "function",
                  "function": {"name": p.tool_name, "arguments": p.args_as_json_str()}}
                 for p in message.parts if isinstance(p, ToolCallPart)]
        reply: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            reply["tool_calls"] = calls
        out.append(reply)
    return out


def openai_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """The agent's tools as OpenAI function tools."""
    return [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                              "parameters": t.parameters_json_schema}} for t in tools]


def response_parts(message: Any) -> list[ModelResponsePart]:
    """An OpenAI chat message (litellm's `Message`) as pydantic-ai response parts: its reasoning text (thinking),
    its text, its tool calls (arguments kept as the model wrote them; the agent validates them)."""
    parts: list[ModelResponsePart] = []
    reasoning = getattr(message, "reasoning_content", None)
    if isinstance(reasoning, str) and reasoning:
        parts.append(ThinkingPart(content=reasoning))
    content = getattr(message, "content", None)
    if isinstance(content, str) and content:
        parts.append(TextPart(content=content))
    for call in getattr(message, "tool_calls", None) or []:
        fn = call.function
        parts.append(ToolCallPart(tool_name=fn.name or "", args=fn.arguments or "{}", tool_call_id=call.id or ""))
    return parts


class LitellmModel(Model):
    """A litellm model string as a pydantic-ai model (see the module's docstring)."""

    def __init__(self, model: str, *, api_base: str | None = None, api_key_env: str | None = None,
                 timeout_s: float = 60.0, retry: RetryPolicy | None = None) -> None:
        super().__init__()
        self._model, self._api_base, self._api_key_env = model, api_base, api_key_env
        self._timeout_s, self._retry = timeout_s, retry or RetryPolicy()
        self.calls = 0
        """Requests sent (every attempt, retries included)."""

    @property
    def model_name(self) -> str:
        """The litellm model string."""
        return self._model

    @property
    def system(self) -> str:
        """The provider, as litellm's model string names it (`openai/x` -> `openai`)."""
        return self._model.partition("/")[0] if "/" in self._model else "litellm"

    def _kwargs(self, messages: list[ModelMessage], params: ModelRequestParameters) -> dict[str, Any]:
        tools = [*params.declared_function_tools, *params.output_tools]
        kwargs: dict[str, Any] = {"model": self._model, "messages": openai_messages(messages),
                                  "timeout": self._timeout_s, **endpoint_kwargs(self._api_base, self._api_key_env)}
        if tools:
            kwargs["tools"] = openai_tools(tools)
            # Text is an answer when the agent allows it; otherwise the model must call a tool.
            kwargs["tool_choice"] = "auto" if params.allow_text_output else "required"
        return kwargs

    async def request(self, messages: list[ModelMessage], model_settings: ModelSettings | None,
                      model_request_parameters: ModelRequestParameters) -> ModelResponse:
        """One completion (retried on transient failures) as a pydantic-ai response."""
        _, params = self.prepare_request(model_settings, model_request_parameters)
        kwargs = self._kwargs(messages, params)
        litellm = load_litellm()  # imported on first use: slow to import, needed only when a model agent runs
        response: Any = None
        async for attempt in retrying(self._retry):
            with attempt:
                self.calls += 1
                response = await litellm_completion(litellm, kwargs)
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        return ModelResponse(
            parts=response_parts(choice.message),
            usage=RequestUsage(input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                               output_tokens=int(getattr(usage, "completion_tokens", 0) or 0)),
            model_name=str(getattr(response, "model", None) or self._model), provider_name="litellm",
            finish_reason=_FINISH.get(str(getattr(choice, "finish_reason", "") or "")),
        )


__all__ = ["LitellmModel", "openai_messages", "openai_tools", "response_parts"]
