from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from agent_factory.evaluators.stats import proportion_ci, two_proportion_z
from agent_factory.evaluators.stats.proportions import VERSION


def test_module_is_versioned() -> None:
    assert VERSION == "1"


def test_wilson_3_of_10_matches_hand_computation() -> None:
    # z = 1.959964, z^2 = 3.841459, p = 0.3, n = 10:
    # centre = (p + z^2/2n) / (1 + z^2/n) = 0.492073 / 1.384146 = 0.355506
    # half   = z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/4n^2) = 1.416005 * sqrt(0.021 + 0.009604) = 0.247715
    # -> (0.107791, 0.603221)
    est = proportion_ci(3, 10)
    assert est.value == pytest.approx(0.3)
    assert est.low == pytest.approx(0.107791, abs=1e-5)
    assert est.high == pytest.approx(0.603221, abs=1e-5)
    assert (est.n, est.method, est.confidence, est.note) == (10, "wilson", 0.95, None)


def test_wilson_matches_statsmodels_when_installed() -> None:
    smp = pytest.importorskip("statsmodels.stats.proportion")
    low, high = smp.proportion_confint(3, 10, alpha=0.05, method="wilson")
    est = proportion_ci(3, 10)
    assert (est.low, est.high) == (pytest.approx(low), pytest.approx(high))


def test_clopper_pearson_limits_satisfy_their_definition() -> None:
    est = proportion_ci(3, 10, method="clopper_pearson")
    assert est.low == pytest.approx(0.066740, abs=1e-5)
    assert est.high == pytest.approx(0.652453, abs=1e-5)
    # exact limits: P(X >= 3 | p = low) = 0.025 and P(X <= 3 | p = high) = 0.025
    assert stats.binom.sf(2, 10, est.low) == pytest.approx(0.025, abs=1e-9)
    assert stats.binom.cdf(3, 10, est.high) == pytest.approx(0.025, abs=1e-9)


def test_zero_trials_is_explicitly_undefined() -> None:
    est = proportion_ci(0, 0)
    assert (est.value, est.low, est.high, est.n) == (None, None, None, 0)
    assert est.note is not None and "n = 0" in est.note


def test_extremes_stay_in_unit_interval() -> None:
    assert proportion_ci(0, 5).low == 0.0
    assert proportion_ci(5, 5).high == 1.0
    assert proportion_ci(0, 5).high == pytest.approx(0.434482, abs=1e-5)


def test_numpy_integers_are_accepted() -> None:
    assert proportion_ci(np.int64(3), np.int64(10)).value == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((4, 3), {}), ((-1, 3), {}), ((1.5, 3), {}), ((1, 3), {"confidence": 1.0}), ((1, 3), {"method": "wald"})],
)
def test_bad_arguments_raise(args: tuple, kwargs: dict) -> None:
    with pytest.raises(ValueError):
        proportion_ci(*args, **kwargs)


@settings(derandomize=True, database=None)  # same examples every run, nothing written to disk
@given(st.integers(min_value=1, max_value=500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_interval_contains_the_rate(case: tuple[int, int]) -> None:
    k, n = case
    est = proportion_ci(k, n)
    assert 0.0 <= est.low <= est.value <= est.high <= 1.0


def test_two_proportion_z_matches_hand_computation() -> None:
    # 30/100 vs 20/100: pooled p = 0.25, se = sqrt(0.25 * 0.75 * (1/100 + 1/100)) = 0.0612372,
    # z = 0.10 / 0.0612372 = 1.632993, two-sided p = 2 * (1 - Phi(1.632993)) = 0.102470
    t = two_proportion_z(30, 100, 20, 100)
    assert t.diff == pytest.approx(0.10)
    assert t.se == pytest.approx(0.0612372, abs=1e-7)
    assert t.z == pytest.approx(1.632993, abs=1e-6)
    assert t.p_value == pytest.approx(0.102470, abs=1e-6)
    assert two_proportion_z(20, 100, 30, 100).z == pytest.approx(-t.z)
    assert (t.n1, t.n2, t.method, t.clusters1) == (100, 100, "pooled_z", None)


def test_two_proportion_z_without_variation_is_undefined() -> None:
    t = two_proportion_z(0, 10, 0, 20)
    assert (t.diff, t.se, t.z, t.p_value) == (0.0, 0.0, None, None)
    assert t.note is not None and "se = 0" in t.note


def test_two_proportion_z_with_an_empty_group_is_undefined() -> None:
    t = two_proportion_z(3, 10, 0, 0)
    assert (t.p1, t.p2, t.z) == (0.3, None, None)
    assert math.isclose(proportion_ci(3, 10).value, t.p1)


def test_wilson_interval_is_scipys_bit_for_bit() -> None:
    from agent_factory.evaluators.stats.proportions import wilson_interval

    cases = [(k, n) for n in range(1, 60) for k in range(n + 1)]
    cases += [(k, n) for n in (997, 4634, 38751) for k in (0, 1, n // 3, n // 2, n - 1, n)]
    for k, n in cases:
        for confidence in (0.8, 0.95, 0.99):
            ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
            assert wilson_interval(k, n, confidence=confidence) == (float(ci.low), float(ci.high)), (k, n, confidence)


def test_normal_quantile_and_tail_are_scipy_stats_norm() -> None:
    from agent_factory.evaluators.stats.estimate import normal_quantile, normal_sf

    for p in (1e-9, 0.025, 0.1, 0.5, 0.9, 0.95, 0.975, 0.995, 1 - 1e-9):
        assert normal_quantile(p) == float(stats.norm.ppf(p))
    for z in (-3.0, -0.5, 0.0, 0.7, 1.959963984540054, 4.2, 9.0):
        assert normal_sf(z) == float(stats.norm.sf(z))
