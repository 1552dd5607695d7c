"""A task trial's root span states its outcome (`task.success`): the OTLP adapter reads it as the conversation's
`task_success` event, and only there."""

from __future__ import annotations

from agent_factory.adapters.model import Span
from agent_factory.adapters.otel.otlp import task_outcome


def _span(**attrs: object) -> Span:
    return Span(id="a1", trace_id="t1", attributes={"session.id": "task-s-t-0", **attrs})


def test_a_root_span_with_task_success_is_the_conversations_outcome() -> None:
    event = task_outcome(_span(**{"task.success": False, "task.id": "t", "task.trial": 0, "task.suite": "s"}))
    assert event is not None
    assert (event.kind, event.conversation_id, event.value) == ("task_success", "task-s-t-0", False)
    assert event.attributes == {"id": "t", "trial": 0, "suite": "s"} and event.is_outcome


def test_no_outcome_from_a_child_span_a_non_boolean_or_a_trace_without_a_session() -> None:
    child = _span(**{"task.success": True}).model_copy(update={"parent_id": "r"})
    assert task_outcome(child) is None
    assert task_outcome(_span(**{"task.success": "true"})) is None
    assert task_outcome(Span(id="a1", trace_id="t1", attributes={"task.success": True})) is None
    assert task_outcome(_span()) is None
