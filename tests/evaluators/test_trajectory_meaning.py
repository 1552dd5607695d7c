"""Trajectory flags that mean what they say (issue 32): a confirmation request is no clarification, a reply to the
agent is no replay, and one event raises one bad flag. Hand-built conversations in both languages, then the real
tau-bench airline trajectories checked against an oracle read independently from their text."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from agent_factory.adapters.chat import TauBenchAdapter
from agent_factory.adapters.model import Conversation, Turn
from agent_factory.evaluators.components.trajectory import FLAGS
from agent_factory.evaluators.components.trajectory import definitions as td
from agent_factory.evaluators.components.trajectory import rules as tr
from agent_factory.evaluators.core import RuleAnswer, RuleContext, get_component, get_rule
from agent_factory.evaluators.findings import DatumRow, ResultRow, UnitKey, bad_flags, flag_counts, flag_table
from agent_factory.knowledge_packs import KnowledgePack, load_pack
from tests.conftest import shared_data

DEFAULT = load_pack("default")
AIRLINE = load_pack("airline")
DEFS = {d.id: d for d in get_component("trajectory").definitions}


def turn(cid: str, i: int, request: str, answer: str | None, delivery: Any = "delivered") -> Turn:
    return Turn(id=f"{cid}-t{i}", conversation_id=cid, user_id="u1", index=i, request=request, answer=answer,
                delivery=delivery)


def conv(cid: str, *pairs: tuple[str, str | None]) -> Conversation:
    return Conversation(id=cid, user_id="u1", turns=tuple(
        turn(cid, i, q, a, "delivered" if a else "failed_empty") for i, (q, a) in enumerate(pairs)))


def ask(item: str, c: Conversation, pack: KnowledgePack = DEFAULT) -> RuleAnswer:
    return get_rule(item)(c, RuleContext(pack=pack, definition=DEFS[item]))


def clarifies(text: str, pack: KnowledgePack = DEFAULT) -> bool:
    return tr.find_lexicon(text, kind="clarification", pack=pack, unit_id="x", field="answer") is not None


# ---- (a) a confirmation request is no clarification ---------------------------------------------------

CONFIRMATIONS = [
    "Could you please confirm if you would like me to proceed with the cancellation?",
    "Please confirm whether you'd like me to go ahead with this change.",
    "Do you want me to proceed with the upgrade?",
    "Do you want to proceed with these changes?",
    "Could you let me know whether I should book this flight?",
    "请确认是否取消这个预订？",
    "需要您确认是否继续办理。",
]
CLARIFICATIONS = [
    "Could you please specify the exact destination on the West Coast?",
    "Could you confirm which reservation you mean?",
    "Please confirm which payment method you'd like to use.",
    "Do you mean the outbound or the return flight?",
    "Which flight would you like to change?",
    "请问您想改哪个航班？",
    "请确认一下您想要哪种舱位",
    "需要您确认一下统计口径：按下单时间还是按支付时间？",
]


@pytest.mark.parametrize("text", CONFIRMATIONS)
def test_asking_for_the_go_ahead_is_no_clarification(text: str) -> None:
    assert not clarifies(text) and not clarifies(text, AIRLINE), text


@pytest.mark.parametrize("text", CLARIFICATIONS)
def test_asking_what_the_user_meant_or_for_missing_information_is_one(text: str) -> None:
    assert clarifies(text) and clarifies(text, AIRLINE), text


def test_two_confirmations_answered_yes_are_no_clarification_loop() -> None:
    ask_yes = "I will cancel reservation S61CZX. Could you please confirm if you would like me to proceed?"
    c = conv("c1", ("Cancel my trip S61CZX", ask_yes), ("Yes, please cancel it.", "Done. Do you want me to proceed "
             "with the upgrade of the other bookings too?"), ("Yes, go ahead.", "All upgraded."))
    a = ask(td.CLARIFICATION_LOOP, c)
    assert (a.value, a.fact) == ("no", 0.0) and "no clarification exchange" in a.reason
    # Two questions about what the user meant, each answered: the loop the item names, with its evidence.
    loop = conv("c2", ("Book me a flight to the West Coast", "Could you please specify which city you mean?"),
                ("Somewhere cheap", "Could you clarify which dates you mean?"), ("Next week", "Here are flights."))
    b = ask(td.CLARIFICATION_LOOP, loop)
    assert (b.value, b.fact) == ("yes", 1.0)
    assert [p.field for p in b.evidence] == ["answer", "request", "answer", "request"]


# ---- (b) a reply to the agent is no replay ------------------------------------------------------------

def test_reconfirmation_after_the_agent_asked_again_is_no_replay() -> None:
    c = conv("c3",
             ("Please upgrade reservation M20IZO to business class.",
              "The upgrade costs $300. Please confirm if you'd like me to proceed with this payment method."),
             ("Yes, please proceed with the upgrade using my card ending in 7334.",
              "I found the card ending in 7334. Please confirm if you'd like me to proceed."),
             ("Yes, please proceed with the upgrade using my card ending in 7334.", "Your reservation is upgraded."))
    for item in (td.VERBATIM_REPLAY, td.REQUEST_REPLAY):
        assert (ask(item, c).value, ask(item, c).fact) == ("no", 0.0), item
    assert ask(td.REPLAY_TURNS, c).fact == ""


def test_a_pick_among_options_and_a_chinese_yes_are_replies() -> None:
    c = conv("c4", ("Change my flight to Friday", "Option 1: $120. Option 2: $190. Which one?"),
             ("Option 2, please, the later one", "Option 2 costs $190. Shall I book option 2?"),
             ("Option 2, please, the later one.", "Booked."))
    assert ask(td.VERBATIM_REPLAY, c).value == "no"
    zh = conv("c5", ("帮我取消订单", "请确认是否取消订单A？"), ("是的，请取消", "请再确认一次：取消订单A？"), ("是的，请取消", "已取消。"))
    assert ask(td.VERBATIM_REPLAY, zh).value == "no"


def test_a_resent_request_is_still_a_replay() -> None:
    # The same yes after an answer that never came: nothing was asked, the user resends.
    blank = conv("c6", ("Cancel S61CZX", "Shall I cancel it?"), ("Yes, cancel it", None), ("Yes, cancel it", "Done."))
    a = ask(td.VERBATIM_REPLAY, blank)
    assert (a.value, a.fact) == ("yes", 1.0) and "turn 2" in a.reason
    # A correction opens like a "no" but restates the request: resent verbatim, it is a replay.
    fix = conv("c7", ("Revenue by region", "Here it is for Q2."), ("No, I meant Q3 2024", "Q2 again."),
               ("No, I meant Q3 2024", "Q3 now."))
    assert ask(td.VERBATIM_REPLAY, fix).value == "yes"
    # A request re-asked in other words, not opening as a reply, stays a near replay.
    again = conv("c8", ("Could you check if I'm a gold member? I need the number of free bags.", "You are silver."),
                 ("Could you check again if I'm a gold member? I need the number of free bags.", "Still silver."))
    assert ask(td.REQUEST_REPLAY, again).value == "yes"


# ---- (c) one event, one bad flag ----------------------------------------------------------------------

def test_one_frustration_raises_one_bad_flag_and_the_outcome_stays_descriptive() -> None:
    outcome_flags = [f for f in FLAGS if f.source == "result"]
    assert outcome_flags and all(f.meaning == "descriptive" for f in outcome_flags)
    assert all(f.meaning == "bad" for f in FLAGS if f.source == "datum")
    units = [UnitKey("c", "conversation", "c", "u1")]
    data = [DatumRow("c", item, "yes" if item == td.FRUSTRATION else "no")
            for item in (*td.RECOVERY_EVENTS, *td.BLOCKING_EVENTS)]
    rows = flag_table(FLAGS, units, data, [ResultRow("c", "trajectory", "outcome", "blocked")])
    raised = {r.flag for r in rows if r.value == 1}
    assert raised == {"trajectory.frustration", "trajectory.struggled_or_blocked", "trajectory.blocked"}
    assert flag_counts(rows, counted=bad_flags(FLAGS)) == {"c": {"trajectory": 1}}


# ---- the real airline trajectories: an independent oracle ---------------------------------------------

_YES = re.compile(r"^\W*(?:yes|sure|ok(?:ay)?|go ahead|option \d)\b", re.I)
_GO_AHEAD = re.compile(r"confirm\s+(?:if|whether|that)\b|\bwant\s+me\s+to\b|\bwant\s+to\s+proceed\b", re.I)


@pytest.mark.realdata
def test_airline_replays_and_clarifications_mean_what_they_say() -> None:
    path = shared_data("tau-bench-airline-gpt4o", "gpt-4o-airline.json")
    convs = [c.model_copy(update={"turns": tuple(t for t in c.turns if t.delivery != "closing")})
             for c in TauBenchAdapter().read(path) if isinstance(c, Conversation)]
    assert len(convs) == len(json.loads(path.read_text(encoding="utf-8"))) == 128
    for c in convs:
        by_id = {t.id: t for t in c.turns}
        for item in (td.REQUEST_REPLAY, td.VERBATIM_REPLAY):
            a = ask(item, c, AIRLINE)
            resent = [by_id[p.unit_id] for p in a.evidence[::2]]  # (resent, previous) pairs
            # No replay is a message opening with a yes or a pick right after the agent answered.
            assert not any(_YES.match(t.request or "") and c.turns[t.index - 1].answer for t in resent), (c.id, item)
        a = ask(td.CLARIFICATION_LOOP, c, AIRLINE)
        for p in a.evidence[::2]:
            text = (getattr(by_id[p.unit_id], p.field) or "")[p.start:p.end + 40]
            # The cited clarifying phrase never asks for the go-ahead on an action.
            assert not _GO_AHEAD.search(text), (c.id, text)
