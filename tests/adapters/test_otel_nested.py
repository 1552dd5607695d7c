from collections import Counter

import pytest

from agent_factory.adapters.assemble import assemble_turn, check_trace
from agent_factory.adapters.base import Quarantine, read_head
from agent_factory.adapters.model import Span, TokenUsage
from agent_factory.adapters.otel import FlatSpanLinesAdapter, NestedSpanTreeAdapter, OtlpJsonAdapter
from agent_factory.adapters.otel.nested import DANGLING_PARENT_KEY
from tests.conftest import FIXTURES, shared_data

TREE = FIXTURES / "otel" / "nested_trace.json"


def _split(items):
    return [i for i in items if isinstance(i, Span)], [i for i in items if isinstance(i, Quarantine)]


def test_sniffing():
    head = read_head(TREE)
    assert NestedSpanTreeAdapter().sniff(head, TREE)
    assert not FlatSpanLinesAdapter().sniff(head, TREE) and not OtlpJsonAdapter().sniff(head, TREE)
    assert NestedSpanTreeAdapter().sniff(b'{"trace_id": "t", "spans": [{"timestamp": "x", "span_id": "ab', TREE)
    assert not NestedSpanTreeAdapter().sniff(b'{"trace_id": "t", "spans": [{"role": "user"}]}', TREE)
    assert not NestedSpanTreeAdapter().sniff(b'[{"spans": [{"span_id": "a"}]}]', TREE)


def test_flattening_parents_and_quarantines():
    items = list(NestedSpanTreeAdapter().read(TREE))
    spans, bad = _split(items)
    assert [s.id for s in spans] == ["1000000000000001", "1000000000000002", "1000000000000004", "1000000000000006"]
    assert [(q.location, q.field) for q in bad] == [
        ("spans[0].child_spans[1]", "timestamp"),
        ("spans[0].child_spans[2]", "span_attributes.llm.token_count.completion"),
        ("spans[0].child_spans[2]", "child_spans"),
    ]
    step1, thinking, grandchild, step2 = spans
    # a top-level span is a root; the parent it names (outside the file) is kept as an attribute
    assert step1.parent_id is None and step1.attributes[DANGLING_PARENT_KEY] == "feedfeedfeedfeed"
    assert all(s.trace_id == "aaaabbbbccccddddeeeeffff00001111" for s in spans)  # from the document
    assert (thinking.parent_id, thinking.kind) == ("1000000000000001", "reasoning")  # enclosing span
    # the child of a quarantined span keeps its link, so the assembler reports it as an orphan
    assert (grandchild.parent_id, grandchild.kind) == ("1000000000000003", "tool")
    kept, orphans = check_trace(spans, source=str(TREE))
    assert [q.field for q in orphans] == ["parent_span_id"] and grandchild not in kept
    assert (step2.status, step2.error) == ("error", "ValueError: bad plan")
    assert step1.attributes["session.id"] == "nested-s"


def test_broken_document_ends_with_one_quarantine(tmp_path):
    text = TREE.read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: text.index('"span_name": "Step 2"')])
    spans, bad = _split(list(NestedSpanTreeAdapter().read(cut)))
    assert len(spans) == 3 and bad[-1].location == "spans[1]" and "truncated" in bad[-1].message


@pytest.mark.realdata
def test_every_trail_trace_reads_cleanly():
    files = sorted(shared_data("trail", "traces").glob("*/*.json"))
    assert len(files) == 52
    oi_kinds: Counter = Counter()
    mapped: Counter = Counter()
    total = errors = with_tokens = llm_with_model = 0
    for path in files:
        assert NestedSpanTreeAdapter().sniff(read_head(path), path), path
        spans, bad = _split(list(NestedSpanTreeAdapter().read(path)))
        assert bad == [], bad[:3]
        ids = {s.id for s in spans}
        trace_ids = {s.trace_id for s in spans}
        assert trace_ids == {path.stem}
        for s in spans:
            assert s.parent_id is None or s.parent_id in ids, (path.name, s.id)
            oi = s.attributes.get("openinference.span.kind")
            oi_kinds[oi] += 1
            mapped[(oi, s.kind)] += 1
            errors += s.status == "error"
            with_tokens += s.tokens is not None
            llm_with_model += oi == "LLM" and s.model is not None
        total += len(spans)
        kept, _dups = check_trace(spans, source=str(path))
        turn = assemble_turn(kept)
        assert turn.id == path.stem and turn.spans
    assert total == 1221
    assert oi_kinds == {"LLM": 514, "CHAIN": 320, "TOOL": 136, "AGENT": 64, None: 187}
    assert mapped == {("LLM", "llm"): 514, ("CHAIN", "agent"): 320, ("TOOL", "tool"): 136, ("AGENT", "agent"): 64,
                      (None, "other"): 187}
    assert errors == 112
    # counts of `llm.model_name` and `llm.token_count.*` in the source: 3 failed LLM calls name no model
    assert (llm_with_model, with_tokens) == (511, 572)


@pytest.mark.realdata
def test_trail_trace_details():
    path = shared_data("trail", "traces", "gaia", "0035f455b3ff2295167a844f04d85d34.json")
    spans, bad = _split(list(NestedSpanTreeAdapter().read(path)))
    assert bad == [] and len(spans) == 11
    assert [s.name for s in spans[:5]] == ["main", "get_examples_to_answer", "answer_single_question",
                                           "create_agent_hierarchy", "CodeAgent.run"]
    by_id = {s.id: s for s in spans}
    final = by_id["193693565e6dc4d0"]
    assert (final.name, final.kind, final.parent_id, final.duration_ms) == ("FinalAnswerTool", "tool",
                                                                           "2f5bc0fdc71c99df", pytest.approx(0.047))
    assert final.input.startswith('{"args": ["33149"]')
    assert final.attributes["tool.name"] == "final_answer"
    llm = by_id["98fa1dda65ab168b"]
    assert (llm.kind, llm.model, llm.duration_ms) == ("llm", "o3-mini", pytest.approx(16212.004))
    assert llm.tokens == TokenUsage(input=1359, output=948, total=2307)
    root = by_id["77fb7128d6f04862"]
    assert root.parent_id is None and root.duration_ms == pytest.approx(108755.33)
    assert root.attributes["service.name"] == "gaia-annotations/app:GAIA-Samples"


@pytest.mark.realdata
def test_trail_multi_root_trace_keeps_roots_and_flags_the_source_duplicate():
    path = shared_data("trail", "traces", "swe_bench", "72822db6e120878d916b515c2501246b.json")
    spans, bad = _split(list(NestedSpanTreeAdapter().read(path)))
    assert bad == []
    roots = [s for s in spans if s.parent_id is None]
    assert [r.name for r in roots] == ["create_agent", "Step 1", "Step 2", "Step 3", "Step 4", "Step 5", "Step 6"]
    assert {r.attributes[DANGLING_PARENT_KEY] for r in roots} == {"dd38ea21168a9f1a", "1b34d02d2b7f4ecd"}
    kept, dups = check_trace(spans, source=str(path))
    # the export repeats one LLM span verbatim; the assembler, not the adapter, drops the copy
    assert [(q.field, q.location) for q in dups] == [
        ("span_id", "trace 72822db6e120878d916b515c2501246b span b14646a5fcac02fd")]
    assert len(kept) == len(spans) - 1


@pytest.mark.realdata
def test_trail_error_spans_carry_the_status_message():
    path = shared_data("trail", "traces", "gaia", "0035f455b3ff2295167a844f04d85d34.json")
    errs = [s for f in sorted(path.parent.glob("*.json"))[:10]
            for s in NestedSpanTreeAdapter().read(f) if isinstance(s, Span) and s.status == "error"]
    assert errs
    for s in errs:
        assert s.error and s.attributes["otel.events"][0]["name"] == "exception"


def test_document_without_a_span_list(tmp_path):
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"trace_id": "t", "spans": {"span_id": "a"}}')
    assert [(q.location, q.field) for q in NestedSpanTreeAdapter().read(wrong)] == [("file", "spans")]
    none = tmp_path / "none.json"
    none.write_text('{"trace_id": "t"}')
    assert [q.field for q in NestedSpanTreeAdapter().read(none)] == ["spans"]
