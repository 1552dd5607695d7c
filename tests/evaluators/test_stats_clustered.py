from __future__ import annotations

import numpy as np
import pytest

from agent_factory.evaluators.stats import (
    cluster_bootstrap_ci,
    cluster_proportion_ci,
    cluster_ratio_se,
    cluster_two_proportion_z,
    two_proportion_z,
)
from agent_factory.evaluators.stats.clustered import VERSION


def clustered_data(n_clusters: int = 20, size: int = 10, seed: int = 3) -> tuple[list[float], list[str]]:
    """Strong within-cluster correlation: cluster effects sd 1, noise sd 0.1 (ICC about 0.99)."""
    rng = np.random.default_rng(seed)
    effects = rng.normal(0.0, 1.0, n_clusters)
    values = [float(effects[g] + rng.normal(0.0, 0.1)) for g in range(n_clusters) for _ in range(size)]
    return values, [f"user{g}" for g in range(n_clusters) for _ in range(size)]


def test_module_is_versioned() -> None:
    assert VERSION == "1"


def test_bootstrap_is_deterministic_under_a_seed() -> None:
    values, users = clustered_data()
    first = cluster_bootstrap_ci(values, users, seed=11, n_boot=500)
    assert cluster_bootstrap_ci(values, users, seed=11, n_boot=500) == first
    assert cluster_bootstrap_ci(values, users, seed=np.random.default_rng(11), n_boot=500) == first
    assert cluster_bootstrap_ci(values, users, seed=12, n_boot=500) != first
    assert first.value == pytest.approx(np.mean(values))
    assert (first.n, first.n_clusters, first.method) == (200, 20, "cluster_bootstrap_percentile")
    assert first.low < first.value < first.high


def test_bootstrap_does_not_depend_on_row_order() -> None:
    values, users = clustered_data()
    order = np.random.default_rng(0).permutation(len(values))
    shuffled = cluster_bootstrap_ci([values[i] for i in order], [users[i] for i in order], seed=5, n_boot=300)
    assert shuffled.low == pytest.approx(cluster_bootstrap_ci(values, users, seed=5, n_boot=300).low)


def test_clustering_widens_the_interval() -> None:
    values, users = clustered_data()
    clustered = cluster_bootstrap_ci(values, users, seed=1)
    iid = cluster_bootstrap_ci(values, list(range(len(values))), seed=1)
    # with ICC ~ 0.99 and 10 per cluster the design effect is ~ 10, so the width ratio is ~ sqrt(10)
    assert (clustered.high - clustered.low) > 2.5 * (iid.high - iid.low)


def test_mean_fast_path_equals_general_path() -> None:
    values, users = clustered_data()
    fast = cluster_bootstrap_ci(values, users, seed=9, n_boot=300)
    slow = cluster_bootstrap_ci(values, users, seed=9, n_boot=300, stat=lambda x: float(np.mean(x)))
    assert (slow.low, slow.high) == (pytest.approx(fast.low), pytest.approx(fast.high))


def test_other_statistics() -> None:
    values, users = clustered_data()
    est = cluster_bootstrap_ci(values, users, seed=2, n_boot=300, stat=lambda x: float(np.median(x)))
    assert est.value == pytest.approx(np.median(values))
    assert est.low <= est.high


def test_bootstrap_degenerate_inputs() -> None:
    one = cluster_bootstrap_ci([1.0, 2.0, 3.0], ["u", "u", "u"], seed=0)
    assert (one.value, one.low, one.high, one.n_clusters) == (2.0, None, None, 1)
    assert one.note is not None and "fewer than 2 clusters" in one.note
    empty = cluster_bootstrap_ci([], [], seed=0)
    assert (empty.value, empty.n) == (None, 0)
    bad = cluster_bootstrap_ci([1.0, 2.0], ["a", "b"], seed=0, stat=lambda x: float("nan"))
    assert bad.low is None and bad.note is not None
    with pytest.raises(ValueError):
        cluster_bootstrap_ci([1.0, 2.0], ["a"], seed=0)


def test_ratio_se_matches_hand_computation() -> None:
    # y = [1, 2, 3], x = [2, 2, 4]: R = 6/8 = 0.75, residuals y - R x = [-0.5, 0.5, 0.0]
    # se^2 = 3/2 * 0.5 / 8^2 = 0.01171875, se = 0.1082532
    r = cluster_ratio_se([1, 2, 3], [2, 2, 4])
    assert r.value == 0.75
    assert r.se == pytest.approx(0.1082532, abs=1e-7)
    assert (r.numerator, r.denominator, r.n_clusters) == (6.0, 8.0, 3)


def test_ratio_se_degenerate() -> None:
    assert cluster_ratio_se([0, 0], [0, 0]).value is None
    single = cluster_ratio_se([1], [4])
    assert (single.value, single.se) == (0.25, None)
    with pytest.raises(ValueError):
        cluster_ratio_se([1, 2], [1, -2])


def test_cluster_proportion_ci_matches_hand_computation() -> None:
    # value 0.75 +/- 1.959964 * 0.1082532 = 0.75 +/- 0.212172
    est = cluster_proportion_ci([1, 2, 3], [2, 2, 4])
    assert est.low == pytest.approx(0.537828, abs=1e-5)
    assert est.high == pytest.approx(0.962172, abs=1e-5)
    assert (est.n, est.n_clusters, est.method) == (8, 3, "cluster_ratio_normal")


def test_cluster_proportion_ci_clips_and_flags_degenerate_cases() -> None:
    clipped = cluster_proportion_ci([2, 2, 0], [2, 2, 1])
    assert clipped.high == 1.0 and clipped.low < clipped.value
    flat = cluster_proportion_ci([0, 0, 0], [3, 4, 5])
    assert (flat.value, flat.low, flat.high) == (0.0, 0.0, 0.0)
    assert flat.note is not None and "single point" in flat.note
    assert cluster_proportion_ci([], []).value is None
    with pytest.raises(ValueError):
        cluster_proportion_ci([3], [2])


def test_cluster_two_proportion_z_matches_hand_computation() -> None:
    # group 1: R = 6/8 = 0.75, se = 0.1082532; group 2 (y = [0, 1, 1]): R = 0.25, residuals [-0.5, 0.5, 0],
    # se = 0.1082532; se(diff) = 0.1082532 * sqrt(2) = 0.1530931, z = 0.5 / 0.1530931 = 3.265986
    t = cluster_two_proportion_z([1, 2, 3], [2, 2, 4], [0, 1, 1], [2, 2, 4])
    assert t.diff == pytest.approx(0.5)
    assert t.z == pytest.approx(3.265986, abs=1e-6)
    assert (t.clusters1, t.clusters2, t.n1, t.n2, t.method) == (3, 3, 8, 8, "cluster_ratio_z")
    few = cluster_two_proportion_z([1], [2], [0, 1], [2, 2])
    assert few.z is None and few.note is not None and "fewer than 2 clusters" in few.note


def test_aa_splits_false_alarm_far_less_when_clustered() -> None:
    """docs/method.md section 7: per-turn tests alarm on A/A user splits; clustered ones hold near the 5% level."""
    rng = np.random.default_rng(2024)
    users = 200
    rates = rng.beta(0.5, 2.0, users)  # user failure rates differ a lot
    trials = rng.integers(5, 60, users)
    fails = rng.binomial(trials, rates)
    per_turn = clustered = 0
    splits = 200
    for _ in range(splits):
        half = rng.permutation(users) < users // 2
        a, b = half, ~half
        flat = two_proportion_z(int(fails[a].sum()), int(trials[a].sum()), int(fails[b].sum()), int(trials[b].sum()))
        per_turn += abs(flat.z) >= 2
        clus = cluster_two_proportion_z(fails[a], trials[a], fails[b], trials[b])
        clustered += abs(clus.z) >= 2
    assert per_turn / splits > 0.25
    assert clustered / splits < 0.12
