"""The fake OpenAI server answers real clients (urllib, litellm, pydantic-ai) and injects faults on cue."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ValidationError

from tests.fakes.openai_server import (
    FakeOpenAIServer,
    FaultPlan,
    FaultReply,
    Reply,
    ToolCallReply,
    example_for_schema,
    truncate_json,
    violate_schema,
)


class Evidence(BaseModel):
    span_id: str
    quote: str


class Verdict(BaseModel):
    answer: Literal["no", "yes"]
    severity: Literal["low", "high"]
    reason: str
    score: int
    confidence: float
    evidence: list[Evidence]
    primary: Evidence
    note: str | None = None


class Tree(BaseModel):
    label: str
    children: list[Tree]
    parent: Tree | None


def post(url: str, body: Any, *, timeout: float = 5.0) -> tuple[int, dict[str, str], dict[str, Any]]:
    """POST JSON with urllib; HTTP errors come back as (status, headers, body) instead of raising."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


def structured_request(schema: dict[str, Any], model: str = "fake-small") -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "judge this"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "v", "schema": schema}},
    }


# ---- plain HTTP ---------------------------------------------------------------------------------


def test_plain_post_is_answered_and_counted(fake_openai: FakeOpenAIServer) -> None:
    body = {"model": "fake-small", "messages": [{"role": "system", "content": "be brief"},
                                                {"role": "user", "content": [{"type": "text", "text": "hello there"}]}]}
    status, _, answer = post(fake_openai.base_url + "/chat/completions", body)
    assert status == 200
    assert answer["object"] == "chat.completion" and answer["model"] == "fake-small"
    assert answer["id"].startswith("chatcmpl-") and isinstance(answer["created"], int)
    choice = answer["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "ok"} and choice["finish_reason"] == "stop"
    usage = answer["usage"]
    assert usage["prompt_tokens"] == len("be brief\nhello there") // 4
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    post(fake_openai.url + "/chat/completions", {**body, "model": "fake-large"})
    assert fake_openai.calls == 2
    assert fake_openai.calls_by_model == {"fake-small": 1, "fake-large": 1}
    assert fake_openai.requests[0] == body
    assert fake_openai.seen_text() == "be brief\nhello there\nbe brief\nhello there"


def test_models_listing_and_bad_requests_are_not_counted(fake_openai: FakeOpenAIServer) -> None:
    with urllib.request.urlopen(fake_openai.base_url + "/models", timeout=5) as resp:
        listing = json.loads(resp.read())
    assert [m["id"] for m in listing["data"]] == ["fake-small"]
    assert post(fake_openai.base_url + "/chat/completions", b"{not json")[0] == 400
    assert post(fake_openai.base_url + "/completions", {"prompt": "x"})[0] == 404
    assert fake_openai.calls == 0


def test_structured_answer_follows_the_request_schema(fake_openai: FakeOpenAIServer) -> None:
    body = structured_request(Verdict.model_json_schema())
    status, _, answer = post(fake_openai.base_url + "/chat/completions", body)
    verdict = Verdict.model_validate_json(answer["choices"][0]["message"]["content"])
    assert status == 200 and verdict.answer == "yes" and verdict.severity == "low"


def test_tools_are_answered_with_a_tool_call(fake_openai: FakeOpenAIServer) -> None:
    tools = [{"type": "function", "function": {"name": name, "parameters": Verdict.model_json_schema()}}
             for name in ("lookup", "final_result_Verdict")]
    body = {"model": "fake-small", "messages": [{"role": "user", "content": "q"}], "tools": tools}
    answer = post(fake_openai.base_url + "/chat/completions", body)[2]["choices"][0]
    call = answer["message"]["tool_calls"][0]
    assert answer["finish_reason"] == "tool_calls" and answer["message"]["content"] is None
    assert call["function"]["name"] == "final_result_Verdict"
    Verdict.model_validate_json(call["function"]["arguments"])

    named = {**body, "tool_choice": {"type": "function", "function": {"name": "lookup"}}}
    assert post(fake_openai.base_url + "/chat/completions", named)[2]["choices"][0]["message"]["tool_calls"][0][
        "function"]["name"] == "lookup"

    fake_openai.responder = lambda req: ToolCallReply("lookup", {"q": req["messages"][-1]["content"]})
    call = post(fake_openai.base_url + "/chat/completions", body)[2]["choices"][0]["message"]["tool_calls"][0]
    assert call["function"] == {"name": "lookup", "arguments": '{"q": "q"}'}
    assert fake_openai.seen_text() == "q\nq\nq"  # message text only: tool definitions are not collected


def test_a_raising_responder_becomes_a_500(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.responder = lambda req: 1 / 0
    status, _, answer = post(fake_openai.base_url + "/chat/completions", {"model": "m", "messages": []})
    assert status == 500 and "ZeroDivisionError" in answer["error"]["message"]


def test_a_scripted_reply_sets_tool_calls_finish_reason_and_usage(fake_openai: FakeOpenAIServer) -> None:
    calls = (ToolCallReply("get_weather", {"city": "Oslo"}, id="call_a"), ToolCallReply("convert", {"amount": 2}))
    fake_openai.responder = lambda req: (Reply(tool_calls=calls, usage=(11, 5)) if len(req["messages"]) == 1
                                         else Reply(content="It is cold and", finish_reason="length", usage=(40, 2)))
    url, body = fake_openai.base_url + "/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "q"}]}
    first = post(url, body)[2]
    message = first["choices"][0]["message"]
    assert first["choices"][0]["finish_reason"] == "tool_calls" and message["content"] is None
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]] == [
        ("call_a", "get_weather", {"city": "Oslo"}), ("call_fake_000000_1", "convert", {"amount": 2})]
    assert first["usage"] == {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}
    second = post(url, {**body, "messages": body["messages"] * 2})[2]
    assert second["choices"][0] == {"index": 0, "message": {"role": "assistant", "content": "It is cold and"},
                                    "finish_reason": "length", "logprobs": None}
    assert second["usage"]["total_tokens"] == 42


def test_a_fault_reply_fails_that_request_and_each_retry(fake_openai: FakeOpenAIServer) -> None:
    import openai

    fake_openai.responder = lambda req: FaultReply("500") if req["messages"][-1]["content"] == "boom" else "fine"
    client = openai.OpenAI(base_url=fake_openai.base_url, api_key="test", max_retries=2)
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "boom"}])
    answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "calm"}])
    assert answer.choices[0].message.content == "fine"
    assert fake_openai.faults_served == ["500", "500", "500", None]


# ---- streaming ----------------------------------------------------------------------------------


def test_openai_sdk_streams_text_with_a_usage_chunk(fake_openai: FakeOpenAIServer) -> None:
    import openai

    fake_openai.responder = lambda req: Reply(content="The euro was introduced in", finish_reason="length",
                                              usage=(120, 6))
    client = openai.OpenAI(base_url=fake_openai.base_url, api_key="test", max_retries=0)
    chunks = list(client.chat.completions.create(model="fake-small", messages=[{"role": "user", "content": "euro"}],
                                                 stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "The euro was introduced in"
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    assert chunks[-1].choices == [] and (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (120, 6)
    assert all(c.usage is None for c in chunks[:-1]) and len(chunks) == 6  # role, 3 pieces, finish, usage
    assert fake_openai.requests[0]["stream"] is True


def test_openai_sdk_assembles_streamed_tool_calls(fake_openai: FakeOpenAIServer) -> None:
    import openai

    calls = (ToolCallReply("get_weather", {"city": "Tokyo"}, id="call_w"),
             ToolCallReply("convert_currency", {"amount": 50, "from_currency": "EUR"}, id="call_c"))
    fake_openai.responder = lambda req: Reply(tool_calls=calls, usage=(9, 4))
    client = openai.OpenAI(base_url=fake_openai.base_url, api_key="test", max_retries=0)
    with client.chat.completions.stream(model="m", messages=[{"role": "user", "content": "both"}]) as stream:
        final = stream.get_final_completion()
    message = final.choices[0].message
    assert final.choices[0].finish_reason == "tool_calls"
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == [
        ("call_w", "get_weather", {"city": "Tokyo"}), ("call_c", "convert_currency", {"amount": 50, "from_currency": "EUR"})]
    assert final.usage is None  # no include_usage asked for: no usage chunk


def test_stream_chunks_split_and_rejoin() -> None:
    from tests.fakes.openai_stream import split_text, stream_chunks

    assert split_text("abcdefg") == ["abc", "def", "g"] and split_text("") == [] and split_text("ab") == ["a", "b"]
    completion = {"id": "c1", "created": 0, "model": "m", "system_fingerprint": "fp", "usage": {"total_tokens": 3},
                  "choices": [{"message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}]}
    chunks = stream_chunks(completion, include_usage=False)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "hello"
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "stop" and "usage" not in chunks[-1]


def test_faults_on_a_streamed_request_answer_before_the_stream(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.faults = FaultPlan(script=(429,))
    body = {"model": "m", "messages": [], "stream": True}
    status, headers, answer = post(fake_openai.base_url + "/chat/completions", body)
    assert status == 429 and answer["error"]["code"] == "rate_limit_exceeded"


# ---- schema examples ----------------------------------------------------------------------------


def test_example_is_valid_for_refs_anyof_nesting_and_recursion() -> None:
    verdict = Verdict.model_validate(example_for_schema(Verdict.model_json_schema()))
    assert verdict == Verdict(answer="yes", severity="low", reason="", score=0, confidence=0.0, evidence=[],
                              primary=Evidence(span_id="", quote=""), note="")
    Tree.model_validate(example_for_schema(Tree.model_json_schema()))
    bounded = {"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 3}, "s": {"type": "string", "minLength": 2},
        "xs": {"type": "array", "items": {"type": "boolean"}, "minItems": 2}, "k": {"const": "fixed"}}}
    assert example_for_schema(bounded) == {"n": 3, "s": "xx", "xs": [True, True], "k": "fixed"}


def test_violation_breaks_the_schema() -> None:
    schema = Verdict.model_json_schema()
    with pytest.raises(ValidationError):
        Verdict.model_validate(violate_schema(example_for_schema(schema), schema))
    assert violate_schema({"free": "text"}, {"type": "object"}) == {"free": 12345}
    for text in ('{"a": [1, 2]}', "12", "{}"):
        with pytest.raises(ValueError):
            json.loads(truncate_json(text))


# ---- real clients -------------------------------------------------------------------------------


def test_litellm_round_trip(fake_openai: FakeOpenAIServer) -> None:
    import litellm

    response = litellm.completion(model="openai/fake-small", api_base=fake_openai.base_url, api_key="test",
                                  messages=[{"role": "user", "content": "rate this"}], response_format=Verdict)
    assert Verdict.model_validate_json(response.choices[0].message.content).answer == "yes"
    assert response.usage.total_tokens > 0
    assert fake_openai.calls == 1
    assert fake_openai.requests[0]["response_format"]["type"] == "json_schema"


async def _acompletion(server: FakeOpenAIServer) -> Any:
    import litellm

    schema = {"type": "json_schema", "json_schema": {"name": "Verdict", "schema": Verdict.model_json_schema()}}
    return await litellm.acompletion(model="openai/fake-small", api_base=server.base_url, api_key="test",
                                     messages=[{"role": "user", "content": "rate"}], response_format=schema)


def test_litellm_async_round_trip(fake_openai: FakeOpenAIServer) -> None:
    import asyncio

    response = asyncio.run(_acompletion(fake_openai))
    assert Verdict.model_validate_json(response.choices[0].message.content).severity == "low"
    assert fake_openai.calls_by_model == {"fake-small": 1}


def test_pydantic_ai_round_trip(fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    import pydantic_ai.models
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    monkeypatch.setattr(pydantic_ai.models, "ALLOW_MODEL_REQUESTS", True)  # the target is 127.0.0.1
    model = OpenAIChatModel("fake-small", provider=OpenAIProvider(base_url=fake_openai.base_url, api_key="test"))
    result = Agent(model, output_type=Verdict).run_sync("judge the turn")
    assert isinstance(result.output, Verdict) and result.output.answer == "yes"
    assert fake_openai.calls == 1 and "judge the turn" in fake_openai.seen_text()


# ---- faults -------------------------------------------------------------------------------------


def test_scripted_faults_are_served_in_order(fake_openai: FakeOpenAIServer) -> None:
    post(fake_openai.base_url + "/chat/completions", {"model": "m", "messages": []})  # before the plan
    fake_openai.faults = FaultPlan(script=(429, 500, "malformed_json", "schema_invalid", None))
    url, body = fake_openai.base_url + "/chat/completions", structured_request(Verdict.model_json_schema())
    seen = [post(url, body) for _ in range(6)]
    assert [s for s, _, _ in seen] == [429, 500, 200, 200, 200, 200]
    assert seen[0][1]["Retry-After"] == "0" and seen[0][2]["error"]["code"] == "rate_limit_exceeded"
    assert seen[1][2]["error"]["type"] == "server_error"
    with pytest.raises(ValueError):
        json.loads(seen[2][2]["choices"][0]["message"]["content"])
    with pytest.raises(ValidationError):
        Verdict.model_validate_json(seen[3][2]["choices"][0]["message"]["content"])
    for ok in seen[4:]:
        Verdict.model_validate_json(ok[2]["choices"][0]["message"]["content"])
    assert fake_openai.faults_served == [None, "429", "500", "malformed_json", "schema_invalid", None, None]


def test_timeout_fault_outlasts_a_short_client_timeout() -> None:
    with FakeOpenAIServer(faults=FaultPlan(script=("timeout",), timeout_s=1.0)) as server:
        url = server.base_url + "/chat/completions"
        start = time.monotonic()
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            post(url, {"model": "m", "messages": []}, timeout=0.2)
        assert post(url, {"model": "m", "messages": []})[0] == 200  # served while the first call stalls
        assert time.monotonic() - start < 1.0
        assert server.faults_served == ["timeout", None]


def test_same_seed_same_faults(fake_openai: FakeOpenAIServer) -> None:
    plan = FaultPlan(rate=0.3, kinds=("429", "500", "malformed_json", "schema_invalid"), seed=7)
    sequence = plan.sequence(40)
    assert sequence == FaultPlan(rate=0.3, kinds=plan.kinds, seed=7).sequence(40)
    assert sequence != FaultPlan(rate=0.3, kinds=plan.kinds, seed=8).sequence(40)
    assert 4 <= sum(f is not None for f in sequence) <= 20
    assert FaultPlan(rate=0.0).sequence(40) == [None] * 40
    assert set(FaultPlan(rate=1.0, kinds=("500",)).sequence(10)) == {"500"}

    fake_openai.faults = plan
    statuses = [post(fake_openai.base_url + "/chat/completions", {"model": "m", "messages": []})[0]
                for _ in range(20)]
    assert fake_openai.faults_served == sequence[:20]
    assert statuses == [{"429": 429, "500": 500}.get(str(f), 200) for f in sequence[:20]]
