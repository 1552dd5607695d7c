"""The step-log and run-contract adapters: schema validation by field, spans per step, outcome events."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_factory.adapters.base import Quarantine, read_head
from agent_factory.adapters.chat_io import RecordProblem, detect_layout
from agent_factory.adapters.model import Conversation
from agent_factory.adapters.steplog import (
    RunContractAdapter,
    StepLogAdapter,
    contract_conversation,
    looks_like_contract,
    looks_like_steplog,
    steplog_conversation,
)
from tests.conftest import FIXTURES

STEPLOG = FIXTURES / "steplog"


def _split(items: list) -> tuple[list[Conversation], list[Quarantine]]:
    convs = [i for i in items if isinstance(i, Conversation)]
    bad = [i for i in items if isinstance(i, Quarantine)]
    assert len(convs) + len(bad) == len(items)
    return convs, bad


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# ---- step log ----------------------------------------------------------------------------------------------


def test_step_log_quarantines_each_bad_run_by_line_and_field() -> None:
    path = STEPLOG / "runs.jsonl"
    convs, bad = _split(list(StepLogAdapter().read(path)))
    assert [(q.location, q.field) for q in bad] == [
        ("line 3", None),
        ("line 4", "steps"),
        ("line 5", "steps[0].started_at"),
        ("line 6", "steps[0].ended_at"),
        ("line 7", "steps[0].duration_ms"),
        ("line 8", "steps[1].tokens.input"),
        ("line 9", "id"),
        ("line 10", "steps[1].index"),
        ("line 11", "steps[0].type"),
        ("line 12", "steps[0]"),
        ("line 13", "success"),
    ]
    assert all(q.source == str(path) for q in bad)
    msg = {q.location: q.message for q in bad}
    assert "before started_at" in msg["line 6"]
    assert "-5" in msg["line 7"] and "-3" in msg["line 8"]
    assert "'model_call'" in msg["line 11"] and "'other'" in msg["line 11"]
    assert "ended_at or duration_ms" in msg["line 12"]
    assert "already used at line 1" in msg["line 9"]
    assert [c.id for c in convs] == ["run-1", "run-2", "run-14"]


def test_step_log_run_becomes_one_turn_with_a_span_per_step() -> None:
    run = next(i for i in StepLogAdapter().read(STEPLOG / "runs.jsonl") if isinstance(i, Conversation))
    assert run.attributes["task_id"] == "t1" and run.attributes["success"] is True
    assert (run.attributes["trial"], run.attributes["agent"], run.attributes["step_count"]) == (0, "demo-agent", 5)
    (turn,) = run.turns
    assert (turn.id, turn.conversation_id) == ("run-1/turn-0", "run-1")
    assert turn.request == "Book the cheapest flight to SFO."
    assert turn.answer == "Booked HAT001 for $99." and turn.delivery == "delivered"
    assert [s.kind for s in turn.spans] == ["llm", "tool", "tool", "retrieval", "llm"]
    assert [s.id for s in turn.spans] == [f"run-1/step-{i}" for i in range(5)]
    model, search, book, policy, final = turn.spans
    assert (model.model, model.tokens.input, model.tokens.output, model.tokens.total) == ("gpt-4o", 120, 12, 132)
    assert model.duration_ms == 1500.0 and model.attributes["reasoning"] == "Need flight list first."
    assert model.start == _utc("2025-01-01T10:00:00")
    assert (search.name, search.input) == ("search_flights", '{"to":"SFO"}')
    assert search.output == '[{"flight":"HAT001","price":99}]'
    assert search.end == _utc("2025-01-01T10:00:02.300") and search.status == "ok"
    assert search.attributes["state_before"] == {"bookings": 0} and "state_after" in search.attributes
    assert (book.status, book.error, book.input) == ("error", "payment declined", '{"flight": "HAT001"}')
    assert (policy.input, policy.output) == ("payment retry", "Retry once.")
    assert final.output == "Booked HAT001 for $99."
    assert (turn.start, turn.end) == (_utc("2025-01-01T10:00:00"), _utc("2025-01-01T10:00:06"))
    assert turn.latency_ms == 6000.0
    (event,) = run.events
    assert (event.kind, event.value, event.conversation_id) == ("task_success", True, "run-1")
    assert event.id == "run-1/task_success"
    assert event.attributes == {"task_id": "t1", "trial": 0}


def test_step_log_failures_unix_times_and_naive_times() -> None:
    convs = {c.id: c for c in StepLogAdapter().read(STEPLOG / "runs.jsonl") if isinstance(c, Conversation)}
    (turn,) = convs["run-2"].turns
    thought, call = turn.spans
    assert (thought.kind, thought.output) == ("reasoning", "Search first.")
    assert thought.start == datetime(2025, 1, 1, 10, 0, tzinfo=UTC)
    assert (call.status, call.error, call.duration_ms) == ("error", "timeout", 30000.0)
    assert turn.answer is None and turn.delivery == "failed_error"
    assert convs["run-2"].events[0].value is False
    (turn14,) = convs["run-14"].turns
    (span,) = turn14.spans
    assert span.start == _utc("2025-01-01T10:00:00") and span.tokens.total == 12
    assert turn14.answer == "Done." and convs["run-14"].events == ()


def test_step_log_array_converts_offsets_to_utc_and_rejects_unknown_fields() -> None:
    path = STEPLOG / "runs.json"
    assert detect_layout(read_head(path)) == "array"
    convs, bad = _split(list(StepLogAdapter().read(path)))
    assert [(q.location, q.field) for q in bad] == [("record 1", "steps[0].colour")]
    (turn,) = convs[0].turns
    assert turn.spans[0].start == _utc("2025-02-01T06:00:00")
    assert turn.answer == "" and turn.delivery == "failed_empty"


def test_step_log_empty_run_has_unknown_delivery() -> None:
    conv = steplog_conversation({"run_id": 7, "steps": []})
    assert conv.id == "7" and conv.turns[0].delivery == "unknown" and conv.turns[0].spans == ()


# ---- run contract ------------------------------------------------------------------------------------------


def test_run_contract_document() -> None:
    path = STEPLOG / "contract.json"
    assert detect_layout(read_head(path)) == "document"
    (conv,) = list(RunContractAdapter().read(path))
    assert isinstance(conv, Conversation) and conv.id == "contract-7"
    assert conv.attributes["task_id"] == "refund-3" and conv.attributes["task"]["category"] == "multi_tool"
    (turn,) = conv.turns
    assert turn.request == "Refund order 42 if it arrived damaged."
    assert turn.answer == "I could not issue the refund; a human agent will follow up." and turn.delivery == "delivered"
    thought, get_order, refund, final = turn.spans
    assert (thought.kind, thought.output) == ("reasoning", "Check the order first.")
    assert (get_order.kind, get_order.name, get_order.input, get_order.output) == (
        "tool", "get_order", '{"order_id":42}', '{"status":"damaged"}')
    assert get_order.end == _utc("2025-03-01T09:00:01.250")
    assert (refund.status, refund.error) == ("error", "refund service unavailable")
    assert (final.kind, final.name, final.output) == ("llm", "final_output", turn.answer)
    assert (turn.start, turn.end) == (_utc("2025-03-01T09:00:00"), _utc("2025-03-01T09:00:04"))
    assert turn.latency_ms == 4000.0
    assert [(e.kind, e.value) for e in conv.events] == [("task_success", False), ("task_reward", 0.25)]
    assert conv.attributes["outcome"] == {"success": False, "reward": 0.25, "reason": "refund not issued"}


def test_run_contract_lines_quarantine_each_bad_contract_by_field() -> None:
    convs, bad = _split(list(RunContractAdapter().read(STEPLOG / "contracts.jsonl")))
    assert [(q.location, q.field) for q in bad] == [
        ("line 2", "steps[0].tool"),
        ("line 3", "steps[0].timestamp"),
        ("line 4", "run_id"),
        ("line 5", "outcome.reward"),
        ("line 6", "steps[0].type"),
        ("line 7", "steps[1].timestamp"),
        ("line 8", "steps[0].duration_ms"),
        ("line 9", "id"),
    ]
    assert "'thought', 'tool_call' or 'final_output'" in bad[4].message
    assert [c.id for c in convs] == ["k-1", "k-10"]
    ok, unanswered = convs
    assert ok.turns[0].request == "Say hi." and ok.turns[0].delivery == "delivered"
    assert [(e.kind, e.value) for e in ok.events] == [("task_success", True)]
    assert unanswered.turns[0].answer is None and unanswered.turns[0].delivery == "failed_empty"


def test_run_contract_needs_final_output_text() -> None:
    with pytest.raises(RecordProblem) as e:
        contract_conversation({"run_id": "x", "steps": [{"type": "final_output"}]})
    assert e.value.field == "steps[0].content"


# ---- sniffing ----------------------------------------------------------------------------------------------


def test_sniff_rules_separate_step_logs_contracts_and_chats() -> None:
    steplog = {"run_id": "r", "steps": [{"index": 0, "type": "tool_call", "name": "t", "started_at": "2025-01-01"}]}
    contract = {"run_id": "r", "steps": [{"type": "tool_call", "tool": "t", "arguments": {}}]}
    assert looks_like_steplog(steplog) and not looks_like_contract(steplog)
    assert looks_like_contract(contract) and not looks_like_steplog(contract)
    assert looks_like_contract({"contract_id": "c", "steps": []})
    assert looks_like_steplog({"run_id": "r", "steps": []}) and not looks_like_contract({"run_id": "r", "steps": []})
    chat = {"messages": [{"role": "user", "content": "x"}], "steps": []}
    assert not looks_like_steplog(chat | {"run_id": "r"}) and not looks_like_contract(chat)


def test_sniff_reads_a_run_cut_short_by_the_head(tmp_path: Path) -> None:
    steps = [{"index": i, "type": "model_call", "output": "x" * 500, "started_at": "2025-01-01T00:00:00Z",
              "duration_ms": 1} for i in range(300)]
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"run_id": "long", "steps": steps}) + "\n")
    head = read_head(path)
    assert len(head) == 65536
    assert StepLogAdapter().sniff(head, path) and not RunContractAdapter().sniff(head, path)
    (conv,) = list(StepLogAdapter().read(path))
    assert len(conv.turns[0].spans) == 300
