"""Tool-use follow-through: gave up without looking (`conduct.deflected_own_records`,
`conduct.looked_before_refusing`) and said is not done (`conduct.agreed_action`, `conduct.agreed_action_done`), on
small retail and airline conversations written for them, with packs built inline."""

from __future__ import annotations

import json
from typing import Any

from agent_factory.adapters.chat import _tau_conversation
from agent_factory.adapters.model import Conversation, EvidencePointer
from agent_factory.evaluators.components.conduct import definitions_for
from agent_factory.evaluators.core.registry import RuleAnswer, RuleContext, get_rule
from agent_factory.knowledge_packs import KnowledgePack, compile_pattern, load_pack
from agent_factory.knowledge_packs.loader import validate_pack_data
from agent_factory.knowledge_packs.tools import ToolIntent, ToolPolicy

CLAUSES: list[dict[str, Any]] = [
    {"id": "looked_before_refusing", "text": "Look up the user's records before refusing or deflecting.",
     "kind": "must", "layer": "conversation", "trigger": {"rule": "conduct.deflected_own_records"},
     "obligation": {"rule": "conduct.looked_before_refusing"}},
    {"id": "did_what_was_agreed", "text": "Do what the user agreed to, with the arguments agreed.",
     "kind": "must", "layer": "conversation", "trigger": {"rule": "conduct.agreed_action"},
     "obligation": {"rule": "conduct.agreed_action_done"}},
]

RETAIL = ToolPolicy(
    read=("find_user_id_by_email", "get_user_details", "get_order_details", "get_product_details"),
    write=("cancel_pending_order", "return_delivered_order_items", "exchange_delivered_order_items",
           "modify_pending_order_payment"),
    subject_patterns=(r"\bmy\s+(?:\w+\s+){0,2}(?:orders?|account|payment\s+methods?|gift\s+cards?)\b",
                      r"我的\s*(?:订单|账户|礼品卡)"),
    intents=(ToolIntent(tool="cancel_pending_order", patterns=(r"\bcancel\w*\b",)),
             ToolIntent(tool="return_delivered_order_items", patterns=(r"\breturn\w*\b",))),
    id_patterns={"order": r"#W\d{7}", "payment": r"\b(?:credit_card|gift_card|paypal)_\d+\b"},
)
AIRLINE = ToolPolicy(
    read=("get_user_details", "get_reservation_details"),
    write=("cancel_reservation", "update_reservation_baggages"),
    subject_patterns=(r"\bmy\s+(?:\w+\s+){0,2}(?:reservations?|bookings?|flights?|certificates?)\b",),
    intents=(ToolIntent(tool="cancel_reservation", patterns=(r"\bcancel\w*\b",)),),
    id_patterns={"reservation": r"\b(?!HAT\d{3}\b)[A-Z0-9]{6}\b", "payment": r"\b(?:credit_card|gift_card)_\d+\b"},
)


def pack_with(tools: ToolPolicy) -> KnowledgePack:
    data = load_pack("default").model_dump(mode="json")
    data["clauses"] = CLAUSES
    return validate_pack_data(data, source="test").model_copy(update={"tools": tools})


def chat(*messages: Any) -> Conversation:
    """A tau-bench record from (role, text) pairs and ("call", tool, args, output) tuples."""
    traj: list[dict[str, Any]] = [{"role": "system", "content": "policy"}]
    for k, m in enumerate(messages):
        if m[0] == "call":
            _, name, args, output = m
            cid = f"call_{k}"
            traj.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
            traj.append({"role": "tool", "tool_call_id": cid, "name": name, "content": json.dumps(output)})
        else:
            traj.append({"role": m[0], "content": m[1]})
    return _tau_conversation({"task_id": 1, "trial": 0, "reward": 0.0, "traj": traj})


def run(rule_item: str, unit: Conversation, pack: KnowledgePack) -> RuleAnswer:
    defn = next(d for d in definitions_for(pack) if d.id == rule_item)
    assert defn.rule is not None
    return get_rule(defn.rule)(unit, RuleContext(pack=pack, definition=defn))


def cited(unit: Conversation, evidence: tuple[EvidencePointer, ...]) -> list[str]:
    texts: dict[tuple[str, str], str] = {}
    for t in unit.turns:
        texts[(t.id, "request")] = t.request or ""
        texts[(t.id, "answer")] = t.answer or ""
        for s in t.spans:
            texts[(s.id, "input")] = s.input or ""
            texts[(s.id, "output")] = s.output or ""
    return [texts[(e.unit_id, e.field)][e.start:e.end] for e in evidence]


DEFLECT_TRIGGER = "conduct.looked_before_refusing.trigger"
DEFLECT = "conduct.looked_before_refusing.obligation"
AGREED_TRIGGER = "conduct.did_what_was_agreed.trigger"
AGREED = "conduct.did_what_was_agreed.obligation"


# ---- the deflection lexicon -------------------------------------------------------------------------------------


def test_deflection_lexicon_examples_match_and_action_refusals_do_not() -> None:
    pack = load_pack("default")
    for lang in ("en", "zh"):
        patterns = pack.lexicons[lang].deflection
        assert patterns and all(p.examples for p in patterns)
        for p in patterns:
            for example in p.examples:
                assert compile_pattern(p.pattern).search(example), (p.id, example)
    quiet = ["I cannot look that up without your user ID.", "I'm unable to remove a passenger from a reservation.",
             "Could you please check your email for the reservation ID?", "I'll transfer you to a human agent.",
             "需要您提供订单号才能查询"]
    every = [p.pattern for lang in ("en", "zh") for p in pack.lexicons[lang].deflection]
    for text in quiet:
        assert not any(compile_pattern(p).search(text) for p in every), text


# ---- gave up without looking ------------------------------------------------------------------------------------


def test_retail_deflection_without_lookup_is_a_violation_citing_it_and_the_request() -> None:
    pack = pack_with(RETAIL)
    unit = chat(("user", "Hi, what is the status of my order #W1234567?"),
                ("assistant", "I'm sorry, I'm unable to access order details. Please contact customer service "
                              "for the status."))
    assert run(DEFLECT_TRIGGER, unit, pack).value == "yes"
    answer = run(DEFLECT, unit, pack)
    assert answer.value == "no" and answer.fact == 1.0
    assert cited(unit, answer.evidence) == ["I'm unable to access", "my order"]


def test_retail_deflection_after_a_lookup_complies_and_cites_the_lookup() -> None:
    pack = pack_with(RETAIL)
    unit = chat(("user", "What's on my account? My email is ann@example.com."),
                ("call", "find_user_id_by_email", {"email": "ann@example.com"}, "ann_lee_1234"),
                ("assistant", "I'm unable to provide information about your gift card balance right now."))
    answer = run(DEFLECT, unit, pack)
    assert answer.value == "yes"
    texts = cited(unit, answer.evidence)
    assert texts[0] == "I'm unable to provide information" and "find_user_id_by_email" not in texts[0]
    assert json.loads(texts[-1]) == {"email": "ann@example.com"}


def test_zh_deflection_and_no_subject_and_conditionals() -> None:
    pack = pack_with(RETAIL)
    zh = chat(("user", "请帮我看看我的订单到哪了"), ("assistant", "抱歉，我无法查询您的订单，请联系客服查询。"))
    assert run(DEFLECT, zh, pack).value == "no"
    # A deflection before any request about the user's own records does not count.
    general = chat(("user", "What is the weather like in Paris?"), ("assistant", "I'm unable to access weather data."))
    assert run(DEFLECT_TRIGGER, general, pack).value == "no"
    assert run(DEFLECT, general, pack).value == "not_applicable"
    # Asking for what the tools need is not a deflection.
    needs = chat(("user", "Where is my order?"), ("assistant", "I cannot look that up without your email address."))
    assert run(DEFLECT_TRIGGER, needs, pack).value == "no"


def test_airline_deflection_without_lookup_and_a_pack_without_tools_abstains() -> None:
    unit = chat(("user", "How much is left on my certificates?"),
                ("assistant", "I don't have access to certificate balances. You may want to check your user "
                              "profile."))
    answer = run(DEFLECT, unit, pack_with(AIRLINE))
    assert answer.value == "no" and cited(unit, answer.evidence)[1] == "my certificates"
    bare = run(DEFLECT, unit, pack_with(ToolPolicy()))
    assert bare.value is None and "declares no tools" in (bare.reason or "")


# ---- said is not done -------------------------------------------------------------------------------------------


def test_airline_agreed_cancellation_done_complies() -> None:
    pack = pack_with(AIRLINE)
    unit = chat(("user", "Please cancel my reservation ABC123."),
                ("call", "get_reservation_details", {"reservation_id": "ABC123"}, {"reservation_id": "ABC123"}),
                ("assistant", "I will cancel reservation ABC123. Do you confirm?"),
                ("user", "Yes, please."),
                ("call", "cancel_reservation", {"reservation_id": "ABC123"}, {"status": "cancelled"}),
                ("assistant", "Done."))
    assert run(AGREED_TRIGGER, unit, pack).value == "yes"
    answer = run(AGREED, unit, pack)
    assert answer.value == "yes"
    assert json.loads(cited(unit, answer.evidence)[0]) == {"reservation_id": "ABC123"}


def test_airline_agreed_but_not_done_before_the_next_request_is_a_violation() -> None:
    pack = pack_with(AIRLINE)
    unit = chat(("user", "Cancel my booking XYZ789 please."),
                ("assistant", "I can cancel reservation XYZ789 for you. Shall I proceed?"),
                ("user", "Yes, go ahead."),
                ("assistant", "Your reservation is cancelled."),
                ("user", "Thanks. What about my other flights?"),
                ("assistant", "You have none."))
    answer = run(AGREED, unit, pack)
    assert answer.value == "no" and "said is not done" in (answer.reason or "")
    assert cited(unit, answer.evidence) == ["cancel", "Yes"]


def test_retail_write_with_another_payment_than_agreed_is_a_violation_citing_the_argument() -> None:
    pack = pack_with(RETAIL)
    unit = chat(("user", "I want to return the lamp from my order #W7654321."),
                ("assistant", "I will return the lamp of order #W7654321 with the refund to gift_card_1111. "
                              "Would you like me to proceed?"),
                ("user", "Yes."),
                ("call", "return_delivered_order_items",
                 {"order_id": "#W7654321", "item_ids": ["123"], "payment_method_id": "credit_card_2222"}, "ok"))
    answer = run(AGREED, unit, pack)
    assert answer.value == "no" and "differs" in (answer.reason or "")
    assert cited(unit, answer.evidence)[0] == '"credit_card_2222"'
    # The same call with the agreed payment complies; so does one the user redirected in their yes.
    same = chat(("user", "I want to return the lamp from my order #W7654321."),
                ("assistant", "I will return the lamp of order #W7654321 with the refund to gift_card_1111. "
                              "Would you like me to proceed?"),
                ("user", "Yes, but refund it to credit_card_2222 instead."),
                ("call", "return_delivered_order_items",
                 {"order_id": "#W7654321", "item_ids": ["123"], "payment_method_id": "credit_card_2222"}, "ok"))
    assert run(AGREED, same, pack).value == "yes"


def test_reconfirmation_is_one_agreement_and_a_revised_plan_withdraws_it() -> None:
    pack = pack_with(RETAIL)
    asked = ("assistant", "I will cancel order #W1111111. Do you confirm?")
    again = chat(("user", "Cancel my order #W1111111."), asked, ("user", "Yes."), asked, ("user", "Yes, confirmed."),
                 ("call", "cancel_pending_order", {"order_id": "#W1111111", "reason": "no longer needed"}, "ok"))
    answer = run(AGREED_TRIGGER, again, pack)
    assert answer.value == "yes" and answer.reason == "1 agreed action(s)"
    assert cited(again, answer.evidence) == ["cancel", "Yes"]
    assert answer.evidence[1].unit_id == again.turns[2].id  # the last yes
    assert run(AGREED, again, pack).value == "yes"
    revised = chat(("user", "Cancel my order #W1111111."), asked, ("user", "Yes."), asked,
                   ("user", "Actually, keep it for now."))
    assert run(AGREED_TRIGGER, revised, pack).value == "no"
    assert run(AGREED, revised, pack).value == "not_applicable"


def test_no_agreement_on_a_denial_or_a_question_naming_no_write() -> None:
    pack = pack_with(RETAIL)
    denied = chat(("user", "Cancel my order #W1111111."), ("assistant", "Cancel order #W1111111, do you confirm?"),
                  ("user", "No, wait."))
    assert run(AGREED_TRIGGER, denied, pack).value == "no"
    vague = chat(("user", "Hi"), ("assistant", "Would you like anything else?"), ("user", "Yes, a question."))
    assert run(AGREED_TRIGGER, vague, pack).value == "no"
    handed = chat(("user", "Cancel my order #W1111111."),
                  ("assistant", "I cannot cancel #W1111111. Would you like me to transfer you to a human agent?"),
                  ("user", "Yes please."), ("call", "transfer_to_human_agents", {"summary": "cancel"}, "ok"))
    assert run(AGREED, handed, pack).value == "not_applicable"


def test_an_identifier_of_another_shape_is_no_swap() -> None:
    # A user name and a payment id can share a pattern (`[a-z]+_[a-z]+_\d+`): a payment the message did not name
    # does not replace the user it named, since a payment id also has the payment shape.
    tools = RETAIL.model_copy(update={"id_patterns": {**RETAIL.id_patterns, "user": r"\b[a-z]+_[a-z]+_\d+\b"}})
    pack = pack_with(tools)
    unit = chat(("user", "Please cancel my order #W1111111, I'm ann_lee_1234."),
                ("assistant", "For ann_lee_1234 I will cancel order #W1111111. Do you confirm?"),
                ("user", "Yes."),
                ("call", "modify_pending_order_payment", {"order_id": "#W1111111", "payment_method_id": "gift_card_5"},
                 "ok"))
    assert run(AGREED, unit, pack).value == "yes"


def test_a_deferral_is_no_agreement_and_never_looking_is_giving_up() -> None:
    """"I'll get back to you when I'm ready to proceed" agrees to nothing; a conversation about the user's
    booking whose agent kept replying and never looked anything up gave up without looking (and says so)."""
    from agent_factory.evaluators.components.conduct.tooluse.followthrough import (
        ASK_REGEX,
        CONFIRM_REGEX,
        DENY_REGEX,
        agreements,
        deflections,
    )
    from agent_factory.evaluators.components.conduct.tooluse.state import timeline
    from agent_factory.knowledge_packs.tools import ToolIntent, ToolPolicy

    tools = ToolPolicy(read=("get_reservation_details",), write=("cancel_reservation",),
                       subject_patterns=(r"\bmy\s+(?:reservation|booking|flight)\b",),
                       intents=(ToolIntent(tool="cancel_reservation", patterns=(r"\bcancel\b",)),))
    record = {"task_id": 1, "trial": 0, "reward": 0.0, "info": {}, "traj": [
        {"role": "user", "content": "I want to cancel my reservation."},
        {"role": "assistant", "content": "I can cancel it. Would you like me to proceed with the cancellation?"},
        {"role": "user", "content": "I'll get back to you when I'm ready to proceed."},
        {"role": "assistant", "content": "Sure, take your time."},
        {"role": "user", "content": "Thanks, bye."},
    ]}
    from agent_factory.adapters.chat import _tau_conversation

    steps = timeline(_tau_conversation(record))
    assert agreements(steps, tools, confirm=CONFIRM_REGEX, deny=DENY_REGEX, ask=ASK_REGEX) == []
    found = list(deflections(steps, tools, (r"\bunable\s+to\s+access\b",)))
    assert [d.never_looked for d in found] == [True]
    assert found[0].message.unit_id.endswith("m1") and found[0].message.start == 0
