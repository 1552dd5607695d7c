"""The gate's always-valid mode: a lower confidence bound on each metric's worse-direction change that holds at
every look at once, so the gate may be checked after every ingest of live candidate traffic without inflating its
false alarms (a fixed-sample z-test checked at every look does inflate them: `looks_simulation` shows both).

The choice: a confidence sequence from a mixture e-process, the one-sided normal mixture of Howard, Ramdas,
McAuliffe and Sekhon (2021, "Time-uniform, nonparametric, nonasymptotic confidence sequences", section 3.2) used as
an asymptotic confidence sequence (Waudby-Smith, Arbour, Sinha, Kennedy and Ramdas, 2024, "Time-uniform central
limit theory and asymptotic confidence sequences") on the user-clustered ratio estimator. Why this one:

- The metric over a group is `R = Y / X` (`evaluators.gate.stats`); linearized, `(R_hat - R) X = sum over users c
  of (Y_c - R X_c)`, a sum of independent per-user terms (users are the independent unit; turns of one user are
  not) whose variance is the clustered sandwich's. So the same ten per-user sums (`evaluators.gate.columns`) feed
  it, vectorized over any leading shape (draws, looks) as `stats.change` is. The clock is the candidate's users
  with a row of the metric (field CLUSTERS); one-sided, because the gate only asks "worse?". Normal mixtures need
  only a finite variance (a gated metric is a rate or a mean log, unbounded in general).
- The baseline is fixed but estimated: ignoring its error would make the candidate's shrinking sequence converge
  on the baseline's noisy estimate and alarm in about half of A/A runs eventually. It is handled exactly rather
  than by splitting the level: standardized by the candidate's per-user spread sigma, the centred change
  `Z_t = sign (delta_hat_t - delta) X_b / sigma` after t candidate users is a random walk plus the drift
  `theta t`, where `theta` (the baseline's error, fixed once) is normal with variance
  `a = (se_baseline X_b / (t sigma))^2`. Under that null the path's likelihood against a driftless walk is the
  two-sided normal mixture with precision 1/a; under the alternative "worse by a drift theta >= 0" with a
  half-normal prior of precision rho it is the one-sided mixture
  `2 sqrt(rho / (t + rho)) exp(z^2 / (2 (t + rho))) Phi(z / sqrt(t + rho))`. Their ratio E_t is a nonnegative
  martingale under the null with E_0 = 1, so by Ville's inequality `P(exists t: E_t >= 1/level) <= level`; E_t is
  increasing in z, so the metric fails at the first look where z (at delta = 0) crosses the boundary solving
  E_t = 1/level, and the bound is `sign delta_hat - boundary sigma / X_b`. At the planned size this bound is about
  a fifth narrower than a level split between a fixed baseline bound and the candidate's own sequence.
  The closed forms are checked in the tests against numerical integration of the mixtures (confseq, the reference
  library, does not build here), and the boundary against Gaussian walks with a random baseline error.
- rho is the mixture's optimal-time parameter: the boundary is tightest near t = `planned`. Design choice: the
  candidate is planned to grow to the baseline's size (its users with a row of the metric), where an A/B
  comparison is balanced; rho follows by Howard et al.'s rule (confseq's `OneSidedNormalMixture.best_rho`), kept
  at most half the null's precision 1/a so that the alternative's prior stays wider than the baseline's error.
- The candidate's per-user variance is floored at the baseline's: early looks (a few users) give unstable
  variance estimates, zero when the first users agree, and the asymptotic sequence assumes a consistent one; the
  floor is the better-estimated variance the candidate has under the null, so it is conservative elsewhere.

A metric fails when its bound exceeds 0. `level` is the per-metric one-sided level: the calibration's tail level
(`AAReport.level`) when stored, else 0.05 / M.

Pure numpy and scipy.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.optimize import elementwise
from scipy.stats import norm

from agent_factory.evaluators.gate.columns import CLUSTERS, CXX, CXY, CYY, F64, I64, X
from agent_factory.evaluators.gate.stats import change, ratio


def best_rho(planned: F64 | float, alpha: F64 | float) -> F64:
    """The one-sided mixture's rho making the boundary tightest near `planned` users, at one-sided level `alpha`
    (Howard et al. 2021, eq. (3.12) at 2 alpha, as confseq's `OneSidedNormalMixture.best_rho`)."""
    la = np.log(1.0 / (2.0 * np.asarray(alpha, dtype=np.float64)))
    out: F64 = np.asarray(planned, dtype=np.float64) / (2.0 * la + np.log1p(2.0 * la))
    return out


def log_mixture(s: F64, t: F64, rho: F64) -> F64:
    """log of the one-sided normal mixture martingale of a standardized sum `s` after time `t`: the likelihood of
    a walk with a half-normal drift of precision `rho` against a driftless one."""
    w = t + rho
    out: F64 = 0.5 * np.log(4.0 * rho / w) + s * s / (2.0 * w) + norm.logcdf(s / np.sqrt(w))
    return out


def log_null_mixture(s: F64, t: F64, drift: F64) -> F64:
    """log of the two-sided normal mixture with drift variance `drift` (precision 1/drift; 0: no drift): the
    likelihood, against a driftless walk, of the null's walk whose drift is the baseline's fixed error."""
    out: F64 = -0.5 * np.log1p(t * drift) + s * s * drift / (2.0 * (1.0 + t * drift))
    return out


def log_e_value(s: F64, t: F64, rho: F64, drift: F64) -> F64:
    """log E_t: the one-sided mixture over the null's mixture, a nonnegative martingale with E_0 = 1 under the
    null (`rho * drift < 1`)."""
    out: F64 = log_mixture(s, t, rho) - log_null_mixture(s, t, drift)
    return out


def _excess(s: F64, /, *args: F64) -> F64:
    """log E_t - log(1/alpha), for the root finder (which hands the active elements' t, rho, drift, log alpha)."""
    t, rho, drift, log_alpha = args
    return log_e_value(s, t, rho, drift) + log_alpha


def mixture_boundary(t: F64, rho: F64, alpha: F64 | float, drift: F64 | float = 0.0) -> F64:
    """The standardized sum at which E_t = 1/alpha, elementwise (NaN where t or rho is not positive, or
    `rho * drift >= 1`). `drift` 0: the plain one-sided mixture boundary."""
    t, rho, drift_, log_alpha = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64)
                                                      for v in (t, rho, drift, np.log(alpha))))
    ok = (t > 0) & (rho > 0) & (drift_ >= 0) & (rho * drift_ < 1.0)
    tt, rr, dd = np.where(ok, t, 1.0), np.where(ok, rho, 1.0), np.where(ok, drift_, 0.0)
    # log E is increasing in s (Mills' ratio) and negative at 0; with Phi >= 1/2 for s >= 0 it exceeds the
    # quadratic 0.5 log(rho / (t + rho)) + 0.5 log1p(t drift) + s^2 c / 2, whose root is closed-form: a bracket.
    c = 1.0 / (tt + rr) - dd / (1.0 + tt * dd)
    need = -log_alpha + 0.5 * np.log1p(tt / rr) - 0.5 * np.log1p(tt * dd)
    hi = np.sqrt(2.0 * need / c) + 1.0
    res = elementwise.find_root(_excess, (np.zeros_like(tt), hi), args=(tt, rr, dd, log_alpha),
                                tolerances={"xatol": 1e-12, "xrtol": 1e-12})
    out: F64 = np.where(ok, np.asarray(res.x, dtype=np.float64), np.nan)
    return out


def _numerator(sums: F64, r: F64) -> F64:
    """Sum over users of (Y_c - R X_c)^2: the clustered sandwich's numerator."""
    out: F64 = np.maximum(sums[..., CYY] - 2.0 * r * sums[..., CXY] + r * r * sums[..., CXX], 0.0)
    return out


def always_valid_bound(a: F64, b: F64, sign: F64, *, level: float | F64,
                       planned: F64 | float | None = None) -> F64:
    """The always-valid lower bound of each metric's worse-direction change `sign * (R_b - R_a)`, from group sums
    `a` (the fixed baseline) and `b` (the candidate so far), each (..., M, F); `sign` (M,) +1 where higher is worse.

    `level`: the per-metric one-sided level (scalar or (M,)). `planned`: the candidate users at which the boundary
    is tightest (None: the baseline's users with a row of the metric). Returns (..., M); a metric fails where the
    bound exceeds 0; NaN (no alarm) where a side has fewer than two users with a row, or no rows.
    """
    ra, rb = ratio(a), ratio(b)
    n_a, t = a[..., CLUSTERS], b[..., CLUSTERS]
    with np.errstate(invalid="ignore", divide="ignore"):
        var_a = _numerator(a, ra) / (n_a - 1.0)  # per-user variance of Y_c - R X_c
        se_a2 = var_a * n_a / a[..., X] ** 2  # the baseline's clustered (CR1) variance
        var_b = np.maximum(_numerator(b, rb) / (t - 1.0), var_a)
        drift = se_a2 * (b[..., X] / t) ** 2 / var_b  # the baseline's error as a drift of the standardized walk
        drift = np.where(var_b > 0, drift, 0.0)
        rho = np.minimum(best_rho(n_a if planned is None else planned, level), 0.5 / np.maximum(drift, 1e-300))
        z = mixture_boundary(t, rho, level, drift)
        bound = sign * (rb - ra) - z * np.sqrt(var_b) / b[..., X]
    defined = (n_a >= 2) & (t >= 2) & (a[..., X] > 0) & (b[..., X] > 0)
    out: F64 = np.where(defined, bound, np.nan)
    return out


class LooksRates(NamedTuple):
    """Family alarm rates over seeds: any metric at any look (a false alarm under A/A, power under a defect)."""

    sequential: float
    """The always-valid bound above 0."""
    fixed: float
    """The fixed-sample z above its threshold, checked at every look."""
    sequential_per_metric: F64
    """(M,): per metric, the share of runs where its bound exceeded 0 at some look."""
    fixed_per_metric: F64
    """(M,): per metric, the share of runs where its z exceeded its threshold at some look."""


def look_sizes(n_candidate: int, looks: int) -> I64:
    """Candidate users at each look: after each 1/looks of them (the last look sees them all)."""
    out: I64 = np.unique(np.ceil(np.arange(1, looks + 1) * n_candidate / looks).astype(np.int64))
    return out


def looks_simulation(user_stats: F64, sign: F64, *, level: float | F64, looks: int = 30, seeds: int = 200,
                     seed: int = 0, threshold: float | F64 | None = None, treated: F64 | None = None) -> LooksRates:
    """Growing A/A (or A/B) traffic checked at every look, over `seeds` runs.

    Each run splits the users (`user_stats` (M, U, F)) at random into halves: a fixed baseline and a candidate
    whose users arrive in random order; the gate looks after each 1/`looks` of them (the baseline stays fixed, as
    the old version's store does while the new one's traffic accrues). With `treated` (the same
    users' stats with a defect applied), the candidate's users take their stats from it (power, not false alarms).
    The fixed-sample test is the clustered z above `threshold` (default: the one-sided normal quantile at
    `level`). Returns the share of runs where some metric alarmed at some look, for both tests.
    """
    m, u, _ = user_stats.shape
    if treated is not None and treated.shape != user_stats.shape:
        raise ValueError(f"treated stats {treated.shape} do not match the users' stats {user_stats.shape}")
    if u < 4:
        raise ValueError(f"looks_simulation needs at least 4 users, got {u}")
    thr = norm.isf(level) if threshold is None else np.asarray(threshold, dtype=np.float64)
    source = user_stats if treated is None else treated
    rng = np.random.default_rng(seed)
    half = u // 2
    sizes = look_sizes(u - half, looks)
    seq = np.zeros((seeds, m), dtype=bool)
    fix = np.zeros((seeds, m), dtype=bool)
    for s in range(seeds):
        order = rng.permutation(u)
        base = user_stats[:, order[:half], :].sum(axis=1)  # (M, F)
        grown = np.cumsum(source[:, order[half:], :], axis=1)[:, sizes - 1, :].transpose(1, 0, 2)  # (L, M, F)
        a = np.broadcast_to(base, grown.shape)
        seq[s] = (always_valid_bound(a, grown, sign, level=level) > 0).any(axis=0)
        fix[s] = (change(a, grown, sign).z > thr).any(axis=0)
    return LooksRates(sequential=float(seq.any(axis=1).mean()), fixed=float(fix.any(axis=1).mean()),
                      sequential_per_metric=seq.mean(axis=0), fixed_per_metric=fix.mean(axis=0))


__all__ = ["LooksRates", "always_valid_bound", "best_rho", "log_e_value", "log_mixture", "log_null_mixture",
           "look_sizes", "looks_simulation", "mixture_boundary"]
