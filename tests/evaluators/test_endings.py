"""Hand-offs and closing messages under the default pack (evaluators.provenance.endings), on invented turns."""

from __future__ import annotations

import pytest

from agent_factory.adapters.model import Span, Turn
from agent_factory.evaluators.provenance.endings import classify, handoff_span, is_closing
from agent_factory.knowledge_packs import load_pack

PACK = load_pack("default")


def _turn(*spans: Span, delivery: str = "failed_empty", answer: str | None = None, request: str = "hi") -> Turn:
    return Turn(id="t", conversation_id="c", request=request, answer=answer, delivery=delivery,  # type: ignore[arg-type]
                spans=spans)


def _tool(name: str, *, status: str = "ok", attrs: dict | None = None, kind: str = "tool") -> Span:
    return Span(id=f"s-{name}", trace_id="t", parent_id="root", kind=kind, name=name, status=status,  # type: ignore[arg-type]
                attributes=attrs or {})


@pytest.mark.parametrize("name", ["transfer_to_human_agents", "Transfer_To_Human", "escalate_to_supervisor",
                                  "handoff_to_human", "request_human_agent"])
def test_human_hand_off_tools(name: str) -> None:
    t = classify(_turn(_tool(name)), PACK, last=True)
    assert t.delivery == "handed_off"
    assert t.attributes["handoff_span_id"] == f"s-{name}"


def test_tool_named_in_attributes_and_genai_span_names() -> None:
    by_attr = _turn(_tool("execute_tool", attrs={"gen_ai.tool.name": "escalate_case"}))
    assert classify(by_attr, PACK, last=None).delivery == "handed_off"
    by_name = _turn(_tool("execute_tool transfer_to_human"))
    assert classify(by_name, PACK, last=None).delivery == "handed_off"


def test_a_failed_hand_off_hands_nothing_over() -> None:
    t = _turn(_tool("transfer_to_human_agents", status="error"))
    assert classify(t, PACK, last=True).delivery == "failed_empty"


def test_a_hand_off_even_when_the_agent_also_said_something() -> None:
    t = _turn(_tool("transfer_to_human_agents"), delivery="delivered", answer="You are being transferred now.")
    assert classify(t, PACK, last=True).delivery == "handed_off"


def test_agent_hand_off_spans_count_only_without_a_delivered_answer() -> None:
    span = _tool("handoff", kind="agent")
    assert classify(_turn(span), PACK, last=None).delivery == "handed_off"
    answered = _turn(span, delivery="delivered", answer="Here is the refund status.")
    assert classify(answered, PACK, last=None).delivery == "delivered"


def test_errors_and_cut_offs_stay_failures() -> None:
    for state in ("failed_error", "failed_truncated"):
        assert classify(_turn(_tool("transfer_to_human_agents"), delivery=state), PACK, last=True).delivery == state


def test_unrelated_tools_are_no_hand_off() -> None:
    assert handoff_span(_turn(_tool("search_flights"), _tool("transfer_funds")), PACK) is None


@pytest.mark.parametrize("text", ["Thank you so much for your help! ###STOP###", "###STOP###", "thanks, bye",
                                  "That's all I needed, thanks again!", "谢谢，再见", "好的，谢谢你的帮助！", "没有了，谢谢"])
def test_closing_messages(text: str) -> None:
    assert is_closing(text, PACK)
    t = classify(_turn(delivery="unknown", request=text), PACK, last=True)
    assert t.delivery == "closing" and t.attributes["closing_pattern"]


@pytest.mark.parametrize("text", ["Thanks. Can you also change my seat?", "thank you, what about the baggage?",
                                  "谢谢，那行李怎么办？", "ok", "Bye the way, my reservation is ABC123",
                                  "I'll gather those details from my emails and provide them shortly. Thank you!"])
def test_not_closing(text: str) -> None:
    assert not is_closing(text, PACK)


def test_closing_needs_no_answer_and_the_end_of_the_session() -> None:
    text = "Thanks, bye!"
    assert classify(_turn(delivery="delivered", answer="Goodbye!", request=text), PACK, last=True).delivery \
        == "delivered"
    assert classify(_turn(delivery="unknown", request=text), PACK, last=False).delivery == "unknown"
    assert classify(_turn(delivery="unknown", request=text), PACK, last=None).delivery == "closing"


def test_cross_session_metrics_need_a_person() -> None:
    from agent_factory.adapters.model import Conversation
    from agent_factory.evaluators.components.results.rules import NOT_OBSERVABLE, identity, not_observable

    person = Conversation(id="c1", user_id="u-42")
    assert identity(person) == "person" and not_observable(person) is None
    nobody = Conversation(id="c2")
    simulated = Conversation(id="c3", user_id="sofia_kim_7287", attributes={"user_identity": "simulated"})
    for conv, why in ((nobody, "names no user"), (simulated, "simulated")):
        answer = not_observable(conv)
        assert answer is not None and answer.value == "not_applicable" and answer.fact == NOT_OBSERVABLE
        assert answer.reason.startswith("not observable") and why in answer.reason
