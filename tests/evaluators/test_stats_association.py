"""The flagged-vs-unflagged mean difference with a user-clustered interval, against an independent computation:
the cluster-robust sandwich of a least-squares regression of the outcome on the flag, built with matrices."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agent_factory.evaluators.stats import cluster_mean_difference


def sandwich_se(y: np.ndarray, flag: np.ndarray, users: list[str]) -> tuple[float, float]:
    """OLS slope of y on [1, flag] and its CR1 standard error with the G / (G - 1) factor only."""
    x = np.column_stack([np.ones_like(y), flag.astype(float)])
    bread = np.linalg.inv(x.T @ x)
    beta = bread @ x.T @ y
    u = y - x @ beta
    meat = np.zeros((2, 2))
    groups = sorted(set(users))
    for g in groups:
        idx = [i for i, k in enumerate(users) if k == g]
        s = x[idx].T @ u[idx]
        meat += np.outer(s, s)
    cov = bread @ meat @ bread * len(groups) / (len(groups) - 1)
    return float(beta[1]), float(np.sqrt(cov[1, 1]))


def test_matches_the_regression_sandwich_on_shared_clusters() -> None:
    rng = np.random.default_rng(5)
    users = [f"u{rng.integers(0, 12)}" for _ in range(150)]
    effect = {u: rng.normal() for u in set(users)}
    flag = rng.random(150) < 0.3
    y = np.array([effect[u] + (-0.8 if f else 0.0) + rng.normal(0, 0.5) for u, f in zip(users, flag, strict=True)])
    md = cluster_mean_difference(y.tolist(), flag.tolist(), users)
    beta, se = sandwich_se(y, flag, users)
    assert md.diff == pytest.approx(beta)
    assert md.se == pytest.approx(se)
    assert md.mean_with == pytest.approx(y[flag].mean())
    assert md.mean_without == pytest.approx(y[~flag].mean())
    assert (md.n_with, md.n_without, md.n_clusters) == (int(flag.sum()), int((~flag).sum()), len(set(users)))
    assert md.low == pytest.approx(beta - 1.959964 * se, rel=1e-6)
    assert md.high == pytest.approx(beta + 1.959964 * se, rel=1e-6)


def test_binary_outcome_by_hand() -> None:
    # users a, b, c; a: flagged reward 0, unflagged 1; b: flagged 0; c: unflagged 1, 1.
    md = cluster_mean_difference([0, 1, 0, 1, 1], [True, False, True, False, False], ["a", "a", "b", "c", "c"])
    assert (md.mean_with, md.mean_without, md.diff) == (0.0, 1.0, -1.0)
    # The sandwich sees no variation (se 0), but the interval no longer collapses onto the point: Newcombe's,
    # from the Wilson intervals of 0 of 2 (upper end z^2 / (2 + z^2)) and 3 of 3 (lower end 3 / (3 + z^2)).
    z2 = 1.959963984540054**2
    assert md.se == 0.0 and md.low == -1.0
    assert md.high == pytest.approx(-1.0 + math.hypot(z2 / (2 + z2), z2 / (3 + z2)))
    assert md.method == "newcombe_or_cluster" and md.note is None


def test_empty_side_and_single_cluster() -> None:
    none = cluster_mean_difference([1.0, 0.0], [False, False], ["a", "b"])
    assert none.diff is None and none.mean_with is None and none.note == "a side has no units"
    one = cluster_mean_difference([1.0, 0.0], [True, False], ["a", "a"])
    assert one.diff == 1.0 and one.se is None and one.low is None
    with pytest.raises(ValueError, match="differ in length"):
        cluster_mean_difference([1.0], [True, False], ["a"])


def test_one_cluster_on_a_side_gives_no_interval() -> None:
    # One flagged session of one user against many users' unflagged sessions: the flagged side's variance
    # cannot be estimated, so no interval (the point difference stays).
    values = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    flagged = [True, False, False, False, False, False]
    md = cluster_mean_difference(values, flagged, ["a", "b", "c", "d", "e", "f"])
    assert md.diff == pytest.approx(1.0 - 0.4) and md.low is None and md.high is None
    assert md.note == "fewer than 2 clusters on a side: no cluster interval"
    two = cluster_mean_difference([*values, 1.0], [*flagged, True], ["a", "b", "c", "d", "e", "f", "g"])
    assert two.low is not None and two.high is not None and two.low < two.diff < two.high
