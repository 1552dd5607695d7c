"""Prediction-powered estimates of a rate: a judge on every unit, corrected with reference labels on a sample
(PPI++, Angelopoulos, Duchi and Zrnic 2023, arXiv 2311.01453), with users as the independent clusters.

The population is N units, each rated by the judge (the suite's collector); a sample S of n of them also has a
reference label (people, or a second rater), drawn with sampling weights w_i (w_h = N_h / n_h in a stratified
sample; equal weights for a simple random sample). The rate is yes / applicable. For a weight lambda,

    m_v(lambda) = lambda * mean_N(f_v) + sum_S w_i (y_v,i - lambda f_v,i) / sum_S w_i      (v = yes, applicable)
    R(lambda)   = m_yes(lambda) / m_applicable(lambda),

where f are the judge's indicators and y the reference's (averaged over reference raters when several rated a
unit). Every lambda gives a consistent estimate, because the judge's term appears once over all units and once,
subtracted, over the sample; lambda = 0 is the labels alone, lambda = 1 classic PPI. When every unit is
applicable to both, R is the prediction-powered mean of yes.

Variance, cluster-robust sandwich (chosen over a user bootstrap): R is a smooth function of per-user totals, so
its influence function is a sum of per-unit terms, and summing those per user gives independent per-user terms
psi_g; se^2 = G / (G - 1) * sum_g psi_g^2. This is PPI++'s central-limit variance (Var(Y - lambda f) / n +
lambda^2 Var(f) / N in the i.i.d. case, with the covariance the labelled units share with all units) with users,
not units, as the independent draws. Why the sandwich: it is closed form and deterministic; the tuned lambda is
a closed-form minimiser of that same variance (lambda* = sum_g b_g d_g / sum_g d_g^2 below), which a bootstrap
would have to re-tune inside every replicate; and its agreement with a user bootstrap is checked by a test.
Treating users as independent ignores the finite-population correction of sampling without replacement within
strata, which only makes the interval wider.

lambda is tuned as in PPI++ (power tuning), on the linearised ratio: with pilot rate R0 (labels alone),
z = y_yes - R0 y_applicable and h = f_yes - R0 f_applicable, the per-user influence is b_g - lambda d_g with
b_g = sum_{S and g} w (z - z_w) / W and d_g = sum_{S and g} w (h - h_w) / W - sum_g (h - h_N) / N; lambda* =
sum b d / sum d^2, clipped to [0, 1] so the estimate stays between the labels alone and classic PPI (a judge that
moves against the labels gets no weight).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np
from pydantic import Field

from agent_factory.evaluators.stats.clustered import cluster_proportion_ci
from agent_factory.evaluators.stats.estimate import Estimate, check_confidence, normal_quantile
from agent_factory.frozen import Frozen

VERSION = "1"

METHOD = "ppi++ (user-clustered)"
"""The estimator's name, as stored with a corrected rate."""


class PPIEstimate(Frozen):
    """A prediction-powered rate with its user-clustered normal interval."""

    value: float | None
    """The corrected rate; None when undefined (`note` says why)."""
    low: float | None = None
    """Lower end of the interval, clipped to [0, 1]."""
    high: float | None = None
    """Upper end."""
    se: float | None = None
    """Cluster-robust standard error."""
    lam: float | None = None
    """The weight of the judge (0: labels alone; 1: classic PPI)."""
    labels: int = Field(ge=0)
    """n: labelled units used."""
    units: int = Field(ge=0)
    """N: units the judge rated."""
    n_clusters: int = Field(ge=0)
    """G: users among the N units."""
    confidence: float = Field(gt=0.0, lt=1.0)
    """Nominal coverage of the interval."""
    method: str = METHOD
    """The estimator."""
    note: str | None = None
    """Why a value is missing, or a caveat."""


def _indicators(name: str, raw: Sequence[float] | np.ndarray, size: int | None = None) -> np.ndarray:
    arr = np.asarray(raw, dtype=float)
    if arr.ndim != 1 or not np.all(np.isfinite(arr)) or np.any((arr < 0.0) | (arr > 1.0)):
        raise ValueError(f"{name} must be a flat sequence of values in [0, 1]")
    if size is not None and arr.size != size:
        raise ValueError(f"{name} has {arr.size} values, expected {size}")
    return arr


def _parts(
    rate: float, f: tuple[np.ndarray, np.ndarray], y: tuple[np.ndarray, np.ndarray], sample: np.ndarray,
    w: np.ndarray, member: np.ndarray, g: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Per user, b_g and d_g of the linearised ratio at `rate` (the influence is b_g - lambda d_g, before
    dividing by the applicable share); neither depends on lambda."""
    n_all, total_w = f[0].size, float(w.sum())
    h = f[0] - rate * f[1]
    z = y[0] - rate * y[1]
    hs = h[sample]
    z_w, h_w = float(w @ z) / total_w, float(w @ hs) / total_w
    b = np.bincount(member[sample], weights=w * (z - z_w) / total_w, minlength=g)
    d = np.bincount(member[sample], weights=w * (hs - h_w) / total_w, minlength=g)
    d -= np.bincount(member, weights=(h - float(h.mean())) / n_all, minlength=g)
    return b, d


def _rate(lam: float, f: tuple[np.ndarray, np.ndarray], y: tuple[np.ndarray, np.ndarray], sample: np.ndarray,
          w: np.ndarray) -> tuple[float, float]:
    """(m_yes(lambda), m_applicable(lambda))."""
    total_w = float(w.sum())
    yes = lam * float(f[0].mean()) + float(w @ (y[0] - lam * f[0][sample])) / total_w
    applicable = lam * float(f[1].mean()) + float(w @ (y[1] - lam * f[1][sample])) / total_w
    return yes, applicable


def ppi_rate(
    judge_yes: Sequence[float] | np.ndarray,
    judge_applicable: Sequence[float] | np.ndarray,
    users: Sequence[Hashable],
    sample: Sequence[int] | np.ndarray,
    reference_yes: Sequence[float] | np.ndarray,
    reference_applicable: Sequence[float] | np.ndarray,
    *,
    weights: Sequence[float] | np.ndarray | None = None,
    lam: float | None = None,
    confidence: float = 0.95,
) -> PPIEstimate:
    """The prediction-powered rate yes / applicable (module docstring), power-tuned unless `lam` is given.

    `judge_yes`, `judge_applicable` and `users` describe all N units (yes implies applicable); `sample` holds
    the indices (into those N) of the labelled units, `reference_yes` and `reference_applicable` their labels
    (shares in [0, 1] when several reference raters are averaged), `weights` their sampling weights (equal when
    None). The interval is normal with the cluster-robust standard error, clipped to [0, 1].
    """
    check_confidence(confidence)
    f_yes = _indicators("judge_yes", judge_yes)
    n_all = f_yes.size
    f_app = _indicators("judge_applicable", judge_applicable, n_all)
    labels = list(users)
    if len(labels) != n_all:
        raise ValueError(f"users has {len(labels)} values, expected {n_all}")
    idx = np.asarray(sample, dtype=np.int64).ravel()
    if np.any((idx < 0) | (idx >= n_all)) or np.unique(idx).size != idx.size:
        raise ValueError(f"sample must hold distinct indices into the {n_all} judged units")
    y = (_indicators("reference_yes", reference_yes, idx.size),
         _indicators("reference_applicable", reference_applicable, idx.size))
    w = np.ones(idx.size) if weights is None else np.asarray(weights, dtype=float).ravel()
    if w.size != idx.size or not np.all(np.isfinite(w)) or np.any(w <= 0.0):
        raise ValueError(f"weights must be {idx.size} positive finite numbers, one per labelled unit")
    f = (f_yes, f_app)
    order = {key: i for i, key in enumerate(sorted(set(labels), key=repr))}
    member = np.fromiter((order[key] for key in labels), dtype=np.intp, count=n_all)
    g = len(order)
    common = dict(labels=int(idx.size), units=n_all, n_clusters=g, confidence=confidence)
    if idx.size == 0:
        return PPIEstimate(value=None, note="no labelled units", **common)
    pilot_yes, pilot_app = _rate(0.0, f, y, idx, w)
    if pilot_app <= 0.0:
        return PPIEstimate(value=None, note="no labelled unit is applicable: the rate is undefined", **common)
    flat = False
    if lam is None:
        b, d = _parts(pilot_yes / pilot_app, f, y, idx, w, member, g)
        dd = float(d @ d)
        # Labels with no variation on the sample (all one value) tell the tuning nothing: b is 0, so lambda would
        # be 0 and the estimate the labels' own constant with a zero-width interval (11 labels all `no` read as a
        # rate of exactly 0 beside a judge's 0.10). Classic PPI (lambda 1) keeps the judge's information instead.
        flat = not np.any(b)
        lam = 1.0 if flat else min(1.0, max(0.0, float(b @ d) / dd)) if dd > 0.0 else 0.0
    m_yes, m_app = _rate(lam, f, y, idx, w)
    if m_app <= 0.0:
        return PPIEstimate(value=None, lam=lam, note="the corrected applicable share is not positive", **common)
    value = m_yes / m_app
    if g < 2:
        return PPIEstimate(value=value, lam=lam, note="fewer than 2 users: no user-clustered interval", **common)
    b, d = _parts(value, f, y, idx, w, member, g)
    psi = (b - lam * d) / m_app
    se = math.sqrt(g / (g - 1) * float(psi @ psi))
    half = normal_quantile(0.5 + confidence / 2.0) * se
    note = "no variation among users: the interval is a single point" if se == 0.0 else None
    if flat:
        note = "; ".join(n for n in ("the labels do not vary on the sample: classic PPI (lambda 1)", note) if n)
    return PPIEstimate(
        value=value, low=max(0.0, value - half), high=min(1.0, value + half), se=se, lam=lam, note=note, **common
    )


def judge_rate(
    judge_yes: Sequence[float] | np.ndarray,
    judge_applicable: Sequence[float] | np.ndarray,
    users: Sequence[Hashable],
    *,
    confidence: float = 0.95,
) -> Estimate:
    """The judge-only rate yes / applicable over all units, with a user-clustered normal interval
    (`cluster_proportion_ci`: per-user yes and applicable counts, delta-method standard error)."""
    f_yes = _indicators("judge_yes", judge_yes)
    f_app = _indicators("judge_applicable", judge_applicable, f_yes.size)
    if np.any(f_yes > f_app):
        raise ValueError("judge_yes must imply judge_applicable")
    labels = list(users)
    if len(labels) != f_yes.size:
        raise ValueError(f"users has {len(labels)} values, expected {f_yes.size}")
    order = {key: i for i, key in enumerate(sorted(set(labels), key=repr))}
    member = np.fromiter((order[key] for key in labels), dtype=np.intp, count=f_yes.size)
    successes = np.bincount(member, weights=f_yes, minlength=len(order))
    trials = np.bincount(member, weights=f_app, minlength=len(order))
    return cluster_proportion_ci(list(successes), list(trials), confidence=confidence)
