"""Tool-use grounding (`conduct.tooluse.grounding`): amounts and terms the agent states came from a tool output,
and a write's arguments were seen before the call; on small retail and airline conversations written for them,
and on the shared tau-bench airline set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_factory.adapters.chat import _tau_conversation
from agent_factory.adapters.model import Conversation, EvidencePointer
from agent_factory.evaluators.components.conduct import definitions_for
from agent_factory.evaluators.components.conduct.tooluse.grounding import (
    claims_grounded,
    states_amounts_or_terms,
    write_arguments_grounded,
)
from agent_factory.evaluators.components.conduct.tooluse.state import timeline
from agent_factory.evaluators.core.model import DataDefinition
from agent_factory.evaluators.core.registry import RuleAnswer, RuleContext, get_rule
from agent_factory.knowledge_packs import KnowledgePack, load_pack
from agent_factory.knowledge_packs.tools import ToolPolicy
from tests.conftest import shared_data

PACKS = Path(__file__).resolve().parents[2] / "knowledge_packs"

# ---- packs: the tools of the tau-bench policies, declared inline (not the pack YAML) ---------------------------

RETAIL = ToolPolicy(
    read=("find_user_id_by_email", "find_user_id_by_name_zip", "get_user_details", "get_order_details",
          "get_product_details", "list_all_product_types", "calculate", "think"),
    write=("cancel_pending_order", "modify_pending_order_address", "modify_pending_order_items",
           "modify_pending_order_payment", "modify_user_address", "return_delivered_order_items",
           "exchange_delivered_order_items"),
    terms={"order_status": ("pending", "processed", "delivered", "cancelled")},
)
AIRLINE = ToolPolicy(
    read=("get_user_details", "get_reservation_details", "search_direct_flight", "search_onestop_flight",
          "calculate", "think"),
    write=("book_reservation", "update_reservation_flights", "update_reservation_baggages", "cancel_reservation",
           "send_certificate"),
    constants=(50.0, 30.0, 100.0),
    terms={"membership": ("regular", "silver", "gold"), "cabin": ("basic_economy", "economy", "business")},
)


def pack(tools: ToolPolicy) -> KnowledgePack:
    return load_pack("default").model_copy(update={"tools": tools})


DEFINITION = DataDefinition(id="conduct.grounding_test.obligation", question="grounded?", component="conduct",
                            rule="conduct.write_arguments_grounded",
                            layer="conversation")
"""A definition of no pack clause: the write rule falls back to the pack's `tools.write`."""


def ctx(tools: ToolPolicy) -> RuleContext:
    return RuleContext(pack=pack(tools), definition=DEFINITION)


# ---- conversations: a tau-bench record, converted as ingest converts it -------------------------------------------


def call(name: str, args: dict[str, Any], k: int) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{k}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def result(name: str, output: Any, k: int) -> dict[str, Any]:
    text = output if isinstance(output, str) else json.dumps(output)
    return {"role": "tool", "tool_call_id": f"c{k}", "name": name, "content": text}


def conversation(*messages: dict[str, Any] | tuple[str, str]) -> Conversation:
    traj: list[dict[str, Any]] = [{"role": "system", "content": "policy"}]
    for m in messages:
        traj.append({"role": m[0], "content": m[1]} if isinstance(m, tuple) else m)
    return _tau_conversation({"task_id": 1, "trial": 0, "reward": 1.0, "traj": traj})


def cited(conv: Conversation, answer: RuleAnswer) -> list[str]:
    """The characters each evidence pointer cites."""
    texts: dict[tuple[str, str], str] = {}
    for t in conv.turns:
        texts[(t.id, "request")] = t.request or ""
        texts[(t.id, "answer")] = t.answer or ""
        for s in t.spans:
            texts[(s.id, "input")] = s.input or ""
            texts[(s.id, "output")] = s.output or ""
    return [texts[(p.unit_id, p.field)][p.start:p.end] for p in answer.evidence]


ORDER = {"order_id": "#W2378156", "user_id": "yusuf_rossi_9620", "status": "delivered",
         "items": [{"name": "Keyboard", "item_id": "1151293680", "price": 272.33},
                   {"name": "Thermostat", "item_id": "4983901480", "price": 262.47}],
         "payment_history": [{"transaction_type": "payment", "amount": 534.8,
                              "payment_method_id": "credit_card_9513926"}]}
USER = {"name": {"first_name": "Yusuf", "last_name": "Rossi"}, "payment_methods": {
    "credit_card_9513926": {"source": "credit_card", "last_four": "2478", "id": "credit_card_9513926"}},
    "membership": "gold"}


# ---- the trigger: states an amount or a term ----------------------------------------------------------------


def test_trigger_raised_by_amounts_and_terms_of_the_users_records_only() -> None:
    for text, says in [
        ("Your refund will be $534.80.", True),
        ("That comes to 300元 in total.", True),
        ("The thermostat costs 262.47 dollars.", True),
        ("As a gold member, you get free shipping.", True),
        ("Your membership is gold.", True),
        ("I found 2 items in order #W2378156, delivered on May 3.", False),  # counts and dates are not money
        ("Would you like economy or business?", False),  # a question states nothing
        ("If you are a gold member, I can waive the fee.", False),  # a condition states nothing
        ("You can upgrade to business.", False),  # an option, not the user's records
    ]:
        conv = conversation(("user", "Hi"), ("assistant", text))
        ans = states_amounts_or_terms(conv, ctx(AIRLINE))
        assert ans.value == ("yes" if says else "no"), text
        if says:
            assert cited(conv, ans)[0] in text


def test_trigger_keeps_the_longest_term_and_needs_declared_tools() -> None:
    conv = conversation(("user", "Hi"), ("assistant", "Your basic economy ticket cannot be changed."))
    ans = states_amounts_or_terms(conv, ctx(AIRLINE.model_copy(update={"terms": {
        "cabin": ("basic economy", "economy")}})))
    assert ans.value == "yes" and cited(conv, ans) == ["basic economy"]
    undeclared = states_amounts_or_terms(conv, ctx(ToolPolicy()))
    assert undeclared.value is None and "declares no tools" in (undeclared.reason or "")


# ---- claims grounded -----------------------------------------------------------------------------------------


def test_retail_refund_grounded_by_the_order_and_a_sum_of_its_items() -> None:
    conv = conversation(
        ("user", "I want to return the keyboard and thermostat of order #W2378156."),
        call("get_order_details", {"order_id": "#W2378156"}, 1), result("get_order_details", ORDER, 1),
        ("assistant", "The keyboard is $272.33 and the thermostat $262.47; your refund is $534.80 in total."),
    )
    ans = claims_grounded(conv, ctx(RETAIL))
    assert ans.value == "yes", ans.reason
    texts = cited(conv, ans)
    assert "$534.80" in texts and json.dumps(ORDER) in texts  # the claim and the output it came from


def test_retail_amount_only_the_user_said_is_ungrounded() -> None:
    conv = conversation(
        ("user", "I paid $600 for order #W2378156, refund it please."),
        call("get_order_details", {"order_id": "#W2378156"}, 1), result("get_order_details", ORDER, 1),
        ("assistant", "I will refund the $600 you paid to your card."),
    )
    ans = claims_grounded(conv, ctx(RETAIL))
    assert ans.value == "no"
    assert cited(conv, ans) == ["$600"]
    assert str(ans.fact).startswith("1 of 1 stated value(s)")


def test_retail_term_grounded_only_by_a_tool_output() -> None:
    said = "Your order is delivered, so it can be returned."
    looked = conversation(("user", "Can I return order #W2378156?"),
                          call("get_order_details", {"order_id": "#W2378156"}, 1),
                          result("get_order_details", ORDER, 1), ("assistant", said))
    assert claims_grounded(looked, ctx(RETAIL)).value == "yes"
    trusted = conversation(("user", "My order #W2378156 was delivered, can I return it?"), ("assistant", said))
    ans = claims_grounded(trusted, ctx(RETAIL))
    assert ans.value == "no" and cited(trusted, ans) == ["delivered"]


def test_airline_tier_contradicting_the_profile_is_ungrounded() -> None:
    profile = {**USER, "membership": "regular"}
    conv = conversation(
        ("user", "As a Gold member I want compensation. My id is yusuf_rossi_9620."),
        call("get_user_details", {"user_id": "yusuf_rossi_9620"}, 1), result("get_user_details", profile, 1),
        ("assistant", "Since you are a Gold member, I can offer a certificate of $100."),
    )
    ans = claims_grounded(conv, ctx(AIRLINE))
    assert ans.value == "no"
    assert cited(conv, ans) == ["Gold"]  # the $100 is the policy's amount: grounded


def test_airline_totals_times_passengers_and_the_agents_own_arithmetic() -> None:
    reservation = {"reservation_id": "ABC123", "cabin": "economy", "flights": [
        {"flight_number": "HAT017", "price": 523}, {"flight_number": "HAT018", "price": 410}],
        "passengers": [{"first_name": "A"}, {"first_name": "B"}]}
    conv = conversation(
        ("user", "How much did my reservation ABC123 cost?"),
        call("get_reservation_details", {"reservation_id": "ABC123"}, 1),
        result("get_reservation_details", reservation, 1),
        ("assistant", "Your flights cost $933 per passenger, $1,866 for both; with 2 bags at $50 that is $100 more, "
                      "so $1,966."),
    )
    ans = claims_grounded(conv, ctx(AIRLINE))
    assert ans.value == "yes", ans.reason


def test_an_amount_no_derivation_reaches_is_ungrounded() -> None:
    conv = conversation(
        ("user", "What is the price?"),
        call("search_direct_flight", {"origin": "JFK", "destination": "SFO", "date": "2024-05-20"}, 1),
        result("search_direct_flight", [{"flight_number": "HAT023", "prices": {"economy": 120, "business": 480}},
                                        {"flight_number": "HAT045", "available_seats": {"economy": 17},
                                         "prices": {"economy": 135}}], 1),
        ("assistant", "The flight costs $299."),
    )
    ans = claims_grounded(conv, ctx(AIRLINE))
    assert ans.value == "no" and cited(conv, ans) == ["$299"]


def test_claims_not_applicable_without_claims() -> None:
    conv = conversation(("user", "Hi"), ("assistant", "How can I help?"))
    assert claims_grounded(conv, ctx(RETAIL)).value == "not_applicable"


# ---- write arguments grounded ------------------------------------------------------------------------------


def test_retail_return_with_arguments_seen_before() -> None:
    conv = conversation(
        ("user", "Return the keyboard of order #W2378156 to my card please."),
        call("get_order_details", {"order_id": "#W2378156"}, 1), result("get_order_details", ORDER, 1),
        ("user", "Yes, confirm."),
        call("return_delivered_order_items", {"order_id": "#W2378156", "item_ids": ["1151293680"],
                                              "payment_method_id": "credit_card_9513926"}, 2),
        result("return_delivered_order_items", {**ORDER, "status": "return requested"}, 2),
    )
    ans = write_arguments_grounded(conv, ctx(RETAIL))
    assert ans.value == "yes", ans.reason
    assert cited(conv, ans)[0].startswith('{"order_id"')


def test_retail_invented_payment_method_cited_in_the_input() -> None:
    conv = conversation(
        ("user", "Return the keyboard of order #W2378156 to my card ending 2478."),
        call("get_order_details", {"order_id": "#W2378156"}, 1), result("get_order_details", ORDER, 1),
        call("return_delivered_order_items", {"order_id": "#W2378156", "item_ids": ["1151293680"],
                                              "payment_method_id": "credit_card_2478"}, 2),
        result("return_delivered_order_items", {"order_id": "#W2378156", "status": "return requested"}, 2),
    )
    ans = write_arguments_grounded(conv, ctx(RETAIL))
    assert ans.value == "no"
    assert cited(conv, ans) == ['"credit_card_2478"']
    assert "payment_method_id='credit_card_2478'" in str(ans.fact)
    # The same call rejected by the tool changed nothing: its error is Execution's span_error, not a second flag.
    rejected = conversation(*[m for m in conv_messages_of_rejected()])
    assert write_arguments_grounded(rejected, ctx(RETAIL)).value == "not_applicable"


def conv_messages_of_rejected() -> list[object]:
    return [("user", "Return the keyboard of order #W2378156 to my card ending 2478."),
            call("get_order_details", {"order_id": "#W2378156"}, 1), result("get_order_details", ORDER, 1),
            call("return_delivered_order_items", {"order_id": "#W2378156", "item_ids": ["1151293680"],
                                                  "payment_method_id": "credit_card_2478"}, 2),
            result("return_delivered_order_items", "Error: payment method not found", 2)]


def test_airline_booking_names_dates_and_sum_seen_vocabulary_skipped() -> None:
    conv = conversation(
        ("user", "Book JFK to SFO on May 20 for me, Yusuf Rossi, born 1990-02-01, id yusuf_rossi_9620."),
        call("get_user_details", {"user_id": "yusuf_rossi_9620"}, 1), result("get_user_details", USER, 1),
        call("search_direct_flight", {"origin": "JFK", "destination": "SFO", "date": "2024-05-20"}, 2),
        result("search_direct_flight", [{"flight_number": "HAT023", "origin": "JFK", "destination": "SFO",
                                         "prices": {"economy": 120}}], 2),
        ("user", "Yes, with insurance."),
        call("book_reservation", {
            "user_id": "yusuf_rossi_9620", "origin": "JFK", "destination": "SFO", "flight_type": "one_way",
            "cabin": "economy", "flights": [{"flight_number": "HAT023", "date": "2024-05-20"}],
            "passengers": [{"first_name": "Yusuf", "last_name": "Rossi", "dob": "1990-02-01"}],
            "payment_methods": [{"payment_id": "credit_card_9513926", "amount": 150}],
            "total_baggages": 1, "nonfree_baggages": 0, "insurance": "yes"}, 3),
        result("book_reservation", {"reservation_id": "NEW001"}, 3),
    )
    ans = write_arguments_grounded(conv, ctx(AIRLINE))
    assert ans.value == "yes", ans.reason  # 150 = the fare 120 + the policy's insurance 30


def test_airline_invented_amount_and_certificate() -> None:
    conv = conversation(
        ("user", "Book HAT023 on May 20 for me, id yusuf_rossi_9620."),
        call("get_user_details", {"user_id": "yusuf_rossi_9620"}, 1), result("get_user_details", USER, 1),
        call("book_reservation", {
            "user_id": "yusuf_rossi_9620", "flights": [{"flight_number": "HAT023", "date": "2024-05-20"}],
            "payment_methods": [{"payment_id": "certificate_1111111", "amount": 777}]}, 2),
        result("book_reservation", {"reservation_id": "NEW002"}, 2),
    )
    ans = write_arguments_grounded(conv, ctx(AIRLINE))
    assert ans.value == "no"
    assert cited(conv, ans) == ['"certificate_1111111"', "777"]


def test_write_rule_reads_the_clause_trigger_and_abstains_on_unreadable_arguments() -> None:
    airline = load_pack("default").model_copy(update={"tools": AIRLINE})
    conv = conversation(("user", "Cancel ABC123"), {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "cancel_reservation", "arguments": "not json"}}]},
        result("cancel_reservation", "ok", 1))
    ans = write_arguments_grounded(conv, RuleContext(pack=airline, definition=DEFINITION))
    assert ans.value is None and "unreadable" in (ans.reason or "")
    none = write_arguments_grounded(conversation(("user", "Hi"), ("assistant", "Hello")), ctx(AIRLINE))
    assert none.value == "not_applicable"
    no_writes = write_arguments_grounded(conv, ctx(ToolPolicy()))
    assert no_writes.value is None and "write tool" in (no_writes.reason or "")


def test_rules_are_registered() -> None:
    for name in ("conduct.states_amounts_or_terms", "conduct.claims_grounded", "conduct.write_arguments_grounded"):
        assert get_rule(name) is not None


# ---- the shared set -----------------------------------------------------------------------------------------


def test_tau_airline_invented_values_are_read_on_writes_that_took_effect() -> None:
    path = shared_data("tau-bench-airline-gpt4o", "gpt-4o-airline.json")
    records = json.loads(path.read_text())
    airline = load_pack(PACKS / "airline" / "pack.yaml")
    if not airline.tools.declared:
        airline = airline.model_copy(update={"tools": AIRLINE})
    clause = [d for d in definitions_for(airline) if d.id == "conduct.write_arguments_grounded.obligation"]
    context = RuleContext(pack=airline, definition=clause[0] if clause else DEFINITION)
    decided = 0
    for rec in records:
        conv = _tau_conversation(rec)
        ans = write_arguments_grounded(conv, context)
        decided += ans.value in ("yes", "no")
        if ans.value != "no":
            continue
        steps = {s.unit_id: s for s in timeline(conv)}
        for p in ans.evidence:
            assert isinstance(p, EvidencePointer) and p.field == "input"
            step = steps[p.unit_id]
            assert step.kind == "call" and step.name in airline.tools.write and not step.failed
            assert step.text[p.start:p.end].strip('"') in str(ans.fact)  # the fact names the value cited
    # The shared set's invented payment ids (tau-20-1, tau-26-0: "payment method not found") were rejected by the
    # tool: Execution's span_error, not this flag, which reads the writes that took effect.
    by_id = {f"tau-{r['task_id']}-{r['trial']}": r for r in records}
    for cid in ("tau-20-1", "tau-26-0"):
        assert write_arguments_grounded(_tau_conversation(by_id[cid]), context).value != "no"
    assert decided > 50


def test_two_spellings_of_a_term_are_one_claim() -> None:
    conv = conversation(("user", "Hi"), ("assistant", "Your reservation is basic economy."))
    ans = claims_grounded(conv, ctx(AIRLINE.model_copy(update={"terms": {
        "cabin": ("basic economy", "basic_economy", "economy")}})))
    assert ans.value == "no" and cited(conv, ans) == ["basic economy"]
    assert str(ans.fact).startswith("1 of 1 ")


def test_chinese_tier_and_amount() -> None:
    tools = AIRLINE.model_copy(update={"terms": {"membership": ("普通", "银卡", "金卡")}})
    profile = {**USER, "membership": "银卡"}
    conv = conversation(
        ("user", "我是金卡会员，用户名 yusuf_rossi_9620，航班取消了。"),
        call("get_user_details", {"user_id": "yusuf_rossi_9620"}, 1), result("get_user_details", profile, 1),
        ("assistant", "您是金卡会员，我可以为您提供100元的补偿。"),
        ("assistant", "您可以升级到金卡。"),  # a proposal, not the user's records
    )
    assert states_amounts_or_terms(conv, ctx(tools)).value == "yes"
    ans = claims_grounded(conv, ctx(tools))
    assert ans.value == "no" and cited(conv, ans) == ["金卡"]  # 100元 is the policy's amount
