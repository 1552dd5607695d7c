"""What every reader does with JSON that is nested absurdly deep, holds lone surrogate escapes, or ends its lines
with a lone CR: one quarantine line naming the record, the records before it kept, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from agent_factory.adapters.base import Adapter, Quarantine, cut_at_depth, read_head
from agent_factory.adapters.chat import OpenAIChatAdapter, TauBenchAdapter
from agent_factory.adapters.jsonguard import MAX_DEPTH, BoundedJson, DepthScanner, mark_lone_surrogates
from agent_factory.adapters.jsonio import iter_json_array, iter_json_lines, json_line, loads_embedded
from agent_factory.adapters.model import Conversation, Span
from agent_factory.adapters.otel import FlatSpanLinesAdapter, NestedSpanTreeAdapter, OtlpJsonAdapter
from tests.conftest import FIXTURES

T0 = 1_700_000_000_000_000_000
DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJ = '{"a":' * 100_000 + "1" + "}" * 100_000


def flat(i: int, **over: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {"traceId": "a" * 32, "spanId": f"{i:016x}", "name": f"s{i}",
                           "startTimeUnixNano": str(T0 + i), "endTimeUnixNano": str(T0 + i + 1000)}
    rec.update(over)
    return rec


def otlp(spans: list[str]) -> str:
    return ('{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"scope":{"name":"t"},"spans":['
            + ",".join(spans) + "]}]}]}")


def nested(children: list[str]) -> str:
    return ('{"trace_id":"' + "b" * 32 + '","spans":[' + ",".join(children) + "]}")


def tree(i: int, **over: Any) -> dict[str, Any]:
    rec = {"timestamp": "2025-03-24T16:35:00Z", "span_id": f"{i:016x}", "span_name": f"n{i}",
           "span_attributes": {}, "duration": "PT1S", "child_spans": []}
    rec.update(over)
    return rec


def chat(i: int, content: str = "hello") -> dict[str, Any]:
    return {"id": f"c{i}", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": content}]}


def tau(i: int) -> dict[str, Any]:
    return {"task_id": i, "trial": 0, "reward": 1.0, "info": {"task": {"user_id": "u"}},
            "traj": [{"role": "system", "content": "policy"}, {"role": "user", "content": "hi"},
                     {"role": "assistant", "content": "hello"}]}


def _read(adapter: Adapter, path: Path) -> tuple[list[Any], list[Quarantine]]:
    items = list(adapter.read(path))
    return [i for i in items if not isinstance(i, Quarantine)], [i for i in items if isinstance(i, Quarantine)]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


# --- depth ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [DEEP, DEEP_OBJ], ids=["arrays", "objects"])
@pytest.mark.parametrize("adapter", [FlatSpanLinesAdapter(), OtlpJsonAdapter(), NestedSpanTreeAdapter(),
                                     TauBenchAdapter(), OpenAIChatAdapter()], ids=lambda a: a.name)
def test_a_deep_document_is_refused_with_one_line(tmp_path: Path, adapter: Adapter, body: str) -> None:
    path = _write(tmp_path, "deep.json", body)
    good, bad = _read(adapter, path)
    assert good == [] and len(bad) == 1
    # A document of nothing but brackets has none of the structure of the span documents: that is their one line.
    assert any(m in bad[0].message for m in (f"nested more than {MAX_DEPTH} levels deep", "not an OTLP/JSON",
                                             "not a nested span tree")), bad[0].message


def _deep_record() -> str:
    return '{"spanId":"' + "c" * 16 + '","x":' + DEEP + "}"


def test_a_deep_record_in_an_array_is_quarantined_and_reading_goes_on(tmp_path: Path) -> None:
    path = _write(tmp_path, "a.json", "[" + json.dumps(flat(1)) + "," + json.dumps(flat(2)) + ","
                  + _deep_record() + "," + json.dumps(flat(3)) + "]")
    good, bad = _read(FlatSpanLinesAdapter(), path)
    assert [s.id for s in good] == [f"{1:016x}", f"{2:016x}", f"{3:016x}"]
    assert [(q.location, q.source) for q in bad] == [("record 2", str(path))]
    assert bad[0].field is not None and bad[0].field.startswith("x[0][0]") and len(bad[0].field) <= 163
    assert f"nested more than {MAX_DEPTH} levels deep" in bad[0].message


def test_a_document_that_ends_inside_a_deep_record_keeps_the_records_before_it(tmp_path: Path) -> None:
    path = _write(tmp_path, "cut.json", "[" + json.dumps(flat(1)) + "," + "[" * 100_000)
    good, bad = _read(FlatSpanLinesAdapter(), path)
    assert [s.id for s in good] == [f"{1:016x}"]
    assert [q.location for q in bad] == ["record 1"] and "levels deep" in bad[0].message


def test_a_deep_span_in_an_otlp_document_is_quarantined_alone(tmp_path: Path) -> None:
    path = _write(tmp_path, "o.json", otlp([json.dumps(flat(1)), json.dumps(flat(2)), _deep_record(),
                                            json.dumps(flat(4))]))
    good, bad = _read(OtlpJsonAdapter(), path)
    assert [s.id for s in good] == [f"{1:016x}", f"{2:016x}", f"{4:016x}"]
    assert [q.location for q in bad] == ["resourceSpans[0].scopeSpans[0].spans[2]"]
    assert f"nested more than {MAX_DEPTH} levels deep" in bad[0].message


def test_a_deep_span_in_a_tree_is_quarantined_alone(tmp_path: Path) -> None:
    deep_child = '{"span_id":"' + "d" * 16 + '","x":' + DEEP + "}"
    root = json.dumps(tree(2)).replace('"child_spans": []', '"child_spans": [' + deep_child + "," + json.dumps(tree(5))
                                       + "]")
    path = _write(tmp_path, "n.json", nested([json.dumps(tree(1)), root, json.dumps(tree(3))]))
    good, bad = _read(NestedSpanTreeAdapter(), path)
    assert [s.id for s in good] == [f"{i:016x}" for i in (1, 2, 5, 3)]
    assert [q.location for q in bad] == ["spans[1].child_spans[0]"]
    # a child too deep to read at all is quarantined in its place, its siblings read
    chain = "".join(json.dumps(tree(100 + i))[:-2] for i in range(80)) + "]}" * 80  # each span the last's child
    path = _write(tmp_path, "c.json", nested([json.dumps(tree(1)), chain, json.dumps(tree(3))]))
    good, bad = _read(NestedSpanTreeAdapter(), path)
    # spans[] holds the chain at depth 2, each child 2 deeper: the first 63 spans are read
    assert [s.id for s in good] == [f"{i:016x}" for i in (1, *range(100, 163), 3)]
    assert [q.location.count("child_spans") for q in bad] == [63] and "levels deep" in bad[0].message


def test_a_deep_json_line_is_quarantined_alone(tmp_path: Path) -> None:
    lines = [json.dumps(flat(1)), json.dumps(flat(2, attributes={"x": json.loads("[" * 600 + "]" * 600)})),
             '{"spanId":"' + "e" * 16 + '","x":' + DEEP + "}", json.dumps(flat(4))]
    path = _write(tmp_path, "d.jsonl", "\n".join(lines) + "\n")
    good, bad = _read(FlatSpanLinesAdapter(), path)
    assert [s.id for s in good] == [f"{1:016x}", f"{4:016x}"]
    assert [q.location for q in bad] == ["line 2", "line 3"]
    assert all(f"nested more than {MAX_DEPTH} levels deep" in q.message for q in bad)


def test_nesting_up_to_the_limit_is_read(tmp_path: Path) -> None:
    inner: Any = "leaf"
    for _ in range(MAX_DEPTH - 4):  # the line's object, attributes, then the nested value
        inner = [inner]
    path = _write(tmp_path, "ok.jsonl", json.dumps(flat(1, attributes={"x": inner})) + "\n")
    good, bad = _read(FlatSpanLinesAdapter(), path)
    assert len(good) == 1 and bad == []
    doc = _write(tmp_path, "ok.json", "[" + json.dumps(flat(1, attributes={"x": inner})) + "]")
    good, bad = _read(FlatSpanLinesAdapter(), doc)
    assert len(good) == 1 and bad == []


def _reference_cut(data: bytes, limit: int) -> int | None:
    depth, in_string, escaped = 0, False, False
    for i, b in enumerate(data):
        if in_string:
            if escaped:
                escaped = False
            elif b == 0x5C:
                escaped = True
            elif b == 0x22:
                in_string = False
        elif b == 0x22:
            in_string = True
        elif b in b"[{":
            depth += 1
            if depth > limit:
                return i
        elif b in b"]}":
            depth -= 1
    return None


@pytest.mark.parametrize("text", [
    b'{"a": "[[[[[\\"[[[", "b": [[[[1]]]]}',
    b'["\\\\", [[["x\\\\\\"[[[[["]]]]',
    b'[' * 5 + b'"' + b'\\"' * 50 + b'[' * 20 + b'"' + b'[' * 3,
    b'{"k": "' + b'\\\\' * 7 + b'", "v": [[[[[[[]]]]]]]}',
])
@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 16])
def test_the_depth_scanner_agrees_with_a_byte_loop_across_chunk_boundaries(text: bytes, chunk: int) -> None:
    limit = 6
    scanner = DepthScanner(limit)
    cut = None
    for at in range(0, len(text), chunk):
        got = scanner.feed(text[at:at + chunk])
        if got is not None:
            cut = at + got
            break
    assert cut == _reference_cut(text, limit)


def test_the_head_sniffers_see_is_cut_at_depth(tmp_path: Path) -> None:
    path = _write(tmp_path, "h.json", "[" * 2000 + "]" * 2000 + "\n")
    assert read_head(path) == b"[" * 64 == cut_at_depth(path.read_bytes())
    # A JSON-lines reader's look at the first lines meets no recursion error.
    assert OtlpJsonAdapter().line_items(path) is None


# --- lone surrogates -----------------------------------------------------------------------------------------

LONE = json.dumps(flat(2, name="x\\ud800y")).replace("\\\\ud800", "\\ud800")
LONE_LOW = json.dumps(flat(3, attributes={"k": "a\\udc00"})).replace("\\\\udc00", "\\udc00")


def test_mark_lone_surrogates_leaves_pairs_and_escaped_backslashes() -> None:
    raw = rb'["\ud83d\ude00", "\\ud800", "\\\ud800", "\ud800\u0041", "\uDC00", "\uD83D\uDE00"]'
    out, escapes = mark_lone_surrogates(raw)
    assert escapes == ["\\ud800", "\\ud800", "\\uDC00"]
    assert out == rb'["\ud83d\ude00", "\\ud800", "\\\uffff", "\uffff\u0041", "\uffff", "\uD83D\uDE00"]'
    assert json.loads(out)[0] == "\U0001F600" and json.loads(out)[1] == "\\ud800"


def test_a_lone_surrogate_in_a_json_line_quarantines_that_line_naming_the_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "s.jsonl", "\n".join([json.dumps(flat(1)), LONE, LONE_LOW, json.dumps(flat(4))]) + "\n")
    good, bad = _read(FlatSpanLinesAdapter(), path)
    assert [s.id for s in good] == [f"{1:016x}", f"{4:016x}"]
    assert [(q.location, q.field) for q in bad] == [("line 2", "name"), ("line 3", "attributes.k")]
    assert "\\ud800" in bad[0].message and "\\udc00" in bad[1].message
    assert all("surrogate" in q.message for q in bad)


def test_a_lone_surrogate_in_an_array_quarantines_that_record_only(tmp_path: Path) -> None:
    path = _write(tmp_path, "s.json", "[" + ",".join([json.dumps(flat(1)), LONE, LONE_LOW, json.dumps(flat(4))])
                  + "]")
    good, bad = _read(FlatSpanLinesAdapter(), path)
    assert [s.id for s in good] == [f"{1:016x}", f"{4:016x}"]
    assert [(q.location, q.field) for q in bad] == [("record 1", "name"), ("record 2", "attributes.k")]
    assert all(s.name.isascii() for s in good)


def test_a_lone_surrogate_in_an_otlp_document_quarantines_that_span_only(tmp_path: Path) -> None:
    path = _write(tmp_path, "o.json", otlp([json.dumps(flat(1)), LONE, json.dumps(flat(4))]))
    good, bad = _read(OtlpJsonAdapter(), path)
    assert [s.id for s in good] == [f"{1:016x}", f"{4:016x}"]
    assert [(q.location, q.field) for q in bad] == [("resourceSpans[0].scopeSpans[0].spans[1]", "name")]


def test_a_lone_surrogate_in_a_span_tree_quarantines_that_span_only(tmp_path: Path) -> None:
    child = json.dumps(tree(2, span_name="x\\ud800")).replace("\\\\ud800", "\\ud800")
    root = json.dumps(tree(1)).replace('"child_spans": []', '"child_spans": [' + child + "]")
    path = _write(tmp_path, "n.json", nested([root, json.dumps(tree(3))]))
    good, bad = _read(NestedSpanTreeAdapter(), path)
    assert [s.id for s in good] == [f"{1:016x}", f"{3:016x}"]
    assert [(q.location, q.field) for q in bad] == [("spans[0].child_spans[0]", "span_name")]


def test_a_lone_surrogate_in_tau_bench_quarantines_that_record(tmp_path: Path) -> None:
    recs = [json.dumps(tau(i)) for i in range(3)]
    recs[1] = recs[1].replace('"hello"', '"hel\\udc00lo"')
    path = _write(tmp_path, "tau.json", "[" + ",".join(recs) + "]")
    good, bad = _read(TauBenchAdapter(), path)
    assert len([c for c in good if isinstance(c, Conversation)]) == 2
    assert [(q.location, q.field) for q in bad] == [("record 1", "traj[2].content")]


def test_embedded_json_with_a_lone_surrogate_or_absurd_depth_is_not_decoded() -> None:
    assert loads_embedded('{"a": "\\ud83d\\ude00"}') == {"a": "\U0001F600"}
    for text in ('{"a": "\\ud800"}', "[" * 5000 + "]" * 5000):
        with pytest.raises(ValueError):
            loads_embedded(text)


def test_a_json_line_quarantine_is_one_line(tmp_path: Path) -> None:
    got = json_line(LONE.encode(), lineno=9, source="f.jsonl")
    assert isinstance(got, Quarantine) and "\n" not in got.line() and got.location == "line 9"


# --- line ends -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sep", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
def test_records_end_at_lf_crlf_or_a_lone_cr(tmp_path: Path, sep: str) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(sep.join(json.dumps(flat(i)) for i in range(1, 4)).encode() + sep.encode())
    good, bad = _read(FlatSpanLinesAdapter(), path)
    assert [s.id for s in good] == [f"{i:016x}" for i in range(1, 4)] and bad == []


def test_line_numbers_count_every_line_end_as_an_editor_does(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_bytes(b"\r\n".join([json.dumps(flat(1)).encode(), b"{broken", json.dumps(flat(3)).encode()])
                     + b"\r" + b"{also broken\n" + json.dumps(flat(5)).encode() + b"\r\r\n")
    got = list(iter_json_lines(path))
    assert [g.location if isinstance(g, Quarantine) else g[0] for g in got] == [
        "line 1", "line 2", "line 3", "line 4", "line 5"]


def test_unicode_line_separators_inside_strings_do_not_split_records(tmp_path: Path) -> None:
    path = tmp_path / "u.jsonl"
    path.write_bytes(json.dumps(flat(1, name="a\u2028b\u0085c"), ensure_ascii=False).encode() + b"\n")
    good, bad = _read(FlatSpanLinesAdapter(), path)
    assert [s.name for s in good] == ["a\u2028b\u0085c"] and bad == []


@pytest.mark.parametrize("adapter", [OpenAIChatAdapter(), OtlpJsonAdapter()], ids=lambda a: a.name)
def test_cr_only_files_of_other_line_formats(tmp_path: Path, adapter: Adapter) -> None:
    if isinstance(adapter, OtlpJsonAdapter):
        recs = [otlp([json.dumps(flat(i))]) for i in range(1, 4)]
    else:
        recs = [json.dumps(chat(i)) for i in range(3)]
    path = tmp_path / "cr.jsonl"
    path.write_bytes("\r".join(recs).encode() + b"\r")
    good, bad = _read(adapter, path)
    assert bad == [] and len([g for g in good if isinstance(g, Conversation | Span)]) == 3


def test_pretty_printed_document_with_cr_line_ends(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_bytes(json.dumps(chat(1), indent=2).replace("\n", "\r").encode())
    good, bad = _read(OpenAIChatAdapter(), path)
    assert bad == [] and [c.id for c in good if isinstance(c, Conversation)] == ["c1"]


# --- the readers in isolation --------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 5, 7, 1 << 16])
def test_bounded_json_hands_ijson_a_mark_for_a_deep_container(tmp_path: Path, size: int) -> None:
    path = _write(tmp_path, "x.json", '["a", "b", ' + DEEP + ', "c\\ud800"]')
    got = list(iter_json_array(path))
    assert [g[1] for g in got if not isinstance(g, Quarantine)] == ["a", "b"]
    assert [(q.location, (q.field or "")[:6]) for q in got if isinstance(q, Quarantine)] == [
        ("record 2", "[0][0]"), ("record 3", "<value")]
    assert f"byte {11 + MAX_DEPTH - 1}" in got[2].message  # type: ignore[union-attr]
    with open(path, "rb") as f:
        reader = BoundedJson(f)
        assert reader.read(0) == b""
        data = b""
        while chunk := reader.read(size):
            data += chunk
    assert data == (b'["a", "b", ' + b"[" * (MAX_DEPTH - 1) + b'"\\ufffe"' + b"]" * (MAX_DEPTH - 1)
                    + b', "c\\uffff"]')
    assert list(reader.deep) == [11 + MAX_DEPTH - 1] and list(reader.escapes) == ["\\ud800"]
    with open(_write(tmp_path, "open.json", "[1, " + "[" * 1000), "rb") as f:
        reader = BoundedJson(f)
        with pytest.raises(ValueError, match="levels deep"):
            while reader.read(size):
                pass


def test_fixture_documents_read_as_before() -> None:
    # Guarded reading changes nothing for ordinary documents.
    for adapter, name in ((NestedSpanTreeAdapter(), "nested_trace.json"), (OtlpJsonAdapter(), "otlp_doc.json"),
                          (FlatSpanLinesAdapter(), "flat_array.json")):
        items: Iterable[object] = adapter.read(FIXTURES / "otel" / name)
        assert any(isinstance(i, Span) for i in items)
