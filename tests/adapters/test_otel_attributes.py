import json

import pytest

from agent_factory.adapters.model import TokenUsage
from agent_factory.adapters.otel.attributes import map_attributes, span_kind, token_usage
from agent_factory.adapters.otel.messages import render_messages, render_openinference
from agent_factory.adapters.otel.values import AttributeValueError, attribute_dict, decode_key_values, jsonable
from tests.conftest import shared_data

WEATHER_INPUT = (
    "user: Weather in Paris?\n"
    "assistant: Absolutely! Let me check the weather for you.\n"
    '[tool call] get_weather {"location":"Paris"}\n'
    "tool: rainy, 57°F"
)
WEATHER_ANSWER = "The weather in Paris is currently rainy with a temperature of 57°F."


def _mapping_fixture(name: str) -> dict:
    return json.loads(shared_data("openinference-otel-fixtures", "genai-attribute-mapping", name).read_text())


@pytest.mark.parametrize(("value", "kind"), [
    ("LLM", "llm"), ("TOOL", "tool"), ("RETRIEVER", "retrieval"), ("RERANKER", "retrieval"),
    ("EMBEDDING", "embedding"), ("AGENT", "agent"), ("CHAIN", "agent"), ("GUARDRAIL", "other"),
    ("EVALUATOR", "other"), ("UNKNOWN", "other"), ("REASONING", "reasoning"), ("llm", "llm"),
    ("SOMETHING_NEW", "other"),
])
def test_openinference_kinds(value, kind):
    assert span_kind({"openinference.span.kind": value}, "span") == kind


@pytest.mark.parametrize(("op", "kind"), [
    ("chat", "llm"), ("text_completion", "llm"), ("generate_content", "llm"), ("execute_tool", "tool"),
    ("embeddings", "embedding"), ("invoke_agent", "agent"), ("create_agent", "agent"), ("teleport", "other"),
])
def test_genai_operation_kinds(op, kind):
    assert span_kind({"gen_ai.operation.name": op}, "x") == kind


def test_reasoning_and_retrieval_from_names_and_markers():
    assert span_kind({"agent.step": "thinking"}, "step 3") == "reasoning"
    assert span_kind({"openinference.span.kind": "CHAIN"}, "Thinking") == "reasoning"
    assert span_kind({"openinference.span.kind": "LLM"}, "thinking") == "llm"  # an explicit LLM stays llm
    assert span_kind({}, "reasoningStep") == "reasoning"
    assert span_kind({"retrieval.documents.0.document.content": "x"}, "lookup") == "retrieval"
    assert span_kind({}, "vector_search") == "retrieval"
    assert span_kind({}, "RetrieveDocs") == "retrieval"
    assert span_kind({"openinference.span.kind": "TOOL"}, "SearchInformationTool") == "tool"
    assert span_kind({}, "main") == "other"


def test_vercel_operation_kinds():
    assert span_kind({"ai.operationId": "ai.generateText"}, "ai.generateText") == "agent"
    assert span_kind({}, "ai.streamText.doStream") == "llm"
    assert span_kind({"operation.name": "ai.embed.doEmbed my-fn"}, "x") == "embedding"
    assert span_kind({}, "ai.toolCall") == "tool"


def test_genai_current_fixture():
    m = map_attributes(_mapping_fixture("otel_genai_client_span_tool_calls.json"), "chat gpt-4")
    assert m.kind == "llm"
    assert m.model == "gpt-4-0613"  # the response model, not the requested "gpt-4"
    assert m.tokens == TokenUsage(input=97, output=52, total=149)
    assert m.input == WEATHER_INPUT
    assert m.output == f"assistant: {WEATHER_ANSWER}"


def test_genai_deprecated_fixture():
    m = map_attributes(_mapping_fixture("otel_genai_deprecated_client_span_tool_calls.json"))
    assert (m.kind, m.model, m.tokens.input, m.tokens.output) == ("llm", "gpt-4-0613", 97, 52)
    assert m.input == WEATHER_INPUT
    assert m.output == WEATHER_ANSWER  # {"text": ..., "finish_reason": ...} reads as its text


def test_genai_tool_execution_fixture():
    m = map_attributes(_mapping_fixture("otel_genai_tool_execution_span.json"))
    assert m.kind == "tool"
    assert m.input == '{"city": "New York"}'
    assert m.output.startswith('{"status": "success", "report": "The weather in New York is sunny')
    assert m.model is None and m.tokens is None


def test_openinference_fixtures():
    m = map_attributes(_mapping_fixture("openinference_client_span_tool_calls.json"))
    assert (m.kind, m.model) == ("llm", "gpt-4-0613")
    assert m.tokens == TokenUsage(input=97, output=52, total=149)
    attrs = _mapping_fixture("openinference_client_span_tool_calls.json")
    # `input.value` is the raw request body (mime_type application/json): the structured messages win.
    assert attrs["input.mime_type"] == "application/json"
    assert m.input == WEATHER_INPUT
    assert m.output == f"assistant: {WEATHER_ANSWER}"
    assert m.consumed == set()
    assert render_openinference(attrs, "llm.input_messages") == WEATHER_INPUT
    assert render_openinference(attrs, "llm.output_messages") == f"assistant: {WEATHER_ANSWER}"


def test_indexed_deprecated_prompt_and_token_strings():
    m = map_attributes({
        "gen_ai.system": "openai", "gen_ai.request.model": "gpt-3.5",
        "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "be brief",
        "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "hi",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "hello",
        "gen_ai.usage.prompt_tokens": "12", "gen_ai.usage.completion_tokens": 3.0,
    })
    assert (m.kind, m.model) == ("llm", "gpt-3.5")
    assert (m.input, m.output) == ("system: be brief\nuser: hi", "assistant: hello")
    assert m.tokens == TokenUsage(input=12, output=3, total=15)


@pytest.mark.parametrize(("value", "message"), [
    ("-3", "negative"), (-1, "negative"), ("lots", "not a number"), (True, "not a number"),
    (2.5, "whole number"), ({"n": 1}, "not a number"),
])
def test_bad_token_counts_name_the_key(value, message):
    with pytest.raises(AttributeValueError) as e:
        token_usage({"llm.token_count.prompt": 5, "gen_ai.usage.output_tokens": value})
    assert e.value.key == "gen_ai.usage.output_tokens"
    assert message in e.value.message


def test_vercel_prompt_shapes():
    assert render_messages('{"prompt":"Write a haiku about programming."}') == "Write a haiku about programming."
    assert render_messages('{"system":"be kind","messages":[{"role":"user","content":"hi"}]}') == "system: be kind\nuser: hi"
    parts = [{"role": "assistant", "content": [{"type": "tool-call", "toolName": "weather", "input": {"city": "Oslo"}}]},
             {"role": "tool", "content": [{"type": "tool-result", "toolName": "weather", "output": "3C"}]}]
    assert render_messages(parts) == 'assistant: [tool call] weather {"city":"Oslo"}\ntool: 3C'
    assert render_messages("not json [") == "not json ["


def test_otlp_any_values_and_flattening():
    attrs = decode_key_values([
        {"key": "s", "value": {"stringValue": "x"}}, {"key": "i", "value": {"intValue": "42"}},
        {"key": "d", "value": {"doubleValue": "NaN"}}, {"key": "b", "value": {"boolValue": True}},
        {"key": "a", "value": {"arrayValue": {"values": [{"intValue": 1}, {"stringValue": "y"}]}}},
        {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "inner", "value": {"doubleValue": 1.5}}]}}},
        {"key": "bytes", "value": {"bytesValue": "AAE="}}, {"key": "empty", "value": {}},
    ])
    assert attrs == {"s": "x", "i": 42, "d": "NaN", "b": True, "a": [1, "y"], "kv": {"inner": 1.5},
                     "bytes": "AAE=", "empty": None}
    flat = attribute_dict([{"key": "kv", "value": {"kvlistValue": {"values": [
        {"key": "inner", "value": {"intValue": 1}}]}}}], "attributes")
    assert flat == {"kv.inner": 1}
    assert attribute_dict({"session": {"id": "s1"}, "user.id": "u"}, "attributes") == {"session.id": "s1", "user.id": "u"}
    with pytest.raises(AttributeValueError) as e:
        attribute_dict([{"key": "n", "value": {"intValue": "forty"}}], "attributes")
    assert e.value.key == "attributes.n"
    with pytest.raises(AttributeValueError) as e:
        attribute_dict("k=v", "span_attributes")
    assert e.value.key == "span_attributes"
    assert json.dumps(jsonable({"x": float("inf"), "t": (1, 2), "b": b"\x00\x01"}), allow_nan=False) == \
        '{"x": "Infinity", "t": [1, 2], "b": "AAE="}'
