"""The openai-chat and tau-bench adapters: real tau-bench data, hand-written fixtures with bad records, streaming."""

from __future__ import annotations

import hashlib
import json
import shutil
import tracemalloc
from pathlib import Path

import pytest

from agent_factory.adapters.base import Quarantine, detect, get_adapter, read_head
from agent_factory.adapters.chat import OpenAIChatAdapter, TauBenchAdapter, is_message
from agent_factory.adapters.chat_io import SeenIds, detect_layout, dotted, first_record
from agent_factory.adapters.chat_messages import content_text, looks_like_error
from agent_factory.adapters.model import Conversation
from agent_factory.adapters.steplog import RunContractAdapter, StepLogAdapter
from agent_factory.evaluators.provenance.endings import classify
from agent_factory.knowledge_packs import load_pack
from tests.conftest import FIXTURES, shared_data

CHAT = FIXTURES / "chat"
TAU = ("tau-bench-airline-gpt4o", "gpt-4o-airline.json")


def _split(items: list) -> tuple[list[Conversation], list[Quarantine]]:
    convs = [i for i in items if isinstance(i, Conversation)]
    bad = [i for i in items if isinstance(i, Quarantine)]
    assert len(convs) + len(bad) == len(items)
    return convs, bad


# ---- real data --------------------------------------------------------------------------------------------


@pytest.mark.realdata
def test_tau_bench_real_file_reads_every_trajectory_with_its_reward() -> None:
    path = shared_data(*TAU)
    convs, bad = _split(list(TauBenchAdapter().read(path)))
    assert bad == []
    assert len(convs) == 128
    events = [e for c in convs for e in c.events]
    assert len(events) == 128
    assert all(e.kind == "task_reward" and e.conversation_id == c.id for c in convs for e in c.events)
    assert sum(e.value for e in events) == 53.0
    raw = json.loads(path.read_text())  # the test's own independent reading of the file
    kept = [(c.attributes["task_id"], c.attributes["trial"]) for c in convs]
    assert kept == [(r["task_id"], r["trial"]) for r in raw]
    assert [c.id for c in convs] == [f"tau-{r['task_id']}-{r['trial']}" for r in raw]
    assert [c.user_id for c in convs] == [r["info"]["task"]["user_id"] for r in raw]
    assert [c.attributes["termination"] for c in convs] == [r["info"]["source"] for r in raw]
    assert sum(not c.attributes["reward_info_present"] for c in convs) == 3


@pytest.mark.realdata
def test_tau_bench_every_tool_span_carries_its_tool_message() -> None:
    path = shared_data(*TAU)
    raw = {f"tau-{r['task_id']}-{r['trial']}": r["traj"] for r in json.loads(path.read_text())}
    n_tool = 0
    for conv in TauBenchAdapter().read(path):
        traj = raw[conv.id]
        expected_results = [m for m in traj if m["role"] == "tool"]
        spans = [s for t in conv.turns for s in t.spans if s.kind == "tool"]
        assert len(spans) == len(expected_results)
        for span in spans:
            result = traj[span.attributes["result_message_index"]]
            assert result["role"] == "tool"
            assert result["tool_call_id"] == span.attributes["tool_call_id"]
            assert span.output == result["content"]
            issuer = traj[span.attributes["message_index"]]
            call = issuer["tool_calls"][span.attributes["tool_call_index"]]
            assert span.input == call["function"]["arguments"] and span.name == call["function"]["name"]
            assert span.parent_id == f"{conv.id}/m{span.attributes['message_index']}"
            assert (span.status == "error") == result["content"].startswith("Error")
            n_tool += 1
    assert n_tool == 723


@pytest.mark.realdata
def test_tau_bench_turns_follow_user_messages() -> None:
    path = shared_data(*TAU)
    raw = json.loads(path.read_text())[0]
    user_count = sum(1 for m in raw["traj"] if m["role"] == "user")
    conv = next(iter(TauBenchAdapter().read(path)))
    assert isinstance(conv, Conversation) and conv.id == "tau-3-0"
    assert len(conv.turns) == user_count == 11
    assert [t.attributes["request_message_index"] for t in conv.turns] == [
        i for i, m in enumerate(raw["traj"]) if m["role"] == "user"
    ]
    policy = raw["traj"][0]["content"]
    assert conv.attributes["system_prompt_sha256"] == hashlib.sha256(policy.encode()).hexdigest()
    assert conv.attributes["system_prompt_chars"] == len(policy)
    assert all(policy not in (t.request or "") for t in conv.turns)
    # The episode ends with the simulated user's ###STOP###: nothing after it to judge.
    assert conv.turns[-1].request.endswith("###STOP###") and conv.turns[-1].delivery == "unknown"


# ---- chat fixtures ----------------------------------------------------------------------------------------


def test_chat_mixed_file_quarantines_each_bad_record_by_line_and_field() -> None:
    path = CHAT / "mixed.jsonl"
    convs, bad = _split(list(OpenAIChatAdapter().read(path)))
    assert [(q.location, q.field) for q in bad] == [
        ("line 3", None),
        ("line 4", "messages"),
        ("line 5", "messages[1].role"),
        ("line 6", "messages[0].content"),
        ("line 7", "messages[2].tool_call_id"),
        ("line 8", "messages[1].tool_calls[0].id"),
        ("line 9", "messages[1].tool_calls[0].function.arguments"),
        ("line 10", "id"),
        ("line 12", None),
        ("line 14", "messages[1].content[0].text"),
        ("line 16", "messages[0].role"),
    ]
    assert all(q.source == str(path) for q in bad)
    by_line = {q.location: q.message for q in bad}
    assert "valid roles: system, developer, user, assistant, tool" in by_line["line 5"]
    assert "'bot'" in by_line["line 5"] and "no role" in by_line["line 16"]
    assert "matches no earlier tool call" in by_line["line 7"]
    assert "already used at line 1" in by_line["line 10"]
    assert "JSON-encoded string" in by_line["line 9"]
    assert [c.id for c in convs] == ["c1", convs[1].id, "c11", "c13", "c15"]
    assert convs[1].id.startswith("chat-")


def test_chat_conversation_turns_spans_and_system_hash() -> None:
    conv = next(i for i in OpenAIChatAdapter().read(CHAT / "mixed.jsonl") if isinstance(i, Conversation))
    assert conv.id == "c1" and conv.user_id == "u1"
    assert conv.attributes["session_id"] == "s1" and conv.attributes["metadata"] == {"channel": "web"}
    assert conv.attributes["system_prompt_sha256"] == hashlib.sha256(b"You are a travel agent.").hexdigest()
    assert conv.attributes["system_prompt_chars"] == len("You are a travel agent.")
    first, second = conv.turns
    assert (first.id, first.index, first.conversation_id, first.user_id) == ("c1/turn-0", 0, "c1", "u1")
    assert first.request == "Find my booking ABC123."
    assert first.answer == "Your booking ABC123 is on flight HAT001." and first.delivery == "delivered"
    call_llm, tool, answer_llm = first.spans
    assert (call_llm.kind, call_llm.output, call_llm.attributes["message_index"]) == ("llm", None, 2)
    assert call_llm.attributes["tool_calls"] == [{"id": "call_1", "name": "get_booking"}]
    assert (tool.kind, tool.name, tool.parent_id, tool.trace_id) == ("tool", "get_booking", call_llm.id, first.id)
    assert tool.input == '{"id": "ABC123"}'
    assert tool.output == '{"id": "ABC123", "flight": "HAT001"}' and tool.status == "ok"
    assert tool.attributes["result_message_index"] == 3 and tool.attributes["arguments_valid_json"] is True
    assert answer_llm.attributes["message_index"] == 4 and answer_llm.parent_id is None
    assert second.request == "Thanks.\nBye." and second.answer == "Goodbye!"
    assert first.attributes["request_message_index"] == 1 and first.attributes["answer_message_index"] == 4
    ids = [s.id for t in conv.turns for s in t.spans]
    assert len(ids) == len(set(ids))


def test_chat_delivery_states_and_tool_errors() -> None:
    convs = {c.id: c for c in OpenAIChatAdapter().read(CHAT / "mixed.jsonl") if isinstance(c, Conversation)}
    # c11: the turn ends on a tool result whose JSON reports an error: no answer reached the user.
    (turn,) = convs["c11"].turns
    assert turn.delivery == "failed_empty" and turn.answer == "Checking."
    tool = turn.spans[1]
    assert tool.status == "error" and tool.error == '{"error": "no seats"}'
    assert tool.attributes["arguments_valid_json"] is False
    # c13: an assistant greeting before the first request is a preamble turn; a request with no reply is unknown.
    pre, asked, last = convs["c13"].turns
    assert pre.request is None and pre.attributes["preamble"] is True and pre.delivery == "unknown"
    assert asked.request == "What is this?" and asked.delivery == "delivered"
    assert asked.attributes["request_non_text_parts"] == 1
    assert last.request == "Thanks" and last.answer is None and last.delivery == "unknown" and last.spans == ()
    # c15: only a system prompt: no turns, but the prompt's hash is kept.
    assert convs["c15"].turns == () and convs["c15"].attributes["system_messages"] == 1


def test_chat_pretty_printed_single_conversation_matches_results_by_call_id() -> None:
    path = CHAT / "conversation.json"
    assert detect_layout(read_head(path), is_item=is_message) == "document"
    (conv,) = list(OpenAIChatAdapter().read(path))
    assert isinstance(conv, Conversation)
    (turn,) = conv.turns
    llm, paris, lyon, final = turn.spans
    assert (paris.input, paris.output, paris.status) == ('{"city": "Paris"}', "18C, sunny", "ok")
    assert (lyon.output, lyon.status, lyon.error) == ("Error: city not supported", "error", "Error: city not supported")
    assert paris.parent_id == lyon.parent_id == llm.id
    assert turn.answer == "Paris: 18C and sunny." and turn.delivery == "delivered"


def test_chat_array_of_records_mixes_lists_and_objects() -> None:
    path = CHAT / "records.json"
    assert detect_layout(read_head(path), is_item=is_message) == "array"
    convs, bad = _split(list(OpenAIChatAdapter().read(path)))
    assert [(q.location, q.field) for q in bad] == [("record 1", "messages")]
    assert convs[0].id == "101" and convs[0].attributes["id_source"] == "id"
    assert convs[1].attributes["id_source"] == "content"
    assert convs[1].turns[0].delivery == "failed_empty" and convs[1].turns[0].answer is None


def test_chat_ids_are_stable_and_independent_of_the_file_name(tmp_path: Path) -> None:
    copy = tmp_path / "other-name.jsonl"
    shutil.copy(CHAT / "mixed.jsonl", copy)
    once = [i for i in OpenAIChatAdapter().read(CHAT / "mixed.jsonl") if isinstance(i, Conversation)]
    again = [i for i in OpenAIChatAdapter().read(copy) if isinstance(i, Conversation)]
    assert [c.id for c in once] == [c.id for c in again]
    assert once == again


def test_chat_tool_call_ids_may_be_reused_once_answered(tmp_path: Path) -> None:
    def call(cid: str) -> dict:
        return {"role": "assistant", "content": None,
                "tool_calls": [{"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}]}

    reused = [{"role": "user", "content": "go"}, call("k"), {"role": "tool", "tool_call_id": "k", "content": "1"},
              call("k"), {"role": "tool", "tool_call_id": "k", "content": "2"}, {"role": "assistant", "content": "ok"}]
    pending = [{"role": "user", "content": "go"}, call("k"), call("k")]
    twice = [{"role": "user", "content": "go"}, call("k"), {"role": "tool", "tool_call_id": "k", "content": "1"},
             {"role": "tool", "tool_call_id": "k", "content": "again"}]
    path = tmp_path / "calls.jsonl"
    path.write_text("\n".join(json.dumps(m) for m in (reused, pending, twice)) + "\n")
    convs, bad = _split(list(OpenAIChatAdapter().read(path)))
    tools = [s for s in convs[0].turns[0].spans if s.kind == "tool"]
    assert [s.output for s in tools] == ["1", "2"] and tools[1].attributes["tool_call_id_reused"] is True
    assert [(q.location, q.field) for q in bad] == [("line 2", "[2].tool_calls[0].id"), ("line 3", "[3].tool_call_id")]
    assert "still awaits its result" in bad[0].message and "already has a result" in bad[1].message


def test_chat_truncated_array_keeps_the_records_before_the_break(tmp_path: Path) -> None:
    text = (CHAT / "records.json").read_text()
    path = tmp_path / "cut.json"
    path.write_text(text[: text.index('{"id": "r2"')] + '{"id": "r2", "messages": [')
    convs, bad = _split(list(OpenAIChatAdapter().read(path)))
    assert [c.id for c in convs] == ["101"]
    assert [(q.location, q.field) for q in bad] == [("record 1", None)]


# ---- tau-bench fixture -------------------------------------------------------------------------------------


def test_tau_fixture_rewards_terminations_and_bad_records() -> None:
    path = CHAT / "tau_small.json"
    convs, bad = _split(list(TauBenchAdapter().read(path)))
    assert [(q.location, q.field) for q in bad] == [("record 2", "reward"), ("record 3", "traj"), ("record 4", "id")]
    assert "must be a number" in bad[0].message and "already used at record 0" in bad[2].message
    assert [c.id for c in convs] == ["tau-1-0", "tau-1-1", "tau-4-2"]
    done, handed_off, unrewarded = convs
    (event,) = done.events
    assert (event.kind, event.value, event.user_id, event.id) == ("task_reward", 1.0, "ann_1", "tau-1-0/task_reward")
    assert event.attributes == {"task_id": 1, "trial": 0, "termination": "user"}
    assert [t.delivery for t in done.turns] == ["delivered", "unknown"]
    # reward_info null does not drop the reward; a transfer call ending the episode leaves no answer text.
    assert handed_off.events[0].value == 0.0 and handed_off.attributes["reward_info_present"] is False
    assert handed_off.attributes["termination"] == "transfer_to_human_agents"
    # The episode ended on a tool result: the adapter reads a stop before any answer (cut_off); the pack then
    # reads the transfer tool as a hand-off (test_a_step_limit_stop_is_cut_off_not_an_empty_answer).
    assert handed_off.turns[0].delivery == "cut_off"
    assert unrewarded.events == () and unrewarded.attributes["reward_missing"] is True
    assert unrewarded.attributes["reward"] is None


def test_a_step_limit_stop_is_cut_off_not_an_empty_answer(tmp_path: Path) -> None:
    # tau-bench ends an episode on the user's stop token, on a hand-off tool, or at the agent's step limit;
    # an episode ending on any other tool result, or on a user message without the stop token, was cut off.
    def record(task: int, *tail: dict[str, object]) -> dict[str, object]:
        head = [{"role": "system", "content": "policy"}, {"role": "user", "content": "Change my flight."}]
        return {"task_id": task, "trial": 0, "reward": 0.0, "info": {"source": "user"}, "traj": head + list(tail)}

    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_reservation_details", "arguments": "{}"}}]}
    transfer = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "transfer_to_human_agents", "arguments": "{}"}}]}
    reply = {"role": "assistant", "content": "Which reservation?"}
    path = tmp_path / "tau.json"
    path.write_text(json.dumps([
        record(1, call, {"role": "tool", "tool_call_id": "c1", "name": "get_reservation_details", "content": "{}"}),
        record(2, reply, {"role": "user", "content": "ABC123, please hurry."}),
        record(3, reply, {"role": "user", "content": "Thanks! ###STOP###"}),
        record(4, transfer, {"role": "tool", "tool_call_id": "c2", "name": "transfer_to_human_agents",
                             "content": "Transfer successful"}),
        record(5, {"role": "assistant", "content": ""}, {"role": "user", "content": "Hello?"},
               {"role": "assistant", "content": "Done."}),
    ]))
    convs, bad = _split(list(TauBenchAdapter().read(path)))
    assert bad == []
    last = {c.id: c.turns[-1].delivery for c in convs}
    assert last == {"tau-1-0": "cut_off", "tau-2-0": "cut_off", "tau-3-0": "unknown", "tau-4-0": "cut_off",
                    "tau-5-0": "delivered"}
    # Only the episode's last turn can be cut off: an empty reply the user answered stays an empty answer.
    assert convs[4].turns[0].delivery == "failed_empty"
    # The pack reads the stop token as a closing message and the transfer tool as a hand-off.
    pack = load_pack("airline")
    assert classify(convs[2].turns[-1], pack, last=True).delivery == "closing"
    assert classify(convs[3].turns[-1], pack, last=True).delivery == "handed_off"
    assert classify(convs[0].turns[-1], pack, last=True).delivery == "cut_off"


# ---- sniffing and layout -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "expected"), [
    ("chat/mixed.jsonl", "openai-chat"),
    ("chat/conversation.json", "openai-chat"),
    ("chat/records.json", "openai-chat"),
    ("chat/tau_small.json", "tau-bench"),
    ("steplog/runs.jsonl", "step-log"),
    ("steplog/runs.json", "step-log"),
    ("steplog/contract.json", "run-contract"),
    ("steplog/contracts.jsonl", "run-contract"),
])
def test_sniffing_claims_exactly_one_of_the_four_formats(name: str, expected: str) -> None:
    path = FIXTURES / name
    head = read_head(path)
    adapters = [OpenAIChatAdapter(), TauBenchAdapter(), StepLogAdapter(), RunContractAdapter()]
    assert [a.name for a in adapters if a.sniff(head, path)] == [expected]


@pytest.mark.realdata
def test_sniffing_the_real_tau_bench_file() -> None:
    path = shared_data(*TAU)
    head = read_head(path)
    adapters = [OpenAIChatAdapter(), TauBenchAdapter(), StepLogAdapter(), RunContractAdapter()]
    assert [a.name for a in adapters if a.sniff(head, path)] == ["tau-bench"]


def test_layout_detection_of_one_line_files() -> None:
    records = b'[{"messages": [{"role": "user", "content": "a"}]}, {"messages": []}]'
    messages = b'[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]'
    assert detect_layout(records, is_item=is_message) == "array"
    assert detect_layout(messages, is_item=is_message) == "lines"
    assert detect_layout(messages + b"\n" + messages + b"\n", is_item=is_message) == "lines"
    assert detect_layout(b'{"id": 1, "messages": []}\n', is_item=is_message) == "lines"
    # A head cut inside a long first line: the first element decides.
    cut = b'[{"role": "user", "content": "' + b"x" * 70000
    assert detect_layout(cut[:65536], is_item=is_message) == "lines"
    assert first_record(cut[:65536], is_item=is_message)[0]["role"] == "user"


def test_content_text_and_error_detection() -> None:
    assert content_text(None, "c") == (None, 0)
    assert content_text([{"type": "text", "text": "a"}, {"type": "input_audio"}, {"type": "text", "text": "b"}],
                        "c") == ("a\nb", 1)
    assert looks_like_error("Error: not found") and looks_like_error('{"error": "boom"}')
    assert not looks_like_error('{"error": null, "ok": true}') and not looks_like_error("No errors")
    assert not looks_like_error("") and not looks_like_error(None)


def test_dotted_paths_drop_pydantic_union_tags() -> None:
    assert dotted(("messages", 3, "tool_calls", 0, "function", "arguments")) == (
        "messages[3].tool_calls[0].function.arguments")
    assert dotted((0, "str"), "traj[2].content") == "traj[2].content[0]"
    assert dotted(("arguments", "dict[str,any]")) == "arguments"


def test_seen_ids_find_duplicates_across_table_growth() -> None:
    seen = SeenIds(slots_log2=4)
    for i in range(1000):
        assert seen.add(f"id-{i}", f"line {i + 1}") is None
    assert len(seen) == 1000
    assert seen.add("id-0", "line 5000") == "line 1"
    assert seen.add("id-999", "line 5001") == "line 1000"
    assert seen.add("id-1000", "line 5002") is None


# ---- streaming ---------------------------------------------------------------------------------------------


def _write_chat_lines(path: Path, n: int) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            messages = [
                {"role": "system", "content": "Policy text. " * 20},
                {"role": "user", "content": f"Request {i}: " + "details " * 10},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"call-{i}", "type": "function",
                     "function": {"name": "lookup", "arguments": f'{{"n": {i}}}'}},
                ]},
                {"role": "tool", "tool_call_id": f"call-{i}", "content": "result " * 10},
                {"role": "assistant", "content": f"Answer {i}: " + "words " * 12},
            ]
            f.write(json.dumps({"id": f"conv-{i}", "user_id": f"u{i % 97}", "messages": messages}) + "\n")


def _peak_while_reading(path: Path) -> tuple[int, int]:
    tracemalloc.start()
    try:
        count = sum(1 for item in OpenAIChatAdapter().read(path) if isinstance(item, Conversation))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return count, peak


@pytest.mark.slow
def test_chat_reading_memory_does_not_grow_with_the_number_of_records(tmp_path: Path) -> None:
    small, large = tmp_path / "5k.jsonl", tmp_path / "20k.jsonl"
    _write_chat_lines(small, 5_000)
    _write_chat_lines(large, 20_000)
    _peak_while_reading(CHAT / "mixed.jsonl")  # warm caches (pydantic, regexes) outside the measurement
    n_small, peak_small = _peak_while_reading(small)
    n_large, peak_large = _peak_while_reading(large)
    assert (n_small, n_large) == (5_000, 20_000)
    # Four times the records may not cost more memory: nothing of a record outlives it.
    assert peak_large <= peak_small * 1.15 + 32 * 1024, (peak_small, peak_large)
    assert peak_large < 4 * 1024 * 1024


@pytest.mark.parametrize(("name", "expected"), [
    ("chat/mixed.jsonl", "openai-chat"),
    ("chat/tau_small.json", "tau-bench"),
    ("steplog/runs.json", "step-log"),
    ("steplog/contract.json", "run-contract"),
])
def test_registry_finds_these_adapters_by_name_and_by_sniffing(name: str, expected: str) -> None:
    assert detect(FIXTURES / name).name == expected
    assert type(get_adapter(expected)).__name__ == {
        "openai-chat": "OpenAIChatAdapter", "tau-bench": "TauBenchAdapter",
        "step-log": "StepLogAdapter", "run-contract": "RunContractAdapter",
    }[expected]
