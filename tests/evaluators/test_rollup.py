"""Layer rollups and the shared rate helpers, on hand-built rows with known answers."""

from __future__ import annotations

import pytest

from agent_factory.evaluators.components.execution.analysis import VERSION as EXEC_VERSION
from agent_factory.evaluators.components.execution.analysis import rollup as execution_rollup
from agent_factory.evaluators.components.execution.definitions import DELIVERED, SPAN_ERROR
from agent_factory.evaluators.components.execution.rollup import (
    FailureItem,
    Meta,
    failure_rollup,
    median_result,
    rate_result,
    row_flagged,
)
from agent_factory.evaluators.components.results.definitions import REDO
from agent_factory.evaluators.components.results.rollup import session_rollup
from agent_factory.evaluators.core.model import Result
from agent_factory.evaluators.core.registry import Observations, UnitRow
from agent_factory.evaluators.stats import cluster_proportion_ci, proportion_ci
from agent_factory.knowledge_packs import load_pack

META = Meta("execution", "test.rollup", "t1")
PACK = load_pack("business_analysis")


def trow(uid: str, user: str | None, conv: str, **values: str) -> UnitRow:
    return UnitRow(uid, "trace", user, conv, 0, None, None, "normal", values, {})


def by_layer(results: list[Result]) -> dict[str, Result]:
    return {r.layer: r for r in results}


def study_shape() -> Observations:
    """1000 users x 2 sessions; sessions 0-1499 have 2 turns, the rest 1 (3500 turns).

    Failed: one session of users 0-93 and both of users 94-102 (112 sessions, 103 users); the first 14 failed
    sessions fail on both turns (126 failed turns): 3.6% of turns, 5.6% of sessions, 10.3% of users.
    """
    failed_sessions = [2 * u for u in range(94)] + [2 * u + j for u in range(94, 103) for j in (0, 1)]
    double = set(failed_sessions[:14])
    failed = set(failed_sessions)
    rows = []
    for g in range(2000):
        user, turns = f"u{g // 2}", 2 if g < 1500 else 1
        for k in range(turns):
            bad = g in failed and (k == 0 or g in double)
            rows.append(trow(f"t{g}.{k}", user, f"s{g}", **{DELIVERED: "no" if bad else "yes"}))
    return Observations(rows={"trace": rows})


def test_the_study_shape_compounds_upward() -> None:
    res = by_layer(failure_rollup(study_shape(), (FailureItem(DELIVERED, "no"),), META))
    assert (res["trace"].value, res["trace"].n) == (pytest.approx(0.036), 3500)
    assert (res["conversation"].value, res["conversation"].n) == (pytest.approx(0.056), 2000)
    assert (res["engagement"].value, res["engagement"].n) == (pytest.approx(0.103), 1000)
    user_ci = proportion_ci(103, 1000)  # users are independent: Wilson
    assert (res["engagement"].low, res["engagement"].high) == (user_ci.low, user_ci.high)
    for r in res.values():
        assert r.low is not None and r.high is not None and r.low < r.value < r.high  # type: ignore[operator]


def test_small_rollup_with_clustered_intervals() -> None:
    rows = [
        trow("a", "u1", "s1", **{DELIVERED: "no"}), trow("b", "u1", "s1", **{DELIVERED: "yes"}),
        trow("c", "u1", "s2", **{DELIVERED: "yes"}),
        trow("d", "u2", "s3", **{DELIVERED: "no"}), trow("e", "u2", "s3", **{DELIVERED: "no"}),
        trow("f", "u2", "s3", **{DELIVERED: "yes"}),
        trow("g", "u3", "s4", **{DELIVERED: "yes"}),
        trow("h", "u3", "s5", **{DELIVERED: "uncollected"}),  # s5 has no decided turn: not a session here
    ]
    res = by_layer(failure_rollup(Observations(rows={"trace": rows}), (FailureItem(DELIVERED),), META))
    assert (res["trace"].value, res["trace"].n) == (pytest.approx(3 / 7), 7)
    assert "1 turns without a decided item excluded" in (res["trace"].note or "")
    turn_ci = cluster_proportion_ci([1, 2, 0], [3, 3, 1])
    assert (res["trace"].low, res["trace"].high) == (turn_ci.low, turn_ci.high)
    assert (res["conversation"].value, res["conversation"].n) == (0.5, 4)
    session_ci = cluster_proportion_ci([1, 1, 0], [2, 1, 1])
    assert (res["conversation"].low, res["conversation"].high) == (session_ci.low, session_ci.high)
    assert (res["engagement"].value, res["engagement"].n) == (pytest.approx(2 / 3), 3)


def test_any_of_several_items_with_their_own_failing_value() -> None:
    items = (FailureItem(DELIVERED, "no"), FailureItem(SPAN_ERROR, "yes"))
    assert row_flagged(trow("a", "u", "s", **{DELIVERED: "yes", SPAN_ERROR: "yes"}), items) is True
    assert row_flagged(trow("a", "u", "s", **{DELIVERED: "yes", SPAN_ERROR: "no"}), items) is False
    assert row_flagged(trow("a", "u", "s", **{DELIVERED: "uncollected"}), items) is None
    assert row_flagged(trow("a", "u", "s", **{DELIVERED: "not_applicable", SPAN_ERROR: "no"}), items) is False


def test_rows_without_a_user_are_their_own_cluster() -> None:
    rows = [trow("a", None, "s1", **{DELIVERED: "no"}), trow("b", None, "s2", **{DELIVERED: "yes"})]
    res = by_layer(failure_rollup(Observations(rows={"trace": rows}), (FailureItem(DELIVERED),), META))
    assert res["engagement"].n == 2 and res["engagement"].value == 0.5


def test_execution_rollup_names_its_versions() -> None:
    res = execution_rollup(study_shape(), PACK)
    assert {r.metric for r in res} == {"delivery_failure_share"}
    assert {r.analysis_version for r in res} == {f"{EXEC_VERSION}/rollup-1"}


def test_session_rollup_of_redo() -> None:
    def crow(uid: str, user: str, redo: str) -> UnitRow:
        return UnitRow(uid, "conversation", user, uid, 0, None, None, None, {REDO: redo}, {})
    rows = [crow("s1", "u1", "yes"), crow("s2", "u1", "no"), crow("s3", "u2", "no"),
            crow("s4", "u2", "not_applicable"), crow("s5", "u3", "no")]
    res = by_layer(session_rollup(Observations(rows={"conversation": rows}), (FailureItem(REDO, "yes"),), META,
                                  metric="redo_share"))
    assert (res["conversation"].value, res["conversation"].n) == (0.25, 4)
    assert (res["engagement"].value, res["engagement"].n) == (pytest.approx(1 / 3), 3)


def test_rate_result_methods_and_empty_denominator() -> None:
    pairs = [("u1", True), ("u1", False), ("u2", False), ("u3", True), ("u3", True)]
    w = rate_result(pairs, META, layer="trace", metric="m", method="wilson")
    c = rate_result(pairs, META, layer="trace", metric="m")
    ew, ec = proportion_ci(3, 5), cluster_proportion_ci([1, 0, 2], [2, 1, 2])
    assert (w.value, w.low, w.high, w.n) == (0.6, ew.low, ew.high, 5)
    assert (c.value, c.low, c.high, c.n) == (pytest.approx(0.6), ec.low, ec.high, 5)
    empty = rate_result([], META, layer="trace", metric="m")
    assert (empty.value, empty.low, empty.high, empty.n) == (None, None, None, 0)


def test_degenerate_clustered_interval_falls_back_to_wilson() -> None:
    none_failed = rate_result([(f"u{i}", False) for i in range(20)], META, layer="trace", metric="m")
    assert none_failed.value == 0.0 and none_failed.high == pytest.approx(proportion_ci(0, 20).high)
    assert "Wilson interval instead" in (none_failed.note or "")
    one_user = rate_result([("u", True), ("u", False)], META, layer="trace", metric="m")
    assert (one_user.low, one_user.high) == (proportion_ci(1, 2).low, proportion_ci(1, 2).high)


def test_median_result() -> None:
    pairs = [("u1", 10.0), ("u1", 30.0), ("u2", 20.0), ("u3", 40.0), ("u4", 1000.0)]
    m = median_result(META, pairs, layer="engagement", metric="med")
    assert (m.value, m.n) == (30.0, 5) and m.low is not None and m.high is not None and m.low <= 30.0 <= m.high
    assert median_result(META, pairs, layer="engagement", metric="med") == m
    assert median_result(META, [], layer="engagement", metric="med").value is None
