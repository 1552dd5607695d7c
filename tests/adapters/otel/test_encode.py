"""Stored units out as OTLP/JSON and back through the project's own OTLP adapter: the same spans and turns."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_factory.adapters.assemble import assemble_turn, check_trace
from agent_factory.adapters.base import Quarantine
from agent_factory.adapters.model import Span, TokenUsage, Turn
from agent_factory.adapters.otel import OtlpJsonAdapter
from agent_factory.adapters.otel.encode import encode_span, encode_turn, encode_turns, encode_value, otlp_id, unix_nanos
from agent_factory.adapters.otel.otlp import request_items
from agent_factory.adapters.otel.timeutil import from_unix_nanos
from agent_factory.adapters.otel.toolcalls import DERIVED
from agent_factory.adapters.otel.values import decode_any_value
from agent_factory.evaluators.collect.redact import DefaultRedactor, redact_text
from tests.conftest import FIXTURES

T0 = 1_733_500_000_123_456_000
TRACE = "0af7651916cd43dd8448eb211c80319c"


def _kv(**attrs: Any) -> list[dict[str, Any]]:
    return [{"key": k.replace("__", "."), "value": v} for k, v in attrs.items()]


def _s(text: str) -> dict[str, Any]:
    return {"stringValue": text}


def _span(sid: str, name: str, parent: str | None, at: int, attrs: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {"traceId": TRACE, "spanId": sid, **({"parentSpanId": parent} if parent else {}), "name": name,
            "startTimeUnixNano": str(T0 + at * 1_000_000), "endTimeUnixNano": str(T0 + (at + 5) * 1_000_000),
            "attributes": attrs, **more}


MESSAGES_IN = json.dumps([{"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
                          {"role": "user", "parts": [{"type": "text", "content": "Where is order 7?"}]}])
MESSAGES_OUT = json.dumps([{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "lookup",
                                                            "arguments": {"id": 7}}]}])
SOURCE = {"resourceSpans": [{
    "resource": {"attributes": _kv(service__name=_s("shop"), deployment__environment=_s("prod"))},
    "scopeSpans": [{"scope": {"name": "my.instrumentation", "version": "1.2"}, "spans": [
        _span("00f067aa0ba902b7", "invoke_agent shop", None, 0, _kv(
            gen_ai__operation__name=_s("invoke_agent"), session__id=_s("s-1"), user__id=_s("u-1"),
            input__value=_s("Where is order 7?"), output__value=_s("It ships today."),
            flags={"arrayValue": {"values": [_s("a"), {"boolValue": True}, {"intValue": "3"}, {}]}},
            ratio={"doubleValue": 0.5}, whole={"doubleValue": 2.0}, nothing={},
            nested={"kvlistValue": {"values": _kv(deep=_s("x"), n={"intValue": "1"})}},
            empty_map={"kvlistValue": {"values": []}}), kind=2, traceState="k=v",
            status={"code": 1}),
        _span("00f067aa0ba902b8", "chat gpt-x", "00f067aa0ba902b7", 1, _kv(
            gen_ai__operation__name=_s("chat"), gen_ai__request__model=_s("gpt-x"),
            gen_ai__response__model=_s("gpt-x-2024"), gen_ai__input__messages=_s(MESSAGES_IN),
            gen_ai__output__messages=_s(MESSAGES_OUT), gen_ai__usage__input_tokens={"intValue": "12"},
            gen_ai__usage__output_tokens={"intValue": 7},
            gen_ai__response__finish_reasons={"arrayValue": {"values": [_s("tool_calls")]}}), kind=3),
        _span("00f067aa0ba902b9", "execute_tool lookup", "00f067aa0ba902b8", 2, _kv(
            gen_ai__operation__name=_s("execute_tool"), gen_ai__tool__name=_s("lookup"),
            gen_ai__tool__call__id=_s("c1"), gen_ai__tool__call__arguments=_s('{"id": 7}'),
            gen_ai__tool__call__result=_s('{"status": "shipped"}')),
            links=[{"traceId": TRACE, "spanId": "00f067aa0ba902b8"}]),
        _span("00f067aa0ba902ba", "ChatCompletion", "00f067aa0ba902b7", 3, _kv(
            openinference__span__kind=_s("LLM"), llm__model_name=_s("gpt-y"),
            input__value=_s('{"messages": [{"role": "user", "content": "hi"}]}'),
            input__mime_type=_s("application/json"),
            **{"llm.input_messages.0.message.role": _s("user"), "llm.input_messages.0.message.content": _s("hi")},
            **{"llm.output_messages.0.message.role": _s("assistant"),
               "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": _s("refund"),
               "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": _s('{"id": 7}'),
               "llm.output_messages.0.message.tool_calls.1.tool_call.function.name": _s("notify")},
            output__value=_s("refunding"), llm__token_count__prompt={"intValue": "3"},
            llm__token_count__completion={"intValue": "4"}, llm__token_count__total={"intValue": "7"})),
        _span("00f067aa0ba902bb", "search docs", "00f067aa0ba902b7", 4, _kv(
            openinference__span__kind=_s("RETRIEVER"), input__value=_s("refund policy"),
            **{"retrieval.documents.0.document.content": _s("Refunds within 30 days.")})),
        _span("00f067aa0ba902bc", "execute_tool refund", "00f067aa0ba902b7", 5, _kv(
            gen_ai__operation__name=_s("execute_tool"), gen_ai__tool__call__arguments=_s('{"id": 7}')),
            status={"code": 2}, events=[{"name": "exception", "timeUnixNano": str(T0 + 6_000_000),
                                         "attributes": _kv(exception__type=_s("KeyError"),
                                                           exception__message=_s("order 7"))}]),
        _span("00f067aa0ba902bd", "thinking", "00f067aa0ba902b7", 6, _kv(agent__step=_s("thinking")),
              status={"code": 2, "message": "timed out"}, events=[{"name": "retry", "attributes": []}]),
    ]}]}]}


def _read(doc: dict[str, Any]) -> list[Turn]:
    """A document through the OTLP adapter and turn assembly, each span as the store keeps it (JSON attributes)."""
    items = list(request_items(json.loads(json.dumps(doc)), source="doc", where="doc"))
    assert not [i for i in items if isinstance(i, Quarantine)]
    by_trace: dict[str, list[Span]] = {}
    for s in items:
        assert isinstance(s, Span)
        by_trace.setdefault(s.trace_id, []).append(Span.model_validate_json(s.model_dump_json()))
    turns = []
    for spans in by_trace.values():
        kept, bad = check_trace(spans, source="doc")
        assert not bad
        turns.append(Turn.model_validate_json(assemble_turn(kept).model_dump_json()))
    return turns


@pytest.fixture(scope="module")
def stored() -> list[Turn]:
    return _read(SOURCE)


def test_a_turn_of_every_convention_reads_back_the_same(stored: list[Turn]) -> None:
    (turn,) = stored
    spans = {s.name: s for s in turn.spans}
    # What the source gives the mapping to work on: every kind, text from verbatim and rendered keys, a derived call.
    assert [s.kind for s in turn.spans] == ["agent", "llm", "tool", "llm", "tool", "retrieval", "tool", "reasoning"]
    assert spans["execute_tool refund"].error == "KeyError: order 7" and spans["thinking"].error == "timed out"
    assert sum(1 for s in turn.spans if s.attributes.get(DERIVED)) == 1
    assert spans["invoke_agent shop"].attributes["nested.deep"] == "x" and "nothing" in turn.spans[0].attributes
    encoded = encode_turn(turn)
    assert (encoded.spans, encoded.derived, encoded.lost) == (7, 1, {})
    assert _read({"resourceSpans": encoded.blocks}) == stored


def test_structural_fields_go_back_to_otlp_fields(stored: list[Turn]) -> None:
    (block,) = encode_turn(stored[0]).blocks
    resource = {a["key"] for a in block["resource"]["attributes"]}
    assert resource == {"service.name", "deployment.environment"}  # what every span shares, nothing else
    (scope,) = block["scopeSpans"]
    assert scope["scope"] == {"name": "my.instrumentation", "version": "1.2"}
    root, chat, tool, *_rest, thinking = scope["spans"]
    assert (root["kind"], root["traceState"], root["status"]) == (2, "k=v", {"code": 1})
    assert tool["links"] == [{"traceId": TRACE, "spanId": "00f067aa0ba902b8"}]
    assert thinking["status"] == {"code": 2, "message": "timed out"} and thinking["events"][0]["name"] == "retry"
    keys = {a["key"] for a in tool["attributes"]}
    # The verbatim carriers of input and output, and no `otel.*` extra, are written.
    assert {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} <= keys and not any(
        k.startswith("otel.") for k in keys)
    assert root["startTimeUnixNano"] == str(T0)


def test_the_adapters_fixture_reads_back_the_same() -> None:
    spans = [s for s in OtlpJsonAdapter().read(FIXTURES / "otel" / "otlp_doc.json") if isinstance(s, Span)]
    by_trace: dict[str, list[Span]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(Span.model_validate_json(s.model_dump_json()))
    turns = [assemble_turn(check_trace(v, source="f")[0]) for v in by_trace.values()]
    assert turns and _read(encode_turns(turns)) == turns


def test_redaction_keeps_text_without_secrets_identical(stored: list[Turn]) -> None:
    redactor = DefaultRedactor()
    assert _read(encode_turns(stored, lambda v: redact_text(v, redactor))) == stored


def test_a_secret_anywhere_in_a_span_is_redacted(stored: list[Turn]) -> None:
    secret, mail = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2, "jane.doe@example.com"
    root = stored[0].spans[0]
    leaky = root.model_copy(update={"input": f"my key is {secret}", "attributes": {
        **root.attributes, f"contact {mail}": mail, "tags": [{"owner": mail}]}})
    turn = stored[0].model_copy(update={"spans": (leaky, *stored[0].spans[1:])})
    redactor = DefaultRedactor()
    doc = json.dumps(encode_turns([turn], lambda v: redact_text(v, redactor)))
    assert secret not in doc and mail not in doc and "[API_KEY]" in doc and "[EMAIL]" in doc
    (back,) = _read(json.loads(doc))
    assert back.spans[0].input == "my key is [API_KEY]" and back.spans[0].attributes["contact [EMAIL]"] == "[EMAIL]"


def test_an_id_the_redactor_changes_is_replaced_by_a_digest() -> None:
    redactor = DefaultRedactor()
    card = "4111111111111111"  # hex, and a Luhn-valid card number
    got = otlp_id(card, 16, lambda v: redact_text(v, redactor))
    assert got != card and len(got) == 16 and int(got, 16) >= 0
    assert otlp_id(TRACE, 32, lambda v: redact_text(v, redactor)) == TRACE


def test_a_span_of_another_source_keeps_its_fields_and_says_what_it_cannot_carry() -> None:
    t = datetime(2024, 5, 1, 12, 0, 0, 250_001, tzinfo=UTC)
    llm = Span(id="conv-1/m1", trace_id="conv-1/turn-0", kind="llm", name="assistant", input="hi", output="hello",
               start=t, end=t + timedelta(seconds=1), duration_ms=1000.0, model="gpt-4o",
               tokens=TokenUsage(input=3, output=4, total=7), status="ok", attributes={"role": "assistant"})
    tool = Span(id="conv-1/m1/call-0", trace_id="conv-1/turn-0", parent_id="conv-1/m1", kind="tool",
                name="get_order", input='{"id": 7}', output='{"ok": true}')
    turn = Turn(id="conv-1/turn-0", conversation_id="conv-1", user_id="u-9", index=2, request="hi",
                answer="hello", spans=(llm, tool))
    encoded = encode_turn(turn)
    assert encoded.lost == {"ids": 2}
    (back,) = _read({"resourceSpans": encoded.blocks})
    for a, b in zip(turn.spans, back.spans, strict=True):
        fields = ("kind", "name", "input", "output", "status", "error", "start", "end", "duration_ms", "model", "tokens")
        assert {f: getattr(b, f) for f in fields} == {f: getattr(a, f) for f in fields}
        assert b.id == otlp_id(a.id, 16)
    assert back.spans[1].parent_id == back.spans[0].id
    # The carriers stay as attributes: the model's (which makes it a model call), the tokens', the session's, the
    # user's, the turn index.
    assert set(back.spans[0].attributes) - set(llm.attributes) == {
        "gen_ai.request.model", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
        "gen_ai.usage.total_tokens", "session.id", "user.id", "session.turn_index"}
    assert (back.conversation_id, back.user_id, back.index) == ("conv-1", "u-9", 2)


@pytest.mark.parametrize(("update", "lost"), [
    ({"start": None, "end": None, "duration_ms": 12.5}, ("duration_ms",)),
    ({"status": "ok", "error": "soft failure"}, ("error",)),
    ({"status": "error", "error": ""}, ("error",)),  # the reader reads an empty message as none
    ({"tokens": TokenUsage(input=1, output=2)}, ("tokens",)),  # the reader adds the total
])
def test_what_otlp_cannot_say_is_named(update: dict[str, Any], lost: tuple[str, ...]) -> None:
    span = Span(id="ab01", trace_id="cd02", kind="llm", name="chat", model="m",
                start=datetime(2024, 1, 1, tzinfo=UTC), end=datetime(2024, 1, 1, 0, 0, 1, tzinfo=UTC),
                duration_ms=1000.0, attributes={"gen_ai.request.model": "m"})
    assert encode_span(span).lost == ()
    assert encode_span(span.model_copy(update=update)).lost == lost


def test_times_are_exact_to_the_microsecond() -> None:
    t = datetime(2026, 12, 7, 1, 2, 3, 456_789, tzinfo=UTC)
    assert from_unix_nanos(unix_nanos(t)) == t
    assert unix_nanos(datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)) == "1000000000"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_every_stored_value_decodes_to_itself(value: Any) -> None:
    got = decode_any_value(json.loads(json.dumps(encode_value(value))), "k")
    assert got == value and type(got) is type(value)
