"""The difference of an outcome's mean between flagged and unflagged units, with a user-clustered interval.

Both groups draw on the same users (a user has flagged and unflagged sessions), so the two means are not
independent and `cluster_two_proportion_z` (disjoint groups) does not apply. The difference
D = Y1 / N1 - Y0 / N0 (sums over units of the outcome y and of the group indicators) is linearised per
cluster g: z_g = (y1_g - m1 n1_g) / N1 - (y0_g - m0 n0_g) / N0, and se^2 = G / (G - 1) * sum_g z_g^2 with G
the clusters that hold any unit. That is the cluster-robust (CR1 without the (N-1)/(N-K) factor) standard
error of the slope of y on the flag indicator in a least-squares regression; the test checks it against that
sandwich computed with matrices. Works for any numeric outcome: a 0/1 outcome gives rates, a reward its mean.

That normal interval alone fails where the findings need it most, on few units and on a side with no variation
(5 conversations, all failed: se ~ 0 and an interval like [-0.56, -0.30]). So the interval printed is widened:

- an outcome in [0, 1] (a success, a reward): the union of the cluster interval and Newcombe's hybrid score
  interval (`proportions.newcombe_interval`, from the two Wilson intervals, on the sums of the outcome). Newcombe
  covers at about its nominal rate for small n and rates at 0 or 1; the cluster interval covers when users hold
  many units each; the union covers at least as often as either.
- any other outcome: the cluster interval, except when a side has no variation: its residuals are then all 0,
  the sandwich sees only the other side and the interval comes out too narrow, so the standard error is
  floored by the pooled-variance (Student) one, sqrt(s_p^2 (1/n1 + 1/n0)): the larger of the robust and the
  conventional error (Angrist and Pischke 2009, section 8.2), the constant side borrowing the other side's
  variance instead of counting as certain, and the quantile is Student's with the varying side's clusters less
  one as degrees of freedom (Welch-Satterthwaite when one variance is 0). Only then: when users hold both
  sides, the user effect cancels and the cluster error is rightly below the conventional one. When neither
  side varies, there is no interval.

`se` stays the cluster-robust standard error (the regression sandwich), whichever interval is printed.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np
from pydantic import Field

from agent_factory.evaluators.stats.estimate import check_confidence, normal_quantile
from agent_factory.evaluators.stats.proportions import newcombe_interval
from agent_factory.frozen import Frozen

VERSION = "3"


class MeanDifference(Frozen):
    """Outcome mean with the flag, without it, their difference and its user-clustered interval."""

    mean_with: float | None
    """Mean outcome of the flagged units; None when there are none."""
    mean_without: float | None
    """Mean outcome of the unflagged units; None when there are none."""
    diff: float | None
    """mean_with - mean_without; None when a side is empty."""
    se: float | None
    """Cluster-robust standard error of `diff`; None when undefined (a side empty, fewer than 2 clusters)."""
    low: float | None
    """Lower end of the interval of `diff`."""
    high: float | None
    """Upper end of the interval of `diff`."""
    n_with: int = Field(ge=0)
    """Flagged units."""
    n_without: int = Field(ge=0)
    """Unflagged units."""
    n_clusters: int = Field(ge=0)
    """Clusters (users) holding any of the units."""
    confidence: float = Field(gt=0.0, lt=1.0)
    """Nominal two-sided coverage of the interval."""
    method: str = "cluster_linearised_normal"
    """How the interval was computed: `newcombe_or_cluster` (an outcome in [0, 1]: the union of the two),
    `cluster_or_pooled_normal` (another outcome: the cluster error, floored when a side has no variation), or
    `cluster_linearised_normal` (no interval was computed)."""
    note: str | None = None
    """Why something is missing, when it is."""


def cluster_mean_difference(
    values: Sequence[float],
    flagged: Sequence[bool],
    clusters: Sequence[Hashable],
    *,
    confidence: float = 0.95,
) -> MeanDifference:
    """Mean of `values` where `flagged` minus where not, with a normal interval from the linearised
    cluster-robust standard error (module docstring). All three sequences are per unit, in one order."""
    check_confidence(confidence)
    y = np.asarray(list(values), dtype=float)
    f = np.asarray(list(flagged), dtype=bool)
    labels = list(clusters)
    if not (y.size == f.size == len(labels)):
        raise ValueError(f"values ({y.size}), flagged ({f.size}) and clusters ({len(labels)}) differ in length")
    if y.size and not np.all(np.isfinite(y)):
        raise ValueError("values must be finite numbers")
    order = {key: i for i, key in enumerate(sorted(set(labels), key=repr))}
    g = len(order)
    member = np.fromiter((order[k] for k in labels), dtype=np.intp, count=y.size)
    n1, n0 = int(f.sum()), int((~f).sum())
    m1 = float(y[f].mean()) if n1 else None
    m0 = float(y[~f].mean()) if n0 else None
    common = dict(mean_with=m1, mean_without=m0, n_with=n1, n_without=n0, n_clusters=g, confidence=confidence)
    if m1 is None or m0 is None:
        return MeanDifference(diff=None, se=None, low=None, high=None, note="a side has no units", **common)
    diff = m1 - m0
    if g < 2:
        return MeanDifference(diff=diff, se=None, low=None, high=None,
                              note="fewer than 2 clusters: no cluster interval", **common)
    sides = min(len(np.unique(member[f])), len(np.unique(member[~f])))
    if sides < 2:
        # One cluster on a side leaves that side's variance unestimated (a lone unit's residual is 0): the
        # interval would come out narrow for the least evidence.
        return MeanDifference(diff=diff, se=None, low=None, high=None,
                              note="fewer than 2 clusters on a side: no cluster interval", **common)
    resid = np.where(f, (y - m1) / n1, -(y - m0) / n0)
    z = np.bincount(member, weights=resid, minlength=g)
    se = math.sqrt(g / (g - 1) * float(z @ z))
    q = normal_quantile(0.5 + confidence / 2.0)
    if bool(np.all((y >= 0.0) & (y <= 1.0))):
        low, high = newcombe_interval(float(y[f].sum()), n1, float(y[~f].sum()), n0, confidence=confidence)
        return MeanDifference(diff=diff, se=se, low=min(low, diff - q * se), high=max(high, diff + q * se),
                              method="newcombe_or_cluster", **common)
    ss1, ss0 = float(((y[f] - m1) ** 2).sum()), float(((y[~f] - m0) ** 2).sum())
    if ss1 == ss0 == 0.0:
        # Every unit equals its side's mean and nothing bounds the outcome: no spread to scale an interval by.
        return MeanDifference(diff=diff, se=se, low=None, high=None,
                              note="no variation within either side: no interval", **common)
    pooled = math.sqrt((ss1 + ss0) / (n1 + n0 - 2) * (1.0 / n1 + 1.0 / n0))
    if ss1 and ss0:
        half = q * se
    else:
        # Welch-Satterthwaite with one variance 0 has the varying side's degrees of freedom, counted in its
        # clusters (the independent pieces): the normal quantile would undercover at a handful of users.
        from scipy.special import stdtrit

        df = len(np.unique(member[~f] if ss1 == 0.0 else member[f])) - 1
        half = float(stdtrit(df, 0.5 + confidence / 2.0)) * max(se, pooled)
    return MeanDifference(diff=diff, se=se, low=diff - half, high=diff + half, method="cluster_or_pooled_normal",
                          **common)


__all__ = ["VERSION", "MeanDifference", "cluster_mean_difference"]
