"""The audit's validity measures (`evaluators.audit.validity`): the criterion's AUC is scikit-learn's and its
difference the plain difference of means, a `bad` flag that goes with good outcomes fails and is named (a
descriptive one never does), the next layer reads minimum S and redo / return by ending with the good side its
component declares, discriminant Jaccards count what they say, and Goodhart flags a metric that improved while
its next layer on the spine worsened."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from sklearn import metrics as sklearn_metrics

from agent_factory.evaluators.audit import validity as v
from agent_factory.evaluators.components.execution.definitions import DELIVERED
from agent_factory.evaluators.components.results.definitions import NOT_RETURNED, REDO, RETURNED, RETURNED_WITHIN_T
from agent_factory.evaluators.components.substance.definitions import ITEMS
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.core.model import Value
from agent_factory.evaluators.core.registry import Observations, UnitRow, components
from agent_factory.evaluators.findings import FlagRow
from agent_factory.evaluators.stats import cluster_auc
from agent_factory.factory.views.results import ResultRow


def _spec(fid: str, meaning: str = "bad") -> FlagSpec:
    return FlagSpec.model_validate({"id": fid, "component": fid.split(".", 1)[0], "layer": "conversation",
                                    "label": fid, "meaning": meaning, "item": fid, "raised": ("yes",),
                                    "clear": ("no",)})


def _rows(fid: str, values: Sequence[int | None], users: Sequence[str]) -> list[FlagRow]:
    return [FlagRow(f"c{i}", "conversation", f"c{i}", u, fid.split(".", 1)[0], fid, x)
            for i, (x, u) in enumerate(zip(values, users, strict=True))]


# 24 conversations over 12 users (two each); reward 1 on even users' conversations.
USERS = [f"u{i // 2}" for i in range(24)]
REWARD = {f"c{i}": float((i // 2) % 2 == 0) for i in range(24)}


def test_the_criterion_auc_is_sklearns_and_the_difference_the_plain_one() -> None:
    flag: list[int | None] = [1 if (i % 3 == 0 or REWARD[f"c{i}"] == 0.0 and i % 2) else 0 for i in range(24)]
    flag[5] = None  # undecided: left out, never read as "not raised"
    [row] = v.criterion([_spec("x.f")], _rows("x.f", flag, USERS), {"task_reward": REWARD}, n_boot=300)
    decided = [i for i in range(24) if flag[i] is not None]
    bad = [REWARD[f"c{i}"] < 1 for i in decided]
    scores = [flag[i] for i in decided]
    assert row.n == 23 and row.outcome == "task_reward" and row.level == "conversation"
    assert row.auc == pytest.approx(sklearn_metrics.roc_auc_score(bad, scores))
    with_ = [REWARD[f"c{i}"] for i in decided if flag[i]]
    without = [REWARD[f"c{i}"] for i in decided if not flag[i]]
    assert row.difference == pytest.approx(sum(with_) / len(with_) - sum(without) / len(without))
    assert row.auc is not None and row.low is not None and row.high is not None and row.low <= row.auc <= row.high
    assert row.difference is not None and row.difference_low is not None and row.difference_high is not None
    assert row.difference_low <= row.difference <= row.difference_high
    assert row.note is not None and "bad = the lower value (0)" in row.note


def test_a_bad_flag_on_the_successes_fails_and_a_descriptive_one_does_not() -> None:
    on_success = [int(REWARD[f"c{i}"] == 1.0) for i in range(24)]
    on_failure = [1 - x for x in on_success]
    specs = [_spec("a.wrong_way"), _spec("a.hand_off", "descriptive"), _spec("b.right_way")]
    rows = _rows("a.wrong_way", on_success, USERS) + _rows("a.hand_off", on_success, USERS) + _rows(
        "b.right_way", on_failure, USERS)
    got = {c.flag: c for c in v.criterion(specs, rows, {"task_reward": REWARD}, n_boot=300)}
    wrong = got["a.wrong_way"]
    assert wrong.fails and wrong.auc == 0.0 and wrong.high is not None and wrong.high < 0.5
    assert wrong.difference == 1.0 and wrong.difference_low is not None and wrong.difference_low > 0
    assert wrong.note is not None and wrong.note.startswith("points the wrong way")
    assert not got["a.hand_off"].fails and got["a.hand_off"].auc == 0.0  # descriptive: says nothing of failure
    retire = v.wrong_way(got.values(), specs)
    assert list(retire) == ["a.wrong_way"]  # the item the flag reads (`_spec`: the flag's id)
    assert retire["a.wrong_way"].startswith("a.wrong_way against task_reward (n = 24): points the wrong way")
    right = got["b.right_way"]
    assert not right.fails and right.auc == 1.0 and right.difference == -1.0


def test_few_units_on_a_side_withhold_the_difference_interval_and_undecided_flags_keep_their_row() -> None:
    rare = [1 if i in (0, 1) else 0 for i in range(24)]
    specs = [_spec("x.rare"), _spec("x.never"), _spec("x.model")]
    rows = _rows("x.rare", rare, USERS) + _rows("x.never", [0] * 24, USERS) + _rows("x.model", [None] * 24, USERS)
    got = {c.flag: c for c in v.criterion(specs, rows, {"task_reward": REWARD}, n_boot=200)}
    assert got["x.rare"].difference == pytest.approx(1.0 - 10 / 22)
    assert got["x.rare"].difference_low is None and "n too small" in (got["x.rare"].note or "")
    assert got["x.never"].n == 24 and got["x.never"].auc == 0.5 and "never raised" in (got["x.never"].note or "")
    assert got["x.model"].n == 0 and got["x.model"].auc is None and not got["x.model"].fails


def test_one_user_gives_no_interval_and_an_outcome_with_one_value_no_row() -> None:
    flag = [i % 2 for i in range(24)]
    [row] = v.criterion([_spec("x.f")], _rows("x.f", flag, ["one"] * 24), {"task_reward": REWARD}, n_boot=200)
    assert row.low is None and row.high is None and "single cluster" in (row.note or "")
    assert v.criterion([_spec("x.f")], _rows("x.f", flag, USERS), {"r": dict.fromkeys(REWARD, 1.0)}) == []


def test_a_per_unit_score_is_read_in_the_direction_its_component_declares_worse() -> None:
    friction = {f"c{i}": float(i % 4) + (0.0 if REWARD[f"c{i}"] else 5.0) for i in range(24)}
    users = {f"c{i}": u for i, u in enumerate(USERS)}
    [higher] = v.score_criterion("friction", "trajectory", friction, users, {"task_reward": REWARD}, worse="higher",
                                 n_boot=200)
    bad = [REWARD[c] < 1 for c in sorted(friction)]
    assert higher.flag == "trajectory.friction" and higher.n == 24 and higher.difference is None
    assert higher.auc == pytest.approx(sklearn_metrics.roc_auc_score(bad, [friction[c] for c in sorted(friction)]))
    assert higher.auc == 1.0 and not higher.fails
    [lower] = v.score_criterion("friction", "trajectory", friction, users, {"task_reward": REWARD}, worse="lower",
                                n_boot=200)
    assert lower.auc == 0.0 and lower.fails  # a score whose declared direction is backwards fails


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_flag_auc_is_cluster_auc_from_counts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 200))
    clusters = [f"u{k}" for k in rng.integers(0, max(2, n // 4), size=n)]
    flags = (rng.random(n) < rng.uniform(0.05, 0.6)).astype(float).tolist()
    bad = (rng.random(n) < rng.uniform(0.2, 0.8)).tolist()
    fast = v.flag_auc(flags, bad, clusters, n_boot=400, seed=seed)
    slow = cluster_auc(flags, bad, clusters, n_boot=400, seed=seed)
    assert fast.value == pytest.approx(slow.value) and fast.note == slow.note
    assert fast.low == pytest.approx(slow.low) and fast.high == pytest.approx(slow.high)
    assert (fast.n_pos, fast.n_neg, fast.clusters) == (slow.n_pos, slow.n_neg, slow.clusters)


def test_the_flag_auc_edge_cases_are_cluster_aucs() -> None:
    for flags, bad, clusters in (([1.0, 0.0], [True, True], ["a", "b"]), ([1.0, 0.0], [True, False], ["a", "a"]),
                                 ([1.0, 0.0, 0.0], [True, False, False], ["a", "b", "c"])):
        fast, slow = v.flag_auc(flags, bad, clusters, n_boot=50), cluster_auc(flags, bad, clusters, n_boot=50, seed=7)
        assert (fast.value, fast.low, fast.high, fast.note) == (slow.value, slow.low, slow.high, slow.note)


def test_bad_outcome_cuts() -> None:
    assert v.bad_outcome([0.0, 1.0, 1.0]) == (1.0, "bad = the lower value (0)")
    assert v.bad_outcome([1, 2, 3, 4, 5])[0] == 3  # a rating: below its median
    assert v.bad_outcome([1, 1, 1, 2, 5]) == (2, "bad = the lowest value (1, the median)")
    assert v.bad_outcome([0.5, 0.5])[0] is None


def _trace(cid: str, user: str, pos: int, delivered: Value, items: dict[str, Value]) -> UnitRow:
    return UnitRow(f"{cid}/t{pos}", "trace", user, cid, pos, float(pos), float(pos) + 1, None,
                   {DELIVERED: delivered, **items}, {})


def _conv(cid: str, user: str, redo: Value, returned: str | None) -> UnitRow:
    values: dict[str, Value] = {REDO: redo, RETURNED_WITHIN_T: "yes"}
    return UnitRow(cid, "conversation", user, cid, 0, 0.0, 10.0, None, values, {RETURNED_WITHIN_T: returned})


def test_next_layer_minimum_s_by_outcome_and_redo_and_return_by_ending() -> None:
    i1, i2 = ITEMS[0], ITEMS[1]
    traces: list[UnitRow] = []
    convs: list[UnitRow] = []
    outcome: dict[str, str | float | None] = {}
    for k in range(16):
        cid, user = f"c{k}", f"u{k // 2}"
        smooth = k % 2 == 0
        # Smooth conversations score 1 on both turns; the others 0.5 on one turn and fail their last.
        traces.append(_trace(cid, user, 0, "yes", {i1: "yes", i2: "yes" if smooth else "no"}))
        traces.append(_trace(cid, user, 1, "yes" if smooth else "no", {i1: "yes"}))
        convs.append(_conv(cid, user, redo="no" if smooth else "yes", returned=RETURNED if smooth else NOT_RETURNED))
        outcome[cid] = "smooth" if smooth else "struggled"
    outcome["c15"] = "undetermined"  # no grade: left out of the minimum-S row
    obs = Observations(rows={"trace": traces, "conversation": convs})
    rows, notes = v.next_layer(obs, outcome, n_boot=300)
    assert notes == []
    got = {(c.flag, c.outcome): c for c in rows}
    s = got[("substance.S.min", v.TRAJECTORY_OUTCOME)]
    assert s.n == 15 and s.auc == 1.0 and not s.fails and s.difference is None  # lower S with the bad outcome
    assert "struggled 0.00" in (s.note or "") and "smooth 1.00" in (s.note or "")
    redo = got[("execution.ended_failed", "results.redo")]
    back = got[("execution.ended_failed", "results.returned_within_t")]
    for c in (redo, back):
        assert c.n == 16 and c.auc == 1.0 and c.difference == -1.0 and not c.fails


def test_next_layer_says_what_it_could_not_measure() -> None:
    traces = [_trace("c0", "u0", 0, "yes", {})]
    convs = [UnitRow("c0", "conversation", "u0", "c0", 0, 0.0, 1.0, None, {RETURNED_WITHIN_T: "not_applicable"},
                     {RETURNED_WITHIN_T: "not_observable"})]
    rows, notes = v.next_layer(Observations(rows={"trace": traces, "conversation": convs}), {"c0": "smooth"})
    assert rows == []
    assert any("S is undefined on every turn" in n for n in notes)
    assert any("none of 1 sessions is observable" in n for n in notes)


def test_the_good_side_of_each_next_layer_outcome_is_the_components_declaration() -> None:
    assert v.OUTCOME_GOOD == {"blocked": 0.0, "struggled": 0.0, "smooth": 1.0, "censored": None,
                              "undetermined": None}
    assert v.REDO_GOOD == {"yes": 0.0, "no": 1.0} and v.RETURN_GOOD == {RETURNED: 1.0, NOT_RETURNED: 0.0}


def test_discriminant_jaccards_unique_sessions_and_near_duplicates() -> None:
    specs = [_spec("a.one"), _spec("a.copy"), _spec("b.two"), _spec("b.note", "descriptive"), _spec("c.few"),
             _spec("c.twin")]
    users = [f"u{i}" for i in range(10)]
    rows = (_rows("a.one", [1, 1, 1, 1, 1, 0, 0, 0, 0, 0], users)
            + _rows("a.copy", [1, 1, 1, 1, 1, 0, 0, 0, 0, 0], users)
            + _rows("b.two", [0, 0, 0, 1, 1, 1, 1, 0, 0, 0], users)
            + _rows("b.note", [1, 1, 1, 1, 1, 1, 1, 1, 1, 1], users)  # descriptive: no component flags by it
            + _rows("c.few", [0, 0, 0, 0, 0, 0, 0, 0, 1, 1], users)
            + _rows("c.twin", [0, 0, 0, 0, 0, 0, 0, 0, 1, 1], users))  # identical, but on 2 sessions only
    d = v.discriminant(specs, rows)
    pairs = {(p.a, p.b): p for p in d.component_jaccard}
    assert pairs[("a", "b")].jaccard == pytest.approx(2 / 7) and pairs[("a", "b")].n == 7
    assert pairs[("a", "c")].jaccard == 0.0 and pairs[("a", "c")].n == 7
    assert d.unique == {"a": 3, "b": 2, "c": 2}
    assert [(p.a, p.b, p.jaccard, p.n) for p in d.near_duplicates] == [("a.one", "a.copy", 1.0, 5)]


def test_the_spine_and_its_next_layers_come_from_the_components() -> None:
    comps = components()
    assert v.spine(comps) == ("execution", "substance", "trajectory", "results")
    keys = ["execution/failure_rate", "substance/S", "substance/pass_rate.i1_answers_task",
            "trajectory/outcome_share.blocked", "trajectory/outcome_share.struggled", "trajectory/mean_friction",
            "results/redo_rate", "conduct/C(r).x"]
    pairs = v.pairing(keys, comps)
    assert pairs["execution/failure_rate"] == ("substance/S",)
    assert pairs["substance/pass_rate.i1_answers_task"] == ("trajectory/outcome_share.blocked",
                                                           "trajectory/outcome_share.struggled")
    assert pairs["trajectory/mean_friction"] == ("results/redo_rate",)
    assert "results/redo_rate" not in pairs and "conduct/C(r).x" not in pairs
    assert v.before("execution", "trajectory", comps) and v.before("conduct", "trajectory", comps)
    assert not v.before("trajectory", "trajectory", comps) and not v.before("results", "trajectory", comps)


def test_goodhart_flags_an_improvement_while_the_next_layer_worsens() -> None:
    comps = components()
    history: list[tuple[str, dict[str, float | None]]] = [
        ("a1", {"execution/failure_rate": 0.10, "substance/S": 0.80, "execution/handed_off": 3.0}),
        ("a2", {"execution/failure_rate": 0.05, "substance/S": 0.70, "execution/handed_off": 9.0}),  # Goodhart
        ("a3", {"execution/failure_rate": 0.04, "substance/S": 0.75, "execution/handed_off": 9.0}),  # both better
        ("a4", {"execution/failure_rate": 0.03, "substance/S": None, "execution/handed_off": 9.0}),  # undefined
        ("a5", {"execution/failure_rate": 0.06, "substance/S": 0.60, "execution/handed_off": 9.0}),  # both worse
    ]
    keys = {k for _, s in history for k in s}
    worse = v.directions(keys, comps)
    assert worse == {"execution/failure_rate": "higher", "substance/S": "lower"}  # a count has no say
    [sig] = v.goodhart(history, worse=worse, next_layer_of=v.pairing(keys, comps))
    assert (sig.metric, sig.next_layer, sig.before, sig.after) == ("execution/failure_rate", "substance/S", "a1",
                                                                   "a2")
    assert sig.metric_change == pytest.approx(0.05) and sig.next_change == pytest.approx(0.10)


def test_a_snapshot_keeps_the_headline_estimates_over_all_units() -> None:
    rows = [ResultRow(component="execution", layer="trace", metric="failure_rate", stratum="all", value=0.1),
            ResultRow(component="execution", layer="trace", metric="failure_rate.wilson", stratum="all", value=0.1),
            ResultRow(component="execution", layer="trace", metric="failure_rate", stratum="mode=deep", value=0.3),
            ResultRow(component="execution", layer="trace", metric="delivery_failure_share", stratum="all", value=0.1),
            ResultRow(component="execution", layer="conversation", metric="delivery_failure_share", stratum="all",
                 value=0.2),
            ResultRow(component="substance", layer="trace", metric="S", stratum="all", value=None),
            ResultRow(component="conduct", layer="conversation", metric="invariant.x", stratum=None, value="held"),
            ResultRow(component="nobody", layer="trace", metric="x", stratum="all", value=1.0)]
    assert v.snapshot(rows, components()) == {
        "execution/failure_rate": 0.1, "execution/delivery_failure_share@trace": 0.1,
        "execution/delivery_failure_share@conversation": 0.2, "substance/S": None}
