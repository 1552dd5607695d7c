"""`tasks compare`'s pure part (`evaluators.tasks.compare`): the verdict on hand-made cases, the signed-rank p value
against an enumeration of every sign flip written here (and a normal approximation written here beyond
`EXACT_UP_TO`), the false-alarm rate and power over many simulated suites with a planted truth, matching of tasks,
and the selectors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import PermutationMethod, norm, wilcoxon

from agent_factory.evaluators.tasks.compare import (
    EXACT_UP_TO,
    TaskComparison,
    compare_tasks,
    parse_selector,
    select_runs,
    signed_rank_test,
)
from agent_factory.evaluators.tasks.model import TaskRun


def runs_of(task: str, n: int, c: int, *, suite: str = "s", agent: str | None = None,
            unlabelled: int = 0) -> list[TaskRun]:
    """`n` labelled trials of a task, the first `c` successes, then `unlabelled` trials without a label."""
    outcomes: list[bool | None] = [i < c for i in range(n)] + [None] * unlabelled
    return [TaskRun(suite=suite, task_id=task, trial=str(i), success=s, source=f"{agent}.json", source_digest="d",
                    conversation_id=f"{suite}-{task}-{i}", steps=1, agent=agent) for i, s in enumerate(outcomes)]


def side(*tasks: tuple[str, int, int], suite: str = "s") -> list[TaskRun]:
    return [r for t, n, c in tasks for r in runs_of(t, n, c, suite=suite)]


def compare(base: list[TaskRun], cand: list[TaskRun]) -> TaskComparison:
    return compare_tasks(base, cand, baseline_name="A", candidate_name="B")


# ---- the verdict on hand-made cases -------------------------------------------------------------------------

def test_every_task_lost_is_below_with_p_one_in_two_to_the_seven() -> None:
    base = side(*[(f"t{i}", 2, 2) for i in range(7)])
    cand = side(*[(f"t{i}", 2, 0) for i in range(7)])
    cmp = compare_tasks(base, cand, baseline_name="A", candidate_name="B")
    # Every task fell: the one arrangement of 2^7 sign flips that extreme.
    assert cmp.test.p_value == pytest.approx(1 / 2 ** 7)
    assert (cmp.test.method, cmp.test.changed, cmp.test.statistic) == ("exact", 7, 0.0)
    assert cmp.below and cmp.mean_change == -1.0
    assert (cmp.baseline.completion, cmp.candidate.completion) == (1.0, 0.0)
    assert [c.change for c in cmp.tasks] == [-1.0] * 7


def test_a_drop_chance_explains_is_not_below_unless_strict() -> None:
    base, cand = side(("t", 4, 3)), side(("t", 4, 2))  # 3/4 -> 2/4
    loose = compare_tasks(base, cand, baseline_name="A", candidate_name="B")
    assert loose.test.p_value == pytest.approx(0.5)  # one change: its sign is a coin
    assert not loose.below and loose.mean_change == pytest.approx(-0.25)
    assert "chance explains it" in loose.reason
    strict = compare_tasks(base, cand, baseline_name="A", candidate_name="B", strict=True)
    assert strict.below and strict.strict


def test_no_change_is_not_below_even_strict() -> None:
    base = side(("a", 3, 1), ("b", 3, 2))
    cand = side(("a", 3, 2), ("b", 3, 1))  # +1/3 and -1/3: a mean change of exactly 0
    for strict in (False, True):
        cmp = compare_tasks(base, cand, baseline_name="A", candidate_name="B", strict=strict)
        assert not cmp.below and cmp.mean_change == 0.0
    same = compare_tasks(base, base, baseline_name="A", candidate_name="B")
    assert (same.test.method, same.test.p_value, same.test.statistic, same.below) == ("none", 1.0, None, False)


def test_a_rank_test_rejection_with_a_mean_gain_is_not_below() -> None:
    # Nine small tied losses (10/10 -> 9/10, mid-rank 5 each) and one large gain (0/20 -> 19/20, rank 10): W+ = 10,
    # and P(W+ <= 10) = (C(9,0) + C(9,1) + C(9,2) + 1) / 2^10 = 47/1024 < 0.05 (up to two losses' ranks flipped to
    # gains, or the gain alone); but the mean change is +0.005.
    base = side(*[(f"t{i}", 10, 10) for i in range(9)], ("g", 20, 0))
    cand = side(*[(f"t{i}", 10, 9) for i in range(9)], ("g", 20, 19))
    cmp = compare_tasks(base, cand, baseline_name="A", candidate_name="B")
    assert cmp.test.statistic == 10.0
    assert cmp.test.p_value == pytest.approx(47 / 1024)
    assert cmp.mean_change == pytest.approx(0.005)
    assert not cmp.below


def test_tasks_on_one_side_are_listed_and_left_out_of_the_test() -> None:
    base = side(("a", 2, 2), ("b", 2, 2), ("gone", 2, 2))
    cand = side(("a", 2, 0), ("b", 2, 1), ("new", 2, 0))
    cmp = compare_tasks(base, cand, baseline_name="A", candidate_name="B")
    assert cmp.test.tasks == 2
    assert [(c.id, c.change, c.only_in) for c in cmp.tasks] == [
        ("a", -1.0, None), ("b", -0.5, None), ("gone", None, "baseline"), ("new", None, "candidate")]
    assert cmp.mean_change == pytest.approx(-0.75)
    # Each side's completion is over all its tasks, as `tasks report` gives pass^1.
    assert (cmp.baseline.completion, cmp.candidate.completion) == pytest.approx((1.0, 0.5 / 3))


def test_unlabelled_trials_leave_the_task_out_of_the_pairs() -> None:
    base = side(("a", 2, 2)) + runs_of("u", 0, 0, unlabelled=2)
    cand = side(("a", 2, 2)) + runs_of("u", 2, 0)
    cmp = compare_tasks(base, cand, baseline_name="A", candidate_name="B")
    assert cmp.test.tasks == 1
    (u,) = [c for c in cmp.tasks if c.id == "u"]
    assert u.change is None and u.only_in is None and u.baseline is not None and u.baseline.completion is None


def test_matching_by_task_id_across_single_suites_and_by_suite_and_task_otherwise() -> None:
    base, cand = side(("1", 4, 4), suite="gpt-4o-airline"), side(("1", 4, 0), suite="claude-airline")
    cmp = compare_tasks(base, cand, baseline_name="A", candidate_name="B")
    assert cmp.matched_by == "task id" and [c.id for c in cmp.tasks] == ["1"]
    two = side(("1", 4, 4), suite="x") + side(("1", 4, 4), suite="y")
    cmp = compare_tasks(two, two[:4], baseline_name="A", candidate_name="B")
    assert cmp.matched_by == "suite/task"
    assert [(c.id, c.only_in) for c in cmp.tasks] == [("x/1", None), ("y/1", "baseline")]


def test_no_task_on_both_sides_says_so() -> None:
    with pytest.raises(ValueError, match="no task has labelled trials on both sides"):
        # "a" is on both sides, but the candidate's trials of it have no label.
        compare(side(("a", 2, 2)), side(("b", 2, 2)) + runs_of("a", 0, 0, unlabelled=2))


# ---- the p value against independent computations ----------------------------------------------------------

def _midranks(values: list[float]) -> list[float]:
    """Ranks 1..n of the values, ties at the mean of their ranks (written here, not scipy's rankdata)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _enumerated_p(changes: list[float]) -> tuple[float, float]:
    """(W+, P(W+ <= observed)) over all 2^n sign flips of the non-zero changes' ranks."""
    d = [c for c in changes if c != 0]
    ranks = _midranks([abs(c) for c in d])
    observed = sum(r for r, c in zip(ranks, d, strict=True) if c > 0)
    flips = [sum(r for r, s in zip(ranks, signs, strict=True) if s)
             for signs in itertools.product((False, True), repeat=len(d))]
    return observed, sum(w <= observed + 1e-9 for w in flips) / len(flips)


def test_exact_p_equals_an_enumeration_of_sign_flips_and_scipys_permutation_test() -> None:
    rng = np.random.default_rng(35)
    for _ in range(60):
        n = int(rng.integers(1, 11))
        # Changes of 4-trial tasks: multiples of 1/4, so ties and zeros are common.
        changes = [float(x) / 4 for x in rng.integers(-4, 3, size=n)]
        d = [c for c in changes if c != 0]
        if not d:
            continue
        test = signed_rank_test(changes, alpha=0.05)
        w, p = _enumerated_p(changes)
        assert test.method == "exact"
        assert test.statistic == pytest.approx(w)
        assert test.p_value == pytest.approx(p, abs=1e-12), changes
        if 2 <= len(d) <= 8:  # scipy enumerates every flip too (slowly, so on few tasks)
            lib = wilcoxon(d, alternative="less", method=PermutationMethod(n_resamples=2 ** len(d)))
            assert test.p_value == pytest.approx(float(lib.pvalue), abs=1e-12), changes


def test_exact_p_without_ties_equals_scipys_exact_distribution_on_many_tasks() -> None:
    rng = np.random.default_rng(3)
    for n in (12, 25, 45):
        changes = list(rng.permutation(np.arange(1, n + 1)) * rng.choice([-1.0, 1.0], size=n) / (n + 1))
        test = signed_rank_test(changes, alpha=0.05)
        lib = wilcoxon(changes, alternative="less", method="exact")
        assert test.statistic == pytest.approx(float(lib.statistic))
        assert test.p_value == pytest.approx(float(lib.pvalue), rel=1e-9)


def test_beyond_exact_the_p_value_is_the_tie_corrected_normal_approximation() -> None:
    rng = np.random.default_rng(7)
    changes = [float(x) / 4 for x in rng.integers(-4, 4, size=300)]
    d = [c for c in changes if c != 0]
    assert len(d) > EXACT_UP_TO
    ranks = _midranks([abs(c) for c in d])
    w = sum(r for r, c in zip(ranks, d, strict=True) if c > 0)
    n = len(d)
    ties = [ranks.count(r) for r in set(ranks)]
    var = n * (n + 1) * (2 * n + 1) / 24 - sum(t ** 3 - t for t in ties) / 48
    expected = norm.cdf((w - n * (n + 1) / 4) / math.sqrt(var))
    test = signed_rank_test(changes, alpha=0.05)
    assert test.method == "normal approximation"
    assert test.p_value == pytest.approx(expected, rel=1e-9)


# ---- false alarms and power against a planted truth ---------------------------------------------------------

def _simulated(rng: np.random.Generator, tasks: int, trials: int,
               drop: float) -> tuple[list[TaskRun], list[TaskRun]]:
    """Two sides of `tasks` tasks, each task's success chance drawn once; the candidate's lowered by `drop`."""
    p = rng.uniform(0.2, 0.9, size=tasks)
    base = side(*[(f"t{i}", trials, int(rng.binomial(trials, p[i]))) for i in range(tasks)])
    cand = side(*[(f"t{i}", trials, int(rng.binomial(trials, max(0.0, p[i] - drop)))) for i in range(tasks)])
    return base, cand


@pytest.mark.parametrize("tasks", [10, 30])
def test_false_alarms_stay_within_alpha_and_a_real_drop_is_caught(tasks: int) -> None:
    rng = np.random.default_rng(tasks)
    seeds = 300
    alarms = sum(compare(*_simulated(rng, tasks, 4, 0.0)).below for _ in range(seeds))
    # At most alpha = 5% in expectation; 3 binomial standard errors of slack over 300 suites.
    assert alarms / seeds <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / seeds), alarms
    caught = sum(compare(*_simulated(rng, tasks, 4, 0.3)).below for _ in range(100))
    assert caught >= 80, caught


def test_the_normal_approximation_keeps_false_alarms_within_alpha() -> None:
    # Beyond EXACT_UP_TO changed tasks: per-task changes of two 4-trial sides with the same success chance.
    rng = np.random.default_rng(11)
    seeds, tasks = 300, 400
    alarms = 0
    for _ in range(seeds):
        p = rng.uniform(0.2, 0.9, size=tasks)
        changes = (rng.binomial(4, p) - rng.binomial(4, p)) / 4
        test = signed_rank_test(list(changes), alpha=0.05)
        assert test.method == "normal approximation"
        alarms += test.p_value < 0.05
    assert alarms / seeds <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / seeds), alarms


# ---- selectors ----------------------------------------------------------------------------------------------

def test_selectors_parse_and_pick_runs() -> None:
    assert parse_selector("agent=script:succeed") == ("agent", ("script:succeed",))
    assert parse_selector("trial=0, 1") == ("trial", ("0", "1"))
    assert parse_selector("store.duckdb") is None
    with pytest.raises(ValueError, match="one of suite, agent, source, trial"):
        parse_selector("model=x")
    with pytest.raises(ValueError, match="needs a value"):
        parse_selector("agent=")
    runs = runs_of("a", 2, 1, agent="script:succeed") + runs_of("a", 3, 0, agent="script:loop")
    assert len(select_runs(runs, "agent", ["script:loop"])) == 3
    assert len(select_runs(runs, "trial", ["0", "2"])) == 3
    assert select_runs(runs_of("a", 2, 1), "agent", ["script:loop"]) == []  # an import names no agent
