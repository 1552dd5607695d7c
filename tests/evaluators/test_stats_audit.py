"""The audit's estimators in `evaluators/stats/`: the vectorised user bootstrap, prediction-powered rates
(PPI++) against textbook computations, and precision / recall of a detector."""

from __future__ import annotations

import numpy as np
import pytest

from agent_factory.evaluators.stats.agreement_ci import bootstrap_weights, percentile_interval, replicate_sums
from agent_factory.evaluators.stats.detection import detection_rates
from agent_factory.evaluators.stats.ppi import judge_rate, ppi_rate


def _clustered(seed: int, users: int, *, sizes: tuple[int, int] = (2, 8)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(users, truth, judge): per-user prevalence, a judge that adds false yeses on 15% of true noes."""
    rng = np.random.default_rng(seed)
    user = np.repeat(np.arange(users), rng.integers(sizes[0], sizes[1] + 1, size=users))
    truth = (rng.random(user.size) < rng.beta(2.0, 4.0, size=users)[user]).astype(float)
    judge = np.where(truth == 1.0, 1.0, (rng.random(user.size) < 0.15).astype(float))
    return user, truth, judge


def test_bootstrap_weights_draw_every_cluster_count_once_per_replicate() -> None:
    chunks = list(bootstrap_weights(7, 1000, np.random.default_rng(1)))
    weights = np.concatenate(chunks)
    assert weights.shape == (1000, 7) and np.all(weights.sum(axis=1) == 7)
    assert weights.mean() == pytest.approx(1.0, abs=0.05)  # each cluster drawn once per replicate on average
    sums = replicate_sums(np.arange(14.0).reshape(7, 2), 1000, 1)
    assert np.allclose(sums, weights @ np.arange(14.0).reshape(7, 2))  # same seed, same draws


def test_percentile_interval_drops_a_few_undefined_replicates_and_refuses_many() -> None:
    reps = np.r_[np.linspace(0.0, 1.0, 97), [np.nan] * 3]
    low, high, note = percentile_interval(reps, 0.95)
    assert (low, high) == (pytest.approx(0.025), pytest.approx(0.975))
    assert note == "undefined on 3 of 100 bootstrap replicates (left out)"
    assert percentile_interval(np.r_[reps[:90], [np.nan] * 10], 0.95)[:2] == (None, None)
    low, high, note = percentile_interval(np.ones(50), 0.95)
    assert (low, high) == (1.0, 1.0) and note is not None and "single-point interval" in note


def test_ppi_point_estimate_is_the_textbook_formula() -> None:
    # PPI++ (Angelopoulos et al. 2023, eq. for the mean): theta = lambda * mean_N(f) + mean_n(y - lambda f).
    user, truth, judge = _clustered(3, 150)
    sample = np.sort(np.random.default_rng(4).choice(truth.size, 120, replace=False))
    n, big_n = sample.size, truth.size
    y, f_lab = truth[sample], judge[sample]
    for lam in (0.0, 0.5, 1.0):
        textbook = lam * judge.mean() + np.mean(y - lam * f_lab)
        got = ppi_rate(judge, np.ones(big_n), user, sample, y, np.ones(n), lam=lam)
        assert got.value == pytest.approx(textbook, abs=1e-12) and got.lam == lam
    # Power tuning: the textbook lambda Cov(y, f) / ((1 + n / N) Var(f)) is for disjoint sets; here the labelled
    # units are among the N, where the variance is minimised at Cov(y, f) / Var(f) (derivation in ppi.py's test
    # of the standard error below); the tuned value is that up to the sample's moments.
    tuned = ppi_rate(judge, np.ones(big_n), user, sample, y, np.ones(n))
    ratio = np.cov(y, f_lab)[0, 1] / np.var(f_lab, ddof=1)
    assert tuned.lam == pytest.approx(min(1.0, ratio), abs=0.08)
    assert tuned.value == pytest.approx(tuned.lam * judge.mean() + np.mean(y - tuned.lam * f_lab), abs=1e-12)


def test_ppi_ratio_with_inapplicable_units_is_the_ratio_of_two_ppi_means() -> None:
    rng = np.random.default_rng(5)
    user, truth, judge = _clustered(5, 120)
    applicable = (rng.random(truth.size) < 0.8).astype(float)
    judge_app = np.where(rng.random(truth.size) < 0.95, applicable, 1.0 - applicable)
    sample = np.sort(rng.choice(truth.size, 100, replace=False))
    w = rng.uniform(1.0, 5.0, size=sample.size)
    yes, j_yes = truth * applicable, judge * judge_app
    got = ppi_rate(j_yes, judge_app, user, sample, yes[sample], applicable[sample], weights=w, lam=0.7)

    def mean(v_all: np.ndarray, v_lab: np.ndarray) -> float:
        return float(0.7 * v_all.mean() + np.sum(w * (v_lab - 0.7 * v_all[sample])) / w.sum())

    assert got.value == pytest.approx(mean(j_yes, yes[sample]) / mean(judge_app, applicable[sample]), abs=1e-12)


def test_ppi_standard_error_is_the_iid_formula_with_one_unit_per_user() -> None:
    # Labelled units among the N: Var = s_y^2 / n - 2 lam s_fy (1/n - 1/N) + lam^2 s_f^2 (1/n - 1/N).
    user, truth, judge = _clustered(6, 3000, sizes=(1, 1))
    sample = np.sort(np.random.default_rng(7).choice(truth.size, 400, replace=False))
    n, big_n, lam = sample.size, truth.size, 0.6
    got = ppi_rate(judge, np.ones(big_n), user, sample, truth[sample], np.ones(n), lam=lam)
    cov = np.cov(truth[sample], judge[sample], ddof=1)
    var_f = np.var(judge, ddof=1)
    formula = cov[0, 0] / n - 2 * lam * cov[0, 1] * (1 / n - 1 / big_n) + lam**2 * var_f * (1 / n - 1 / big_n)
    assert got.se == pytest.approx(np.sqrt(formula), rel=0.02)


def test_ppi_sandwich_agrees_with_a_user_bootstrap() -> None:
    user, truth, judge = _clustered(8, 120)
    rng = np.random.default_rng(9)
    sample = np.sort(rng.choice(truth.size, 150, replace=False))
    labelled = np.zeros(truth.size, dtype=bool)
    labelled[sample] = True
    got = ppi_rate(judge, np.ones(truth.size), user, sample, truth[sample], np.ones(sample.size))
    assert got.lam is not None and got.se is not None
    members = [np.nonzero(user == g)[0] for g in range(120)]
    reps = []
    for _ in range(400):  # resample users; each drawn user's units (and their labels) come along
        idx = np.concatenate([members[g] for g in rng.integers(0, 120, size=120)])
        lab = np.nonzero(labelled[idx])[0]
        reps.append(ppi_rate(
            judge[idx], np.ones(idx.size), np.arange(idx.size), lab, truth[idx][lab], np.ones(lab.size), lam=got.lam,
        ).value)
    assert got.se == pytest.approx(float(np.std(reps, ddof=1)), rel=0.15)


def test_ppi_and_judge_rate_say_what_is_missing() -> None:
    none = ppi_rate([1.0, 0.0], [1.0, 1.0], ["a", "b"], [], [], [])
    assert (none.value, none.note, none.labels, none.units) == (None, "no labelled units", 0, 2)
    inapplicable = ppi_rate([1.0, 0.0], [1.0, 1.0], ["a", "b"], [0], [0.0], [0.0])
    assert inapplicable.value is None and "applicable" in (inapplicable.note or "")
    with pytest.raises(ValueError, match="distinct indices"):
        ppi_rate([1.0, 0.0], [1.0, 1.0], ["a", "b"], [0, 0], [1.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="weights"):
        ppi_rate([1.0, 0.0], [1.0, 1.0], ["a", "b"], [0], [1.0], [1.0], weights=[0.0])
    judged = judge_rate([1, 0, 1, 0, 0], [1, 1, 1, 0, 1], ["a", "a", "b", "b", "c"])
    assert judged.value == pytest.approx(2 / 4) and judged.n_clusters == 3 and judged.method == "cluster_ratio_normal"
    with pytest.raises(ValueError, match="imply"):
        judge_rate([1], [0], ["a"])


def test_detection_counts_precision_and_recall() -> None:
    # 10 units over 5 users: the rule fires on 4, the model on 5, both on 3 -> precision 3/4, recall 3/5.
    rule = [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]
    model = [1, 1, 1, 0, 1, 1, 0, 0, 0, 0]
    users = ["u1", "u1", "u2", "u2", "u3", "u3", "u4", "u4", "u5", "u5"]
    found = detection_rates([bool(x) for x in rule], [bool(x) for x in model], users, seed=1, n_boot=500)
    assert (found.n, found.detected, found.reference, found.both, found.n_clusters) == (10, 4, 5, 3, 5)
    assert (found.precision, found.recall) == (pytest.approx(0.75), pytest.approx(0.6))
    silent = detection_rates([False] * 4, [True, False, True, False], ["a", "a", "b", "b"], n_boot=50)
    assert (silent.precision, silent.recall, silent.recall_high) == (None, 0.0, 0.0)
    assert silent.note is not None and "never fired" in silent.note


def test_labels_that_do_not_vary_keep_the_judge_classic_ppi() -> None:
    # 100 units of 50 users, the judge says yes on 10; 11 labelled units, all `no` as the judge says: the tuning
    # has nothing to learn from, and the labels' own 0 with a zero-width interval would be no estimate at all.
    yes = np.array([1.0] * 10 + [0.0] * 90)
    users = [f"u{i // 2}" for i in range(100)]
    sample = list(range(20, 31))
    got = ppi_rate(yes, np.ones(100), users, sample, np.zeros(11), np.ones(11))
    assert got.lam == 1.0 and got.value == pytest.approx(0.10)
    assert got.low is not None and got.high is not None and got.low < 0.10 < got.high
    assert got.note is not None and "classic PPI" in got.note
