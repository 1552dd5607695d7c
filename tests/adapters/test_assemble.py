"""Turn assembly when the root span is empty: the request from the first model call's input, the answer from the
last one's output, in each convention's shape, and the turn saying where they came from."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent_factory.adapters.assemble import (
    ANSWER_SOURCE,
    ANSWER_SPAN,
    LLM_INPUT,
    LLM_OUTPUT,
    REQUEST_SOURCE,
    REQUEST_SPAN,
    assemble_turn,
)
from agent_factory.adapters.model import Span

T0 = datetime(2025, 3, 1, tzinfo=UTC)


def sp(sid: str, *, parent: str | None = "root", kind: str = "llm", at: int = 0, **kw: Any) -> Span:
    start = T0 + timedelta(seconds=at)
    return Span(id=sid, trace_id="t1", parent_id=parent, kind=kind,  # type: ignore[arg-type]
                start=start, end=start + timedelta(seconds=1), **kw)


ROOT = sp("root", parent=None, kind="agent", name="main", attributes={"pat.app": "x"})

OPENINFERENCE_INPUT = {
    "llm.input_messages.0.message.role": "system", "llm.input_messages.0.message.content": "You are helpful.",
    "llm.input_messages.1.message.role": "user", "llm.input_messages.1.message.content": "Earlier question",
    "llm.input_messages.2.message.role": "assistant", "llm.input_messages.2.message.content": "Earlier answer",
    "llm.input_messages.3.message.role": "user",
    "llm.input_messages.3.message.contents.0.message_content.type": "text",
    "llm.input_messages.3.message.contents.0.message_content.text": "What is the capital of Peru?",
}


@pytest.mark.parametrize(
    ("attributes", "input_text", "expected"),
    [
        (OPENINFERENCE_INPUT, None, "What is the capital of Peru?"),
        ({"gen_ai.input.messages": json.dumps([
            {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
            {"role": "user", "parts": [{"type": "text", "content": "Capital of Peru?"},
                                       {"type": "image", "uri": "x.png"}]}])}, None, "Capital of Peru?"),
        ({"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "Peru's capital?"}, None, "Peru's capital?"),
        ({}, json.dumps({"messages": [{"role": "system", "content": "sys"},
                                      {"role": "user", "content": [{"type": "text", "text": "Lima or Cusco?"}]}]}),
         "Lima or Cusco?"),
    ],
    ids=["openinference", "genai", "genai-deprecated", "openai-request-json"],
)
def test_empty_root_takes_the_request_from_the_first_model_call(
    attributes: dict[str, Any], input_text: str | None, expected: str,
) -> None:
    first = sp("llm1", at=1, input=input_text, attributes=attributes, output="Lima")
    later = sp("llm2", at=5, input=json.dumps({"messages": [{"role": "user", "content": "a later prompt"}]}),
               output="Lima.")
    turn = assemble_turn([ROOT, later, first])
    assert turn.request == expected
    assert (turn.attributes[REQUEST_SOURCE], turn.attributes[REQUEST_SPAN]) == (LLM_INPUT, "llm1")
    assert turn.attributes["pat.app"] == "x"  # the root's own attributes stay


@pytest.mark.parametrize(
    ("attributes", "output", "answer"),
    [
        ({"llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "Lima."},
         '{"role": "assistant", "content": "Lima.", "tool_calls": null}', "Lima."),
        ({"gen_ai.output.messages": [{"role": "assistant", "parts": [{"type": "text", "content": "Lima!"}]}]},
         None, "Lima!"),
        ({}, '{"role": "assistant", "content": "FINAL ANSWER: Lima"}', "FINAL ANSWER: Lima"),
        ({}, json.dumps({"choices": [{"message": {"role": "assistant", "content": "It is Lima."}}]}), "It is Lima."),
        ({}, "Plain completion text", "Plain completion text"),
    ],
    ids=["openinference", "genai", "message-json", "completion-json", "plain"],
)
def test_empty_root_takes_the_answer_from_the_last_model_call(
    attributes: dict[str, Any], output: str | None, answer: str,
) -> None:
    if output is None:
        output = "rendered elsewhere"
    first = sp("llm1", at=1, input="plan", output="a plan")
    last = sp("llm2", at=9, input="go", output=output, attributes=attributes)
    errored = sp("llm3", at=12, input="retry", status="error", error="timeout")  # no output: not the answer
    turn = assemble_turn([ROOT, first, last, errored])
    assert turn.answer == answer and turn.delivery == "delivered"
    assert (turn.attributes[ANSWER_SOURCE], turn.attributes[ANSWER_SPAN]) == (LLM_OUTPUT, "llm2")


def test_order_is_by_time_when_every_model_call_has_one() -> None:
    early = sp("late-in-file", at=1, input=json.dumps([{"role": "user", "content": "first asked"}]), output="one")
    late = sp("early-in-file", at=3, input=json.dumps([{"role": "user", "content": "second asked"}]), output="two")
    turn = assemble_turn([ROOT, late, early])
    assert (turn.request, turn.answer) == ("first asked", "two")


def test_a_root_with_its_own_text_is_not_replaced() -> None:
    root = sp("root", parent=None, kind="agent", input="the user's question", output="the answer")
    llm = sp("llm1", at=1, input=json.dumps([{"role": "user", "content": "prompt"}]), output="reply")
    turn = assemble_turn([root, llm])
    assert (turn.request, turn.answer) == ("the user's question", "the answer")
    assert REQUEST_SOURCE not in turn.attributes and ANSWER_SOURCE not in turn.attributes


def test_a_failed_root_with_a_request_keeps_its_missing_answer() -> None:
    # The root holds the request and failed: the answer never came, whatever the model calls said.
    root = sp("root", parent=None, kind="agent", input="question", status="error", error="crash")
    llm = sp("llm1", at=1, input=json.dumps([{"role": "user", "content": "question"}]), output="half an answer")
    turn = assemble_turn([root, llm])
    assert (turn.request, turn.answer, turn.delivery) == ("question", None, "failed_error")
    assert ANSWER_SOURCE not in turn.attributes


def test_a_cut_off_last_model_call_makes_the_delivery_truncated() -> None:
    llm = sp("llm1", at=1, input=json.dumps([{"role": "user", "content": "q"}]), output="The answer is",
             attributes={"gen_ai.response.finish_reasons": ["length"]})
    assert assemble_turn([ROOT, llm]).delivery == "failed_truncated"


def test_no_model_calls_leave_request_and_answer_missing() -> None:
    tool = sp("tool1", kind="tool", input="{}", output="{}")
    turn = assemble_turn([ROOT, tool])
    assert (turn.request, turn.answer, turn.delivery) == (None, None, "unknown")
    assert REQUEST_SOURCE not in turn.attributes and ANSWER_SOURCE not in turn.attributes


def test_model_calls_without_a_user_message_give_no_request() -> None:
    llm = sp("llm1", at=1, input=json.dumps([{"role": "system", "content": "only a system prompt"}]), output="x")
    turn = assemble_turn([ROOT, llm])
    assert turn.request is None and turn.answer == "x"
