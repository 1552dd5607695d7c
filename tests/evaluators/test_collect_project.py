"""pi: fields by layer, declared cuts and coverage, and quotes mapped back to original character ranges."""

from __future__ import annotations

import pytest

from agent_factory.adapters.model import Conversation, Engagement
from agent_factory.errors import SpecError
from agent_factory.evaluators.collect.project import project
from agent_factory.evaluators.collect.schema import locate_quote
from agent_factory.evaluators.core import EngagementView, Projection, SpanView
from tests.evaluators.test_collect_support import make_turn


def test_trace_fields_default_and_spans() -> None:
    t = make_turn(1)
    ev = project(t, "trace", Projection())
    assert [(f.id, f.unit_id, f.field) for f in ev.fields] == [("request", t.id, "request"), ("answer", t.id, "answer")]
    ev = project(t, "trace", Projection(fields=("answer", "spans")))
    assert [f.id for f in ev.fields] == ["answer", "spans[0].input", "spans[0].output"]
    assert ev.fields[2].unit_id == "span-001" and ev.fields[2].text == "101.5"
    assert ev.coverage == 1.0 and ev.shown_chars == ev.original_chars


def test_conversation_engagement_and_span_layers() -> None:
    turns = (make_turn(0), make_turn(1, answer=""))
    conv = Conversation(id="c", turns=turns)
    ev = project(conv, "conversation", Projection(fields=("turns",)))
    assert [f.id for f in ev.fields] == ["turns[0].request", "turns[0].answer", "turns[1].request"]  # empty skipped
    eng = EngagementView(Engagement(id="e", user_id="u", conversation_ids=("c", "d")),
                         (conv, Conversation(id="d", turns=(make_turn(2),))), None)
    ev = project(eng, "engagement", Projection(fields=("request",)))
    assert [f.id for f in ev.fields] == ["sessions[0].turns[0].request", "sessions[0].turns[1].request",
                                         "sessions[1].turns[0].request"]
    assert ev.unit_id == "e"
    sv = SpanView(turns[0].spans[0], turns[0])
    ev = project(sv, "span", Projection(fields=("input", "output", "request")))
    assert [(f.id, f.unit_id) for f in ev.fields] == [("input", "span-000"), ("output", "span-000"),
                                                      ("request", "turn-000")]


def test_bad_fields_and_unit_types_are_spec_errors() -> None:
    with pytest.raises(SpecError, match="valid: request, answer"):
        project(make_turn(0), "trace", Projection(fields=("turns",)))
    with pytest.raises(SpecError, match="expects a Conversation"):
        project(make_turn(0), "conversation", Projection())


def test_cuts_are_declared_with_coverage() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(100))
    t = make_turn(0, request="hi", answer=text)
    head = project(t, "trace", Projection(fields=("answer",), max_chars=30, strategy="head"))
    assert head.fields[0].shown == ((0, 30),) and head.coverage == pytest.approx(0.30)
    both = project(t, "trace", Projection(fields=("answer",), max_chars=30, strategy="head_tail"))
    assert both.fields[0].shown == ((0, 15), (85, 100)) and both.coverage == pytest.approx(0.30)
    full = project(t, "trace", Projection(fields=("request", "answer"), max_chars=30))  # strategy full: no cut
    assert full.coverage == 1.0
    short = project(t, "trace", Projection(fields=("request",), max_chars=30, strategy="head_tail"))
    assert short.fields[0].shown == ((0, 2),)
    assert len({head.digest(), both.digest(), full.digest(), short.digest()}) == 4


def test_quotes_map_to_original_ranges() -> None:
    answer = "Revenue was 4.2M USD.\nContact  bob@example.com for the\tfull table. Growth: 12%."
    t = make_turn(0, answer=answer)
    ev = project(t, "trace", Projection())
    p = locate_quote("4.2M USD", ev)
    assert p is not None and (p.unit_id, p.field) == (t.id, "answer") and answer[p.start:p.end] == "4.2M USD"
    p = locate_quote("USD. Contact bob@example.com", ev)  # whitespace differs from the original
    assert p is not None and answer[p.start:p.end] == "USD.\nContact  bob@example.com"
    p = locate_quote("Contact [EMAIL] for the full", ev)  # quoted from the redacted prompt
    assert p is not None and answer[p.start:p.end] == "Contact  bob@example.com for the\tfull"
    p = locate_quote("Revenue was 4.2M USD.\\nContact", ev)  # quoted in its JSON-encoded form
    assert p is not None and answer[p.start:p.end] == "Revenue was 4.2M USD.\nContact"
    assert locate_quote("a sentence that is not there", ev) is None
    assert locate_quote("  ", ev) is None


def test_quotes_in_the_omitted_middle_are_not_found() -> None:
    answer = "BEGIN " + "x" * 80 + " MIDDLE " + "y" * 80 + " END"
    ev = project(make_turn(0, answer=answer), "trace", Projection(fields=("answer",), max_chars=20,
                                                                    strategy="head_tail"))
    assert locate_quote("MIDDLE", ev) is None
    p = locate_quote("y END", ev)
    assert p is not None and answer[p.start:p.end] == "y END" and p.end == len(answer)
