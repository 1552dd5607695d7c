"""The airline pack's tool declarations (`tools:`) and its tool-use clauses, checked against the policy they restate
and against the real tau-bench airline trajectories (skipped when ../shared/data is absent): every declared tool is
one the agent calls, and every precondition reads fields the tool outputs carry, so it decides real calls."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from agent_factory.adapters.chat import TauBenchAdapter
from agent_factory.adapters.model import Conversation
from agent_factory.evaluators.components.conduct.tooluse.state import at_path, entity, timeline
from agent_factory.knowledge_packs import load_pack
from agent_factory.knowledge_packs.tools import Precondition
from tests.conftest import shared_data

AIRLINE = load_pack("airline")
TOOLS = AIRLINE.tools
DATA = ("tau-bench-airline-gpt4o", "gpt-4o-airline.json")

# The contract between the pack and the rules (clause id -> trigger, obligation rule).
WIRING = {
    "write_preconditions_hold": ("tool_names", "conduct.write_preconditions_hold"),
    "refusal_justified": ("conduct.refused_write_request", "conduct.refusal_justified"),
    "claims_grounded": ("conduct.states_amounts_or_terms", "conduct.claims_grounded"),
    "write_arguments_grounded": ("tool_names", "conduct.write_arguments_grounded"),
    "looked_before_refusing": ("conduct.deflected_own_records", "conduct.looked_before_refusing"),
    "did_what_was_agreed": ("conduct.agreed_action", "conduct.agreed_action_done"),
}


def test_the_tool_use_clauses_are_wired_as_agreed() -> None:
    for cid, (trigger, obligation) in WIRING.items():
        c = AIRLINE.clause(cid)
        assert c is not None, cid
        assert c.layer == "conversation" and c.kind in ("must", "before"), cid
        assert c.source.startswith("tau-bench airline policy"), cid
        assert c.obligation.rule == obligation, cid
        if trigger == "tool_names":
            assert c.trigger.tool_names and set(c.trigger.tool_names) <= set(TOOLS.write), cid
        else:
            assert c.trigger.rule == trigger, cid
    # The writes are those the confirmation clause names; the preconditions clause fires on every constrained write.
    confirm = AIRLINE.clause("confirm_before_write")
    assert confirm is not None and set(confirm.trigger.tool_names) == set(TOOLS.write)
    wpc = AIRLINE.clause("write_preconditions_hold")
    assert wpc is not None
    assert set(wpc.trigger.tool_names) == {t for p in TOOLS.preconditions for t in p.tools}
    args = AIRLINE.clause("write_arguments_grounded")
    assert args is not None and set(args.trigger.tool_names) == set(TOOLS.write)


def test_every_write_has_a_request_shape_in_english_and_chinese() -> None:
    intents = {i.tool: [re.compile(p, re.I) for p in i.patterns] for i in TOOLS.intents}
    assert set(intents) == set(TOOLS.write)
    requests = {
        "cancel_reservation": ("I'd like to cancel my reservation ABC123.", "我想取消这个预订"),
        "update_reservation_flights": ("Can I change my flight to the 20th?", "我要改签航班"),
        "update_reservation_baggages": ("I need to add two checked bags.", "我想加一件行李"),
        "update_reservation_passengers": ("Please change the passenger name to Mia Li.", "我要修改乘客姓名"),
        "book_reservation": ("I want to book a flight from JFK to SEA.", "我想订一张机票"),
        "send_certificate": ("I expect some compensation for this.", "你们应该给我补偿"),
    }
    for tool, examples in requests.items():
        for text in examples:
            assert any(p.search(text) for p in intents[tool]), (tool, text)
    # A complaint that the airline cancelled is not a request to cancel.
    assert not any(p.search("My flight was cancelled yesterday.") for p in intents["cancel_reservation"])
    assert not any(p.search("我的航班被取消了") for p in intents["cancel_reservation"])
    subjects = [re.compile(p, re.I) for p in TOOLS.subject_patterns]
    for text in ("What is the status of my booking?", "how many bags does my reservation include",
                 "my user id is sofia_kim_7287", "我的预订是什么时候？"):
        assert any(p.search(text) for p in subjects), text


def test_identifier_shapes() -> None:
    ids = {name: re.compile(p) for name, p in TOOLS.id_patterns.items()}
    assert ids["reservation"].fullmatch("OI5L9G") and ids["reservation"].fullmatch("AQLBTL")
    assert not ids["reservation"].search("flight HAT017")  # a flight number is not a reservation
    assert ids["flight"].fullmatch("HAT017") and ids["user"].fullmatch("sofia_kim_7287")
    assert ids["payment"].fullmatch("gift_card_7091239") and ids["payment"].fullmatch("certificate_8544743")


@pytest.mark.realdata
def test_now_is_the_time_the_policy_states() -> None:
    policy = shared_data("tau-bench-policies", "airline-policy.md").read_text(encoding="utf-8")
    m = re.search(r"current time is (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})", policy)
    assert m is not None and TOOLS.now == datetime.fromisoformat(m.group(1))
    # The policy's amounts: the bag fee, the insurance and the certificates per passenger.
    for amount in re.findall(r"(\d+) dollars|\$(\d+) times", policy):
        assert float(next(a for a in amount if a)) in TOOLS.constants


# ---- against the real trajectories ---------------------------------------------------------------------------------


def _records() -> list[dict[str, Any]]:
    return list(json.loads(shared_data(*DATA).read_text(encoding="utf-8")))


def _outputs_by_tool(records: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Every JSON tool output of the data, by the tool that returned it (the raw records, not the adapter)."""
    out: dict[str, list[Any]] = {}
    for rec in records:
        names: dict[str, str] = {}
        for m in rec["traj"]:
            for c in m.get("tool_calls") or []:
                names[c["id"]] = c["function"]["name"]
            if m["role"] == "tool":
                try:
                    value = json.loads(m["content"])
                except ValueError:
                    continue
                out.setdefault(names.get(m.get("tool_call_id"), "?"), []).append(value)
    return out


def _objects_with(value: Any, key: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        if key in value:
            found.append(value)
        for v in value.values():
            found += _objects_with(v, key)
    elif isinstance(value, list):
        for v in value:
            found += _objects_with(v, key)
    return found


@pytest.mark.realdata
def test_every_declared_tool_is_called_in_the_data() -> None:
    called = Counter(c["function"]["name"] for rec in _records() for m in rec["traj"]
                     for c in m.get("tool_calls") or [])
    missing = [t for t in (*TOOLS.read, *TOOLS.write) if called[t] == 0]
    assert not missing, f"declared tools no trajectory calls: {missing}"
    # And every tool the agent calls that changes the database is declared a write.
    assert {"book_reservation", "cancel_reservation", "send_certificate"} <= set(TOOLS.write)


@pytest.mark.realdata
def test_every_precondition_field_is_in_some_output_of_its_entity() -> None:
    outputs = _outputs_by_tool(_records())
    for p in TOOLS.preconditions:
        # The entity as a read tool shows it (a write's output may echo it, but the agent must have looked).
        entities = [o for tool in TOOLS.read for v in outputs.get(tool, []) for o in _objects_with(v, p.entity_key)]
        assert entities, f"{p.id}: no read tool's output has an object with key {p.entity_key!r}"
        for test in (*p.all_of, *p.any_of):
            assert any(at_path(e, test.field) for e in entities), f"{p.id}: no {p.entity_key} object has {test.field}"


def _decided_calls(p: Precondition, convs: list[Conversation]) -> int:
    """Write calls of `p.tools` whose entity an earlier output showed with every tested field (and argument)."""
    n = 0
    for conv in convs:
        steps = timeline(conv)
        for s in steps:
            if s.kind != "call" or s.name not in p.tools or s.failed or s.args is None:
                continue
            prefix, _, key = p.entity_argument.rpartition("[].")
            elements = at_path(s.args, prefix + "[]") if prefix else [s.args]
            for element in elements:
                ids = at_path(element, key or p.entity_argument)
                found = entity(steps, s.position, key=p.entity_key, value=ids[0]) if ids else None
                if found is None:
                    continue
                tests = (*p.all_of, *p.any_of)
                if all(at_path(found[1], t.field) for t in tests) and all(
                        t.argument is None or at_path(s.args, t.argument) for t in tests):
                    n += 1
                    break
    return n


@pytest.mark.realdata
def test_every_precondition_decides_real_write_calls() -> None:
    convs = [c for c in TauBenchAdapter().read(Path(shared_data(*DATA))) if isinstance(c, Conversation)]
    decided = {p.id: _decided_calls(p, convs) for p in TOOLS.preconditions}
    print(decided)
    assert all(n > 0 for n in decided.values()), decided
