"""The `retail` pack: a second tool-calling domain that needs a pack and no code. Its clauses run through the general
conduct rules on small retail conversations written for this, in the tau-bench record shape
({task_id, trial, reward, info, traj}) converted by the tau-bench adapter; each clause is raised on one and not raised
on another, and a raised one cites the characters it is about."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_factory.adapters.chat import _tau_conversation
from agent_factory.adapters.model import Conversation, EvidencePointer
from agent_factory.errors import UnknownNameError
from agent_factory.evaluators.components.conduct import definitions_for, obligation_id, trigger_id
from agent_factory.evaluators.core.model import DataDefinition
from agent_factory.evaluators.core.registry import RuleAnswer, RuleContext, get_rule
from agent_factory.knowledge_packs import KnowledgePack, load_pack
from agent_factory.knowledge_packs.loader import BUILTINS

RETAIL = load_pack("retail")
DEFS = {d.id: d for d in definitions_for(RETAIL)}

TOOL_USE = ("write_preconditions_hold", "refusal_justified", "claims_grounded", "write_arguments_grounded",
            "looked_before_refusing", "did_what_was_agreed")

# ---- the retail world the conversations read (field names as the tau-bench retail tools return them) -------------

USER_ID = "yusuf_rossi_9620"
CARD = "credit_card_9513926"
GIFT = "gift_card_5100801"
DELIVERED = "#W2378156"
PENDING = "#W4776164"
USER = {
    "user_id": USER_ID, "name": {"first_name": "Yusuf", "last_name": "Rossi"}, "email": "yusuf.rossi7301@example.com",
    "address": {"address1": "763 Broadway", "address2": "Suite 135", "city": "Philadelphia", "country": "USA",
                "state": "PA", "zip": "19122"},
    "payment_methods": {
        CARD: {"source": "credit_card", "brand": "mastercard", "last_four": "2478", "id": CARD},
        GIFT: {"source": "gift_card", "balance": 40.0, "id": GIFT},
    },
    "orders": [DELIVERED, PENDING],
}


def order(order_id: str, status: str, amount: float = 342.81) -> dict[str, Any]:
    """An order as `get_order_details` returns it."""
    return {
        "order_id": order_id, "user_id": USER_ID, "address": USER["address"], "status": status,
        "items": [{"name": "Headphones", "product_id": "6992792935", "item_id": "4202497723", "price": amount,
                   "options": {"type": "over-ear", "connectivity": "wireless", "color": "black"}}],
        "fulfillments": [], "payment_history": [
            {"transaction_type": "payment", "amount": amount, "payment_method_id": CARD}],
    }


# ---- tau-bench records, message by message ------------------------------------------------------------------------


class Episode:
    """A tau-bench trajectory under construction: messages in the OpenAI-chat shape tau-bench records."""

    def __init__(self) -> None:
        self.traj: list[dict[str, Any]] = [{"role": "system", "content": "# Retail agent policy\n(abridged)"}]
        self._calls = 0

    def user(self, text: str) -> Episode:
        self.traj.append({"role": "user", "content": text})
        return self

    def say(self, text: str) -> Episode:
        self.traj.append({"role": "assistant", "content": text})
        return self

    def call(self, name: str, args: dict[str, Any], output: Any) -> Episode:
        self._calls += 1
        cid = f"call_{self._calls}"
        self.traj.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        content = output if isinstance(output, str) else json.dumps(output)
        self.traj.append({"role": "tool", "tool_call_id": cid, "name": name, "content": content})
        return self

    def conversation(self, reward: float = 1.0) -> Conversation:
        record = {"task_id": 7, "trial": 0, "reward": reward, "info": {"task": {"user_id": USER_ID}},
                  "traj": self.traj}
        return _tau_conversation(record)


def authenticated() -> Episode:
    """The policy's opening: the user is found by email and their profile read."""
    return (Episode()
            .user("Hi, my email is yusuf.rossi7301@example.com.")
            .call("find_user_id_by_email", {"email": "yusuf.rossi7301@example.com"}, USER_ID)
            .call("get_user_details", {"user_id": USER_ID}, USER))


# ---- running a clause the way the runner's rule tier does ----------------------------------------------------------


def needs(*rules: str) -> None:
    """Skip while a rule the clause names is not registered (the tool-use rules land separately)."""
    for name in rules:
        try:
            get_rule(name)
        except UnknownNameError:
            pytest.skip(f"rule {name} is not registered yet")


def collect(defn: DataDefinition, unit: Conversation, pack: KnowledgePack) -> RuleAnswer:
    """`applies_when` first (not yes -> not_applicable), then the rule."""
    ctx = RuleContext(pack=pack, definition=defn)
    if defn.applies_when is not None:
        gate = get_rule(defn.applies_when)(unit, ctx)
        if gate.value != "yes":
            return RuleAnswer("not_applicable", reason="applies_when did not hold")
    assert defn.rule is not None
    return get_rule(defn.rule)(unit, ctx)


def clause(clause_id: str, unit: Conversation) -> tuple[RuleAnswer, RuleAnswer]:
    """The clause's trigger and obligation answers on one conversation."""
    c = RETAIL.clause(clause_id)
    assert c is not None
    needs(*(r for r in (c.trigger.rule, c.obligation.rule) if r is not None))
    return collect(DEFS[trigger_id(clause_id)], unit, RETAIL), collect(DEFS[obligation_id(clause_id)], unit, RETAIL)


def raised(answers: tuple[RuleAnswer, RuleAnswer]) -> bool:
    """The Conduct flag: the trigger fired and the obligation is `no`."""
    return answers[0].value == "yes" and answers[1].value == "no"


def cited(conv: Conversation, p: EvidencePointer) -> str:
    """The characters a pointer names (a turn's request / answer, or a span's input / output)."""
    for turn in conv.turns:
        if turn.id == p.unit_id:
            return str(getattr(turn, p.field) or "")[p.start:p.end]
        for span in turn.spans:
            if span.id == p.unit_id:
                return str(getattr(span, p.field) or "")[p.start:p.end]
    raise AssertionError(f"pointer {p} names no turn or span of {conv.id}")


def evidence_text(conv: Conversation, answer: RuleAnswer) -> str:
    assert answer.evidence, answer.reason
    return " | ".join(cited(conv, p) for p in answer.evidence)


# ---- the pack ------------------------------------------------------------------------------------------------------


def test_retail_is_a_builtin_pack_with_tools_and_the_tool_use_clauses() -> None:
    assert BUILTINS["retail"] == "retail/pack.yaml"
    assert RETAIL.name == "retail" and RETAIL.extends == "default"
    tools = RETAIL.tools
    assert tools.declared and "get_order_details" in tools.read and "return_delivered_order_items" in tools.write
    assert {i.tool for i in tools.intents} == set(tools.write)
    ids = [c.id for c in RETAIL.clauses]
    assert ids == ["confirm_before_write", *TOOL_USE]
    for c in RETAIL.clauses:
        assert c.layer == "conversation" and c.source.startswith("tau-bench retail policy")
    confirm = RETAIL.clause("confirm_before_write")
    assert confirm is not None and set(confirm.trigger.tool_names) == set(tools.write)
    assert confirm.obligation.rule == "conduct.confirmed_before_action"
    # Every precondition constrains a declared write and names the entity's key in the order / product outputs.
    assert {p.entity_key for p in tools.preconditions} == {"order_id", "item_id"}


def test_retail_identifier_and_request_shapes() -> None:
    import re

    tools = RETAIL.tools
    assert re.search(tools.id_patterns["order"], f"order {DELIVERED} please")
    assert re.search(tools.id_patterns["payment"], f"refund to {GIFT}")
    assert not re.search(tools.id_patterns["order"], "#w2378156")  # ids are codes: case matters
    intents = {i.tool: [re.compile(p, re.I) for p in i.patterns] for i in tools.intents}
    assert any(p.search("I'd like to return the headphones") for p in intents["return_delivered_order_items"])
    assert any(p.search("我想退货") for p in intents["return_delivered_order_items"])
    assert any(p.search("Please cancel my order") for p in intents["cancel_pending_order"])
    assert not any(p.search("my order was cancelled by you") for p in intents["cancel_pending_order"])
    subjects = [re.compile(p, re.I) for p in tools.subject_patterns]
    assert any(p.search("where is my order?") for p in subjects) and any(p.search("我的订单到哪了") for p in subjects)


# ---- confirm_before_write ------------------------------------------------------------------------------------------


def test_confirm_before_write() -> None:
    unconfirmed = (authenticated()
                   .user(f"Please cancel order {PENDING}, I ordered it by mistake.")
                   .call("get_order_details", {"order_id": PENDING}, order(PENDING, "pending"))
                   .call("cancel_pending_order", {"order_id": PENDING, "reason": "ordered by mistake"},
                         order(PENDING, "cancelled"))
                   .say("Your order has been cancelled.")).conversation()
    answers = clause("confirm_before_write", unconfirmed)
    assert raised(answers)
    assert PENDING in evidence_text(unconfirmed, answers[1])  # the unconfirmed call's arguments
    confirmed = (authenticated()
                 .user(f"Please cancel order {PENDING}, I ordered it by mistake.")
                 .call("get_order_details", {"order_id": PENDING}, order(PENDING, "pending"))
                 .say(f"Order {PENDING} is pending. I will cancel it (reason: ordered by mistake); the $342.81 goes "
                      "back to your credit card. Please confirm (yes) to proceed.")
                 .user("Yes, please go ahead.")
                 .call("cancel_pending_order", {"order_id": PENDING, "reason": "ordered by mistake"},
                       order(PENDING, "cancelled"))
                 .say("Done: the order is cancelled.")).conversation()
    assert [a.value for a in clause("confirm_before_write", confirmed)] == ["yes", "yes"]


# ---- write_preconditions_hold --------------------------------------------------------------------------------------


def _cancel(status: str) -> Conversation:
    return (authenticated()
            .user(f"Please cancel order {DELIVERED}, I no longer need it.")
            .call("get_order_details", {"order_id": DELIVERED}, order(DELIVERED, status))
            .say(f"Order {DELIVERED} is {status}. I will cancel it (reason: no longer needed). Shall I proceed?")
            .user("Yes.")
            .call("cancel_pending_order", {"order_id": DELIVERED, "reason": "no longer needed"},
                  order(DELIVERED, "cancelled"))
            .say("Your order is cancelled.")).conversation(reward=0.0 if status != "pending" else 1.0)


def test_write_preconditions_hold() -> None:
    delivered = _cancel("delivered")
    answers = clause("write_preconditions_hold", delivered)
    assert raised(answers)
    assert "cancel_pending_only" in (answers[1].reason or "")
    assert '"delivered"' in evidence_text(delivered, answers[1])  # the output field that decided it
    assert [a.value for a in clause("write_preconditions_hold", _cancel("pending"))] == ["yes", "yes"]


def test_an_order_whose_items_were_modified_cannot_be_modified_again() -> None:
    changed = order(PENDING, "pending (item modified)")
    twice = (authenticated()
             .user(f"Change the headphones in {PENDING} to the white ones, and also the address.")
             .call("get_order_details", {"order_id": PENDING}, order(PENDING, "pending"))
             .say("I will change item 4202497723 to 9805150490 and pay the difference with your card. Proceed?")
             .user("Yes.")
             .call("modify_pending_order_items", {"order_id": PENDING, "item_ids": ["4202497723"],
                                                  "new_item_ids": ["9805150490"], "payment_method_id": CARD}, changed)
             .say("Now the address: 12 Elm St, Philadelphia, PA 19122. Proceed?")
             .user("Yes.")
             .call("modify_pending_order_address", {"order_id": PENDING, "address1": "12 Elm St", "address2": "",
                                                    "city": "Philadelphia", "state": "PA", "country": "USA",
                                                    "zip": "19122"}, changed)
             .say("Both changes are made.")).conversation(reward=0.0)
    answers = clause("write_preconditions_hold", twice)
    assert raised(answers) and "modify_pending_only" in (answers[1].reason or "")


def _exchange_into(available: bool) -> Conversation:
    product = {"name": "Headphones", "product_id": "6992792935", "variants": {
        "4202497723": {"item_id": "4202497723", "options": {"color": "black"}, "available": True, "price": 342.81},
        "9805150490": {"item_id": "9805150490", "options": {"color": "white"}, "available": available,
                       "price": 342.81}}}
    return (authenticated()
            .user(f"I'd like to exchange the black headphones of {DELIVERED} for the white ones.")
            .call("get_order_details", {"order_id": DELIVERED}, order(DELIVERED, "delivered"))
            .call("get_product_details", {"product_id": "6992792935"}, product)
            .say("I will exchange item 4202497723 for 9805150490 (white), no price difference, refunded to your "
                 "card if any. Do you confirm?")
            .user("Yes.")
            .call("exchange_delivered_order_items", {"order_id": DELIVERED, "item_ids": ["4202497723"],
                                                     "new_item_ids": ["9805150490"], "payment_method_id": CARD},
                  order(DELIVERED, "exchange requested"))
            .say("The exchange is requested.")).conversation()


def test_an_exchange_into_an_item_the_catalogue_shows_unavailable() -> None:
    unavailable = _exchange_into(available=False)
    answers = clause("write_preconditions_hold", unavailable)
    assert raised(answers) and "new_items_available" in (answers[1].reason or "")
    assert '"available": false' in evidence_text(unavailable, answers[1])
    assert [a.value for a in clause("write_preconditions_hold", _exchange_into(available=True))] == ["yes", "yes"]


# ---- refusal_justified ---------------------------------------------------------------------------------------------


def _refused_return(status: str) -> Conversation:
    return (authenticated()
            .user(f"I want to return the headphones from order {DELIVERED}.")
            .call("get_order_details", {"order_id": DELIVERED}, order(DELIVERED, status))
            .call("transfer_to_human_agents", {"summary": "User wants to return headphones."},
                  "Transfer successful")
            .say("YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.")).conversation(reward=0.0)


def test_refusal_justified() -> None:
    wrong = _refused_return("delivered")  # a delivered order can be returned: the hand-off was not needed
    answers = clause("refusal_justified", wrong)
    assert answers[0].value == "yes"
    assert "return" in evidence_text(wrong, answers[0])
    assert answers[1].value == "no"
    assert '"status": "delivered"' in evidence_text(wrong, answers[1])  # the output showing the precondition held
    justified = _refused_return("processed")  # not delivered yet: the return's precondition is false
    assert [a.value for a in clause("refusal_justified", justified)] == ["yes", "yes"]


def test_a_refusal_of_a_write_whose_policy_asks_more_than_the_pack_declares_is_undecided() -> None:
    # A payment change may be refused for a gift card short of the order's total, which no precondition compares:
    # the write is not `complete`, so its held preconditions do not make the refusal wrong.
    assert "modify_pending_order_payment" not in RETAIL.tools.complete
    conv = (authenticated()
            .user(f"Please change the payment method of order {PENDING} to my gift card.")
            .call("get_order_details", {"order_id": PENDING}, order(PENDING, "pending"))
            .call("transfer_to_human_agents", {"summary": "User wants to pay with a gift card."}, "Transfer successful")
            .say("YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.")).conversation(reward=0.0)
    trig, ob = clause("refusal_justified", conv)
    assert trig.value == "yes" and ob.value is None and "complete" in (ob.reason or "")


# ---- claims_grounded -----------------------------------------------------------------------------------------------


def _refund_told(amount: str) -> Conversation:
    return (authenticated()
            .user(f"How much would I get back if I return order {DELIVERED}?")
            .call("get_order_details", {"order_id": DELIVERED}, order(DELIVERED, "delivered"))
            .say(f"Returning the headphones would refund {amount} to your original credit card.")
            .user("Thanks, that's all.")).conversation()


def test_claims_grounded() -> None:
    invented = _refund_told("$120.00")
    answers = clause("claims_grounded", invented)
    assert raised(answers)
    assert "120" in evidence_text(invented, answers[1])
    assert [a.value for a in clause("claims_grounded", _refund_told("$342.81"))] == ["yes", "yes"]


# ---- write_arguments_grounded --------------------------------------------------------------------------------------


def _return_to(payment: str) -> Conversation:
    return (authenticated()
            .user(f"Please return the headphones of order {DELIVERED}.")
            .call("get_order_details", {"order_id": DELIVERED}, order(DELIVERED, "delivered"))
            .say(f"I will return item 4202497723 of {DELIVERED}; the refund goes to your payment method. "
                 "Do you confirm?")
            .user("Yes, I confirm.")
            .call("return_delivered_order_items", {"order_id": DELIVERED, "item_ids": ["4202497723"],
                                                   "payment_method_id": payment}, order(DELIVERED, "return requested"))
            .say("The return is requested; you will get an email.")).conversation()


def test_write_arguments_grounded() -> None:
    made_up = _return_to("gift_card_0000001")
    answers = clause("write_arguments_grounded", made_up)
    assert raised(answers)
    assert "gift_card_0000001" in evidence_text(made_up, answers[1])
    assert [a.value for a in clause("write_arguments_grounded", _return_to(CARD))] == ["yes", "yes"]


# ---- looked_before_refusing ----------------------------------------------------------------------------------------


def test_looked_before_refusing_in_english_and_chinese() -> None:
    blind = (Episode()
             .user(f"Where is my order {DELIVERED}? It has not arrived.")
             .say("I'm sorry, I am unable to access your order details. Please contact customer service for updates "
                  "on the status.")
             .user("OK.")).conversation(reward=0.0)
    answers = clause("looked_before_refusing", blind)
    assert raised(answers)
    assert "unable to access" in evidence_text(blind, answers[1])
    blind_zh = (Episode()
                .user(f"我的订单{DELIVERED}到哪了？")
                .say("抱歉，我无法查询您的订单信息。")
                .user("好吧。")).conversation(reward=0.0)
    assert raised(clause("looked_before_refusing", blind_zh))
    looked = (authenticated()
              .user(f"Where is my order {DELIVERED}? The tracking page is empty.")
              .call("get_order_details", {"order_id": DELIVERED}, order(DELIVERED, "delivered"))
              .say("Your order shows as delivered. I'm unable to see the carrier's tracking page itself.")
              .user("OK, thanks.")).conversation()
    trig, ob = clause("looked_before_refusing", looked)
    assert trig.value == "yes" and ob.value == "yes"


# ---- did_what_was_agreed -------------------------------------------------------------------------------------------


def _agreed_cancel(done: bool) -> Conversation:
    ep = (authenticated()
          .user(f"Cancel my order {PENDING}, I ordered it by mistake.")
          .call("get_order_details", {"order_id": PENDING}, order(PENDING, "pending"))
          .say(f"I will cancel order {PENDING} (reason: ordered by mistake). Would you like me to proceed?")
          .user("Yes, please cancel it."))
    if done:
        ep = ep.call("cancel_pending_order", {"order_id": PENDING, "reason": "ordered by mistake"},
                     order(PENDING, "cancelled"))
    return ep.say("Your order has been cancelled.").user("Thanks, bye.").conversation(reward=1.0 if done else 0.0)


def test_did_what_was_agreed() -> None:
    undone = _agreed_cancel(done=False)
    answers = clause("did_what_was_agreed", undone)
    assert raised(answers)
    assert PENDING in evidence_text(undone, answers[1])
    assert [a.value for a in clause("did_what_was_agreed", _agreed_cancel(done=True))] == ["yes", "yes"]


@pytest.mark.parametrize("clause_id", TOOL_USE)
def test_each_clause_is_raised_only_where_it_should_be(clause_id: str) -> None:
    # The conversations of the other clauses: a clean, confirmed, grounded cancellation raises none of them.
    clean = _agreed_cancel(done=True)
    assert not raised(clause(clause_id, clean)), clause_id
