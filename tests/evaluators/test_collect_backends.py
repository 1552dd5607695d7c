"""How litellm's errors are classified for the retry layer: litellm's own exception classes by `isinstance`,
checked for real through the local fake server's faults, with the class name and status as the fallback."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import litellm
import pytest

from agent_factory.evaluators.collect import backends
from agent_factory.evaluators.collect.backends import (
    FatalModelError,
    LitellmBackend,
    TransientModelError,
    classify_litellm_error,
)
from agent_factory.evaluators.collect.config import ModelSpec
from agent_factory.evaluators.collect.schema import build_sigma
from tests.evaluators.test_collect_support import SPECIFIC
from tests.fakes.openai_server import FakeOpenAIServer, FaultPlan

KEY_ENV = "AGENT_FACTORY_TEST_KEY"
SIGMA = build_sigma([SPECIFIC])


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "test-key-not-secret")


def attempt(base_url: str, model: str = "openai/fake-small", *,
            timeout_s: float = 5.0) -> TransientModelError | FatalModelError | None:
    # short only for a "timeout" fault: a loaded machine must not turn another fault into a timeout
    backend = LitellmBackend(ModelSpec(model=model, api_base=base_url, api_key_env=KEY_ENV, family="f",
                                       timeout_s=timeout_s))
    try:
        asyncio.run(backend.attempt("Is the answer specific?", SIGMA))
    except (TransientModelError, FatalModelError) as e:
        return e
    return None


@pytest.mark.parametrize(("fault", "kind", "litellm_class"), [
    ("429", "rate_limit", "RateLimitError"),
    ("500", "server_error", "InternalServerError"),
    ("timeout", "timeout", "Timeout"),
])
def test_the_fake_servers_http_faults_arrive_as_litellms_classes(
    fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, fault: str, kind: str, litellm_class: str,
) -> None:
    raised: list[BaseException] = []

    def recording(exc: BaseException, lib: Any) -> TransientModelError | FatalModelError:
        raised.append(exc)
        return classify_litellm_error(exc, lib)

    monkeypatch.setattr(backends, "classify_litellm_error", recording)
    fake_openai.faults = FaultPlan(script=(fault,), timeout_s=1.0)
    error = attempt(fake_openai.base_url, timeout_s=0.3 if fault == "timeout" else 5.0)
    assert isinstance(error, TransientModelError) and error.kind == kind
    (exc,) = raised
    assert isinstance(exc, getattr(litellm, litellm_class))  # decided by isinstance, not by the name fallback


def test_answers_that_do_not_parse_or_validate_are_transient(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.faults = FaultPlan(script=("malformed_json", "schema_invalid"))
    kinds = [getattr(attempt(fake_openai.base_url), "kind", None) for _ in range(2)]
    assert kinds == ["malformed_json", "schema_invalid"]
    assert attempt(fake_openai.base_url) is None  # the plan's script is over: a valid answer


def test_a_refused_connection_and_an_unknown_provider() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    refused = attempt(f"http://127.0.0.1:{port}/v1")
    # litellm's OpenAI provider reports a refused connection as its InternalServerError: retried all the same
    assert isinstance(refused, TransientModelError) and refused.kind == "server_error"
    assert "Connection error" in str(refused)
    unknown = attempt("http://127.0.0.1:9/v1", model="no-such-provider/x")
    assert isinstance(unknown, FatalModelError) and "BadRequestError" in str(unknown)


class Unreachable(litellm.APIConnectionError):
    """A subclass whose name the old substring match would not have recognised."""


class Slow(litellm.Timeout):
    """litellm's Timeout carries status 408: by status alone it would be a server error."""


class UpstreamRateLimitHit(Exception):
    """Not litellm's: only its name says what it is."""


class Gateway(Exception):
    status_code = 503


def test_classification_by_class_first_then_name_and_status() -> None:
    def kind(exc: BaseException) -> str:
        out = classify_litellm_error(exc, litellm)
        return out.kind if isinstance(out, TransientModelError) else "fatal"

    assert kind(Unreachable(message="down", llm_provider="openai", model="m")) == "connection"
    assert kind(Slow(message="slow", model="m", llm_provider="openai")) == "timeout"
    assert kind(UpstreamRateLimitHit("slow down")) == "rate_limit"
    assert kind(Gateway("bad gateway")) == "server_error"
    assert kind(ValueError("no such model")) == "fatal"
    fatal = classify_litellm_error(litellm.BadRequestError(message="bad", model="m", llm_provider="openai"), litellm)
    assert isinstance(fatal, FatalModelError) and str(fatal).startswith("BadRequestError: ")
    # No key given: the OpenAI client refuses before any request and litellm calls it a 500; no retry helps.
    no_key = litellm.InternalServerError(message="OpenAIException - Missing credentials. Please pass an `api_key`",
                                         model="m", llm_provider="openai")
    assert kind(no_key) == "fatal"
