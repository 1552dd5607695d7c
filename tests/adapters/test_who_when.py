"""The Who&When adapter: both log styles, the failure labels as annotation events, a graded record as a finished
task, sniffing that neither steals nor is stolen, bad records quarantined with their field; and the real benchmark
when present."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_factory.adapters.base import HEAD_BYTES, Quarantine, detect, read_head
from agent_factory.adapters.chat import OpenAIChatAdapter, TauBenchAdapter
from agent_factory.adapters.model import TASK_FINISHED, Conversation
from agent_factory.adapters.steplog import RunContractAdapter, StepLogAdapter
from agent_factory.adapters.who_when import WhoWhenAdapter
from tests.conftest import FIXTURES, shared_data

ALGORITHM: dict[str, Any] = {
    "is_correct": False, "question": "How many clients live on even-numbered streets?", "question_ID": "q-1",
    "level": "2", "ground_truth": "8",
    "history": [
        {"content": "Plan: load the sheet and count.", "role": "assistant", "name": "Excel_Expert"},
        {"content": "exitcode: 0 (execution succeeded)\nCode output: 4\n", "role": "user",
         "name": "Computer_terminal"},
        {"content": "exitcode: 1 (execution failed)\nTraceback ...", "role": "user", "name": "Computer_terminal"},
        {"content": "The answer is 4.", "role": "user", "name": "DataVerification_Expert"},
        {"content": "TERMINATE", "role": "user", "name": "DataVerification_Expert"},
    ],
    "mistake_agent": "Excel_Expert", "mistake_step": "0", "mistake_reason": "Ignored odd address formats.",
    "system_prompt": {"Excel_Expert": "You are an Excel expert.", "DataVerification_Expert": "Verify."},
}
HAND: dict[str, Any] = {
    "history": [
        {"content": "Where can I take martial arts classes near the NYSE?\n", "role": "human"},
        {"content": "Initial plan: search the web.", "role": "Orchestrator (thought)"},
        {"content": "Search for martial arts schools near 11 Wall St.", "role": "Orchestrator (-> WebSurfer)"},
        {"content": "I typed 'martial arts near NYSE' into the search bar.", "role": "WebSurfer"},
        {"content": "No agent selected.\nFINAL ANSWER: Renzo Gracie Jiu-Jitsu",
         "role": "Orchestrator (termination condition)"},
    ],
    "question": "Where can I take martial arts classes near the NYSE?", "ground_truth": "Renzo Gracie Jiu-Jitsu",
    "is_corrected": False, "question_ID": "q-2", "mistake_agent": "WebSurfer", "mistake_step": "3",
    "mistake_reason": "Clicked an irrelevant site.",
}


def write(tmp_path: Path, name: str, record: Any, *, indent: int | None = 4) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(record, indent=indent), encoding="utf-8")
    return path


def read_one(path: Path) -> Conversation:
    [conv] = list(WhoWhenAdapter().read(path))
    assert isinstance(conv, Conversation)
    return conv


def test_algorithm_generated_log_is_one_turn_of_agent_spans(tmp_path: Path) -> None:
    path = write(tmp_path, "1.json", ALGORITHM)
    assert detect(path).name == "who-and-when"
    conv = read_one(path)
    [turn] = conv.turns
    assert conv.user_id is None and turn.user_id is None and conv.attributes["user_identity"] == "none"
    assert turn.request == ALGORITHM["question"] and turn.attributes["request_source"] == "question"
    # The final answer is the last message that says more than the termination token; the log shows the end.
    assert (turn.answer, turn.delivery, turn.attributes["answer_message_index"]) == ("The answer is 4.", "delivered", 3)
    assert [(s.name, s.kind, s.attributes["message_index"]) for s in turn.spans] == [
        ("Excel_Expert", "llm", 0), ("Computer_terminal", "tool", 1), ("Computer_terminal", "tool", 2),
        ("DataVerification_Expert", "llm", 3), ("DataVerification_Expert", "llm", 4)]
    assert [s.status for s in turn.spans[1:3]] == ["ok", "error"]
    assert turn.spans[2].error == "exitcode: 1 (execution failed)"
    assert conv.attributes["agents"] == ["Computer_terminal", "DataVerification_Expert", "Excel_Expert"]
    assert set(conv.attributes["system_prompts"]) == {"Excel_Expert", "DataVerification_Expert"}
    assert conv.attributes["system_prompts"]["Excel_Expert"]["chars"] == len("You are an Excel expert.")


def test_failure_labels_are_outcome_events_tied_to_the_step(tmp_path: Path) -> None:
    conv = read_one(write(tmp_path, "1.json", ALGORITHM))
    events = {e.kind: e for e in conv.events}
    assert set(events) == {"mistake_agent", "mistake_step", "mistake_reason"}
    assert all(e.conversation_id == conv.id and e.user_id is None for e in events.values())
    step_span = conv.turns[0].spans[0]
    assert events["mistake_agent"].value == "Excel_Expert"
    assert events["mistake_agent"].attributes == {"message_index": 0, "span_id": step_span.id,
                                                  "agent_at_step": "Excel_Expert", "matches_step": True}
    assert events["mistake_step"].value == 0.0
    assert events["mistake_step"].attributes["span_id"] == step_span.id
    assert events["mistake_reason"].value == "Ignored odd address formats."


def test_failure_labels_are_annotations_not_outcomes(tmp_path: Path) -> None:
    # A step index, an agent's name and a reason label the run; none says how the task went.
    conv = read_one(write(tmp_path, "1.json", ALGORITHM))
    assert {e.kind: e.is_outcome for e in conv.events} == {
        "mistake_agent": False, "mistake_step": False, "mistake_reason": False}


@pytest.mark.parametrize(("record", "finished"), [
    (ALGORITHM, True),                                                          # is_correct: graded
    (HAND, True),                                                               # is_corrected: graded
    ({k: v for k, v in ALGORITHM.items() if k != "is_correct"}, False),        # no verdict: nothing says so
])
def test_a_graded_record_is_a_finished_task(tmp_path: Path, record: dict[str, Any], finished: bool) -> None:
    conv = read_one(write(tmp_path, "r.json", record))
    assert conv.attributes.get(TASK_FINISHED, False) is finished


def test_hand_crafted_log_reads_agent_and_channel_from_the_role(tmp_path: Path) -> None:
    conv = read_one(write(tmp_path, "h.json", HAND))
    [turn] = conv.turns
    assert turn.attributes["request_message_index"] == 0  # the person's message is the request, not a span
    assert [(s.name, s.kind, s.attributes.get("channel"), s.attributes.get("recipient")) for s in turn.spans] == [
        ("Orchestrator", "reasoning", "thought", None), ("Orchestrator", "agent", "-> WebSurfer", "WebSurfer"),
        ("WebSurfer", "llm", None, None), ("Orchestrator", "agent", "termination condition", None)]
    assert turn.answer == HAND["history"][4]["content"] and turn.delivery == "delivered"
    step = {e.kind: e for e in conv.events}["mistake_step"]
    assert step.attributes["span_id"] == turn.spans[2].id and turn.spans[2].attributes["message_index"] == 3


def test_a_log_cut_before_the_end_has_an_unknown_delivery(tmp_path: Path) -> None:
    rec = {**HAND, "history": HAND["history"][:4]}
    turn = read_one(write(tmp_path, "h.json", rec)).turns[0]
    assert (turn.answer, turn.delivery) == (HAND["history"][3]["content"], "unknown")


def test_ids_are_stable_and_differ_between_runs_of_one_question(tmp_path: Path) -> None:
    a = read_one(write(tmp_path, "a.json", ALGORITHM)).id
    again = read_one(write(tmp_path, "b.json", ALGORITHM, indent=None)).id
    other = read_one(write(tmp_path, "c.json", {**ALGORITHM, "history": ALGORITHM["history"][:3]})).id
    assert a == again != other and a.startswith("whowhen-")


def test_sniffing_takes_these_logs_and_no_others(tmp_path: Path) -> None:
    ww = WhoWhenAdapter()
    for rec, name in ((ALGORITHM, "a.json"), (HAND, "h.json")):
        path = write(tmp_path, name, rec)
        head = read_head(path)
        assert ww.sniff(head, path)
        for other in (OpenAIChatAdapter(), TauBenchAdapter(), StepLogAdapter(), RunContractAdapter()):
            assert not other.sniff(head, path), other.name
    # A hand-crafted log whose head ends inside its long history (its other keys come after it).
    long = {**HAND, "history": HAND["history"] * 400}
    path = write(tmp_path, "long.json", long)
    assert path.stat().st_size > HEAD_BYTES and detect(path).name == "who-and-when"
    # Other formats' files are not taken.
    for f in sorted(FIXTURES.rglob("*.json*")):
        assert not ww.sniff(read_head(f), f), f
    chat = write(tmp_path, "chat.json", {"history": [{"role": "user", "content": "hi"}], "messages": []})
    assert not ww.sniff(read_head(chat), chat)
    plain = write(tmp_path, "plain.json", {"history": [{"role": "user", "content": "hi"}]})
    assert not ww.sniff(read_head(plain), plain)  # a whole record without any Who&When key


@pytest.mark.parametrize(("change", "field"), [
    ({"history": "none"}, "history"),
    ({"question": None}, "question"),
    ({"mistake_step": "twelve"}, "mistake_step"),
    ({"mistake_step": "99"}, "mistake_step"),
    ({"mistake_agent": 7}, "mistake_agent"),
    ({"history": [{"content": "x"}]}, "history[0].role"),
    ({"history": [{"content": 5, "role": "assistant", "name": "A"}]}, "history[0].content"),
    ({"system_prompt": ["x"]}, "system_prompt"),
])
def test_bad_records_are_quarantined_with_their_field(tmp_path: Path, change: dict[str, Any], field: str) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(ALGORITHM) + "\n" + json.dumps({**ALGORITHM, **change}) + "\n", encoding="utf-8")
    good, bad = list(WhoWhenAdapter().read(path))
    assert isinstance(good, Conversation) and isinstance(bad, Quarantine)
    assert (bad.location, bad.field) == ("line 2", field)


@pytest.mark.realdata
def test_the_real_benchmark_reads_every_log_with_its_labels() -> None:
    root = shared_data("who-and-when")
    files = sorted(root.glob("*/*.json"))
    assert len(files) == 184
    ids = set()
    for f in files:
        assert detect(f).name == "who-and-when", f
        conv = read_one(f)
        raw = json.loads(f.read_text(encoding="utf-8"))
        ids.add(conv.id)
        [turn] = conv.turns
        assert turn.request == raw["question"] and turn.answer
        events = {e.kind: e for e in conv.events}
        assert events["mistake_agent"].value == raw["mistake_agent"]
        step = int(raw["mistake_step"])
        assert events["mistake_step"].value == step
        at = next(s for s in turn.spans if s.attributes["message_index"] == step)
        assert events["mistake_step"].attributes["span_id"] == at.id
        assert events["mistake_reason"].value == raw["mistake_reason"]
        humans = sum(1 for m in raw["history"] if m["role"] == "human")
        assert len(turn.spans) == len(raw["history"]) - humans
    assert len(ids) == 184  # the benchmark repeats question ids; the runs stay apart
