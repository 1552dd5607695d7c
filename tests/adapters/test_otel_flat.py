import json
from datetime import UTC, datetime

import pytest

from agent_factory.adapters.base import Quarantine, read_head
from agent_factory.adapters.model import Span, TokenUsage
from agent_factory.adapters.otel import FlatSpanLinesAdapter, NestedSpanTreeAdapter, OtlpJsonAdapter
from tests.conftest import FIXTURES, shared_data

LINES = FIXTURES / "otel" / "flat_spans.jsonl"
ARRAY = FIXTURES / "otel" / "flat_array.json"
HAIKU = "Lines of code align,  \nLogic dances through the night—  \nDreams in data flow."


def _split(items):
    return [i for i in items if isinstance(i, Span)], [i for i in items if isinstance(i, Quarantine)]


def _vercel(name: str):
    return shared_data("openinference-otel-fixtures", "vercel-ai-sdk-v6-spans", name)


def test_sniffing():
    for path in (LINES, ARRAY):
        head = read_head(path)
        assert FlatSpanLinesAdapter().sniff(head, path)
        assert not NestedSpanTreeAdapter().sniff(head, path) and not OtlpJsonAdapter().sniff(head, path)
    adapter = FlatSpanLinesAdapter()
    assert adapter.sniff(b'{"traceId": "ab", "spanId": "cd", "attributes": {"x": "very long', LINES)
    assert adapter.sniff(b'[{"name": "x", "spanContext": {"traceId"', ARRAY)
    assert not adapter.sniff(b'{"messages": [{"role": "user", "span_id": "x"}]}\n', LINES)  # not top level
    assert not adapter.sniff(b'{"trace_id": "t", "spans": [{"span_id": "s"', LINES)
    assert not adapter.sniff(b"not json at all", LINES)


def test_flat_lines_mixed_good_and_bad():
    spans, bad = _split(list(FlatSpanLinesAdapter().read(LINES)))
    assert [s.id for s in spans] == ["77fb7128d6f04862", "e32a2a33a464cb54", "39d6e9b3ddec9996", "1111222233334444",
                                     "1111222233337777"]
    assert [(q.location, q.field) for q in bad] == [
        ("line 3", "duration"), ("line 4", "span_id"), ("line 5", "span_attributes"), ("line 6", "timestamp"),
        ("line 8", "spanContext.spanId"), ("line 10", "attributes.llm.token_count.prompt"), ("line 11", None),
    ]
    assert "negative duration" in bad[0].message and bad[1].message == "missing id"

    trail_root, trail_llm, vercel, camel, nested = spans
    # (a) TRAIL flat: ISO start + ISO duration, resource attributes merged, source fields kept as otel.*
    assert trail_root.start == datetime(2025, 3, 19, 16, 32, 8, 62589, tzinfo=UTC)
    assert trail_root.duration_ms == pytest.approx(108750.0)
    assert (trail_root.end - trail_root.start).total_seconds() == pytest.approx(108.75)
    assert (trail_root.kind, trail_root.status, trail_root.input, trail_root.output) == ("agent", "ok", "What is 2+2?", "4")
    assert trail_root.attributes["session.id"] == "s-flat" and trail_root.attributes["user.id"] == "u-1"
    assert trail_root.attributes["otel.scope.version"] == "0.1.6"
    assert (trail_llm.kind, trail_llm.model, trail_llm.parent_id) == ("llm", "o3-mini", "77fb7128d6f04862")
    assert trail_llm.tokens == TokenUsage(input=461, output=1311, total=1772)
    assert (trail_llm.input, trail_llm.output) == ("user: What is 2+2?", "assistant: 4")
    assert (trail_llm.status, trail_llm.error) == ("error", "RateLimitError: slow down")
    assert trail_llm.attributes["otel.events"][0]["name"] == "exception"
    # (b) Vercel ReadableSpan with a parent
    assert (vercel.kind, vercel.parent_id, vercel.status, vercel.model) == ("llm", "648be1dfd8e521b6", "ok", "gpt-4o-mini")
    assert (vercel.input, vercel.output) == ("user: Write a haiku.", "Code flows")
    assert vercel.duration_ms == pytest.approx(1779.415667, abs=1e-3)
    # (c) flat OTLP-like with an AnyValue list; unknown top-level keys are kept
    assert (camel.kind, camel.parent_id, camel.tokens.input) == ("reasoning", None, 7)
    assert camel.attributes["session.id"] == "s-camel" and camel.attributes["custom_top_level"] == {"kept": True}
    assert nested.attributes == {"session.id": "s-nested"}


def test_flat_array_streams_items():
    spans, bad = _split(list(FlatSpanLinesAdapter().read(ARRAY)))
    assert [s.id for s in spans] == ["53e12604843b0399", "53e12604843b0401"]
    assert [(q.location, q.field) for q in bad] == [("record 1", "endTime")]
    embed, tool = spans
    assert (embed.kind, embed.model, embed.input, embed.tokens) == (
        "embedding", "text-embedding-3-small", "hello world", TokenUsage(total=2))
    assert (tool.kind, tool.input, tool.output, tool.error) == ("tool", '{"city":"Rome"}', '{"temp":18}', "tool failed")


def test_vercel_all_spans_fixture():
    spans, bad = _split(list(FlatSpanLinesAdapter().read(_vercel("all-spans.json"))))
    assert bad == [] and len(spans) == 10
    assert len({s.trace_id for s in spans}) == 10 and all(s.parent_id is None for s in spans)
    by_name: dict[str, list[Span]] = {}
    for s in spans:
        by_name.setdefault(s.name, []).append(s)
    assert {n: [s.kind for s in v] for n, v in by_name.items()} == {
        "ai.generateText.doGenerate": ["llm", "llm"], "ai.generateText": ["agent", "agent"],
        "ai.generateObject.doGenerate": ["llm"], "ai.generateObject": ["agent"],
        "ai.streamText.doStream": ["llm"], "ai.streamText": ["agent"],
        "ai.embed.doEmbed": ["embedding"], "ai.embed": ["agent"],
    }
    first = spans[0]
    assert (first.id, first.trace_id) == ("39d6e9b3ddec9996", "b3e700af9eab81e19f72f964d62a35af")
    assert (first.model, first.tokens) == ("gpt-4o-mini-2024-07-18", TokenUsage(input=14, output=20, total=34))
    assert (first.input, first.output) == ("user: Write a haiku about programming.", HAIKU)
    assert first.start == datetime(2026, 2, 3, 15, 19, 52, 242000, tzinfo=UTC)
    assert first.attributes["ai.telemetry.metadata.customField"] == "custom-value"
    outer = by_name["ai.generateText"][0]
    assert (outer.model, outer.input, outer.output) == ("gpt-4o-mini", "Write a haiku about programming.", HAIKU)
    multi = by_name["ai.generateText.doGenerate"][1]
    assert multi.input == ("system: You are a helpful assistant.\nuser: What is 2 + 2?\n"
                           "assistant: 2 + 2 equals 4.\nuser: And what is 3 + 3?")
    assert (multi.output, multi.tokens.input, multi.tokens.output) == ("3 + 3 equals 6.", 50, 9)
    stream = by_name["ai.streamText.doStream"][0]
    assert stream.tokens == TokenUsage(input=15, output=112, total=127)
    assert [e["name"] for e in stream.attributes["otel.events"]] == ["ai.stream.firstChunk", "ai.stream.finish"]
    embed = by_name["ai.embed.doEmbed"][0]
    assert (embed.model, embed.input, embed.output) == (
        "text-embedding-3-small", "The quick brown fox jumps over the lazy dog.", None)
    obj = by_name["ai.generateObject.doGenerate"][0]
    assert json.loads(obj.output)["name"] == "Scrambled Eggs"


def test_each_vercel_operation_file():
    files = ["ai-embed-doEmbed.json", "ai-embed.json", "ai-generateObject-doGenerate.json", "ai-generateObject.json",
             "ai-generateText-doGenerate.json", "ai-generateText.json", "ai-streamText-doStream.json",
             "ai-streamText.json"]
    kinds = {}
    for name in files:
        path = _vercel(name)
        assert FlatSpanLinesAdapter().sniff(read_head(path), path)
        spans, bad = _split(list(FlatSpanLinesAdapter().read(path)))
        assert bad == [] and spans
        kinds[name] = {s.kind for s in spans}
    assert kinds["ai-generateText-doGenerate.json"] == {"llm"} and kinds["ai-embed.json"] == {"agent"}
    assert kinds["ai-embed-doEmbed.json"] == {"embedding"} and kinds["ai-streamText.json"] == {"agent"}
    for name in ("capture-results.json", "spans-by-operation.json"):  # not span lists
        path = _vercel(name)
        assert not FlatSpanLinesAdapter().sniff(read_head(path), path)


def test_a_flat_line_with_a_subtree_yields_the_subtree(tmp_path):
    p = tmp_path / "trees.jsonl"
    p.write_text(
        '{"trace_id": "t1", "span_id": "a", "parent_span_id": "outer", "span_name": "Step 1", "child_spans": ['
        '{"trace_id": "t1", "span_id": "b", "span_name": "LLM", "child_spans": []},'
        '{"trace_id": "t1", "span_name": "no id"}]}\n'
        '{"trace_id": "t1", "span_id": "outer", "span_name": "root"}\n'
    )
    items = list(FlatSpanLinesAdapter().read(p))
    assert [(i.id, i.parent_id) for i in items if isinstance(i, Span)] == [("a", "outer"), ("b", "a"), ("outer", None)]
    assert [(q.location, q.field) for q in items if isinstance(q, Quarantine)] == [("line 1 child_spans[1]", "span_id")]
