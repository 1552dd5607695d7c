"""Evidence coverage that knows each format: what an adapter declares complete, where text came from, fields cut
at ingest, and the pointer every gap carries (hand-built turns)."""

from __future__ import annotations

from typing import Any, get_args

import pytest

from agent_factory.adapters.jsonio import cut_text
from agent_factory.adapters.model import COMPLETE_WITHOUT, DeliveryState, EvidencePointer, Span, Turn
from agent_factory.evaluators.provenance import coverage
from agent_factory.evaluators.provenance.coverage import waivers
from agent_factory.knowledge_packs import load_pack

DEFAULT = load_pack("default")


def span(sid: str, kind: str = "llm", **kw: Any) -> Span:
    return Span(id=sid, trace_id="t1", kind=kind, **kw)  # type: ignore[arg-type]


def turn(**kw: Any) -> Turn:
    base: dict[str, Any] = {"id": "t1", "conversation_id": "c1", "request": "Change my flight to Friday.",
                            "answer": "Done: you fly on Friday.", "delivery": "delivered"}
    base.update(kw)
    return Turn(**base)


def fields(t: Turn) -> dict[str, Any]:
    return {f.label: f for f in coverage(t, DEFAULT).fields}


def test_a_tool_calling_message_declared_complete_has_no_gap() -> None:
    calls = span("m1", output=None, attributes={"tool_calls": [{"id": "c1", "name": "get_reservation"}],
                                                COMPLETE_WITHOUT: ["output"]})
    undeclared = span("m2", output=None)
    cov = coverage(turn(spans=(calls, undeclared)), DEFAULT)
    f = {x.label: x for x in cov.fields}
    out = f["spans.m1.output"]
    assert (out.state, out.required, out.waived_by, out.complete, out.pointer) == (
        "missing", False, "adapter", True, None)
    # The same message without the declaration is a gap, cited as the empty range of the missing field.
    gap = f["spans.m2.output"]
    assert not gap.complete and gap.waived_by is None
    assert gap.pointer == EvidencePointer(unit_id="m2", field="output", start=0, end=0)
    assert cov.incomplete == ("spans.m2.output",)


def test_a_declaration_waives_absence_not_truncation() -> None:
    cut = span("m1", output="The refund is [truncated]", attributes={COMPLETE_WITHOUT: ["output"]})
    f = fields(turn(spans=(cut,)))["spans.m1.output"]
    assert f.truncated and not f.complete and f.waived_by is None
    text = "The refund is [truncated]"
    assert f.pointer == EvidencePointer(unit_id="m1", field="output", start=text.index("["), end=len(text))


def test_a_turn_declared_complete_without_an_answer() -> None:
    t = turn(answer=None, request=None, attributes={COMPLETE_WITHOUT: "answer"})
    f = fields(t)
    assert f["answer"].complete and f["answer"].waived_by == "adapter"
    assert not f["request"].complete  # only what is declared is waived
    assert f["request"].pointer == EvidencePointer(unit_id="t1", field="request", start=0, end=0)


@pytest.mark.parametrize(("value", "expected"), [
    (["output", "input"], {"output", "input"}), ("answer", {"answer"}), (["output", 3, None], {"output"}),
    (42, set()), ({"output": True}, set()),
])
def test_waivers_read_a_name_or_a_list_of_names(value: Any, expected: set[str]) -> None:
    assert waivers({COMPLETE_WITHOUT: value}) == expected
    assert waivers({"coverage": {"complete_without": value}}) == expected  # nested attributes too


@pytest.mark.skipif(not {"handed_off", "closing"} <= set(get_args(DeliveryState)),
                    reason="delivery states handed_off / closing not in this model yet")
@pytest.mark.parametrize("delivery", ["handed_off", "closing"])
def test_no_answer_is_expected_after_a_hand_off_or_a_goodbye(delivery: str) -> None:
    f = fields(turn(answer=None, delivery=delivery))["answer"]
    assert f.complete and f.waived_by == "delivery"


def test_the_source_of_a_request_and_answer_taken_from_model_calls_is_declared() -> None:
    t = turn(attributes={"request_source": "llm_input", "request_span_id": "s1",
                         "answer_source": "llm_output", "answer_span_id": "s9"})
    f = fields(t)
    assert (f["request"].source, f["request"].source_unit_id) == ("llm_input", "s1")
    assert (f["answer"].source, f["answer"].source_unit_id) == ("llm_output", "s9")
    own = fields(turn())
    assert own["request"].source is None and own["answer"].source is None


def test_a_field_cut_at_ingest_is_declared_truncated_with_its_original_length() -> None:
    original = "A" * 3000 + "B" * 3000
    kept = cut_text(original, 2000)
    f = fields(turn(request=kept))["request"]
    assert f.reasons == ("cut_at_ingest",) and f.truncated and not f.complete
    assert (f.declared_length, f.declared_by) == (6000, "ingest")
    assert f.pointer is not None and kept[f.pointer.start:f.pointer.end].startswith("[agent-factory: ")
    assert kept[f.pointer.start - 1] == "\n" and kept[f.pointer.end] == "\n"
    # A source's own declared length wins over the marker's, and adds no second reason.
    declared = fields(turn(answer=kept, attributes={"answer.original_length": 9000}))["answer"]
    assert declared.reasons == ("cut_at_ingest",) and declared.declared_length == 9000


def test_other_truncations_cite_the_whole_field() -> None:
    t = turn(answer="x" * 50, attributes={"output.original_length": 400})
    f = fields(t)["answer"]
    assert f.pointer == EvidencePointer(unit_id="t1", field="answer", start=0, end=50)
    assert fields(turn())["answer"].pointer is None


@pytest.mark.parametrize(("text", "truncated"), [
    ("Found 6 pages:\n[page one](https://a)\n\n(truncated)\n\nThought: read the first two.", False),
    ("Found 6 pages:\n[page one](https://a) (truncated)", True),
    ("Found 6 pages: [truncated] Thought: read them.", True),  # a recorder's head-tail cut
    ("华东区增长（已截断）后面还有内容", False),
])
def test_plain_word_markers_cut_only_at_the_end(text: str, truncated: bool) -> None:
    s = Span(id="s", trace_id="t", parent_id=None, kind="llm", input=text, output="ok", status="ok")
    cov = coverage(Turn(id="t", conversation_id="c", request="q", answer="a", delivery="delivered", spans=(s,)),
                   DEFAULT)
    field = next(f for f in cov.fields if f.label == "spans.s.input")
    assert field.truncated is truncated, field
