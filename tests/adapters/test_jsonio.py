"""Field and record limits on reading: huge strings cut head and tail with a declared marker, records over the
hard limit quarantined, the cuts noted for the ingest report, in every reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent_factory.adapters.base import Quarantine
from agent_factory.adapters.jsonio import (
    CUT_PATTERN,
    FieldLimits,
    current_limits,
    cut_text,
    iter_json_array,
    iter_json_lines,
    limit_record,
    loads,
    parse_json_text,
    reading,
)
from agent_factory.adapters.model import Span
from agent_factory.adapters.otel import NestedSpanTreeAdapter, OtlpJsonAdapter

SMALL = FieldLimits(max_field_chars=2000, max_record_chars=20_000)


@pytest.mark.parametrize("n", [2001, 2500, 9999, 1_000_000])
def test_cut_text_keeps_head_and_tail_within_the_limit(n: int) -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(n))
    cut = cut_text(text, 2000)
    assert len(cut) <= 2000
    m = CUT_PATTERN.search(cut)
    assert m is not None
    head, tail = cut[:m.start() - 1], cut[m.end() + 1:]
    assert text.startswith(head) and text.endswith(tail) and abs(len(head) - len(tail)) <= 1
    # The marker says exactly how much is missing and how long the field was.
    assert int(m.group(1)) == n - len(head) - len(tail) and int(m.group(2)) == n


def test_text_within_the_limit_is_unchanged() -> None:
    assert cut_text("x" * 2000, 2000) == "x" * 2000


def test_limit_record_cuts_in_place_and_notes_each_cut() -> None:
    rec = {"a": "s" * 3000, "b": [{"c": "ok"}, {"d": "t" * 2001}], "skip": "u" * 5000}
    with reading(SMALL) as cuts:
        out = limit_record(rec, source="f.jsonl", location="line 7", skip=frozenset({"skip"}))
    assert out is rec and len(rec["a"]) <= 2000 and len(rec["b"][1]["d"]) <= 2000
    assert rec["skip"] == "u" * 5000 and rec["b"][0] == {"c": "ok"}
    assert [(c.source, c.location, c.field, c.original_chars) for c in cuts] == [
        ("f.jsonl", "line 7", "a", 3000), ("f.jsonl", "line 7", "b[1].d", 2001)]
    assert all(c.kept_chars == len(v) for c, v in zip(cuts, (rec["a"], rec["b"][1]["d"]), strict=True))


def test_record_over_the_hard_limit_is_quarantined_naming_its_largest_field() -> None:
    rec = {"id": "r1", "parts": ["p" * 1500] * 13 + ["q" * 1900]}
    with reading(SMALL) as cuts:
        out = limit_record(rec, source="f.json", location="record 2")
    assert isinstance(out, Quarantine) and cuts == []
    assert (out.source, out.location, out.field) == ("f.json", "record 2", "parts[13]")
    assert "over the hard limit of 20000" in out.message


def test_outside_a_reading_block_the_defaults_apply_and_nothing_is_collected() -> None:
    assert current_limits() == FieldLimits()
    rec = {"a": "x" * 10}
    assert limit_record(rec, source="f", location="line 1") == {"a": "x" * 10}
    with reading(SMALL):
        assert current_limits() == SMALL
    assert current_limits() == FieldLimits()


def test_the_field_limit_must_leave_room_for_the_marker() -> None:
    with pytest.raises(ValidationError):
        FieldLimits(max_field_chars=100)


def test_json_lines_and_arrays_cut_their_records(tmp_path: Path) -> None:
    lines = tmp_path / "r.jsonl"
    lines.write_text(json.dumps({"id": 1, "text": "a" * 3000}) + "\n" + json.dumps({"id": 2}) + "\n"
                     + json.dumps({"id": 3, "parts": ["b" * 1999] * 11}) + "\n")
    array = tmp_path / "r.json"
    array.write_text(json.dumps([{"id": 1, "text": "a" * 3000}, {"id": 2}]))
    with reading(SMALL) as cuts:
        got = list(iter_json_lines(lines))
        got_array = list(iter_json_array(array))
    assert [g[1]["id"] if isinstance(g, tuple) else g.location for g in got] == [1, 2, "line 3"]
    assert len(got[0][1]["text"]) <= 2000  # type: ignore[index]
    assert len(got_array) == 2 and len(got_array[0][1]["text"]) <= 2000  # type: ignore[index]
    assert [(c.location, c.field) for c in cuts] == [("line 1", "text"), ("record 0", "text")]


def test_nested_span_trees_cut_each_span_and_not_its_children(tmp_path: Path) -> None:
    child = {"span_id": "c" * 16, "span_name": "llm", "timestamp": "2025-01-01T00:00:00Z",
             "span_attributes": {"openinference.span.kind": "LLM", "output.value": "o" * 5000}}
    root = {"span_id": "a" * 16, "span_name": "main", "timestamp": "2025-01-01T00:00:00Z",
            "span_attributes": {"input.value": "i" * 3000}, "child_spans": [child]}
    path = tmp_path / "tree.json"
    path.write_text(json.dumps({"trace_id": "t" * 32, "spans": [root]}))
    with reading(SMALL) as cuts:
        spans = list(NestedSpanTreeAdapter().read(path))
    assert all(isinstance(s, Span) for s in spans) and len(spans) == 2
    assert [(c.location, c.field, c.original_chars) for c in cuts] == [
        ("spans[0]", "span_attributes.input.value", 3000),
        ("spans[0].child_spans[0]", "span_attributes.output.value", 5000)]
    assert all(len(s.input or s.output or "") <= 2000 for s in spans)  # type: ignore[union-attr]


def test_otlp_documents_cut_span_attributes(tmp_path: Path) -> None:
    span = {"traceId": "a" * 32, "spanId": "b" * 16, "name": "chat",
            "attributes": [{"key": "output.value", "value": {"stringValue": "z" * 4000}}]}
    doc = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {}, "spans": [span]}]}]}
    path = tmp_path / "o.json"
    path.write_text(json.dumps(doc, indent=1))
    with reading(SMALL) as cuts:
        [got] = list(OtlpJsonAdapter().read(path))
    assert isinstance(got, Span) and got.output is not None and CUT_PATTERN.search(got.output)
    [cut] = cuts
    assert (cut.location, cut.field) == ("resourceSpans[0].scopeSpans[0].spans[0]", "attributes[0].value.stringValue")


def test_a_record_nested_too_deeply_to_walk_is_quarantined_and_reading_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('[{"a": 1}, ' + "[" * 5000 + "]" * 5000 + ', {"b": 2}]')
    got = list(iter_json_array(path))
    assert [g[0] if isinstance(g, tuple) else g.message for g in got] == [
        "record 0", "JSON nested more than 128 levels deep at byte 138 of the document: no trace record is",
        "record 2"]
    assert [(g.location, (g.field or "")[:6]) for g in got if isinstance(g, Quarantine)] == [("record 1", "[0][0]")]


@pytest.mark.parametrize("text", [
    '{"a": 1, "a": 2, "b": [1.0, -0.0, 0.1, 1E5, 5e-324, 1.7976931348623157e308]}',
    '[9223372036854775807, -9223372036854775808, 18446744073709551615, 18446744073709551616, 123456789012345678901]',
    '{"big": 1e400, "tiny": 1.00000000000000000000001}',
    r'["\ud83d\ude00", "\ud800", "\u0000", "é", "\ufeff"]',
])
def test_lines_parse_to_the_values_json_gives(text: str) -> None:
    """The fast parser's values are `json`'s, types included (an integer past 64 bits stays an exact int)."""
    got = parse_json_text(text, source="s", location="line 1")
    want = json.loads(text)
    assert repr(got) == repr(want) == repr(loads(text)) == repr(loads(text.encode("utf-8", "surrogatepass")))
