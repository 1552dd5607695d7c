"""Tool-use preconditions: a write's preconditions over the state earlier tool outputs showed
(`conduct.write_preconditions_hold`), refused write requests (`conduct.refused_write_request`) and whether a
refusal was covered by a precondition (`conduct.refusal_justified`), on small retail and airline conversations
written for them (tau-bench records, converted as the adapter converts them)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from agent_factory.adapters.chat import _tau_conversation
from agent_factory.adapters.model import Conversation, EvidencePointer
from agent_factory.evaluators.components.conduct.tooluse.preconditions import (
    Operand,
    refusal_justified,
    refused_write_request,
    run_test,
    write_preconditions_hold,
)
from agent_factory.evaluators.components.conduct.tooluse.state import timeline
from agent_factory.evaluators.core.model import DataDefinition
from agent_factory.evaluators.core.registry import RuleAnswer, RuleContext, get_rule
from agent_factory.knowledge_packs import KnowledgePack, load_pack
from agent_factory.knowledge_packs.model import Lexicon, LexiconPattern
from agent_factory.knowledge_packs.tools import FieldTest, Precondition, ToolIntent, ToolPolicy

DEFAULT = load_pack("default")
DEFLECTION = Lexicon(deflection=(
    LexiconPattern(id="en.t.cannot", pattern=r"\b(?:i\s+am|i'm)\s+(?:unable|not\s+able)\s+to\b|\bi\s+cannot\b"),
))

# ---- retail: tools and preconditions of tau-bench's retail policy ------------------------------------------------

RETAIL_TOOLS = ToolPolicy(
    read=("get_user_details", "get_order_details", "get_product_details"),
    write=("cancel_pending_order", "return_delivered_order_items", "modify_pending_order_payment"),
    complete=("cancel_pending_order", "return_delivered_order_items"),
    intents=(
        ToolIntent(tool="cancel_pending_order", patterns=(r"\bcancel\b", "取消")),
        ToolIntent(tool="return_delivered_order_items", patterns=(r"\breturn\b",)),
    ),
    preconditions=(
        Precondition(id="cancel_only_pending", text="An order can only be cancelled if its status is 'pending'.",
                     tools=("cancel_pending_order",), entity_argument="order_id", entity_key="order_id",
                     all_of=(FieldTest(field="status", op="equals", value="pending"),)),
        Precondition(id="return_only_delivered", text="An order can only be returned if its status is 'delivered'.",
                     tools=("return_delivered_order_items",), entity_argument="order_id", entity_key="order_id",
                     all_of=(FieldTest(field="status", op="equals", value="delivered"),)),
        Precondition(id="gift_card_covers", text="A gift card paying must have enough balance to cover the total.",
                     tools=("modify_pending_order_payment",), entity_argument="payment_method_id", entity_key="id",
                     any_of=(FieldTest(field="source", op="not_equals", value="gift_card"),
                             FieldTest(field="balance", op="at_least", argument="total"))),
    ),
)
RETAIL = DEFAULT.model_copy(update={"tools": RETAIL_TOOLS, "lexicons": {"en": DEFLECTION}})

# ---- airline: tau-bench's airline policy (now is the policy's 2024-05-15 15:00) ------------------------------------

AIRLINE_TOOLS = ToolPolicy(
    read=("get_user_details", "get_reservation_details"),
    write=("cancel_reservation", "update_reservation_baggages", "book_reservation", "update_reservation_passengers"),
    intents=(ToolIntent(tool="cancel_reservation", patterns=(r"\bcancel\b",)),
             ToolIntent(tool="update_reservation_passengers", patterns=(r"\bpassenger",))),
    complete=("cancel_reservation", "update_reservation_passengers"),
    now=datetime(2024, 5, 15, 15, 0),
    preconditions=(
        Precondition(id="cancellation_allowed", text="Within 24 hours of booking, business, or insured.",
                     tools=("cancel_reservation",), entity_argument="reservation_id", entity_key="reservation_id",
                     any_of=(FieldTest(field="created_at", op="within_hours_before_now", value=24),
                             FieldTest(field="cabin", op="equals", value="business"),
                             FieldTest(field="insurance", op="equals", value="yes"))),
        Precondition(id="unflown", text="Only a trip none of whose segments was flown can be cancelled.",
                     tools=("cancel_reservation",), entity_argument="reservation_id", entity_key="reservation_id",
                     all_of=(FieldTest(field="flights[].date", op="after_now"),)),
        Precondition(id="bags_only_added", text="Checked bags can be added, not removed.",
                     tools=("update_reservation_baggages",), entity_argument="reservation_id",
                     entity_key="reservation_id",
                     all_of=(FieldTest(field="total_baggages", op="at_most", argument="total_baggages"),)),
        Precondition(id="balance_covers", text="A gift card or certificate holds the amount charged to it.",
                     tools=("book_reservation",), entity_argument="payment_methods[].payment_id", entity_key="id",
                     any_of=(FieldTest(field="source", op="equals", value="credit_card"),
                             FieldTest(field="amount", op="at_least", argument="payment_methods[].amount"))),
        Precondition(id="at_most_five", text="A reservation has at most five passengers.",
                     tools=("update_reservation_passengers",), entity_argument="reservation_id",
                     entity_key="reservation_id",
                     all_of=(FieldTest(field="passengers[]", op="count_at_most", value=5),)),
    ),
)
AIRLINE = DEFAULT.model_copy(update={"tools": AIRLINE_TOOLS, "lexicons": {"en": DEFLECTION}})

DEFN = DataDefinition(id="conduct.tooluse_test", question="q", component="conduct", layer="conversation",
                      rule="conduct.write_preconditions_hold")


# ---- building conversations --------------------------------------------------------------------------------------


class Chat:
    """A tau-bench record written message by message."""

    def __init__(self) -> None:
        self.traj: list[dict[str, Any]] = [{"role": "system", "content": "policy"}]
        self.n = 0

    def user(self, text: str) -> Chat:
        self.traj.append({"role": "user", "content": text})
        return self

    def agent(self, text: str) -> Chat:
        self.traj.append({"role": "assistant", "content": text})
        return self

    def call(self, name: str, args: dict[str, Any], output: Any) -> Chat:
        self.n += 1
        cid = f"call_{self.n}"
        self.traj.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        content = output if isinstance(output, str) else json.dumps(output)
        self.traj.append({"role": "tool", "tool_call_id": cid, "name": name, "content": content})
        return self

    def conversation(self) -> Conversation:
        return _tau_conversation({"task_id": 1, "trial": 0, "reward": 1.0, "traj": self.traj})


def ask(fn: Any, chat: Chat, pack: KnowledgePack) -> RuleAnswer:
    answer: RuleAnswer = fn(chat.conversation(), RuleContext(pack=pack, definition=DEFN))
    return answer


def cited(chat: Chat, evidence: tuple[EvidencePointer, ...]) -> list[str]:
    """The characters each pointer cites."""
    texts: dict[tuple[str, str], str] = {}
    for s in timeline(chat.conversation()):
        texts[(s.unit_id, s.field)] = s.text
        if s.kind == "call":
            texts[(s.unit_id, "output")] = s.output_text
    return [texts[(p.unit_id, p.field)][p.start:p.end] for p in evidence]


def order(order_id: str, status: str) -> dict[str, Any]:
    return {"order_id": order_id, "user_id": "yusuf_rossi_9620", "status": status,
            "items": [{"name": "T-Shirt", "item_id": "1234567890", "price": 53.27}]}


def reservation(rid: str, *, created: str = "2024-05-01T10:00:00", cabin: str = "economy", insurance: str = "no",
                dates: tuple[str, ...] = ("2024-05-20",), bags: int = 1, passengers: int = 1) -> dict[str, Any]:
    return {"reservation_id": rid, "user_id": "mia_li_3668", "cabin": cabin, "insurance": insurance,
            "created_at": created, "total_baggages": bags,
            "flights": [{"flight_number": f"HAT{k:03d}", "date": d} for k, d in enumerate(dates)],
            "passengers": [{"first_name": f"P{k}", "last_name": "Li"} for k in range(passengers)]}


# ---- conduct.write_preconditions_hold -----------------------------------------------------------------------------


def test_retail_cancel_of_a_pending_order_holds_citing_its_status() -> None:
    chat = (Chat().user("Please cancel order #W2378156.")
            .call("get_order_details", {"order_id": "#W2378156"}, order("#W2378156", "pending"))
            .call("cancel_pending_order", {"order_id": "#W2378156", "reason": "no longer needed"},
                  order("#W2378156", "cancelled")))
    a = ask(write_preconditions_hold, chat, RETAIL)
    assert a.value == "yes"
    assert '"status": "pending"' in cited(chat, a.evidence)


def test_retail_cancel_of_a_delivered_order_is_a_violation_citing_call_and_status() -> None:
    chat = (Chat().user("Cancel #W2378156 please.")
            .call("get_order_details", {"order_id": "#W2378156"}, order("#W2378156", "delivered"))
            .call("cancel_pending_order", {"order_id": "#W2378156", "reason": "ordered by mistake"},
                  order("#W2378156", "cancelled")))
    a = ask(write_preconditions_hold, chat, RETAIL)
    assert a.value == "no" and a.fact == "cancel_only_pending"
    texts = cited(chat, a.evidence)
    assert texts[0] == '{"order_id": "#W2378156", "reason": "ordered by mistake"}'
    assert '"status": "delivered"' in texts
    assert a.reason is not None and "cancel_only_pending" in a.reason and "#W2378156" in a.reason


def test_the_latest_reading_of_the_entity_decides() -> None:
    # Read delivered, then read again pending (another order's output in between): the latest reading of
    # *this* order decides, and the other order is not confused with it.
    chat = (Chat().user("Cancel #W1.")
            .call("get_order_details", {"order_id": "#W1"}, order("#W1", "delivered"))
            .call("get_order_details", {"order_id": "#W1"}, order("#W1", "pending"))
            .call("get_order_details", {"order_id": "#W2"}, order("#W2", "delivered"))
            .call("cancel_pending_order", {"order_id": "#W1"}, order("#W1", "cancelled")))
    assert ask(write_preconditions_hold, chat, RETAIL).value == "yes"


def test_an_entity_never_read_abstains_and_says_so() -> None:
    chat = Chat().user("Cancel #W9.").call("cancel_pending_order", {"order_id": "#W9"}, order("#W9", "cancelled"))
    a = ask(write_preconditions_hold, chat, RETAIL)
    assert a.value is None
    assert a.reason is not None and "#W9 was never shown" in a.reason


def test_an_absent_field_abstains() -> None:
    chat = (Chat().call("get_order_details", {"order_id": "#W1"}, {"order_id": "#W1", "items": []})
            .call("cancel_pending_order", {"order_id": "#W1"}, order("#W1", "cancelled")))
    a = ask(write_preconditions_hold, chat, RETAIL)
    assert a.value is None and a.reason is not None and "status absent" in a.reason


def test_a_failed_write_changed_nothing_and_is_not_counted() -> None:
    chat = (Chat().call("get_order_details", {"order_id": "#W1"}, order("#W1", "delivered"))
            .call("cancel_pending_order", {"order_id": "#W1"}, "Error: non-pending order cannot be cancelled"))
    assert ask(write_preconditions_hold, chat, RETAIL).value == "not_applicable"


def test_any_of_a_gift_card_balance_against_the_call_argument() -> None:
    user = {"payment_methods": {
        "gift_card_1": {"source": "gift_card", "balance": 40.0, "id": "gift_card_1"},
        "paypal_2": {"source": "paypal", "id": "paypal_2"}}}

    def pay(method: str) -> Chat:
        return (Chat().call("get_user_details", {"user_id": "u"}, user)
                .call("modify_pending_order_payment", {"order_id": "#W1", "payment_method_id": method, "total": 53.27},
                      order("#W1", "pending")))

    short = ask(write_preconditions_hold, pay("gift_card_1"), RETAIL)
    assert short.value == "no" and short.fact == "gift_card_covers"
    assert {'"source": "gift_card"', '"balance": 40.0'} <= set(cited(pay("gift_card_1"), short.evidence))
    assert ask(write_preconditions_hold, pay("paypal_2"), RETAIL).value == "yes"


def test_airline_cancellation_within_24_hours_holds_and_after_it_does_not() -> None:
    def cancel(**kw: Any) -> Chat:
        return (Chat().call("get_reservation_details", {"reservation_id": "ABC123"}, reservation("ABC123", **kw))
                .call("cancel_reservation", {"reservation_id": "ABC123"}, {"reservation_id": "ABC123"}))

    assert ask(write_preconditions_hold, cancel(created="2024-05-15T05:00:00"), AIRLINE).value == "yes"
    assert ask(write_preconditions_hold, cancel(cabin="business"), AIRLINE).value == "yes"
    late = cancel(created="2024-05-12T09:00:00")
    a = ask(write_preconditions_hold, late, AIRLINE)
    assert a.value == "no" and a.fact == "cancellation_allowed"
    assert {'"created_at": "2024-05-12T09:00:00"', '"cabin": "economy"', '"insurance": "no"'} <= set(
        cited(late, a.evidence))
    # A creation date alone spans its whole day: 2024-05-15 is partly inside the last 24 hours, partly not.
    undecided = ask(write_preconditions_hold, cancel(created="2024-05-15"), AIRLINE)
    assert undecided.value is None and undecided.reason is not None and "created_at" in undecided.reason


def test_airline_a_flight_dated_today_is_not_flown_and_yesterday_is() -> None:
    def cancel(dates: tuple[str, ...]) -> Chat:
        res = reservation("ABC123", cabin="business", dates=dates)
        return (Chat().call("get_reservation_details", {"reservation_id": "ABC123"}, res)
                .call("cancel_reservation", {"reservation_id": "ABC123"}, res))

    assert ask(write_preconditions_hold, cancel(("2024-05-15", "2024-05-18")), AIRLINE).value == "yes"
    flown = cancel(("2024-05-14", "2024-05-18"))
    a = ask(write_preconditions_hold, flown, AIRLINE)
    assert a.value == "no" and a.fact == "unflown"
    assert '"date": "2024-05-14"' in cited(flown, a.evidence)
    assert '"date": "2024-05-18"' not in cited(flown, a.evidence)


def test_airline_bags_compared_with_the_call_argument() -> None:
    def bags(total: int) -> Chat:
        return (Chat().call("get_reservation_details", {"reservation_id": "ABC123"}, reservation("ABC123", bags=2))
                .call("update_reservation_baggages", {"reservation_id": "ABC123", "total_baggages": total},
                      reservation("ABC123", bags=total)))

    assert ask(write_preconditions_hold, bags(3), AIRLINE).value == "yes"
    a = ask(write_preconditions_hold, bags(1), AIRLINE)
    assert a.value == "no" and a.fact == "bags_only_added"


def test_airline_each_payment_method_of_a_booking_against_its_own_amount() -> None:
    user = {"payment_methods": {
        "gift_card_1": {"source": "gift_card", "amount": 100, "id": "gift_card_1"},
        "credit_card_2": {"source": "credit_card", "id": "credit_card_2"}}}

    def book(gift: int, card: int) -> Chat:
        return (Chat().call("get_user_details", {"user_id": "mia_li_3668"}, user)
                .call("book_reservation", {"user_id": "mia_li_3668", "payment_methods": [
                    {"payment_id": "gift_card_1", "amount": gift}, {"payment_id": "credit_card_2", "amount": card}]},
                      {"reservation_id": "NEW123"}))

    assert ask(write_preconditions_hold, book(100, 500), AIRLINE).value == "yes"
    over = book(150, 450)
    a = ask(write_preconditions_hold, over, AIRLINE)
    assert a.value == "no" and a.fact == "balance_covers"
    assert '"amount": 100' in cited(over, a.evidence)
    assert a.reason is not None and "gift_card_1" in a.reason and "credit_card_2" not in a.reason


def test_count_at_most_counts_the_elements_and_an_absent_list_is_undecided() -> None:
    five = FieldTest(field="passengers[]", op="count_at_most", value=5)
    six = reservation("ABC123", passengers=6)
    assert run_test(five, six, Operand(), None).truth is False
    assert run_test(five, reservation("ABC123", passengers=5), Operand(), None).truth is True
    assert run_test(five, {"passengers": []}, Operand(), None).truth is True
    assert run_test(five, {"reservation_id": "ABC123"}, Operand(), None).truth is None
    whole_list = FieldTest(field="passengers", op="count_at_most", value=5)
    assert run_test(whole_list, six, Operand(), None).truth is False
    assert run_test(whole_list, {"passengers": "six"}, Operand(), None).truth is None
    chat = (Chat().call("get_reservation_details", {"reservation_id": "ABC123"}, six)
            .call("update_reservation_passengers", {"reservation_id": "ABC123", "passengers": []}, six))
    assert ask(write_preconditions_hold, chat, AIRLINE).fact == "at_most_five"


def test_field_tests_are_three_valued() -> None:
    ent = {"status": "Pending", "amount": "12.5", "when": "not a date"}
    op = Operand()
    assert run_test(FieldTest(field="status", op="equals", value="pending"), ent, op, None).truth is True
    assert run_test(FieldTest(field="status", op="in", value=("delivered", "processed")), ent, op, None).truth is False
    assert run_test(FieldTest(field="status", op="not_in", value=("delivered",)), ent, op, None).truth is True
    assert run_test(FieldTest(field="amount", op="at_least", value=12), ent, op, None).truth is True
    assert run_test(FieldTest(field="status", op="at_most", value=3), ent, op, None).truth is None
    now = datetime(2024, 5, 15, 15, 0)
    assert run_test(FieldTest(field="when", op="after_now"), ent, op, now).truth is None
    assert run_test(FieldTest(field="missing", op="equals", value=1), ent, op, now).truth is None
    # No time called now: a time test cannot be decided.
    assert run_test(FieldTest(field="when", op="after_now"), {"when": "2024-05-20"}, op, None).truth is None


def test_a_pack_without_tools_abstains_with_the_reason() -> None:
    chat = Chat().call("cancel_pending_order", {"order_id": "#W1"}, order("#W1", "cancelled"))
    a = ask(write_preconditions_hold, chat, DEFAULT)
    assert a.value is None and a.reason is not None and "no tools" in a.reason


def test_the_rules_are_registered_for_the_conversation_layer() -> None:
    for name in ("conduct.write_preconditions_hold", "conduct.refused_write_request", "conduct.refusal_justified"):
        assert callable(get_rule(name))


# ---- conduct.refused_write_request and conduct.refusal_justified ---------------------------------------------------


def test_retail_refusal_of_a_cancel_is_a_refused_request_citing_both() -> None:
    chat = (Chat().user("Hi, I want to cancel order #W1, I no longer need it.")
            .call("get_order_details", {"order_id": "#W1"}, order("#W1", "pending"))
            .agent("I'm sorry, I am unable to do that for you."))
    a = ask(refused_write_request, chat, RETAIL)
    assert a.value == "yes" and a.reason == "refused: cancel_pending_order"
    assert cited(chat, a.evidence) == ["cancel", "I am unable to"]


def test_no_refusal_when_the_write_is_done_or_the_request_negated() -> None:
    done = (Chat().user("Please cancel order #W1.").agent("I cannot see it yet, let me look.")
            .call("get_order_details", {"order_id": "#W1"}, order("#W1", "pending"))
            .call("cancel_pending_order", {"order_id": "#W1"}, order("#W1", "cancelled")))
    assert ask(refused_write_request, done, RETAIL).value == "no"
    negated = (Chat().user("I don't want to cancel the order, just change the address.")
               .agent("I'm unable to change addresses."))
    assert ask(refused_write_request, negated, RETAIL).value == "no"
    plain = Chat().user("Where is my order #W1?").agent("I'm unable to see it.")
    assert ask(refused_write_request, plain, RETAIL).value == "no"


def test_a_request_in_chinese_and_its_negation() -> None:
    handoff = ("transfer_to_human_agents", {"summary": "cancel #W1"}, "Transfer successful")
    asked = Chat().user("请帮我取消订单 #W1。").call(*handoff)
    assert ask(refused_write_request, asked, RETAIL).value == "yes"
    negated = Chat().user("我不想取消订单，只想改地址。").call(*handoff)
    assert ask(refused_write_request, negated, RETAIL).value == "no"


def test_a_handoff_call_is_a_refusal() -> None:
    chat = (Chat().user("I need to return order #W1.")
            .call("transfer_to_human_agents", {"summary": "user wants to return #W1"}, "Transfer successful"))
    a = ask(refused_write_request, chat, RETAIL)
    assert a.value == "yes" and cited(chat, a.evidence)[1] == '{"summary": "user wants to return #W1"}'


def test_retail_wrong_refusal_when_the_order_read_was_pending() -> None:
    chat = (Chat().user("Please cancel my order #W1.")
            .call("get_order_details", {"order_id": "#W1"}, order("#W1", "pending"))
            .agent("I'm unable to cancel this order."))
    a = ask(refusal_justified, chat, RETAIL)
    assert a.value == "no"
    assert a.reason == "cancel_pending_order refused though cancel_only_pending held"
    assert cited(chat, a.evidence) == ["I'm unable to", "cancel", '"status": "pending"']


def test_retail_refusal_covered_when_the_order_read_was_delivered() -> None:
    chat = (Chat().user("Please cancel my order #W1.")
            .call("get_order_details", {"order_id": "#W1"}, order("#W1", "delivered"))
            .agent("I'm unable to cancel a delivered order; you could return it instead."))
    a = ask(refusal_justified, chat, RETAIL)
    assert a.value == "yes"
    assert '"status": "delivered"' in cited(chat, a.evidence)


def test_several_candidates_none_named_abstain_and_the_named_one_decides() -> None:
    def chat(request: str) -> Chat:
        return (Chat().user(request)
                .call("get_order_details", {"order_id": "#W1"}, order("#W1", "pending"))
                .call("get_order_details", {"order_id": "#W2"}, order("#W2", "delivered"))
                .agent("I'm unable to process that."))

    a = ask(refusal_justified, chat("Please cancel one of my orders."), RETAIL)
    assert a.value is None
    assert a.reason is not None and "2 order_ids were shown and none is named" in a.reason
    assert ask(refusal_justified, chat("Please cancel my order #W2."), RETAIL).value == "yes"
    assert ask(refusal_justified, chat("Please cancel my order #W1."), RETAIL).value == "no"


def test_airline_refused_cancellation_of_a_reservation_booked_hours_ago_is_wrong() -> None:
    def chat(created: str) -> Chat:
        return (Chat().user("I need to cancel reservation ABC123, I booked it by mistake.")
                .call("get_reservation_details", {"reservation_id": "ABC123"},
                      reservation("ABC123", created=created))
                .call("transfer_to_human_agents", {"summary": "cancel ABC123"}, "Transfer successful"))

    a = ask(refusal_justified, chat("2024-05-15T09:00:00"), AIRLINE)
    assert a.value == "no"
    assert {'"created_at": "2024-05-15T09:00:00"', '"date": "2024-05-20"'} <= set(
        cited(chat("2024-05-15T09:00:00"), a.evidence))
    assert ask(refusal_justified, chat("2024-05-02T09:00:00"), AIRLINE).value == "yes"


def test_refusal_justified_abstains_without_preconditions_or_entity() -> None:
    never_read = Chat().user("Cancel reservation ABC123.").agent("I'm unable to help with cancellations.")
    a = ask(refusal_justified, never_read, AIRLINE)
    assert a.value is None and a.reason is not None and "no reservation_id was shown" in a.reason
    nothing = Chat().user("Where is my order?").agent("Here it is.")
    assert ask(refusal_justified, nothing, RETAIL).value == "not_applicable"
    no_lexicon = RETAIL.model_copy(update={"lexicons": {}, "handoff": DEFAULT.handoff.model_copy(
        update={"tool_names": ()})})
    b = ask(refused_write_request, never_read, no_lexicon)
    assert b.value is None and b.reason is not None and "no refusal or deflection lexicon" in b.reason


def test_a_refusal_is_wrong_only_for_a_write_whose_preconditions_the_pack_declares_complete() -> None:
    """A write with no precondition over the state (a passenger change) is refused wrongly whenever it is refused,
    if the pack says its preconditions are complete; otherwise the refusal is undecided (the policy may ask what
    no output shows). The refusal lexicon ("I cannot assist with this request") counts as a refusal."""
    two = {"reservation_id": "ABC123", "cabin": "basic_economy",
           "passengers": [{"first_name": "Anya", "last_name": "Garcia"}, {"first_name": "Mei", "last_name": "Lee"}]}
    chat = (Chat().user("Please change the passenger name on reservation ABC123 to Mei Garcia.")
            .call("get_reservation_details", {"reservation_id": "ABC123"}, two)
            .agent("Unfortunately, I cannot assist with this request."))
    a = ask(refusal_justified, chat, AIRLINE)
    assert a.value == "no" and a.reason is not None and "at_most_five held" in a.reason
    assert ask(refused_write_request, chat, AIRLINE).value == "yes"
    partial = AIRLINE.model_copy(update={"tools": AIRLINE_TOOLS.model_copy(update={"complete": ()})})
    b = ask(refusal_justified, chat, partial)
    assert b.value is None and b.reason is not None and "complete" in b.reason
    unconditioned = AIRLINE.model_copy(update={"tools": AIRLINE_TOOLS.model_copy(update={"preconditions": tuple(
        p for p in AIRLINE_TOOLS.preconditions if p.id != "at_most_five")})})
    c = ask(refusal_justified, chat, unconditioned)
    assert c.value == "no" and c.reason is not None and "no condition on the state" in c.reason
