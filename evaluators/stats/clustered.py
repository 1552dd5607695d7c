"""User-clustered intervals and tests (docs/method.md section 7).

Turns of one user are not independent: in the study a per-turn A/A test raised at least one false alarm in
98% of user splits. Everything here treats the cluster (user) as the independent unit:

- `cluster_bootstrap_ci`: resample whole clusters with replacement, percentile interval of any statistic;
- `cluster_ratio_se`: a rate sum(y) / sum(x) whose numerator and denominator are summed per cluster, with the
  linearisation (delta method) standard error sqrt(G / (G - 1) * sum_g (y_g - R x_g)^2) / sum(x);
- `cluster_proportion_ci` and `cluster_two_proportion_z`: that ratio applied to successes / trials.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence

import numpy as np
from pydantic import Field

from agent_factory.evaluators.stats.estimate import Estimate, check_confidence, normal_quantile
from agent_factory.evaluators.stats.proportions import ProportionTest, finish_test
from agent_factory.frozen import Frozen

VERSION = "1"

Statistic = Callable[[np.ndarray], float]
"""A statistic of a flat float array (the values of the drawn clusters, concatenated)."""


def mean(values: np.ndarray) -> float:
    """Arithmetic mean; the default statistic (and the one with a fast bootstrap path)."""
    return float(np.mean(values))


class ClusterRatio(Frozen):
    """A ratio estimator sum(y) / sum(x) over clusters with its cluster-robust standard error."""

    value: float | None
    """sum(y) / sum(x); None when sum(x) = 0."""
    se: float | None
    """Linearisation standard error; None when the value is undefined or there are fewer than 2 clusters."""
    numerator: float
    """sum over clusters of y_g."""
    denominator: float
    """sum over clusters of x_g."""
    n_clusters: int = Field(ge=0)
    """G: number of clusters, including those with x_g = 0 (they still count as observed clusters)."""
    note: str | None = None
    """Why the value or se is missing, when it is."""


def _rng(seed: int | np.random.Generator) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _flat(name: str, raw: Sequence[float] | np.ndarray) -> np.ndarray:
    arr = np.asarray(list(raw), dtype=float)
    if arr.ndim != 1 or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be a flat sequence of finite numbers")
    return arr


def cluster_bootstrap_ci(
    values: Sequence[float],
    clusters: Sequence[Hashable],
    *,
    stat: Statistic = mean,
    n_boot: int = 2000,
    seed: int | np.random.Generator,
    confidence: float = 0.95,
) -> Estimate:
    """Percentile interval of `stat` from resampling whole clusters with replacement.

    Each replicate draws G cluster labels uniformly with replacement (G = number of distinct clusters) and
    evaluates `stat` on the values of the drawn clusters. Clusters are ordered by `repr` of their label, so
    the result depends on the seed and the data, not on the order of the rows. An integer seed gives the same
    interval every call; a Generator is advanced. With one observation per cluster this is the ordinary i.i.d.
    bootstrap. Fewer than 2 clusters, or a statistic that is not finite on some replicate, gives no interval.
    """
    check_confidence(confidence)
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    arr = _flat("values", values)
    labels = list(clusters)
    if len(labels) != arr.size:
        raise ValueError(f"values ({arr.size}) and clusters ({len(labels)}) differ in length")
    method = "cluster_bootstrap_percentile"
    if arr.size == 0:
        return Estimate(
            value=None, low=None, high=None, n=0, method=method, confidence=confidence, n_clusters=0,
            note="no observations",
        )
    order = {key: i for i, key in enumerate(sorted(set(labels), key=repr))}
    g = len(order)
    member = np.fromiter((order[key] for key in labels), dtype=np.intp, count=arr.size)
    value = float(stat(arr))
    common = dict(value=value, n=int(arr.size), method=method, confidence=confidence, n_clusters=g)
    if g < 2:
        return Estimate(low=None, high=None, note="fewer than 2 clusters: no cluster interval", **common)

    rng = _rng(seed)
    sums = np.bincount(member, weights=arr, minlength=g)
    sizes = np.bincount(member, minlength=g).astype(float)
    reps = np.empty(n_boot)
    for b in range(n_boot):
        counts = np.bincount(rng.integers(0, g, size=g), minlength=g)
        if stat is mean:
            reps[b] = counts @ sums / (counts @ sizes)  # same draws as the general path, O(G) not O(n)
        else:
            reps[b] = stat(np.repeat(arr, counts[member]))
    if not np.all(np.isfinite(reps)):
        bad = int(np.sum(~np.isfinite(reps)))
        return Estimate(low=None, high=None, note=f"statistic not finite on {bad} of {n_boot} replicates", **common)
    alpha = 1.0 - confidence
    low, high = np.quantile(reps, [alpha / 2.0, 1.0 - alpha / 2.0])
    return Estimate(low=float(low), high=float(high), **common)


def cluster_ratio_se(
    numerators: Sequence[float] | np.ndarray, denominators: Sequence[float] | np.ndarray
) -> ClusterRatio:
    """Ratio sum(y) / sum(x) over clusters and its delta-method standard error.

    `numerators[g]` and `denominators[g]` are y_g and x_g already summed within cluster g (e.g. failed turns
    and turns of one user). se^2 = G / (G - 1) * sum_g (y_g - R x_g)^2 / (sum x)^2, the usual linearisation
    with the small-sample factor G / (G - 1). Denominators must be non-negative.
    """
    y = _flat("numerators", numerators)
    x = _flat("denominators", denominators)
    if y.size != x.size:
        raise ValueError(f"numerators ({y.size}) and denominators ({x.size}) differ in length")
    if np.any(x < 0):
        raise ValueError("denominators must be non-negative")
    g = int(y.size)
    total_y, total_x = float(y.sum()), float(x.sum())
    if total_x == 0.0:
        return ClusterRatio(
            value=None, se=None, numerator=total_y, denominator=total_x, n_clusters=g,
            note="the denominator sums to 0: the rate is undefined",
        )
    ratio = total_y / total_x
    if g < 2:
        return ClusterRatio(
            value=ratio, se=None, numerator=total_y, denominator=total_x, n_clusters=g,
            note="fewer than 2 clusters: no cluster standard error",
        )
    resid = y - ratio * x
    se = math.sqrt(g / (g - 1) * float(resid @ resid)) / total_x
    return ClusterRatio(value=ratio, se=se, numerator=total_y, denominator=total_x, n_clusters=g)


def _proportion_counts(successes: Sequence[int], trials: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    s = _flat("successes_per_cluster", successes)
    t = _flat("trials_per_cluster", trials)
    if s.size != t.size:
        raise ValueError(f"successes ({s.size}) and trials ({t.size}) per cluster differ in length")
    if np.any(s < 0) or np.any(s > t) or np.any(s != np.round(s)) or np.any(t != np.round(t)):
        raise ValueError("per cluster, successes and trials must be integers with 0 <= successes <= trials")
    return s, t


def cluster_proportion_ci(
    successes_per_cluster: Sequence[int],
    trials_per_cluster: Sequence[int],
    *,
    confidence: float = 0.95,
) -> Estimate:
    """Pooled rate sum(successes) / sum(trials) with a user-clustered normal interval, clipped to [0, 1].

    The standard error is `cluster_ratio_se`. When no cluster deviates from the pooled rate (e.g. no success
    at all) the standard error is 0 and the interval is the point itself; the note says so, because with
    clustered data such an interval understates uncertainty. For a resampling interval instead, pass the
    per-trial 0/1 outcomes and their users to `cluster_bootstrap_ci`.
    """
    check_confidence(confidence)
    s, t = _proportion_counts(successes_per_cluster, trials_per_cluster)
    ratio = cluster_ratio_se(s, t)
    common = dict(n=int(t.sum()), method="cluster_ratio_normal", confidence=confidence, n_clusters=ratio.n_clusters)
    if ratio.value is None or ratio.se is None:
        return Estimate(value=ratio.value, low=None, high=None, note=ratio.note, **common)
    half = normal_quantile(0.5 + confidence / 2.0) * ratio.se
    note = "no between-cluster variation: the interval is a single point" if ratio.se == 0.0 else None
    return Estimate(
        value=ratio.value, low=max(0.0, ratio.value - half), high=min(1.0, ratio.value + half), note=note, **common,
    )


def cluster_two_proportion_z(
    successes1: Sequence[int],
    trials1: Sequence[int],
    successes2: Sequence[int],
    trials2: Sequence[int],
) -> ProportionTest:
    """User-clustered z test of rate 1 against rate 2 (diff = p1 - p2), per-cluster counts for each group.

    se = sqrt(se1^2 + se2^2) with each se from `cluster_ratio_se`: the groups must hold disjoint clusters
    (users), as in a user split. Each rate is pooled over its group's trials, not averaged over users.
    """
    s1, t1 = _proportion_counts(successes1, trials1)
    s2, t2 = _proportion_counts(successes2, trials2)
    r1, r2 = cluster_ratio_se(s1, t1), cluster_ratio_se(s2, t2)
    common = dict(n1=int(t1.sum()), n2=int(t2.sum()), clusters1=r1.n_clusters, clusters2=r2.n_clusters)
    method = "cluster_ratio_z"
    if r1.value is None or r2.value is None:
        return ProportionTest(
            p1=r1.value, p2=r2.value, diff=None, se=None, z=None, p_value=None, method=method,
            note="a group has no trials", **common,
        )
    se = math.sqrt(r1.se**2 + r2.se**2) if r1.se is not None and r2.se is not None else None
    return finish_test(
        r1.value, r2.value, se, method=method, undefined_se="a group has fewer than 2 clusters", **common
    )
