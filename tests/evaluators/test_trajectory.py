"""Trajectory: recovery-event rules, the outcome rule, friction, replay after failure; simulated traffic."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from dataclasses import astuple
from itertools import groupby
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from agent_factory.adapters.model import TASK_FINISHED, Conversation, DeliveryState, OutcomeEvent, Span, Turn
from agent_factory.evaluators.components.trajectory import analysis
from agent_factory.evaluators.components.trajectory import definitions as td
from agent_factory.evaluators.components.trajectory import rules as tr
from agent_factory.evaluators.core import Observations, RuleAnswer, RuleContext, UnitRow, get_component, get_rule
from agent_factory.evaluators.provenance.normalize import normalize
from agent_factory.factory.ingest.files import ingest_paths
from agent_factory.factory.simulate import SimConfig, behaviour, simulate, texts
from agent_factory.factory.store import Store
from agent_factory.knowledge_packs import KnowledgePack, compile_pattern, load_pack

PACK = load_pack("business_analysis")
DEFAULT = load_pack("default")
DEFS = {d.id: d for d in get_component("trajectory").definitions}
EXECUTION = {d.id: d for d in get_component("execution").definitions}


def turn(conv: str, i: int, request: str | None, answer: str | None = "ok", *,
         delivery: DeliveryState = "delivered", user: str = "u1") -> Turn:
    return Turn(id=f"{conv}-t{i}", conversation_id=conv, user_id=user, index=i, request=request, answer=answer,
                delivery=delivery)


def conv(cid: str, *turns: Turn, user: str = "u1") -> Conversation:
    return Conversation(id=cid, user_id=user, turns=turns)


def ask(item: str, c: Conversation, pack: Any = PACK) -> RuleAnswer:
    return get_rule(item)(c, RuleContext(pack=pack, definition=DEFS[item]))


def cited(c: Conversation, ptr: Any) -> str:
    t = next(t for t in c.turns if t.id == ptr.unit_id)
    return (getattr(t, ptr.field) or "")[ptr.start:ptr.end]


# ---- definitions ---------------------------------------------------------------------------------------


def test_component_registers_conversation_definitions_with_rules() -> None:
    spec = get_component("trajectory")
    ids = [d.id for d in spec.definitions]
    assert ids == [*td.RECOVERY_EVENTS, *td.BLOCKING_EVENTS, td.TURNS, td.REPLAY_TURNS, td.SESSION_ENDED]
    assert all(d.layer == "conversation" and d.component == "trajectory" for d in spec.definitions)
    for d in spec.definitions:
        assert get_rule(d.rule) is not None  # type: ignore[arg-type]
    assert DEFS[td.CONTEXT_REPAIR].tiers == ("rule", "small_model")
    assert DEFS[td.TURNS].kind == "fact" and DEFS[td.REPLAY_TURNS].kind == "fact"
    assert {a.name for a in spec.analyses} == {"trajectory.outcome", "trajectory.replay_after_failure"}


# ---- replays -------------------------------------------------------------------------------------------


def test_request_replay_near_edits_zh_and_en_with_evidence_to_both_turns() -> None:
    zh = "帮我分析一下华东区上个月的销售额，按渠道拆开看，找出主要变化原因"
    en = "Analyze gross margin for East China over Q3 2024, broken down by region, and explain the main drivers"
    c = conv("c1", turn("c1", 0, zh, delivery="failed_empty", answer=""), turn("c1", 1, "再试一次：" + zh),
             turn("c1", 2, en), turn("c1", 3, "try again: " + en), turn("c1", 4, "What about Q2 instead?"))
    a = ask(td.REQUEST_REPLAY, c)
    assert a.value == "yes" and a.fact == 2.0
    assert [(p.unit_id, p.field) for p in a.evidence] == [
        ("c1-t1", "request"), ("c1-t0", "request"), ("c1-t3", "request"), ("c1-t2", "request")]
    assert cited(c, a.evidence[0]) == "再试一次：" + zh
    assert "turn 1, 3" in (a.reason or "")
    assert ask(td.VERBATIM_REPLAY, c).value == "no"


def test_verbatim_replay_after_case_width_and_space_normalisation_is_not_a_request_replay() -> None:
    c = conv("c2", turn("c2", 0, "Forecast GMV for Q3"), turn("c2", 1, "forecast  gmv for q3 "),
             turn("c2", 2, "预测ＧＭＶ"), turn("c2", 3, "预测GMV"))
    v = ask(td.VERBATIM_REPLAY, c)
    assert v.value == "yes" and v.fact == 2.0
    assert ask(td.REQUEST_REPLAY, c).value == "no"
    assert ask(td.REPLAY_TURNS, c).fact == "1,3"


def test_replay_threshold_comes_from_the_pack_and_blank_requests_never_replay() -> None:
    a, b = "sales by region for march", "sales by region for may"
    c = conv("c3", turn("c3", 0, a), turn("c3", 1, b), turn("c3", 2, ""), turn("c3", 3, ""))
    j = tr.bigram_jaccard(a, b)
    assert 0.6 <= j < 0.9
    assert ask(td.REQUEST_REPLAY, c).value == "yes"
    strict = PACK.model_copy(update={"thresholds": PACK.thresholds.model_copy(update={"redo_jaccard": 0.95})})
    assert ask(td.REQUEST_REPLAY, c, strict).value == "no"
    assert ask(td.VERBATIM_REPLAY, c).value == "no"  # two blank requests are not a resend
    assert ask(td.REPLAY_TURNS, c).fact == "1"


def test_turn_count_fact() -> None:
    assert ask(td.TURNS, conv("c", turn("c", 0, "hi"), turn("c", 1, "more"))).fact == 2.0


# ---- lexicon events --------------------------------------------------------------------------------------


def test_context_repair_lexicon_abstain_and_single_turn() -> None:
    c = conv("c4", turn("c4", 0, "Compare GMV by channel"), turn("c4", 1, "No, I meant by region, as I said"))
    a = ask(td.CONTEXT_REPAIR, c)
    assert a.value == "yes" and a.fact == 1.0 and cited(c, a.evidence[0]).lower().startswith("no, i meant")
    zh = conv("c5", turn("c5", 0, "分析一下复购率"), turn("c5", 1, "我说的是 线上 渠道的复购率"))
    z = ask(td.CONTEXT_REPAIR, zh)
    assert z.value == "yes" and cited(zh, z.evidence[0]) == "我说的是"
    # A repair phrase in the first request repairs nothing in this session; a plain follow-up needs a model
    # (the default pack leaves the lexicon open).
    plain = conv("c6", turn("c6", 0, "As I said yesterday, churn by store"), turn("c6", 1, "Put that in a table"))
    abstained = ask(td.CONTEXT_REPAIR, plain, DEFAULT)
    assert abstained.value is None and "model" in (abstained.reason or "")
    assert ask(td.CONTEXT_REPAIR, conv("c7", turn("c7", 0, "I meant churn")), DEFAULT).value == "no"


def test_context_repair_is_decided_by_the_rule_where_the_pack_says_so() -> None:
    # business_analysis lists the item in rules_decide: finding no repair phrase is a "no", with the reason.
    assert PACK.rules_decide == (td.CONTEXT_REPAIR,) and DEFAULT.rules_decide == ()
    plain = conv("c6", turn("c6", 0, "As I said yesterday, churn by store"), turn("c6", 1, "Put that in a table"))
    decided = ask(td.CONTEXT_REPAIR, plain)
    assert (decided.value, decided.fact) == ("no", 0.0) and "rules_decide" in (decided.reason or "")
    assert decided.evidence == ()
    # A hit is still a "yes", and the same pack without the listing abstains again.
    hit = conv("c4", turn("c4", 0, "Compare GMV by channel"), turn("c4", 1, "Wrong period - I asked about Q3"))
    assert ask(td.CONTEXT_REPAIR, hit).value == "yes"
    open_pack = PACK.model_copy(update={"rules_decide": ()})
    assert ask(td.CONTEXT_REPAIR, plain, open_pack).value is None
    # The listing is read for this item only: other items' rules do not consult it.
    other = PACK.model_copy(update={"rules_decide": ("trajectory.frustration",)})
    assert ask(td.CONTEXT_REPAIR, plain, other).value is None


def test_clarification_loop_needs_two_answered_clarifications() -> None:
    ask_zh = "您好！请问想分析哪方面的数据？例如销售额、库存周转或客户流失，并告诉我时间范围。"
    ask_en = "Could you clarify which region you mean?"
    loop = conv("c8", turn("c8", 0, "你好", ask_zh), turn("c8", 1, "销售额", ask_en), turn("c8", 2, "East China"))
    a = ask(td.CLARIFICATION_LOOP, loop)
    assert a.value == "yes" and a.fact == 1.0
    assert cited(loop, a.evidence[0]) == "请问想"
    assert [(p.unit_id, p.field) for p in a.evidence[1::2]] == [("c8-t1", "request"), ("c8-t2", "request")]
    once = conv("c9", turn("c9", 0, "hi", ask_en), turn("c9", 1, "East China", "Sales rose 4%."))
    assert ask(td.CLARIFICATION_LOOP, once).value == "no"
    # The last clarifying answer was never answered by the user: not an exchange.
    unanswered = conv("c10", turn("c10", 0, "hi", ask_en), turn("c10", 1, "East", ask_en))
    assert ask(td.CLARIFICATION_LOOP, unanswered).value == "no"
    closing = conv("c11", turn("c11", 0, "GMV?", "GMV rose 3%. What else would you like to know?"),
                   turn("c11", 1, "churn", "如果您需要什么帮助，请告诉我。"), turn("c11", 2, "thanks"))
    assert ask(td.CLARIFICATION_LOOP, closing).value == "no"


def test_session_termination_follows_the_last_delivery_state() -> None:
    ended = conv("c12", turn("c12", 0, "q"), turn("c12", 1, "q2", None, delivery="failed_error"))
    a = ask(td.SESSION_TERMINATION, ended)
    assert a.value == "yes" and a.fact == 1.0 and a.evidence[0].unit_id == "c12-t1"
    failed_then_ok = conv("c13", turn("c13", 0, "q", "", delivery="failed_empty"), turn("c13", 1, "q"))
    assert ask(td.SESSION_TERMINATION, failed_then_ok).value == "no"
    unknown = ask(td.SESSION_TERMINATION, conv("c14", turn("c14", 0, "q", None, delivery="unknown")))
    assert unknown.value == "uncollected" and unknown.reason


def test_abandonment_by_lexicon_or_by_leaving_after_a_failed_retry() -> None:
    zh = conv("c15", turn("c15", 0, "分析毛利率"), turn("c15", 1, "那算了，我还是自己算吧"))
    a = ask(td.ABANDONMENT, zh)
    assert a.value == "yes" and cited(zh, a.evidence[0]) == "算了"
    retry = conv("c16", turn("c16", 0, "churn by store", "", delivery="failed_empty"),
                 turn("c16", 1, "churn by store please", "churn by", delivery="failed_truncated"))
    r = ask(td.ABANDONMENT, retry)
    assert r.value == "yes" and len(r.evidence) == 4 and "failed again" in (r.reason or "")
    # One failure at the end is session termination (struggled), not abandonment.
    single = conv("c17", turn("c17", 0, "GMV by month"), turn("c17", 1, "churn by store", "", delivery="failed_empty"))
    assert ask(td.ABANDONMENT, single).value == "no"
    assert ask(td.ABANDONMENT, conv("c18", turn("c18", 0, "我自己做了一个表，帮我分析"))).value == "no"


def test_frustration_cites_the_original_text_through_normalisation() -> None:
    c = conv("c19", turn("c19", 0, "GMV"), turn("c19", 1, "怎么 又 报错 了？？？"), turn("c19", 2, "THIS IS RIDICULOUS"))
    a = ask(td.FRUSTRATION, c)
    assert a.value == "yes" and a.fact == 2.0
    assert [cited(c, p) for p in a.evidence] == ["怎么 又 报错", "THIS IS RIDICULOUS"]
    assert ask(td.FRUSTRATION, conv("c20", turn("c20", 0, "Sales were terrible in March, why?"))).value == "no"


# ---- the packs' lexicons ---------------------------------------------------------------------------------

CATEGORIES = ("frustration", "abandonment", "clarification", "context_repair")


def _examples() -> list[tuple[str, str, str, str]]:
    return [(lang, cat, p.id, ex) for lang, lex in PACK.lexicons.items() for cat in CATEGORIES
            for p in getattr(lex, cat) for ex in p.examples]


@pytest.mark.parametrize(("lang", "category", "pattern_id", "example"), _examples())
def test_every_lexicon_example_matches_its_pattern(lang: str, category: str, pattern_id: str, example: str) -> None:
    entry = next(p for p in getattr(PACK.lexicons[lang], category) if p.id == pattern_id)
    assert compile_pattern(entry.pattern).search(normalize(example).text), (pattern_id, example)


def test_both_packs_fill_the_behaviour_lexicons_in_both_languages() -> None:
    for pack in (DEFAULT, PACK):
        for lang in ("en", "zh"):
            for cat in CATEGORIES:
                assert len(getattr(pack.lexicons[lang], cat)) >= 2, (pack.name, lang, cat)
    assert len(_examples()) >= 60


NEGATIVES = [
    "How many times did users log in last month?", "Sales were terrible in March, why?",
    "customers who bought for the second time", "我自己做了一个表，帮我分析", "帮我计算了一下毛利", "第二次复购率是多少",
    "是不是这个渠道的问题？", "不用了解太多细节，给我结论", "上面第二点能展开说说吗", "Forget the chart, show me a table",
    "购物车放弃率上升了", "估算了一下库存", "What about Q2 instead?", "Only East China, please", "again - Analyze churn",
]


def test_ordinary_requests_and_closing_offers_match_no_behaviour_lexicon() -> None:
    for text in NEGATIVES:
        for cat in ("frustration", "abandonment", "context_repair"):
            assert tr.find_lexicon(text, kind=cat, pack=PACK, unit_id="x", field="request") is None, (cat, text)
    for text in ("如果您需要什么帮助，请告诉我。", "如有其他问题，请告诉我您还需要什么。", "What else would you like to know?",
                 "Let me know if this helps.", "Is there anything else you need?"):
        assert tr.find_lexicon(text, kind="clarification", pack=PACK, unit_id="x", field="answer") is None, text


def test_simulator_texts_never_hit_and_its_clarifying_answer_does() -> None:
    import numpy as np

    rng = np.random.default_rng(3)
    for i in range(600):
        lang = "zh" if i % 2 else "en"
        req = texts.new_request(rng, lang, short=i % 5 == 0)
        follow_up, resend = texts.followup_request(rng, req, lang), texts.near_copy(rng, req, threshold=0.6)
        for text in (req.text, follow_up.text, resend.text):
            for cat in ("frustration", "abandonment", "context_repair"):
                assert tr.find_lexicon(text, kind=cat, pack=PACK, unit_id="x", field="request") is None, (cat, text)
        answer = texts.answer_text(rng, req, ("normal", "simple", "deep")[i % 3])
        hit = tr.find_lexicon(answer, kind="clarification", pack=PACK, unit_id="x", field="answer")
        assert (hit is not None) == (req.topic is None), answer


REQUEST_LEXICONS = ("frustration", "abandonment", "context_repair")


def _request_hits(text: str) -> set[str]:
    return {cat for cat in REQUEST_LEXICONS
            if tr.find_lexicon(text, kind=cat, pack=PACK, unit_id="x", field="request") is not None}


def _resends(text: str, lang: str) -> list[str]:
    """Every near-verbatim resend `texts.near_copy` can make of `text` (a resent message keeps its act)."""
    out = []
    for pre, post in texts.NEAR_EDITS[lang]:
        edited = text.rstrip("？?。.!！") + post if post else pre + text
        if texts.resend_kind(text, edited, threshold=0.6) == "near":
            out.append(edited)
    return out


def _behaviour_texts() -> list[tuple[str | None, str, str]]:
    """(lexicon the text must hit, language, text) for every template of the simulator's user behaviour, filled
    with 30 topics; context repairs with every (old, new) pair of every slot."""
    import numpy as np

    rng = np.random.default_rng(5)
    topics = [texts.new_topic(rng) for _ in range(30)]
    banks = ((behaviour.FRUSTRATION_AFTER_FAILURE, "frustration"),
             (behaviour.FRUSTRATION_AFTER_REPEAT_FAILURE, "frustration"),
             (behaviour.FRUSTRATION_AFTER_SUCCESS, "frustration"), (behaviour.ABANDONMENT_AFTER_FAILURE, "abandonment"),
             (behaviour.ABANDONMENT_AFTER_SUCCESS, "abandonment"), (behaviour.CLARIFICATION_REPLIES, None))
    out: list[tuple[str | None, str, str]] = []
    for lang in ("zh", "en"):
        i = 0 if lang == "zh" else 1
        for bank, cat in banks:
            out += [(cat, lang, tpl.format(**texts.slots(t, lang))) for tpl in bank[lang] for t in topics]
        for slot, vocab in behaviour.SLOT_VOCAB.items():
            templates = (*behaviour.REPAIR_ANY[lang], behaviour.REPAIR_BY_SLOT[slot][lang])
            for old in range(len(vocab)):
                for new in range(len(vocab)):
                    if new != old:
                        out += [("context_repair", lang, tpl.format(**texts.slots(topics[0], lang), new=vocab[new][i],
                                                                    old=vocab[old][i])) for tpl in templates]
    return out


def test_simulator_behaviour_texts_hit_their_own_lexicon_only() -> None:
    # Truth labels what each message does; a correct rule must find exactly that, and a resend of the
    # message (which keeps its label) must too. Each text hits its own behaviour's lexicon and no other.
    cases = _behaviour_texts()
    assert len(cases) > 5000
    for cat, lang, text in cases:
        want = set() if cat is None else {cat}
        for t in (text, *_resends(text, lang)):
            assert _request_hits(t) == want, (cat, t)


def test_simulator_behaviour_messages_and_the_agents_questions() -> None:
    import numpy as np

    rng = np.random.default_rng(7)
    for i in range(400):
        lang = "zh" if i % 2 else "en"
        prev = texts.new_request(rng, lang, short=i % 9 == 0)
        act = behaviour.ACTS[i % len(behaviour.ACTS)]
        msg = behaviour.act_request(rng, act, prev, lang, after_failure=i % 3 == 0, failures=(i // 3) % 3)
        assert (msg.act, msg.lang) == (act, lang) and msg.topic is not None
        if act in ("frustration", "abandonment") and prev.topic is not None:
            assert msg.topic == prev.topic  # a vent or a give-up is about the same request
        if act == "context_repair":  # the corrected topic differs from the previous one in exactly one slot
            assert prev.topic is None or sum(a != b for a, b in zip(astuple(msg.topic), astuple(prev.topic), strict=True)) == 1
        assert texts.near_copy(rng, msg, threshold=0.6).act == act
        # The agent's clarifying question is caught by the clarification lexicon; its reply to a give-up is not.
        if prev.topic is not None:
            q = behaviour.clarifying_question(rng, prev)
            assert tr.find_lexicon(q, kind="clarification", pack=PACK, unit_id="x", field="answer") is not None, q
            assert _request_hits(q) == set()
        ack = behaviour.acknowledgement(rng, lang)
        assert tr.find_lexicon(ack, kind="clarification", pack=PACK, unit_id="x", field="answer") is None, ack


# ---- the outcome rule ------------------------------------------------------------------------------------


def row(cid: str, values: dict[str, str], *, turns: int | None = 2, user: str = "u1",
        facts: dict[str, Any] | None = None) -> UnitRow:
    base = {i: "no" for i in (*td.RECOVERY_EVENTS, *td.BLOCKING_EVENTS)}
    base.update(values)
    f: dict[str, Any] = dict(facts or {})
    if turns is not None:
        base[td.TURNS] = "yes"
        f[td.TURNS] = float(turns)
    return UnitRow(cid, "conversation", user, cid, 0, None, None, "normal", base, f)


@pytest.mark.parametrize(("values", "turns", "outcome", "friction"), [
    ({td.FRUSTRATION: "yes", td.REQUEST_REPLAY: "yes", td.VERBATIM_REPLAY: "yes"}, 3, "blocked", 2),
    ({td.ABANDONMENT: "yes"}, 1, "blocked", 0),
    ({td.SESSION_TERMINATION: "yes"}, 1, "struggled", 1),  # one turn, but an event: not censored
    ({td.CLARIFICATION_LOOP: "yes"}, 4, "struggled", 1),
    ({}, 1, "censored", 0),
    ({}, 2, "smooth", 0),
    ({td.CONTEXT_REPAIR: "uncollected"}, 2, "undetermined", None),
    ({td.CONTEXT_REPAIR: "uncollected", td.REQUEST_REPLAY: "yes"}, 2, "struggled", None),
    ({td.FRUSTRATION: "uncollected", td.REQUEST_REPLAY: "yes"}, 2, "undetermined", 1),
    ({td.CONTEXT_REPAIR: "not_applicable"}, 2, "smooth", 0),
    ({}, None, "undetermined", 0),
])
def test_outcome_rule_boundaries(values: dict[str, str], turns: int | None, outcome: str, friction: int | None) -> None:
    s = analysis.session_outcome(row("s", values, turns=turns))
    assert (s.outcome, s.friction) == (outcome, friction)


@pytest.mark.parametrize(("ended", "turns", "outcome"), [
    ("yes", 1, "smooth"),     # the source saw the end: the session cannot continue, so it is not censored
    ("no", 1, "censored"),    # no end observed: it may still continue
    (None, 1, "censored"),    # the item not admitted: nothing says the session ended
    ("no", 2, "smooth"),      # the method's rule for longer sessions is unchanged
])
def test_a_session_whose_end_was_observed_is_not_censored(ended: str | None, turns: int, outcome: str) -> None:
    values = {} if ended is None else {td.SESSION_ENDED: ended}
    assert analysis.session_outcome(row("s", values, turns=turns)).outcome == outcome
    # An event still decides first: a one-turn graded session that ended on a failure struggled.
    failed = {**values, td.SESSION_TERMINATION: "yes"}
    assert analysis.session_outcome(row("s", failed, turns=turns)).outcome == "struggled"


def _one_turn(cid: str, *, spans: tuple[Span, ...] = (), events: tuple[OutcomeEvent, ...] = (),
              attributes: dict[str, Any] | None = None) -> Conversation:
    t = Turn(id=f"{cid}-t0", conversation_id=cid, request="What is 2+2?", answer="4", delivery="delivered",
             spans=spans)
    return Conversation(id=cid, turns=(t,), events=events, attributes=attributes or {})


def test_session_ended_reads_the_end_the_source_records() -> None:
    reward = OutcomeEvent(id="c/task_reward", kind="task_reward", conversation_id="c", value=0.0)
    a = ask(td.SESSION_ENDED, _one_turn("c", events=(reward,)))
    assert (a.value, [(p.unit_id, p.field) for p in a.evidence]) == ("yes", [("c/task_reward", "value")])
    assert "task_reward" in (a.reason or "")
    a = ask(td.SESSION_ENDED, _one_turn("c", attributes={TASK_FINISHED: True}))
    assert (a.value, [(p.unit_id, p.field) for p in a.evidence]) == ("yes", [("c", f"attributes.{TASK_FINISHED}")])
    # OpenInference names the tool in `tool.name`; the span is named after the tool's class.
    final = Span(id="s9", trace_id="c-t0", kind="tool", name="FinalAnswerTool",
                 attributes={"tool.name": "final_answer"})
    a = ask(td.SESSION_ENDED, _one_turn("c", spans=(final,)))
    assert (a.value, [(p.unit_id, p.field) for p in a.evidence]) == ("yes", [("s9", "name")])
    bare = Span(id="s8", trace_id="c-t0", kind="tool", name="final_answer")
    assert ask(td.SESSION_ENDED, _one_turn("c", spans=(bare,))).value == "yes"


def test_session_ended_is_no_without_a_recorded_end() -> None:
    # A delivered answer, feedback, a label or another tool say nothing about whether the session may continue.
    feedback = OutcomeEvent(id="c/feedback", kind="feedback", conversation_id="c", value=1.0)
    label = OutcomeEvent(id="c/mistake_step", kind="mistake_step", conversation_id="c", value=3.0)
    search = Span(id="s1", trace_id="c-t0", kind="tool", name="SearchTool", attributes={"tool.name": "web_search"})
    unscored = OutcomeEvent(id="c/task_reward", kind="task_reward", conversation_id="c", value=None)
    for c in (_one_turn("c"), _one_turn("c", events=(feedback, label, unscored), spans=(search,)),
              _one_turn("c", attributes={TASK_FINISHED: False})):
        a = ask(td.SESSION_ENDED, c)
        assert (a.value, a.evidence) == ("no", ()) and "may continue" in (a.reason or "")


def test_items_absent_from_a_row_are_not_admitted_and_not_read() -> None:
    r = row("s", {})
    values = {k: v for k, v in r.values.items() if k != td.CONTEXT_REPAIR}
    values[td.REQUEST_REPLAY] = "no"
    s = analysis.session_outcome(r._replace(values=values))
    assert s.outcome == "smooth" and s.uncollected == ()


def _result(results: list[Any], metric: str, unit_id: str | None = None) -> Any:
    found = [r for r in results if r.metric == metric and r.unit_id == unit_id]
    assert len(found) == 1, metric
    return found[0]


def test_outcome_analysis_shares_counts_and_mean_friction_by_hand() -> None:
    rows = [
        row("a", {td.FRUSTRATION: "yes", td.REQUEST_REPLAY: "yes"}, user="u1",
            facts={td.REQUEST_REPLAY: 2.0, td.FRUSTRATION: 1.0}),                       # blocked, F = 1
        row("b", {td.REQUEST_REPLAY: "yes", td.SESSION_TERMINATION: "yes"}, user="u1",
            facts={td.REQUEST_REPLAY: 1.0}),                                            # struggled, F = 2
        row("c", {}, turns=1, user="u2"),                                               # censored, F = 0
        row("d", {}, turns=3, user="u2"),                                               # smooth, F = 0
        row("e", {td.CONTEXT_REPAIR: "uncollected"}, user="u3"),                        # undetermined, F = ?
        row("f", {td.VERBATIM_REPLAY: "yes"}, user="u4"),                               # struggled, F = 1
    ]
    res = analysis.outcomes(Observations(rows={"conversation": rows}), PACK)
    assert [r.value for r in res if r.metric == "outcome"] == [
        "blocked", "struggled", "censored", "smooth", "undetermined", "struggled"]
    assert _result(res, "friction", "e").value is None and _result(res, "friction", "b").value == 2.0
    assert _result(res, "outcome_share.struggled").value == pytest.approx(2 / 6)
    assert _result(res, "outcome_count.struggled").value == 2 and _result(res, "outcome_count.struggled").n == 6
    share = _result(res, "outcome_share.blocked")
    assert share.low <= 1 / 6 <= share.high and "user-clustered" in share.note
    mf = _result(res, "mean_friction")
    assert mf.value == pytest.approx(statistics.mean([1, 2, 0, 0, 1])) and mf.n == 5
    assert mf.low <= mf.value <= mf.high and "1 sessions" in mf.note
    assert _result(res, "event_share.request_replay").value == pytest.approx(2 / 6)
    assert _result(res, "event_count.request_replay").value == 3.0
    unc = [r for r in res if r.metric == "uncollected" and r.stratum == f"item={td.CONTEXT_REPAIR}"]
    assert unc[0].value == 1.0
    assert all(r.analysis_version == analysis.VERSION for r in res)


def trace_row(cid: str, i: int, delivered: str | None, *, user: str = "u1") -> UnitRow:
    values = {} if delivered is None else {analysis.DELIVERED: delivered}
    return UnitRow(f"{cid}-t{i}", "trace", user, cid, i, None, None, "normal", values, {})


def test_replay_after_failure_vs_success_by_hand() -> None:
    # Session a (u1): fail -> replay -> ok -> new.  Session b (u2): ok -> replay -> fail -> new.
    # Session c (u3): fail -> replay, but the previous state of its second pair is undecided.
    traces = [trace_row("a", 0, "no"), trace_row("a", 1, "yes"), trace_row("a", 2, "yes"), trace_row("a", 3, "yes"),
              trace_row("b", 0, "yes", user="u2"), trace_row("b", 1, "no", user="u2"),
              trace_row("b", 2, "yes", user="u2"),
              trace_row("c", 0, "no", user="u3"), trace_row("c", 1, None, user="u3"),
              trace_row("c", 2, "yes", user="u3")]
    convs = [row(cid, {td.REPLAY_TURNS: "yes"}, facts={td.REPLAY_TURNS: replayed}, user=user)
             for cid, replayed, user in (("a", "1", "u1"), ("b", "1", "u2"), ("c", "1,2", "u3"))]
    res = analysis.replay_after_failure(Observations(rows={"trace": traces, "conversation": convs}), PACK)
    after_fail, after_ok = _result(res, "replay_after_failure"), _result(res, "replay_after_success")
    # After failure: a0->a1 replay, b1->b2 not, c0->c1 replay.  After success: a1->a2 no, a2->a3 no, b0->b1 yes.
    assert (after_fail.value, after_fail.n) == (pytest.approx(2 / 3), 3)
    assert (after_ok.value, after_ok.n) == (pytest.approx(1 / 3), 3)
    assert "1 pairs with the previous delivery undecided" in after_fail.note
    assert analysis.replay_indices("") == set() and analysis.replay_indices(3.0) == {3}
    assert analysis.replay_indices("x") is None


# ---- simulated traffic -----------------------------------------------------------------------------------
# The simulator labels what each message does (a vent, a give-up, a context repair, the answer to a clarifying
# question), which turns resend the previous one, and what each answer asks; truth_sessions.jsonl applies the
# event definitions and the outcome rule to those labels, without any lexicon. The rules read only the ingested
# traces. Seed 0 is the simulator's default, chosen before looking at any result.

USERS = 350
OUTCOME_LABELS = ("smooth", "struggled", "blocked", "censored")
STUDY_SHARE = {"smooth": 14 / 107, "struggled": 34 / 107, "blocked": 13 / 107, "censored": 46 / 107}
EVENT_ITEMS = (*td.RECOVERY_EVENTS, *td.BLOCKING_EVENTS)


def collect_rules_only(c: Conversation, pack: KnowledgePack = PACK) -> UnitRow:
    """Apply every Trajectory rule to one conversation as a rules-only run would: abstain -> uncollected."""
    values: dict[str, str] = {}
    facts: dict[str, Any] = {}
    for d in get_component("trajectory").definitions:
        a = ask(d.id, c, pack)
        values[d.id] = a.value if a.value is not None else "uncollected"
        if a.fact is not None:
            facts[d.id] = a.fact
    return UnitRow(c.id, "conversation", c.user_id, c.id, 0, None, None, c.turns[0].mode, values, facts)


def delivered_row(t: Turn) -> UnitRow:
    a = get_rule(analysis.DELIVERED)(t, RuleContext(pack=PACK, definition=EXECUTION[analysis.DELIVERED]))
    return UnitRow(t.id, "trace", t.user_id, t.conversation_id, t.index, None, None, t.mode,
                   {analysis.DELIVERED: a.value}, {})


class Simulated(NamedTuple):
    convs: list[Conversation]
    """Real sessions as ingested, turns in order."""
    truth: dict[str, dict]
    """truth.jsonl by trace (turn) id."""
    sessions: dict[str, dict]
    """truth_sessions.jsonl by session (conversation) id."""
    summary: dict


def _simulate(out: Path, config: SimConfig) -> Simulated:
    simulate(config, out)
    with Store(out / "store.duckdb") as store:
        ingest_paths(store, [out / "traces.otlp.jsonl"], pack=PACK)
        turns = list(store.iter_turns(segment="real"))  # by conversation, then turn index
    convs = [Conversation(id=cid, user_id=ts[0].user_id, turns=tuple(sorted(ts, key=lambda t: t.index)))
             for cid, ts in ((k, list(g)) for k, g in groupby(turns, key=lambda t: t.conversation_id))]
    with open(out / "truth.jsonl", encoding="utf-8") as f:
        truth = {r["trace_id"]: r for r in map(json.loads, f)}
    with open(out / "truth_sessions.jsonl", encoding="utf-8") as f:
        sessions = {r["session_id"]: r for r in map(json.loads, f)}
    summary = json.loads((out / "truth_summary.json").read_text(encoding="utf-8"))
    return Simulated(convs, truth, sessions, summary)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Simulated:
    """Default traffic of 350 users at the simulator's default seed."""
    return _simulate(tmp_path_factory.mktemp("sim"), SimConfig(users=USERS))


@pytest.fixture(scope="module")
def rules_only(simulated: Simulated) -> list[UnitRow]:
    """Every session's Trajectory data as a rules-only run with the business-analysis pack collects it."""
    return [collect_rules_only(c) for c in simulated.convs]


def _precision_recall(pred: set[str], true: set[str]) -> tuple[float, float]:
    return len(pred & true) / len(pred), len(pred & true) / len(true)


@pytest.mark.slow
def test_replay_rules_against_simulator_truth(simulated: Simulated,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # The simulator labels a turn a replay exactly when its logged request resends the previous one of its
    # session by the definition, so the rule and truth must agree (bar what ingest changes in the texts).
    convs, truth = simulated.convs, simulated.truth
    assert len(convs) > 500
    pred_any: set[str] = set()
    pred_verbatim: set[str] = set()
    for c in convs:
        for _, cur, kind in tr.replays(c, PACK):
            pred_any.add(cur.id)
            if kind == "verbatim":
                pred_verbatim.add(cur.id)
    ids = {t.id for c in convs for t in c.turns}
    true_any = {i for i in ids if truth[i]["is_replay"]}
    true_verbatim = {i for i in ids if truth[i]["is_verbatim_replay"]}
    p_any, r_any = _precision_recall(pred_any, true_any)
    p_verb, r_verb = _precision_recall(pred_verbatim, true_verbatim)
    with capsys.disabled():
        print(f"\nreplay rule vs simulator truth: any replay precision {p_any:.3f} recall {r_any:.3f} "
              f"(n={len(true_any)}, {len(pred_any - true_any)} unlabelled, {len(true_any - pred_any)} missed); "
              f"verbatim precision {p_verb:.3f} recall {r_verb:.3f} (n={len(true_verbatim)})")
    assert len(true_any) > 100 and len(true_verbatim) > 50
    assert p_any >= 0.95 and r_any >= 0.95
    assert p_verb >= 0.95 and r_verb >= 0.95
    assert all(truth[i]["replay_of"] is not None for i in true_any)


def _event_disagreements(convs: list[Conversation], rows: list[UnitRow], sessions: dict[str, dict]
                         ) -> tuple[Counter[str], list[tuple[str, str, int, str, Any]]]:
    """(sessions where each event occurred by truth, (session, event, truth count, rule value, rule fact) for
    every session where the rule's value or count differs from truth)."""
    occurred: Counter[str] = Counter()
    wrong = []
    for c, r in zip(convs, rows, strict=True):
        events = sessions[c.id]["events"]
        for item in EVENT_ITEMS:
            k = events[analysis.short(item)]
            occurred[item] += k > 0
            if (r.values[item] == "yes") != (k > 0) or r.facts.get(item) != k:
                wrong.append((c.id, item, k, r.values[item], r.facts.get(item)))
    return occurred, wrong


@pytest.mark.slow
def test_event_rules_agree_with_the_simulators_session_truth(simulated: Simulated, rules_only: list[UnitRow],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    # Every event of every session, yes/no and its count: what the rules find in the ingested traces is what
    # the simulator's labels say, including context repair decided by its lexicon (rules_decide).
    convs, sessions = simulated.convs, simulated.sessions
    assert {c.id for c in convs} == set(sessions)
    occurred, wrong = _event_disagreements(convs, rules_only, sessions)
    with capsys.disabled():
        print(f"\nsessions with each event (truth, n={len(convs)}): "
              + ", ".join(f"{analysis.short(i)} {occurred[i]}" for i in EVENT_ITEMS)
              + f"; rule disagreements: {len(wrong)}")
    assert all(occurred[i] >= 10 for i in EVENT_ITEMS), occurred
    assert wrong == []


PLANTS = {"plant_blank_rate": 0.15, "plant_replay_rate": 0.15, "plant_disclosure_rate": 0.2,
          "plant_template_rate": 0.2, "plant_injection_rate": 0.2, "plant_secret_rate": 0.2, "defect_user_share": 0.5}


@pytest.mark.slow
def test_session_truth_follows_planted_defects(tmp_path: Path) -> None:
    # Planted defects rewrite the logs: a blanked answer no longer asks to clarify and may end a session in
    # failure, a planted resend copies what the previous message did. Truth follows the logs, so the rules
    # still agree with it session by session.
    sim = _simulate(tmp_path, SimConfig(users=120, seed=4, **PLANTS))
    rows = [collect_rules_only(c) for c in sim.convs]
    occurred, wrong = _event_disagreements(sim.convs, rows, sim.sessions)
    assert sum(r["planted"] != [] for r in sim.truth.values()) > 100
    assert occurred[td.FRUSTRATION] > 0 and occurred[td.CONTEXT_REPAIR] > 0
    assert wrong == []


@pytest.mark.slow
def test_rules_only_replay_after_failure_on_simulated_traffic(simulated: Simulated, rules_only: list[UnitRow],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    convs, summary = simulated.convs, simulated.summary
    trace_rows = [delivered_row(t) for c in convs for t in c.turns]
    obs = Observations(rows={"conversation": rules_only, "trace": trace_rows})
    res = analysis.replay_after_failure(obs, PACK)
    fail_r, ok_r = _result(res, "replay_after_failure"), _result(res, "replay_after_success")
    fail_t, ok_t = summary["conversation"]["replay_after_failure"], summary["conversation"]["replay_after_success"]
    with capsys.disabled():
        print(f"\ndefault traffic: replay after failure {fail_r.value:.3f} ({fail_r.low:.3f}-{fail_r.high:.3f}, "
              f"n={fail_r.n}), truth {fail_t['rate']:.3f}; after success {ok_r.value:.3f} ({ok_r.low:.3f}-"
              f"{ok_r.high:.3f}, n={ok_r.n}), truth {ok_t['rate']:.3f}")
    assert (fail_r.n, ok_r.n) == (fail_t["n"], ok_t["n"])
    # Truth's rates are what a correct estimator should find: the rule's 95% intervals must cover them.
    assert fail_r.low <= fail_t["rate"] <= fail_r.high
    assert ok_r.low <= ok_t["rate"] <= ok_r.high
    assert fail_r.value > ok_r.value + 0.15


@pytest.mark.slow
def test_rules_only_outcome_shares_cover_the_simulators_truth(simulated: Simulated, rules_only: list[UnitRow],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    convs, sessions, summary = simulated.convs, simulated.sessions, simulated.summary
    out = analysis.outcomes(Observations(rows={"conversation": rules_only}), PACK)
    counts = {o: int(_result(out, f"outcome_count.{o}").value) for o in analysis.OUTCOMES}
    truth = summary["trajectory"]["outcome_share"]
    lines = []
    for label in OUTCOME_LABELS:
        r, t = _result(out, f"outcome_share.{label}"), truth[label]
        lines.append(f"{label} {r.value:.3f} ({r.low:.3f}-{r.high:.3f}) truth {t['rate']:.3f} "
                     f"[{t['k']}/{t['n']}], study {STUDY_SHARE[label]:.3f}")
    mf, mf_t = _result(out, "mean_friction"), summary["trajectory"]["mean_friction"]
    per_session = {r.unit_id: r.value for r in out if r.metric == "outcome"}
    confusion = Counter((sessions[cid]["outcome"], label) for cid, label in per_session.items())
    with capsys.disabled():
        print(f"\nrules-only outcome shares, {len(convs)} sessions of {USERS} users (user-clustered 95% CI):\n  "
              + "\n  ".join(lines)
              + f"\n  mean friction {mf.value:.3f} ({mf.low:.3f}-{mf.high:.3f}) truth {mf_t:.3f}; "
              f"undetermined {counts['undetermined']}; off-diagonal sessions "
              f"{sum(n for (a, b), n in confusion.items() if a != b)}")
    # Rules decide every session: context repair by its lexicon (rules_decide), the rest by rule anyway.
    assert counts["undetermined"] == 0 and sum(counts.values()) == len(convs)
    assert all(truth[o]["n"] == len(convs) for o in OUTCOME_LABELS)
    for label in OUTCOME_LABELS:
        r = _result(out, f"outcome_share.{label}")
        assert r.n == len(convs) and "user-clustered" in (r.note or "")
        assert r.low <= truth[label]["rate"] <= r.high, label
        assert truth[label]["k"] >= 50, label  # every outcome is well represented
    assert mf.low <= mf_t <= mf.high
    assert all(a == b for a, b in confusion)  # and session by session, the same label


@pytest.mark.slow
def test_without_rules_decide_quiet_multi_turn_sessions_stay_undetermined(simulated: Simulated) -> None:
    # The same traffic with the pack's listing removed: context repair abstains wherever no phrase is found,
    # so exactly the sessions truth calls smooth (several turns, no event) cannot be told apart from a
    # repair in the user's own words; none is guessed smooth.
    open_pack = PACK.model_copy(update={"rules_decide": ()})
    rows = [collect_rules_only(c, open_pack) for c in simulated.convs]
    out = analysis.outcomes(Observations(rows={"conversation": rows}), open_pack)
    counts = {o: int(_result(out, f"outcome_count.{o}").value) for o in analysis.OUTCOMES}
    smooth = simulated.summary["trajectory"]["outcome_share"]["smooth"]["k"]
    assert counts["smooth"] == 0 and counts["undetermined"] == smooth > 0
    single = {c.id for c in simulated.convs if len(c.turns) == 1}
    per_session = {r.unit_id: r.value for r in out if r.metric == "outcome"}
    assert {per_session[c] for c in single} <= {"censored", "struggled", "blocked"}
