"""The gate's always-valid mode (`evaluators.gate.sequential`).

The boundary is checked against independent computations (confseq, the reference library, does not build here):
the closed-form mixture martingale against numerical integration of the half-normal mixture, the boundary against
a scalar root of that integral, rho against a numerical optimum, and time-uniform validity on Gaussian walks. The
bound of a ratio metric is recomputed from rows (statsmodels' clustered standard error for the baseline). Then the
promise itself on planted truth: per-user data with within-user correlation over five metrics of every scale, A/A
traffic growing over 30 looks, many seeds: the sequential family false-alarm rate stays <= 5% while the
fixed-sample test checked at every look exceeds it, and a large real defect is detected.

Binomial margins: with N runs, a rate is "<= 5%" when its count is at most the 99th percentile of Binomial(N, 5%)
(a true 5% exceeds it 1% of the time), and "exceeds 5%" when its count is above that percentile.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import integrate, optimize
from scipy.stats import binom, norm

from agent_factory.evaluators.gate.columns import F64, MeasureRows, user_stats
from agent_factory.evaluators.gate.sequential import (
    always_valid_bound,
    best_rho,
    log_e_value,
    log_mixture,
    log_null_mixture,
    look_sizes,
    looks_simulation,
    mixture_boundary,
)
from agent_factory.evaluators.gate.stats import group_sums

LOOKS = 30
FAMILY = 0.05


def _allowed(n: int, rate: float = FAMILY) -> int:
    """The most alarms among `n` runs consistent with a true `rate` (its 99th binomial percentile)."""
    return int(binom.ppf(0.99, n, rate))


def _log_integral(log_f: Callable[[float], float], mode: float, sd: float, lower: float) -> float:
    """log of the integral of exp(log_f) over [lower, inf), a unimodal integrand: quadrature over 40 sd around its
    mode, scaled by its peak so nothing overflows."""
    lo, hi = max(lower, mode - 40.0 * sd), mode + 40.0 * sd
    peak = log_f(max(mode, lower))
    value, _ = integrate.quad(lambda lam: np.exp(log_f(lam) - peak), lo, hi, points=[max(mode, lower)], limit=200,
                              epsabs=0.0, epsrel=1e-11)
    return float(peak + np.log(value))


def _log_mixture_by_quadrature(s: float, t: float, rho: float) -> float:
    """log of the one-sided normal mixture, integrated: exp(l s - l^2 t / 2) over l ~ |N(0, 1/rho)| (half-normal)."""
    log_density = np.log(2.0) + 0.5 * np.log(rho / (2.0 * np.pi))
    return _log_integral(lambda lam: float(log_density + lam * s - lam * lam * (t + rho) / 2.0),
                         s / (t + rho), 1.0 / np.sqrt(t + rho), 0.0)


def _log_null_by_quadrature(s: float, t: float, drift: float) -> float:
    """log of the null's mixture, integrated: exp(l s - l^2 t / 2) over l ~ N(0, drift) (0 when drift is 0)."""
    if drift == 0.0:
        return 0.0
    precision = t + 1.0 / drift
    return _log_integral(lambda lam: float(-0.5 * np.log(2.0 * np.pi * drift) + lam * s - lam * lam * precision / 2.0),
                         s / precision, 1.0 / np.sqrt(precision), -np.inf)


def _boundary_by_quadrature(t: float, rho: float, alpha: float, drift: float) -> float:
    """The standardized sum where the integrated mixtures' ratio reaches 1/alpha (a scalar root)."""
    def excess(s: float) -> float:
        return _log_mixture_by_quadrature(s, t, rho) - _log_null_by_quadrature(s, t, drift) + float(np.log(alpha))

    return float(optimize.brentq(excess, 0.0, 20.0 * np.sqrt(t + rho) + 20.0, xtol=1e-12))


@pytest.mark.parametrize(("s", "t", "rho", "drift"), [(0.0, 1.0, 0.5, 0.0), (3.0, 10.0, 2.0, 0.1),
                                                      (25.0, 400.0, 60.0, 0.002), (-2.0, 50.0, 8.0, 0.05),
                                                      (90.0, 5000.0, 700.0, 0.0002)])
def test_the_closed_form_mixtures_are_the_integrals(s: float, t: float, rho: float, drift: float) -> None:
    sa, ta, ra, da = (np.array(v) for v in (s, t, rho, drift))
    want_mixture, want_null = _log_mixture_by_quadrature(s, t, rho), _log_null_by_quadrature(s, t, drift)
    assert float(log_mixture(sa, ta, ra)) == pytest.approx(want_mixture, rel=1e-8, abs=1e-9)
    assert float(log_null_mixture(sa, ta, da)) == pytest.approx(want_null, rel=1e-8, abs=1e-9)
    assert float(log_e_value(sa, ta, ra, da)) == pytest.approx(want_mixture - want_null, rel=1e-8, abs=1e-9)


@pytest.mark.parametrize(("alpha", "drift"), [(0.05, 0.0), (0.01, 0.0), (0.0025, 0.0), (0.01, 1.0 / 300.0),
                                              (0.0025, 1.0 / 2000.0)])
def test_the_boundary_is_where_the_integrated_mixtures_reach_one_over_alpha(alpha: float, drift: float) -> None:
    t = np.array([1.0, 7.0, 60.0, 300.0, 2500.0])
    rho = float(best_rho(300.0, alpha))
    got = mixture_boundary(t, np.full(t.shape, rho), alpha, drift)
    for ti, ui in zip(t, got, strict=True):
        assert ui == pytest.approx(_boundary_by_quadrature(float(ti), rho, alpha, drift), rel=1e-7)
    if drift == 0.0:  # between the two-sided closed forms at 2 alpha and at alpha (Phi lies in [1/2, 1])
        two_sided = [np.sqrt((t + rho) * (np.log1p(t / rho) + 2.0 * np.log(1.0 / a))) for a in (2.0 * alpha, alpha)]
        assert np.all(two_sided[0] < got) and np.all(got < two_sided[1])
    else:  # the baseline's error widens it
        assert np.all(got > mixture_boundary(t, np.full(t.shape, rho), alpha))


def test_no_boundary_where_the_alternative_is_narrower_than_the_null() -> None:
    got = mixture_boundary(np.array([10.0, 10.0, 0.0]), np.array([4.0, 5.0, 4.0]), 0.01, np.array([0.2, 0.2, 0.0]))
    assert np.isfinite(got[0]) and np.isnan(got[1]) and np.isnan(got[2])


@pytest.mark.parametrize("alpha", [0.05, 0.0025])
def test_rho_makes_the_boundary_tightest_at_the_planned_size(alpha: float) -> None:
    planned = 800.0

    def at_planned(log_rho: float) -> float:
        return float(mixture_boundary(np.array([planned]), np.array([np.exp(log_rho)]), alpha)[0])

    best = optimize.minimize_scalar(at_planned, bounds=(np.log(planned) - 8.0, np.log(planned) + 4.0),
                                    method="bounded")
    assert at_planned(float(np.log(best_rho(planned, alpha)))) <= best.fun * 1.001
    # and at the planned size it is tighter than the boundaries tuned for a tenth or ten times that size
    for other in (planned / 10.0, planned * 10.0):
        assert at_planned(float(np.log(best_rho(planned, alpha)))) < at_planned(float(np.log(best_rho(other, alpha))))


@pytest.mark.parametrize("drift", [0.0, 1.0 / 400.0])
def test_the_boundary_holds_uniformly_over_time_on_gaussian_walks(drift: float) -> None:
    """Walks of unit steps plus a drift drawn once per walk with variance `drift` (the baseline's error)."""
    rng = np.random.default_rng(7)
    walks, steps, alpha = 3000, 1500, 0.05
    t = np.arange(1.0, steps + 1.0)
    s = rng.standard_normal((walks, steps)).cumsum(axis=1) + rng.normal(0.0, np.sqrt(drift), (walks, 1)) * t
    u = mixture_boundary(t, np.full(t.shape, float(best_rho(400.0, alpha))), alpha, drift)
    crossed = int((s > u).any(axis=1).sum())
    naive = int((s > norm.isf(alpha) * np.sqrt(t + drift * t * t)).any(axis=1).sum())
    assert crossed <= _allowed(walks, alpha)
    assert naive > 5 * _allowed(walks, alpha)  # the fixed-sample boundary, looked at every step, fails often
    if drift > 0:  # and the candidate's own boundary, the baseline's error ignored, fails past the baseline's size
        plain = mixture_boundary(t, np.full(t.shape, float(best_rho(400.0, alpha))), alpha)
        assert int((s > plain).any(axis=1).sum()) > _allowed(walks, alpha)


def _rate_rows(rng: np.random.Generator, n_users: int) -> MeasureRows:
    counts = rng.integers(1, 12, size=n_users)
    user = np.repeat(np.arange(n_users), counts)
    p = rng.beta(1.0, 6.0, n_users)[user]
    y = (rng.random(len(user)) < p).astype(float)
    return MeasureRows(unit_ids=tuple(f"r{i}" for i in range(len(user))), user=user, y=y, x=np.ones(len(user)))


def test_the_bound_is_recomputed_from_rows() -> None:
    """The candidate's per-user residual spread sigma (floored at the baseline's), the baseline's error as the
    walk's drift variance from statsmodels' clustered (CR1) standard error, the boundary by quadrature at the
    candidate's user count: bound = delta - boundary sigma / X_b."""
    rng = np.random.default_rng(3)
    n_users, level = 240, 0.01
    rows = _rate_rows(rng, n_users)
    stats = user_stats(rows, n_users)[None]
    in_b = (np.arange(n_users) >= 150).astype(float)
    sums = group_sums(stats, np.stack([1.0 - in_b, in_b]))
    got = float(always_valid_bound(sums[0], sums[1], np.array([1.0]), level=level)[0])

    def side(mask: F64) -> tuple[float, float, int, float, float]:
        keep = mask[rows.user] > 0
        y, users = rows.y[keep], rows.user[keep]
        fit = sm.OLS(y, np.ones((len(y), 1))).fit(cov_type="cluster", cov_kwds={"groups": users})
        per_user = np.bincount(users, weights=y - y.mean(), minlength=n_users)[np.unique(users)]  # Y_c - R X_c
        return (float(y.mean()), float(fit.bse[0]), len(per_user), float((per_user ** 2).sum() / (len(per_user) - 1)),
                float(rows.x[keep].sum()))

    ra, se_a, n_a, var_a, _ = side(1.0 - in_b)
    rb, _, t, var_b, x_b = side(in_b)
    sigma2 = max(var_b, var_a)
    drift = se_a ** 2 * (x_b / t) ** 2 / sigma2
    u = _boundary_by_quadrature(float(t), float(best_rho(n_a, level)), level, drift)
    want = (rb - ra) - u * np.sqrt(sigma2) / x_b
    assert got == pytest.approx(want, rel=1e-7, abs=1e-12)


def test_too_few_candidate_users_give_no_bound() -> None:
    rng = np.random.default_rng(4)
    stats = user_stats(_rate_rows(rng, 50), 50)[None]
    mask = np.zeros((3, 50))
    mask[1, 0] = 1.0
    mask[2, :2] = 1.0
    a = group_sums(stats, (np.arange(50) >= 10).astype(float)[None])[0]
    got = always_valid_bound(np.broadcast_to(a, (3, 1, a.shape[-1])), group_sums(stats, mask), np.array([1.0]),
                             level=0.01)
    assert np.isnan(got[0, 0]) and np.isnan(got[1, 0]) and np.isfinite(got[2, 0])


def test_looks_are_after_each_thirtieth_and_the_last_sees_everyone() -> None:
    sizes = look_sizes(301, LOOKS)
    assert len(sizes) == LOOKS and sizes[0] == 11 and sizes[-1] == 301 and np.all(np.diff(sizes) > 0)


def _planted(seed: int, n_users: int = 600, defect: float = 0.0) -> tuple[F64, F64, F64]:
    """Per-user stats of five measures with user effects (rows of a user correlate), and the same users' stats
    with `defect` added to every row's failure probability (measure 0; the others untouched). Returns (stats,
    treated, sign)."""
    rng = np.random.default_rng(seed)
    counts = 1 + rng.poisson(5.0, n_users)
    user = np.repeat(np.arange(n_users), counts)
    n = len(user)
    ones = np.ones(n)
    fail_p = rng.beta(1.0, 12.0, n_users)[user]  # failure rate, clustered (worse higher)
    draw = rng.random(n)
    fail, fail_defected = (draw < fail_p).astype(float), (draw < fail_p + defect).astype(float)
    latency = rng.normal(0.0, 0.5, n_users)[user] + rng.normal(0.0, 0.7, n)  # a mean log (worse higher)
    opportunities = (1 + rng.poisson(3.0, n)).astype(np.float64)  # a ratio of sums, x counts opportunities (worse higher)
    replays = rng.binomial(opportunities.astype(int), rng.beta(2.0, 8.0, n_users)[user]).astype(float)
    success = (rng.random(n) < rng.beta(8.0, 2.0, n_users)[user]).astype(float)  # worse lower
    rare = (rng.random(n) < rng.beta(0.2, 20.0, n_users)[user]).astype(float)  # a rare violation (worse higher)
    eligible = rng.random(n) < 0.4  # the ratio measure is defined on a subset of rows
    measures: list[tuple[F64, F64]] = [(fail, ones), (latency, ones), (replays[eligible], opportunities[eligible]),
                                       (success, ones), (rare, ones)]  # (y, x) per measure
    users = [user, user, user[eligible], user, user]

    def stack(first: F64) -> F64:
        out: list[F64] = []
        for i, ((y, x), u) in enumerate(zip(measures, users, strict=True)):
            yy = first if i == 0 else y
            out.append(user_stats(MeasureRows(unit_ids=tuple(map(str, range(len(u)))), user=u, y=yy, x=x),
                                  n_users))
        return np.stack(out)

    return stack(fail), stack(fail_defected), np.array([1.0, 1.0, 1.0, -1.0, 1.0])


@pytest.fixture(scope="module")
def aa() -> list[tuple[float, float, int]]:
    """(sequential, fixed, runs) over growing A/A traffic on two planted populations, Bonferroni level."""
    out = []
    for data_seed in (11, 12):
        stats, _, sign = _planted(data_seed)
        got = looks_simulation(stats, sign, level=FAMILY / stats.shape[0], looks=LOOKS, seeds=300, seed=data_seed)
        out.append((got.sequential, got.fixed, 300))
    return out


def test_sequential_family_false_alarms_stay_at_most_five_percent_over_thirty_looks(
        aa: list[tuple[float, float, int]]) -> None:
    alarms = sum(round(seq * n) for seq, _, n in aa)
    runs = sum(n for _, _, n in aa)
    assert alarms <= _allowed(runs)


def test_the_fixed_sample_test_checked_at_every_look_exceeds_five_percent(
        aa: list[tuple[float, float, int]]) -> None:
    alarms = sum(round(fix * n) for _, fix, n in aa)
    runs = sum(n for _, _, n in aa)
    assert alarms > _allowed(runs)
    assert all(fix > seq for seq, fix, _ in aa)


def test_a_large_real_defect_is_detected_and_named() -> None:
    stats, treated, sign = _planted(21, defect=0.15)
    got = looks_simulation(stats, sign, level=FAMILY / stats.shape[0], looks=LOOKS, seeds=200, seed=21,
                           treated=treated)
    assert got.sequential > 0.8
    assert got.sequential_per_metric[0] > 0.8  # the failure rate, the metric the defect moves
    assert np.all(got.sequential_per_metric[1:] <= _allowed(200) / 200)


def test_treated_stats_must_match() -> None:
    stats, _, sign = _planted(5, n_users=40)
    with pytest.raises(ValueError, match="treated stats"):
        looks_simulation(stats, sign, level=0.01, seeds=2, treated=stats[:, :10])
