"""Substance: checklist definitions, applicability rules, C2 on truncation markers, and S(x) by hand."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest
from scipy import stats

from agent_factory.adapters.model import DeliveryState, Span, Turn
from agent_factory.evaluators.components import substance
from agent_factory.evaluators.components.substance import analysis
from agent_factory.evaluators.components.substance import definitions as sd
from agent_factory.evaluators.components.substance import rules as sr
from agent_factory.evaluators.core import Observations, RuleContext, UnitRow, get_component, get_rule
from agent_factory.knowledge_packs import load_pack

PACK = load_pack("business_analysis")
DEFS = {d.id: d for d in get_component("substance").definitions}
DELIVERED_DEF = next(d for d in get_component("execution").definitions if d.id == analysis.DELIVERED)


def turn(request: str | None = "Analyze churn", answer: str | None = "Churn fell 2% in March.", *,
         delivery: DeliveryState = "delivered", spans: tuple[Span, ...] = (), tid: str = "t1") -> Turn:
    return Turn(id=tid, conversation_id="c1", user_id="u1", request=request, answer=answer, delivery=delivery,
                spans=spans)


def applies(rule_name: str, t: Turn) -> Any:
    return get_rule(rule_name)(t, RuleContext(pack=PACK, definition=DEFS[sd.I1]))


# ---- definitions ---------------------------------------------------------------------------------------


def test_eight_model_items_with_registered_applicability_and_full_text() -> None:
    spec = get_component("substance")
    assert [d.id for d in spec.definitions] == list(sd.ITEMS)
    for d in spec.definitions:
        assert d.layer == "trace" and d.component == "substance" and d.question.endswith("?")
        assert d.tiers[-2:] == ("small_model", "jury")
        assert d.projection.max_chars is None and d.projection.strategy == "full"
        assert get_rule(d.applies_when) is not None  # type: ignore[arg-type]
    assert DEFS[sd.C2].rule == sd.C2 and DEFS[sd.C2].tiers == ("rule", "small_model", "jury")
    assert all(DEFS[i].rule is None and DEFS[i].tiers == ("small_model", "jury") for i in sd.ITEMS if i != sd.C2)
    assert DEFS[sd.I3].applies_when == sd.APPLIES_CONTEXT and "spans.output" in DEFS[sd.I3].projection.fields
    assert DEFS[sd.I2].applies_when == sd.APPLIES_CONSTRAINTS and DEFS[sd.C1].applies_when == sd.APPLIES_MULTIPART


def test_applicability_patterns_enter_the_definition_digests() -> None:
    assert substance.DEFINITIONS == sd.build(sr.RULES_DIGEST)
    other = sd.build("r-other")
    assert all(a.digest() != b.digest() for a, b in zip(substance.DEFINITIONS, other, strict=True))


# ---- applicability -------------------------------------------------------------------------------------


@pytest.mark.parametrize("delivery", ["failed_empty", "failed_error", "failed_truncated", "unknown"])
def test_nothing_applies_to_an_undelivered_turn(delivery: DeliveryState) -> None:
    t = turn("Only East China, in a table, and explain the drivers", "", delivery=delivery,
             spans=(Span(id="s", trace_id="t1", kind="retrieval", output="docs"),))
    for name in (sd.APPLIES_DELIVERED, sd.APPLIES_CONSTRAINTS, sd.APPLIES_CONTEXT, sd.APPLIES_MULTIPART):
        a = applies(name, t)
        assert a.value == "no" and delivery in (a.reason or ""), name


@pytest.mark.parametrize(("request_text", "constraint", "multipart"), [
    ("Write a short brief for my boss on GMV, max three paragraphs, with a table by region", True, False),
    ("Analyze churn for East China over Q3, broken down by channel, and explain the main drivers", False, True),
    ("Why did GMV drop? Which stores lag most?", False, True),
    ("Forecast next quarter's GMV and state your assumptions", True, True),
    ("Only East China, please", True, False),
    ("Why did margin drop in March", False, False),
    ("给老板写一份华东区上个月销售额简报，三段以内，附按区域的表格", True, False),
    ("用上个月订单数据做漏斗分析，按渠道输出结果并标出异常值", False, True),
    ("帮我分析一下华东区的毛利率，按门店拆开看，找出主要变化原因", False, True),
    ("只看华东区的呢", True, False),
    ("上面第二点能展开说说吗", False, False),
    ("2024年第三季度线上商城的复购率为什么下降了？", False, False),
    ("请列出：1. 总体情况 2. 主要原因", False, True),
])
def test_constraint_and_multipart_cues(request_text: str, constraint: bool, multipart: bool) -> None:
    t = turn(request_text)
    c, m = applies(sd.APPLIES_CONSTRAINTS, t), applies(sd.APPLIES_MULTIPART, t)
    assert (c.value == "yes", m.value == "yes") == (constraint, multipart)
    for a in (c, m):
        if a.value == "yes":
            p = a.evidence[0]
            assert p.field == "request" and 0 <= p.start < p.end <= len(request_text)


def test_context_applies_with_retrieval_or_a_tool_result() -> None:
    retrieval = Span(id="r1", trace_id="t1", parent_id="root", kind="retrieval", output="metric definition: GMV")
    tool = Span(id="k1", trace_id="t1", parent_id="root", kind="tool", output="ok: 12 rows")
    empty_tool = Span(id="k2", trace_id="t1", parent_id="root", kind="tool", output=None)
    a = applies(sd.APPLIES_CONTEXT, turn(spans=(retrieval,)))
    assert a.value == "yes" and (a.evidence[0].unit_id, a.evidence[0].field, a.evidence[0].end) == ("r1", "output", 22)
    assert applies(sd.APPLIES_CONTEXT, turn(spans=(empty_tool, tool))).evidence[0].unit_id == "k1"
    assert applies(sd.APPLIES_CONTEXT, turn(spans=(empty_tool,))).value == "no"
    assert applies(sd.APPLIES_DELIVERED, turn()).value == "yes"


# ---- C2: the one cheap judgment ---------------------------------------------------------------------------


@pytest.mark.parametrize(("answer", "marker"), [
    ("GMV rose 4% in East China, driven by [truncated]", "[truncated]"),
    ("GMV rose 4% ... [TRUNCATED]  \n", "[TRUNCATED]"),
    ("华东区毛利率为23.4%，同比变化…[内容已截断]", "…[内容已截断]"),
    ("华东区毛利率为23.4%（已截断）", "（已截断）"),
])
def test_c2_says_no_when_the_answer_ends_in_a_truncation_marker(answer: str, marker: str) -> None:
    a = get_rule(sd.C2)(turn(answer=answer), RuleContext(pack=PACK, definition=DEFS[sd.C2]))
    assert a.value == "no"
    p = a.evidence[0]
    assert (p.unit_id, p.field) == ("t1", "answer") and answer[p.start:p.end] == marker


def test_c2_abstains_otherwise() -> None:
    for answer in ("GMV rose 4%. Next step: review the stores.", "see [truncated] logs below for details", None):
        a = get_rule(sd.C2)(turn(answer=answer), RuleContext(pack=PACK, definition=DEFS[sd.C2]))
        assert a.value is None and "model" in (a.reason or "")


# ---- S(x) ----------------------------------------------------------------------------------------------


def trow(uid: str, mode: str | None, delivered: str | None, items: dict[str, str], *, user: str = "u1") -> UnitRow:
    values: dict[str, str] = {i: "not_applicable" for i in sd.ITEMS}
    values.update(items)
    if delivered is not None:
        values[analysis.DELIVERED] = delivered
    return UnitRow(uid, "trace", user, "c", 0, None, None, mode, values, {})


Y, N, U = "yes", "no", "uncollected"


def hand_rows() -> list[UnitRow]:
    """Two modes; failed turns, scored delivered turns and one delivered turn with nothing collected."""
    return [
        trow("n1", "normal", "yes", {sd.I1: Y, sd.S1: Y, sd.E1: N}, user="u1"),              # 2/3
        trow("n2", "normal", "yes", {sd.I1: Y, sd.S1: Y, sd.S2: Y, sd.C2: Y}, user="u2"),    # 1
        trow("n3", "normal", "yes", {sd.I1: U, sd.S1: U, sd.S2: U, sd.E1: U}, user="u3"),    # undefined
        trow("n4", "normal", "yes", {sd.I1: Y, sd.C2: N, sd.S2: U}, user="u4"),              # 1/2
        trow("n5", "normal", "no", {}, user="u5"),                                          # 0
        trow("s1", "simple", "yes", {sd.I1: Y}, user="u1"),                                 # 1
        trow("s2", "simple", "yes", {sd.I1: N, sd.I2: N}, user="u2"),                       # 0
        trow("s3", "simple", "no", {}, user="u3"),                                          # 0
        trow("x1", "simple", None, {sd.I1: Y}, user="u3"),                                  # delivery undecided
    ]


def _get(results: list[Any], metric: str, stratum: str = "all") -> Any:
    found = [r for r in results if r.metric == metric and r.stratum == stratum]
    assert len(found) == 1, (metric, stratum)
    return found[0]


def test_turn_score_by_hand() -> None:
    rows = {r.unit_id: r for r in hand_rows()}
    assert analysis.turn_score(rows["n1"]).score == pytest.approx(2 / 3)
    assert analysis.turn_score(rows["n4"])[1:] == (0.5, 1, 2, 1)
    assert analysis.turn_score(rows["n3"]).score is None and analysis.turn_score(rows["n3"]).uncollected == 4
    assert analysis.turn_score(rows["n5"]) == analysis.TurnScore(False, 0.0, 0, 0, 0)
    assert analysis.turn_score(rows["x1"]).delivered is None and analysis.turn_score(rows["x1"]).score is None


def test_population_s_with_stratum_weights_matches_the_hand_value() -> None:
    res = analysis.score(Observations(rows={"trace": hand_rows()}), PACK)
    # Strata mode x delivery.  normal|delivered: N = 4 turns, n = 3 scored (2/3, 1, 1/2) -> each weighs 4/3.
    # normal|failed: N = n = 1 (0).  simple|delivered: N = n = 2 (1, 0).  simple|failed: N = n = 1 (0).
    nd = [2 / 3, 1.0, 0.5]
    hand = (4 * statistics.mean(nd) + 1 * 0.0 + 2 * 0.5 + 1 * 0.0) / 8
    s = _get(res, "S")
    assert s.value == pytest.approx(hand) and s.value == pytest.approx(0.4861111)
    assert s.n == 7
    # Only normal|delivered was sampled: var = W^2 (1 - n/N) s^2 / n with W = 4/8.
    half = stats.norm.ppf(0.975) * math.sqrt((4 / 8) ** 2 * (1 - 3 / 4) * statistics.variance(nd) / 3)
    assert (s.low, s.high) == (pytest.approx(hand - half), pytest.approx(hand + half))
    assert "w_h = N_h / n_h" in s.note
    normal, simple = _get(res, "S", "mode=normal"), _get(res, "S", "mode=simple")
    assert normal.value == pytest.approx(4 * statistics.mean(nd) / 5)
    assert simple.value == pytest.approx((2 * 0.5 + 0.0) / 3)
    assert simple.low == simple.high == pytest.approx(simple.value)  # a census: no sampling error


def test_pass_rates_uncollected_and_unscored_counts() -> None:
    res = analysis.score(Observations(rows={"trace": hand_rows()}), PACK)
    i1 = _get(res, "pass_rate.i1_answers_task")
    assert (i1.value, i1.n) == (pytest.approx(4 / 5), 5)  # n1 n2 n4 s1 yes, s2 no; n3 uncollected; x1 undecided
    assert i1.low <= i1.value <= i1.high and "user-clustered" in i1.note
    assert _get(res, "pass_rate.i1_answers_task", "mode=simple").value == pytest.approx(1 / 2)
    c2 = _get(res, "pass_rate.c2_closes_properly")
    assert (c2.value, c2.n) == (pytest.approx(1 / 2), 2)
    none = _get(res, "pass_rate.i3_uses_context")
    assert none.value is None and none.n == 0
    assert _get(res, "uncollected", f"item={sd.S2}").value == 2.0
    assert _get(res, "no_collected_items").value == 1.0 and _get(res, "no_collected_items").n == 6
    assert _get(res, "delivery_undecided").value == 1.0
    assert all(r.analysis_version == analysis.VERSION for r in res)


def collect_rules_only(t: Turn) -> UnitRow:
    """What a run with no model configured records for one turn: rules and applicability; the rest uncollected."""
    values: dict[str, str] = {}
    for d in get_component("substance").definitions:
        ctx = RuleContext(pack=PACK, definition=d)
        if d.applies_when and get_rule(d.applies_when)(t, ctx).value != "yes":
            values[d.id] = "not_applicable"
            continue
        answer = get_rule(d.rule)(t, ctx) if d.rule else None
        values[d.id] = answer.value if answer is not None and answer.value is not None else "uncollected"
    values[analysis.DELIVERED] = get_rule(analysis.DELIVERED)(t, RuleContext(pack=PACK, definition=DELIVERED_DEF)).value
    return UnitRow(t.id, "trace", t.user_id, t.conversation_id, t.index, None, None, t.mode, values, {})


def test_no_model_means_uncollected_items_and_no_s_rather_than_s_one() -> None:
    turns = [
        turn("Analyze churn by store and explain the drivers", "Churn fell 2%.", tid="a"),
        turn("华东区上个月的毛利率", "毛利率为23.4%。", tid="b").model_copy(update={"user_id": "u2", "mode": "simple"}),
        turn("GMV by month", "", delivery="failed_empty", tid="c"),
    ]
    rows = [collect_rules_only(t) for t in turns]
    a = rows[0].values
    assert a[sd.C1] == "uncollected" and a[sd.I3] == "not_applicable" and a[sd.I2] == "not_applicable"
    assert {a[i] for i in (sd.I1, sd.C2, sd.S1, sd.S2, sd.E1)} == {"uncollected"}
    assert {rows[2].values[i] for i in sd.ITEMS} == {"not_applicable"}
    res = analysis.score(Observations(rows={"trace": rows}), PACK)
    s = _get(res, "S")
    assert s.value is None and "no collected items" in s.note and "not imputed" in s.note
    assert _get(res, "no_collected_items").value == 2.0
    assert _get(res, "pass_rate.i1_answers_task").value is None
    assert _get(res, "uncollected", f"item={sd.I1}").value == 2.0


def test_model_collected_values_give_the_hand_s() -> None:
    # The same three turns once a model has answered the items the rules left (as the cascade stores them).
    rows = [
        trow("a", "normal", "yes", {sd.I1: Y, sd.C1: N, sd.C2: Y, sd.S1: Y, sd.S2: N, sd.E1: Y}, user="u1"),
        trow("b", "simple", "yes", {sd.I1: Y, sd.C2: Y, sd.S1: Y, sd.S2: Y, sd.E1: Y}, user="u2"),
        trow("c", "normal", "no", {}, user="u1"),
    ]
    res = analysis.score(Observations(rows={"trace": rows}), PACK)
    hand = (4 / 6 + 1.0 + 0.0) / 3  # every stratum a census: w_h = 1, the plain mean of S(x)
    s = _get(res, "S")
    assert s.value == pytest.approx(hand) and s.low == pytest.approx(hand) and s.n == 3
    assert _get(res, "S", "mode=normal").value == pytest.approx((4 / 6 + 0.0) / 2)
    assert _get(res, "no_collected_items").value == 0.0


def test_a_truncated_delivered_answer_scores_its_c2_no_without_a_model() -> None:
    t = turn("GMV by month", "GMV rose in March, driven by [truncated]", tid="d")
    r = collect_rules_only(t)
    assert r.values[sd.C2] == "no"
    res = analysis.score(Observations(rows={"trace": [r]}), PACK)
    assert _get(res, "S").value == 0.0 and _get(res, "pass_rate.c2_closes_properly").value == 0.0


def test_through_the_cascade_with_no_model_every_judgment_item_is_uncollected() -> None:
    import asyncio

    from agent_factory.evaluators.collect.cascade import Cascade
    from agent_factory.evaluators.collect.config import ModelConfig

    cascade = Cascade(ModelConfig())
    t = turn("Analyze churn by store and explain the drivers", "Churn fell 2% in March.", tid="e")
    data = asyncio.run(cascade.collect(unit_id=t.id, layer="trace", unit=t, definitions=substance.DEFINITIONS,
                                       pack=PACK))
    by_item = {d.item: d for d in data}
    judged = [i for i in sd.ITEMS if by_item[i].value != "not_applicable"]
    assert judged == [sd.I1, sd.C1, sd.C2, sd.S1, sd.S2, sd.E1]
    assert all(by_item[i].value == "uncollected" and by_item[i].reason for i in judged)
    row = UnitRow(t.id, "trace", "u1", "c1", 0, None, None, "normal",
                  {**{d.item: d.value for d in data}, analysis.DELIVERED: "yes"}, {})
    s = _get(analysis.score(Observations(rows={"trace": [row]}), PACK), "S")
    assert s.value is None and "not imputed" in s.note
