"""Rank AUC against scipy's Mann-Whitney U and a brute-force pair count; the cluster interval's coverage."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from agent_factory.evaluators.stats import cluster_auc, rank_auc


def _pairs(scores, outcomes):
    pos = [s for s, y in zip(scores, outcomes, strict=True) if y]
    neg = [s for s, y in zip(scores, outcomes, strict=True) if not y]
    wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a, b in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


@pytest.mark.parametrize("seed", range(5))
def test_rank_auc_equals_pair_count_and_mann_whitney(seed: int) -> None:
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 4, size=60).astype(float)  # many ties, like counts of flags
    outcomes = rng.random(60) < 0.4
    auc = rank_auc(scores, outcomes)
    assert auc == pytest.approx(_pairs(scores, outcomes), abs=1e-12)
    u = mannwhitneyu(scores[outcomes], scores[~outcomes]).statistic
    assert auc == pytest.approx(u / (outcomes.sum() * (~outcomes).sum()), abs=1e-12)


def test_rank_auc_edges() -> None:
    assert rank_auc([1, 2, 3], [False, False, True]) == 1.0
    assert rank_auc([3, 2, 1], [False, False, True]) == 0.0
    assert rank_auc([1, 1, 1, 1], [True, False, True, False]) == 0.5
    assert rank_auc([1, 2], [True, True]) is None
    with pytest.raises(ValueError):
        rank_auc([1, 2], [True])


def test_cluster_auc_reports_classes_and_clusters() -> None:
    r = cluster_auc([0, 1, 0, 1, 1, 0], [False, True, False, True, False, False], ["a", "a", "b", "b", "c", "c"],
                    n_boot=200, seed=1)
    assert (r.n_pos, r.n_neg, r.clusters) == (2, 4, 3)
    assert r.value == pytest.approx(_pairs([0, 1, 0, 1, 1, 0], [False, True, False, True, False, False]))
    assert r.low is not None and r.low <= r.value <= r.high
    single = cluster_auc([0, 1], [False, True], ["a", "a"])
    assert single.low is None and "single cluster" in single.note


def test_cluster_interval_covers_planted_auc() -> None:
    """Clustered data with a planted population AUC: the 95% interval covers it in about 95% of seeds."""
    # Scores: normal with mean shift d for positives, plus a shared cluster effect (correlated trials).
    # The planted AUC of the unit-level mixture is computed from a very large draw of the same process.
    d, sigma_c = 0.8, 0.7

    def draw(rng, clusters, per):
        c = np.repeat(np.arange(clusters), per)
        effect = rng.normal(0, sigma_c, clusters)[c]
        y = rng.random(c.size) < 0.4
        s = effect + rng.normal(0, 1, c.size) + d * y
        return s, y, c

    big_s, big_y, _ = draw(np.random.default_rng(999), 4000, 4)
    truth = rank_auc(big_s, big_y)
    covered = 0
    seeds = 120
    for seed in range(seeds):
        s, y, c = draw(np.random.default_rng(seed), 40, 4)
        r = cluster_auc(s, y, list(c), n_boot=300, seed=seed)
        covered += r.low <= truth <= r.high
    assert covered / seeds >= 0.88, f"coverage {covered / seeds:.3f} of planted AUC {truth:.3f}"
