"""Two real ways to call a model for one structured answer, and the one retry layer around them.

- `LitellmBackend`: `litellm.acompletion` with sigma's JSON schema as `response_format`, validated with
  pydantic; usage from the response and cost from litellm's *local* cost map (an unknown model costs 0; its
  tokens still count). litellm's and the OpenAI client's own retries are off (`num_retries=0`,
  `max_retries=0`), so every attempt is exactly one request the provider counts and bills.
- `PydanticAIBackend`: a pydantic-ai `Agent(model, output_type=sigma)` for any pydantic-ai `Model` object
  (tests use `FunctionModel` / `TestModel`); its own output retries are off for the same reason.

`call_model` runs one backend call under tenacity: timeouts, rate limits (429), 5xx, connection errors,
malformed JSON and schema-invalid answers are retried with short exponential backoff and jitter, up to the
configured attempts; every attempt is first reserved against the run's budget.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ValidationError
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from agent_factory.errors import CollectionError
from agent_factory.evaluators.collect.budget import Budget
from agent_factory.evaluators.collect.config import ModelSpec, RetryPolicy
from agent_factory.evaluators.collect.schema import json_schema
from agent_factory.validation import describe_error

# Never fetch litellm's cost map from the network; the copy shipped with litellm is used.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ErrorKind = Literal["timeout", "rate_limit", "server_error", "connection", "malformed_json", "schema_invalid"]


@dataclass(frozen=True)
class Reply:
    """One validated structured answer and what it cost."""

    data: dict[str, Any]
    """The answer as JSON (sigma dumped by alias: definition id -> item answer)."""
    tokens: int
    cost_usd: float


class TransientModelError(CollectionError):
    """A failure worth retrying; carries the usage of the failed attempt, if any."""

    def __init__(self, kind: ErrorKind, message: str, *, tokens: int = 0, cost_usd: float = 0.0) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.tokens = tokens
        self.cost_usd = cost_usd


class FatalModelError(CollectionError):
    """A failure retrying cannot fix (authentication, bad request, unknown model, missing key)."""


class Backend(Protocol):
    """Makes one attempt at a structured call."""

    spec: ModelSpec

    async def attempt(self, prompt: str, sigma: type[BaseModel]) -> Reply:
        """One model call for `prompt` whose answer must validate against `sigma`."""


@dataclass
class CallCounters:
    """What calls cost, counted per attempt (failed attempts included)."""

    model_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]


def _transient_status(status: object) -> bool:
    return isinstance(status, int) and (status in (408, 409, 425, 429) or status >= 500)


def _validate(sigma: type[BaseModel], content: str | None, tokens: int, cost: float) -> Reply:
    try:
        raw = json.loads(content or "")
    except ValueError:
        raise TransientModelError("malformed_json", f"answer is not JSON: {str(content)[:80]!r}",
                                  tokens=tokens, cost_usd=cost) from None
    try:
        out = sigma.model_validate(raw)
    except ValidationError as e:
        raise TransientModelError("schema_invalid", describe_error(e, raw), tokens=tokens, cost_usd=cost) from None
    return Reply(data=out.model_dump(by_alias=True), tokens=tokens, cost_usd=cost)


_SERVER_ERROR_NAMES = ("InternalServerError", "ServiceUnavailableError", "BadGatewayError")
# litellm's exported exception classes per transient kind, most specific first: its Timeout derives from the
# OpenAI SDK's connection error, so it is tested before APIConnectionError.
_LITELLM_CLASSES: tuple[tuple[ErrorKind, tuple[str, ...]], ...] = (
    ("timeout", ("Timeout",)),
    ("rate_limit", ("RateLimitError",)),
    ("connection", ("APIConnectionError",)),
    ("server_error", _SERVER_ERROR_NAMES),
)


_NO_KEY = ("Missing credentials", "api_key client option must be set")
"""What the OpenAI client says when no key was given: raised before any request, and wrapped by litellm as an
internal server error (500), so by class it would be retried; no retry can supply a key."""


def classify_litellm_error(exc: BaseException, litellm: Any) -> TransientModelError | FatalModelError:
    """The retry layer's view of an exception litellm raised: a missing key is fatal whatever its class; then
    `isinstance` against litellm's exported classes; for any other class (another litellm version, a wrapper)
    its name and HTTP status, as litellm names them; anything else is fatal."""
    if any(text in str(exc) for text in _NO_KEY):
        return FatalModelError(f"{type(exc).__name__}: {_short(exc)}")
    for kind, names in _LITELLM_CLASSES:
        classes = tuple(c for n in names if isinstance(c := getattr(litellm, n, None), type))
        if classes and isinstance(exc, classes):
            return TransientModelError(kind, _short(exc))
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    if "Timeout" in name:
        return TransientModelError("timeout", _short(exc))
    if "RateLimit" in name or status == 429:
        return TransientModelError("rate_limit", _short(exc))
    if "Connection" in name:
        return TransientModelError("connection", _short(exc))
    if _transient_status(status) or name in _SERVER_ERROR_NAMES:
        return TransientModelError("server_error", _short(exc))
    return FatalModelError(f"{name}: {_short(exc)}")


def load_litellm() -> Any:
    """litellm, imported on first use, its debug banners off."""
    import litellm  # imported lazily: it is slow to import and only needed when a model string is configured

    litellm.suppress_debug_info = True
    return litellm


def endpoint_kwargs(api_base: str | None, api_key_env: str | None) -> dict[str, Any]:
    """litellm's `api_base` and `api_key` for an endpoint (the key read from the variable `api_key_env` names;
    keys never live in config files); `FatalModelError` when that variable is not set."""
    kwargs: dict[str, Any] = {}
    if api_base:
        kwargs["api_base"] = api_base
    if api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            raise FatalModelError(f"environment variable {api_key_env} (api_key_env) is not set")
        kwargs["api_key"] = key
    return kwargs


async def litellm_completion(litellm: Any, kwargs: dict[str, Any]) -> Any:
    """One `litellm.acompletion(**kwargs)` (litellm's own retries off), its failure as the retry layer sees it:
    `TransientModelError` or `FatalModelError` (`classify_litellm_error`)."""
    try:
        return await litellm.acompletion(**kwargs, num_retries=0, max_retries=0)
    except (asyncio.TimeoutError, TimeoutError) as e:
        raise TransientModelError("timeout", _short(e)) from None
    except Exception as e:  # noqa: BLE001 - litellm maps every provider error to its own classes
        raise classify_litellm_error(e, litellm) from None


def retrying(retry: RetryPolicy) -> AsyncRetrying:
    """tenacity under the run's retry policy: transient failures only, short exponential backoff with jitter."""
    return AsyncRetrying(
        stop=stop_after_attempt(retry.attempts),
        wait=wait_exponential_jitter(multiplier=retry.initial_wait_s, max=retry.max_wait_s,
                                     jitter=retry.initial_wait_s),
        retry=retry_if_exception_type(TransientModelError),
        reraise=True,
    )


class LitellmBackend:
    """A litellm model string, optionally at an `api_base` (OpenAI-compatible servers, vLLM, Ollama...)."""

    def __init__(self, spec: ModelSpec) -> None:
        if not isinstance(spec.model, str):
            raise TypeError("LitellmBackend needs a litellm model string")
        self.spec = spec

    def _cost(self, litellm: Any, response: Any) -> float:
        try:
            return float(litellm.completion_cost(completion_response=response) or 0.0)
        except Exception:  # noqa: BLE001 - a model missing from the local cost map costs 0, tokens still count
            return 0.0

    async def attempt(self, prompt: str, sigma: type[BaseModel]) -> Reply:
        """One litellm completion constrained to `sigma`'s JSON schema."""
        litellm = load_litellm()
        kwargs: dict[str, Any] = {
            "model": self.spec.model,
            "messages": [{"role": "user", "content": prompt}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "checklist", "schema": json_schema(sigma), "strict": True},
            },
            "timeout": self.spec.timeout_s,
            **endpoint_kwargs(self.spec.api_base, self.spec.api_key_env),
        }
        response = await litellm_completion(litellm, kwargs)
        usage = getattr(response, "usage", None)
        tokens = int(getattr(usage, "total_tokens", 0) or 0)
        cost = self._cost(litellm, response)
        try:
            content = response.choices[0].message.content
        except (AttributeError, IndexError):
            content = None
        return _validate(sigma, content, tokens, cost)


class PydanticAIBackend:
    """A pydantic-ai `Model` object, called through `Agent(model, output_type=sigma)`."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self._agents: dict[type[BaseModel], Any] = {}

    def _agent(self, sigma: type[BaseModel]) -> Any:
        from pydantic_ai import Agent

        if sigma not in self._agents:
            if len(self._agents) >= 256:  # sigma classes are memoized, so this rarely drops a live agent
                self._agents.clear()
            self._agents[sigma] = Agent(self.spec.model, output_type=sigma, retries=0)
        return self._agents[sigma]

    async def attempt(self, prompt: str, sigma: type[BaseModel]) -> Reply:
        """One pydantic-ai run whose output type is `sigma`."""
        from pydantic_ai import exceptions as px

        transient = tuple(
            getattr(px, n) for n in ("ModelTimeoutError", "ModelRequestTimeout", "ModelConnectionError",
                                     "ModelRateLimitError", "ModelServerError", "ModelOverloadedError",
                                     "ModelUnavailableError")
            if isinstance(getattr(px, n, None), type)
        )
        try:
            result = await asyncio.wait_for(self._agent(sigma).run(prompt), timeout=self.spec.timeout_s)
        except (asyncio.TimeoutError, TimeoutError) as e:
            raise TransientModelError("timeout", _short(e)) from None
        except px.UnexpectedModelBehavior as e:
            raise TransientModelError("schema_invalid", _short(e)) from None
        except Exception as e:  # noqa: BLE001 - classify, then retry or give up
            status = getattr(e, "status_code", None)
            if isinstance(e, transient) or _transient_status(status):
                kind: ErrorKind = "rate_limit" if status == 429 or "RateLimit" in type(e).__name__ else "server_error"
                raise TransientModelError(kind, _short(e)) from None
            raise FatalModelError(f"{type(e).__name__}: {_short(e)}") from None
        usage = result.usage
        if callable(usage) and not hasattr(usage, "input_tokens"):  # older pydantic-ai: a method
            usage = usage()
        tokens = int(getattr(usage, "total_tokens", 0) or 0) or int(
            (getattr(usage, "input_tokens", 0) or 0) + (getattr(usage, "output_tokens", 0) or 0)
        )
        cost = getattr(usage, "cost", None)
        try:
            cost_usd = float(cost() if callable(cost) else (cost or 0.0))
        except Exception:  # noqa: BLE001 - pricing unknown for this model: 0
            cost_usd = 0.0
        output = result.output
        return Reply(data=output.model_dump(by_alias=True), tokens=tokens, cost_usd=cost_usd)


def backend_for(spec: ModelSpec) -> Backend:
    """litellm for model strings, pydantic-ai for `Model` objects."""
    if isinstance(spec.model, str):
        return LitellmBackend(spec)
    return PydanticAIBackend(spec)


BackendFactory = Callable[[ModelSpec], Backend]


async def call_model(
    backend: Backend,
    prompt: str,
    sigma: type[BaseModel],
    *,
    budget: Budget,
    retry: RetryPolicy,
    counters: CallCounters,
) -> Reply:
    """One structured answer, retried on transient failures; `BudgetExhausted`, `TransientModelError` (after
    the last attempt) or `FatalModelError` otherwise."""
    async for attempt in retrying(retry):
        with attempt:
            budget.reserve()
            counters.model_calls += 1
            try:
                reply = await backend.attempt(prompt, sigma)
            except TransientModelError as e:
                counters.tokens += e.tokens
                counters.cost_usd += e.cost_usd
                budget.charge(tokens=e.tokens, cost_usd=e.cost_usd)
                raise
            counters.tokens += reply.tokens
            counters.cost_usd += reply.cost_usd
            budget.charge(tokens=reply.tokens, cost_usd=reply.cost_usd)
            return reply
    raise AssertionError("unreachable: tenacity either returns or reraises")
