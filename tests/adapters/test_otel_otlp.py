from datetime import UTC, datetime

from agent_factory.adapters.assemble import assemble_turn, check_trace
from agent_factory.adapters.base import Quarantine, read_head
from agent_factory.adapters.model import Span, TokenUsage
from agent_factory.adapters.otel import FlatSpanLinesAdapter, NestedSpanTreeAdapter, OtlpJsonAdapter
from agent_factory.adapters.otel.otlp import looks_like_json_lines
from tests.conftest import FIXTURES

DOC = FIXTURES / "otel" / "otlp_doc.json"
LINES = FIXTURES / "otel" / "otlp_lines.jsonl"
TRACE = "5b8efff798038103d269b633813fc60c"


def _split(items):
    spans = [i for i in items if isinstance(i, Span)]
    bad = [i for i in items if isinstance(i, Quarantine)]
    assert len(spans) + len(bad) == len(items)
    return spans, bad


def test_sniffing_picks_only_otlp():
    for path in (DOC, LINES):
        head = read_head(path)
        assert OtlpJsonAdapter().sniff(head, path)
        assert not NestedSpanTreeAdapter().sniff(head, path)
        assert not FlatSpanLinesAdapter().sniff(head, path)
    assert looks_like_json_lines(read_head(LINES)) and not looks_like_json_lines(read_head(DOC))
    assert OtlpJsonAdapter().sniff(b'{"resourceSpans": [{"resou', DOC)  # a cut head is enough
    flat_line = b'{"traceId": "ab", "spanId": "cd", "attributes": {"resourceSpans": "n/a"}}\n'
    assert not OtlpJsonAdapter().sniff(flat_line, LINES) and FlatSpanLinesAdapter().sniff(flat_line, LINES)


def test_document_spans_and_quarantines():
    spans, bad = _split(list(OtlpJsonAdapter().read(DOC)))
    assert [s.id for s in spans] == ["eee19b7ec3c1b174", "eee19b7ec3c1b175", "eee19b7ec3c1b176", "eee19b7ec3c1b179"]
    assert [(q.location, q.field) for q in bad] == [
        ("resourceSpans[0].scopeSpans[0].spans[3]", "spanId"),
        ("resourceSpans[0].scopeSpans[0].spans[4]", "endTimeUnixNano"),
        ("resourceSpans[0].scopeSpans[0].spans[5]", "attributes.gen_ai.usage.input_tokens"),
        ("resourceSpans[1].scopeSpans[0].spans[1]", "attributes"),
        ("resourceSpans[1].scopeSpans[0].spans[2]", "startTimeUnixNano"),
    ]
    assert all(q.source == str(DOC) for q in bad)
    assert "negative" in bad[2].message and "before start" in bad[1].message

    root, chat, tool, retr = spans
    assert (root.kind, root.parent_id, root.status, root.duration_ms) == ("agent", None, "ok", 12500.0)
    assert root.start == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert (root.input, root.output) == ("Where is my order 1234?", "Your order ships tomorrow.")
    # resource attributes merge in, the span's own value wins, typed OTLP values survive
    assert root.attributes["session.id"] == "sess-1" and root.attributes["user.id"] == "user-7"
    assert root.attributes["agent.mode"] == "normal" and chat.attributes["agent.mode"] == "deep"
    assert root.attributes["session.turn_index"] == 2 and root.attributes["traffic.synthetic"] is False
    assert root.attributes["otel.scope.name"] == "my.instrumentation"
    assert "input.value" not in root.attributes  # copied verbatim into `input`

    assert (chat.kind, chat.model, chat.parent_id) == ("llm", "gpt-4o-2024-08-06", root.id)
    assert chat.tokens == TokenUsage(input=120, output=30, total=150)
    assert chat.input == "user: Where is my order 1234?"
    assert chat.output == "assistant: Your order ships tomorrow."
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert chat.attributes["app.meta.region"] == "eu" and chat.attributes["otel.span_kind"] == "CLIENT"

    assert (tool.kind, tool.input, tool.output) == ("tool", '{"order_id": 1234}', '{"status": "shipping"}')
    assert (tool.status, tool.error) == ("error", "TimeoutError: order service slow")  # from the exception event

    # base64 ids are decoded to hex; the resource written after its spans still applies
    assert (retr.trace_id, retr.id, retr.kind) == (TRACE, "eee19b7ec3c1b179", "retrieval")
    assert (retr.status, retr.error) == ("error", "index unavailable")
    assert retr.attributes["session.id"] == "sess-2" and retr.attributes["otel.scope.name"] == "late.scope"


def test_document_assembles_into_a_turn():
    spans, _ = _split(list(OtlpJsonAdapter().read(DOC)))
    kept, orphans = check_trace([s for s in spans if s.trace_id == TRACE and s.id != "eee19b7ec3c1b179"],
                                source=str(DOC))
    assert not orphans
    turn = assemble_turn(kept)
    assert (turn.conversation_id, turn.user_id, turn.index, turn.mode) == ("sess-1", "user-7", 2, "normal")
    assert (turn.request, turn.answer, turn.delivery) == ("Where is my order 1234?", "Your order ships tomorrow.",
                                                          "delivered")


def test_json_lines_keep_going_past_bad_lines():
    spans, bad = _split(list(OtlpJsonAdapter().read(LINES)))
    assert [s.id for s in spans] == ["b7ad6b7169203331", "b7ad6b7169203334"]
    assert [(q.location, q.field) for q in bad] == [
        ("line 2", None),
        ("line 3 resourceSpans[0].scopeSpans[0].spans[0]", "attributes.llm.token_count.prompt"),
        ("line 5 resourceSpans[0].scopeSpans[0].spans[0]", "traceId"),
        ("line 5 resourceSpans[0].scopeSpans[0].spans[1]", "spanId"),
        ("line 5 resourceSpans[0].scopeSpans[0].spans[2]", "attributes.odd"),
    ]
    assert "invalid JSON" in bad[0].message and "not a number" in bad[1].message
    assert "must be a string" in bad[2].message and "neither hex nor base64" in bad[3].message
    first, llm = spans
    assert first.attributes["user.account_type"] == "internal_test"
    assert first.attributes["request.source"] == "suggestion_click"
    assert (llm.kind, llm.model, llm.tokens) == ("llm", "o3-mini", TokenUsage(input=10, output=4, total=14))
    assert llm.output == "assistant: hello!" and llm.parent_id == first.id


def test_truncated_document_keeps_spans_before_the_break(tmp_path):
    text = DOC.read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: text.index('"name": "ends before it starts"')])
    spans, bad = _split(list(OtlpJsonAdapter().read(cut)))
    assert [s.id for s in spans] == ["eee19b7ec3c1b174", "eee19b7ec3c1b175", "eee19b7ec3c1b176"]
    assert len(bad) == 2 and bad[0].field == "spanId"
    assert bad[1].location == "resourceSpans[0].scopeSpans[0].spans[4]"
    assert "truncated" in bad[1].message


def test_not_an_export_request(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"resourceSpans": []}\n{"resourceSpans": {"oops": 1}}\n[1, 2]\n')
    items = list(OtlpJsonAdapter().read(p))
    assert [(q.location, q.field) for q in items] == [("line 2", "resourceSpans"), ("line 3", "resourceSpans")]


def test_document_without_a_span_list(tmp_path):
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"resourceSpans": {"spans": []}}')
    assert [(q.location, q.field) for q in OtlpJsonAdapter().read(wrong)] == [("file", "resourceSpans")]
    other = tmp_path / "other.json"
    other.write_text('{\n"data": [1, 2]\n}')
    items = list(OtlpJsonAdapter().read(other))
    assert [(q.field, q.message.split(";")[0]) for q in items] == [("resourceSpans", "no resourceSpans found")]
    empty = tmp_path / "empty.json"
    empty.write_text('{\n"resourceSpans": []\n}')
    assert list(OtlpJsonAdapter().read(empty)) == []
