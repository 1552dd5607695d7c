"""The gate's test, vectorized: a ratio metric's change between two groups of users, with a user-clustered
standard error (the test that decides) and a rows-as-independent one (the per-turn test, for contrast only).

A gated metric over a group g is `R_g = Y_g / X_g`, the sums of its rows' contributions (`evaluators.gate.columns`).
This is the coefficient of a weighted least-squares regression of y/x on a group indicator with weights x, and
its cluster-robust (CR1) variance is the sandwich

    V_g = sum over users c of g of (Y_c - R_g X_c)^2 / X_g^2,   Var(R_b - R_a) = k (V_a + V_b),
    k = G/(G-1) * (N-1)/(N-2)   (G users, N rows over both groups)

which statsmodels' `OLS/WLS(...).fit(cov_type="cluster")` gives for the same regression (`bench/gate_bench.py`
checks it split by split). The sums of squares expand into the per-user fields CYY, CXY, CXX, so over S splits
everything is a (S x U) @ (U x F) product: no per-split loop. The per-turn test is the same with each row its own
cluster (fields RYY, RXY, RXX). Statistics are signed so that positive is worse (`GateMeasure.sign`).

Pure numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from agent_factory.evaluators.gate.columns import CLUSTERS, CXX, CXY, CYY, F64, ROWS, RXX, RXY, RYY, X, Y

Test = Literal["clustered", "per_turn"]


def group_sums(user_stats: F64, masks: F64) -> F64:
    """Sums of the per-user fields over groups: `user_stats` (M, U, F), `masks` (S, U) of 0/1 (or weights)
    -> (S, M, F)."""
    out: F64 = np.einsum("su,muf->smf", masks, user_stats, optimize=True)
    return out


def totals(user_stats: F64) -> F64:
    """(M, F): the fields summed over every user."""
    out: F64 = user_stats.sum(axis=1)
    return out


def ratio(sums: F64) -> F64:
    """R = Y / X per group (NaN where no row contributes)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sums[..., X] > 0, sums[..., Y] / np.where(sums[..., X] > 0, sums[..., X], 1.0), np.nan)


def _sandwich(sums: F64, r: F64, test: Test) -> F64:
    yy, xy, xx = (CYY, CXY, CXX) if test == "clustered" else (RYY, RXY, RXX)
    num = sums[..., yy] - 2.0 * r * sums[..., xy] + r * r * sums[..., xx]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.maximum(num, 0.0) / (sums[..., X] ** 2)


@dataclass(frozen=True)
class Change:
    """The change of each metric between groups a and b, over any leading shape (splits, draws)."""

    a: F64
    """R over group a (the baseline)."""
    b: F64
    """R over group b (the candidate)."""
    delta: F64
    """b - a, in the metric's own scale (a share, a mean log)."""
    se: F64
    z: F64
    """delta / se, signed so that positive is worse; NaN where undefined (no row, or no variance, on a side)."""


def change(a: F64, b: F64, sign: F64, *, test: Test = "clustered") -> Change:
    """The change from group sums `a` to `b` (each (..., M, F)), `sign` (M,) +1 where higher is worse."""
    ra, rb = ratio(a), ratio(b)
    va, vb = _sandwich(a, ra, test), _sandwich(b, rb, test)
    n_groups = (a[..., CLUSTERS] + b[..., CLUSTERS]) if test == "clustered" else (a[..., ROWS] + b[..., ROWS])
    n_rows = a[..., ROWS] + b[..., ROWS]
    with np.errstate(invalid="ignore", divide="ignore"):
        k = (n_groups / (n_groups - 1.0)) * ((n_rows - 1.0) / (n_rows - 2.0))
        se = np.sqrt(k * (va + vb))
        delta = rb - ra
        z = np.where(se > 0, sign * delta / np.where(se > 0, se, 1.0), np.nan)
    return Change(a=ra, b=rb, delta=delta, se=se, z=z)


def split_change(user_stats: F64, masks: F64, sign: F64, *, test: Test = "clustered") -> Change:
    """The change between the complement (a) and the mask (b) of each split: `masks` (S, U) of 0/1."""
    b = group_sums(user_stats, masks)
    a = totals(user_stats)[None, :, :] - b
    return change(a, b, sign, test=test)


def bonferroni_threshold(n_measures: int, *, alpha: float = 0.05) -> float:
    """The one-sided z threshold holding the family rate at `alpha` with no calibration (Bonferroni, normal)."""
    from scipy.stats import norm

    return float(norm.isf(alpha / max(n_measures, 1)))


__all__ = ["Change", "Test", "bonferroni_threshold", "change", "group_sums", "ratio", "split_change", "totals"]
