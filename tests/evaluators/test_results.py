"""Results: every rule on hand-built sessions in a user's window, every analysis on hand-built rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent_factory.adapters.model import Conversation, Engagement, EvidencePointer, OutcomeEvent, Turn
from agent_factory.evaluators.components.execution.definitions import DELIVERED
from agent_factory.evaluators.components.results import analysis as ra
from agent_factory.evaluators.components.results.definitions import (
    CENSORED,
    DEFINITIONS,
    FEEDBACK,
    NOT_RETURNED,
    REDO,
    RETURN_INTERVAL_S,
    RETURNED,
    RETURNED_WITHIN_T,
)
from agent_factory.evaluators.core.model import Result
from agent_factory.evaluators.core.registry import (
    EngagementView,
    Observations,
    RuleAnswer,
    RuleContext,
    UnitRow,
    get_component,
    get_rule,
)
from agent_factory.evaluators.stats import bigram_jaccard, cluster_proportion_ci
from agent_factory.knowledge_packs import load_pack

PACK = load_pack("business_analysis")  # T = 7 days, redo Jaccard 0.6
DEFS = {d.id: d for d in DEFINITIONS}
T0 = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
HOUR, DAY = timedelta(hours=1), timedelta(days=1)


def session(cid: str, start: datetime, requests: list[str], *, minutes: float = 2.0,
            events: tuple[OutcomeEvent, ...] = ()) -> Conversation:
    turns = []
    t = start
    for i, req in enumerate(requests):
        turns.append(Turn(id=f"{cid}.t{i}", conversation_id=cid, user_id="u1", index=i, request=req,
                          answer="ok", delivery="delivered", start=t, end=t + timedelta(minutes=minutes)))
        t += timedelta(minutes=minutes + 1)
    return Conversation(id=cid, user_id="u1", start=turns[0].start, end=turns[-1].end, turns=tuple(turns),
                        events=events)


def window(*convs: Conversation, horizon: datetime | None, window_end: datetime | None = None,
           events: tuple[OutcomeEvent, ...] = ()) -> EngagementView:
    eng = Engagement(id="e1", user_id="u1", window_end=window_end, conversation_ids=tuple(c.id for c in convs),
                     events=events)
    return EngagementView(eng, tuple(convs), horizon)


def ask(item: str, conv: Conversation, view: EngagementView | None) -> RuleAnswer:
    return get_rule(item)(conv, RuleContext(pack=PACK, definition=DEFS[item], engagement=view))


# s1 at T0 (2 turns); s2 one hour after s1 ends, redoing its last request; s3 eight days after s2 ends.
S1 = session("s1", T0, ["Q3 revenue by region?", "Break the east region down by store"])
S2 = session("s2", S1.end + HOUR, ["Break the east region down by store, please"])  # type: ignore[operator]
S3 = session("s3", S2.end + 8 * DAY, ["Draft a churn report for March"])  # type: ignore[operator]


def user(horizon: datetime | None) -> EngagementView:
    return window(S3, S1, S2, horizon=horizon)  # order given does not matter: sessions are sorted by start


# ---- registration ---------------------------------------------------------------------------------------


def test_component_registers_conversation_layer_definitions() -> None:
    spec = get_component("results")
    assert [d.id for d in spec.definitions] == [RETURNED_WITHIN_T, RETURN_INTERVAL_S, REDO, FEEDBACK]
    assert {d.layer for d in spec.definitions} == {"conversation"}
    assert all(d.rule == d.id for d in spec.definitions)
    assert DEFS[RETURNED_WITHIN_T].kind == "fact" and DEFS[REDO].kind == "check"


# ---- return within T and interval -----------------------------------------------------------------------


def test_return_within_t_and_its_interval() -> None:
    view = user(horizon=S3.end + 30 * DAY)  # type: ignore[operator]
    a = ask(RETURNED_WITHIN_T, S1, view)
    assert (a.value, a.fact) == ("yes", RETURNED)
    assert a.evidence == (EvidencePointer(unit_id="s2.t0", field="request", start=0, end=43),)
    gap = ask(RETURN_INTERVAL_S, S1, view)
    assert (gap.value, gap.fact) == ("yes", 3600.0)


def test_a_later_session_beyond_t_is_not_a_return() -> None:
    view = user(horizon=S3.end + 30 * DAY)  # type: ignore[operator]
    assert ask(RETURNED_WITHIN_T, S2, view).fact == NOT_RETURNED
    assert ask(RETURN_INTERVAL_S, S2, view).fact == pytest.approx(8 * 86400.0)


def test_last_session_is_not_returned_only_when_t_is_fully_observed() -> None:
    observed = ask(RETURNED_WITHIN_T, S3, user(horizon=S3.end + 7 * DAY))  # type: ignore[operator]
    assert (observed.value, observed.fact) == ("yes", NOT_RETURNED)  # the window ends exactly at the horizon
    cut = ask(RETURNED_WITHIN_T, S3, user(horizon=S3.end + 2 * DAY))  # type: ignore[operator]
    assert (cut.value, cut.fact, cut.reason) == ("yes", CENSORED, "censored: window extends past horizon")
    unknown = ask(RETURNED_WITHIN_T, S3, user(horizon=None))
    assert unknown.fact == CENSORED and "no observation horizon" in (unknown.reason or "")
    interval = ask(RETURN_INTERVAL_S, S3, user(horizon=S3.end + 30 * DAY))  # type: ignore[operator]
    assert interval.value == "not_applicable" and (interval.reason or "").startswith("censored")


def test_an_earlier_engagement_window_end_censors() -> None:
    view = window(S1, S2, S3, horizon=S3.end + 30 * DAY, window_end=S3.end + DAY)  # type: ignore[operator]
    assert ask(RETURNED_WITHIN_T, S3, view).fact == CENSORED


def test_a_naive_horizon_is_read_as_utc() -> None:
    naive = (S3.end + 2 * DAY).replace(tzinfo=None)  # type: ignore[operator]
    assert ask(RETURNED_WITHIN_T, S3, user(horizon=naive)).fact == CENSORED


def test_without_the_users_window_nothing_is_guessed() -> None:
    for item in (RETURNED_WITHIN_T, RETURN_INTERVAL_S, REDO):
        a = ask(item, S1, None)
        assert a.value == "uncollected" and "engagement view" in (a.reason or "")
    stranger = ask(RETURNED_WITHIN_T, S1, window(S2, S3, horizon=None))
    assert stranger.value == "uncollected" and "not in the user's engagement window" in (stranger.reason or "")


def test_missing_times_are_uncollected() -> None:
    timeless = Conversation(id="x", user_id="u1", turns=(Turn(id="x.t0", conversation_id="x", request="hi"),))
    view = window(timeless, horizon=T0)
    assert ask(RETURNED_WITHIN_T, timeless, view).value == "uncollected"


# ---- redo -----------------------------------------------------------------------------------------------


def test_redo_compares_the_last_request_with_the_next_sessions_first() -> None:
    view = user(horizon=None)
    a = ask(REDO, S1, view)
    j = bigram_jaccard("Break the east region down by store", "Break the east region down by store, please")
    assert (a.value, a.fact) == ("yes", round(j, 4)) and j >= 0.6
    assert [p.unit_id for p in a.evidence] == ["s1.t1", "s2.t0"]  # the last turn, not the first
    b = ask(REDO, S2, view)
    assert b.value == "no" and b.fact is not None and b.fact < 0.6  # type: ignore[operator]
    assert ask(REDO, S3, view).value == "not_applicable"


def test_redo_in_chinese_without_word_segmentation() -> None:
    a = session("a", T0, ["把华东区上季度的销售额按门店拆开"])
    b = session("b", T0 + DAY, ["把华东区上季度的销售额按门店拆开看看"])
    assert ask(REDO, a, window(a, b, horizon=None)).value == "yes"


def test_redo_threshold_comes_from_the_pack() -> None:
    strict = PACK.model_copy(update={"thresholds": PACK.thresholds.model_copy(update={"redo_jaccard": 0.99})})
    a = get_rule(REDO)(S1, RuleContext(pack=strict, definition=DEFS[REDO], engagement=user(horizon=None)))
    assert a.value == "no"


def test_redo_without_request_text_is_uncollected() -> None:
    silent = Conversation(id="q", user_id="u1", start=T0 + 2 * DAY, end=T0 + 2 * DAY,
                          turns=(Turn(id="q.t0", conversation_id="q", start=T0 + 2 * DAY),))
    assert ask(REDO, S1, window(S1, silent, horizon=None)).value == "uncollected"


# ---- feedback -------------------------------------------------------------------------------------------


def test_feedback_latest_event_of_the_session() -> None:
    early = OutcomeEvent(id="f1", kind="feedback", conversation_id="s1", time=T0, value=False)
    late = OutcomeEvent(id="f2", kind="feedback", conversation_id="s1", time=T0 + HOUR, value=True)
    other = OutcomeEvent(id="f3", kind="feedback", conversation_id="s2", time=T0 + DAY, value=0.0)
    reward = OutcomeEvent(id="r1", kind="task_reward", conversation_id="s1", time=T0 + DAY, value=0.0)
    s1 = S1.model_copy(update={"events": (early, reward)})
    view = window(s1, S2, horizon=None, events=(late, other))
    a = ask(FEEDBACK, s1, view)
    assert (a.value, a.fact) == ("yes", 1.0)
    assert a.evidence == (EvidencePointer(unit_id="f2", field="value", start=0, end=0),)
    assert ask(FEEDBACK, s1, None).fact == 0.0  # without the window only the session's own events are seen
    assert ask(FEEDBACK, S3, view).value == "not_applicable"


# ---- analyses -------------------------------------------------------------------------------------------


def crow(sid: str, user: str, returned: str | None = None, interval: float | None = None,
         redo: str = "not_applicable", feedback: Any = None, value: str = "yes") -> UnitRow:
    values: dict[str, Any] = {REDO: redo}
    facts: dict[str, Any] = {}
    if returned is not None:
        values[RETURNED_WITHIN_T], facts[RETURNED_WITHIN_T] = value, returned
    else:
        values[RETURNED_WITHIN_T] = "uncollected"
    if interval is not None:
        values[RETURN_INTERVAL_S], facts[RETURN_INTERVAL_S] = "yes", interval
    if feedback is not None:
        values[FEEDBACK], facts[FEEDBACK] = "yes", feedback
    return UnitRow(sid, "conversation", user, sid, 0, None, None, None, values, facts)


def trow(sid: str, user: str, index: int, delivered: str) -> UnitRow:
    return UnitRow(f"{sid}.t{index}", "trace", user, sid, index, float(index), None, "normal",
                   {DELIVERED: delivered}, {})


def population() -> Observations:
    """Six sessions of three users; s1, s3, s5 end in a failed turn (their last turn), the others delivered."""
    conv = [
        crow("s1", "u1", RETURNED, 600.0, redo="yes"),
        crow("s2", "u1", NOT_RETURNED, 9 * 86400.0, redo="no", feedback=1.0),
        crow("s3", "u2", RETURNED, 300.0, redo="yes", feedback=0.0),
        crow("s4", "u2", RETURNED, 40000.0, redo="no"),
        crow("s5", "u3", CENSORED),
        crow("s6", "u3", None),  # uncollected: in no rate
    ]
    trace = [trow("s1", "u1", 0, "yes"), trow("s1", "u1", 1, "no"), trow("s2", "u1", 0, "yes"),
             trow("s3", "u2", 0, "no"), trow("s4", "u2", 0, "no"), trow("s4", "u2", 1, "yes"),
             trow("s5", "u3", 0, "no"), trow("s6", "u3", 0, "uncollected")]
    return Observations(rows={"conversation": conv, "trace": trace})


def pick(results: list[Result], metric: str, stratum: str = "all") -> Result:
    found = [r for r in results if r.metric == metric and r.stratum == stratum]
    assert len(found) == 1, (metric, stratum)
    return found[0]


def test_sessions_join_the_last_turns_delivery() -> None:
    ss = {s.id: s for s in ra.sessions(population())}
    assert [ss[k].ended for k in ("s1", "s2", "s3", "s4", "s5", "s6")] == [
        "failed", "delivered", "failed", "delivered", "failed", None]
    assert (ss["s1"].turns, ss["s4"].turns, ss["s6"].returned) == (2, 2, None)


def test_return_rate_excludes_and_counts_censored() -> None:
    res = ra.return_rate(population(), PACK)
    r = pick(res, "return_rate_within_t")
    assert (r.value, r.n) == (0.75, 4)  # s5 censored and s6 uncollected are neither return nor non-return
    ci = cluster_proportion_ci([1, 2], [2, 2])
    assert (r.low, r.high) == (ci.low, ci.high)
    assert "1 censored sessions excluded" in (r.note or "")
    assert pick(res, "return_rate_within_t", "after=failed").value == 1.0  # s1, s3 (s5 censored)
    assert pick(res, "return_rate_within_t", "after=delivered").value == 0.5  # s2 no, s4 yes
    assert [pick(res, f"sessions.{k}").value for k in (RETURNED, NOT_RETURNED, CENSORED)] == [3, 1, 1]
    assert pick(res, "uncollected", f"item={RETURNED_WITHIN_T}").value == 1


def test_median_return_interval_after_failed_vs_delivered() -> None:
    res = ra.return_interval(population(), PACK)
    assert pick(res, "median_return_interval_s", "after=failed").value == pytest.approx(450.0)
    assert pick(res, "median_return_interval_s", "after=delivered").value == pytest.approx(
        (40000.0 + 9 * 86400.0) / 2)
    assert pick(res, "median_return_interval_s").n == 4


def test_redo_rate_after_failed_vs_delivered() -> None:
    res = ra.redo_rate(population(), PACK)
    assert (pick(res, "redo_rate", "after=failed").value, pick(res, "redo_rate", "after=failed").n) == (1.0, 2)
    assert pick(res, "redo_rate", "after=delivered").value == 0.0
    assert pick(res, "redo_rate").value == 0.5
    assert "1 sessions whose last turn's execution.delivered is undecided" in (pick(res, "redo_rate").note or "")


def test_single_turn_sessions_and_what_followed_them() -> None:
    res = ra.single_turn(population(), PACK)
    share = pick(res, "single_turn_session_share")
    assert (share.value, share.n) == (pytest.approx(4 / 6), 6)  # s2, s3, s5, s6 have one turn
    seen = pick(res, "single_turn.returned_share")
    assert (seen.value, seen.n) == (pytest.approx(1 / 3), 3)  # s3 returned; s2 not; s5 censored (s6 uncollected)
    assert pick(res, "single_turn.return_rate_within_t").value == 0.5
    assert [pick(res, f"single_turn.{k}").value for k in (RETURNED, NOT_RETURNED, CENSORED)] == [1, 1, 1]


def test_feedback_count_and_mean() -> None:
    res = ra.feedback(population(), PACK)
    assert pick(res, "sessions_with_feedback").value == 2
    assert pick(res, "feedback_mean").value == 0.5


def test_rollup_of_redo_to_users() -> None:
    res = {r.layer: r for r in ra.rollup(population(), PACK)}
    assert (res["conversation"].value, res["conversation"].n) == (0.5, 4)
    assert (res["engagement"].value, res["engagement"].n) == (1.0, 2)  # u1, u2 each redid once; u3 undecided


def test_every_analysis_is_pure_and_handles_empty_observations() -> None:
    for a in get_component("results").analyses:
        for o in (Observations(rows={}), population()):
            first = a.fn(o, PACK)
            assert first == a.fn(o, PACK)
            assert all(r.component == "results" and r.analysis == a.name and r.analysis_version == a.version
                       for r in first)
