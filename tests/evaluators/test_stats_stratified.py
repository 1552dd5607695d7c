from __future__ import annotations

import pytest

from agent_factory.evaluators.stats import StratifiedEstimate, stratified_mean
from agent_factory.evaluators.stats.stratified import VERSION

# A: N = 100, sampled [1, 0, 1, 1]: mean 0.75, s^2 = 0.75 / 3 = 0.25, w = 25
# B: N = 300, sampled [0.5, 0.7, 0.9]: mean 0.70, s^2 = 0.08 / 2 = 0.04, w = 100
# mean = (100 * 0.75 + 300 * 0.70) / 400 = 285 / 400 = 0.7125 (plain mean of the 7 values: 0.728571)
# var  = 0.25^2 * (1 - 4/100) * 0.25 / 4 + 0.75^2 * (1 - 3/300) * 0.04 / 3 = 0.00375 + 0.007425 = 0.011175
# half = 1.959964 * sqrt(0.011175) = 0.207192 -> (0.505308, 0.919692)
VALUES = {"A": [1.0, 0.0, 1.0, 1.0], "B": [0.5, 0.7, 0.9]}
POPULATION = {"A": 100, "B": 300}


def test_module_is_versioned() -> None:
    assert VERSION == "1"


def test_hand_built_case() -> None:
    est = stratified_mean(VALUES, POPULATION)
    assert isinstance(est, StratifiedEstimate)
    assert est.value == pytest.approx(0.7125)
    assert est.low == pytest.approx(0.505308, abs=1e-5)
    assert est.high == pytest.approx(0.919692, abs=1e-5)
    assert (est.n, est.method, est.unsampled, est.population_covered, est.note) == (
        7, "stratified_normal", (), 1.0, None,
    )
    a, b = est.strata
    assert (a.name, a.population, a.sampled, a.mean, a.variance, a.weight) == ("A", 100, 4, 0.75, 0.25, 25.0)
    assert (b.name, b.weight) == ("B", 100.0)
    assert b.variance == pytest.approx(0.04)


def test_unsampled_stratum_is_reported_not_dropped() -> None:
    est = stratified_mean(VALUES, {**POPULATION, "C": 100})
    assert est.value == pytest.approx(0.7125)
    assert est.unsampled == ("C",)
    assert est.population_covered == pytest.approx(0.8)
    assert est.note is not None and "C" in est.note
    c = est.strata[2]
    assert (c.name, c.sampled, c.mean, c.weight) == ("C", 0, None, None)


def test_census_stratum_adds_no_variance() -> None:
    # A fully enumerated (n = N = 2, values 0 and 1) adds nothing; only B's term is left:
    # W_B = 300 / 302, var = W_B^2 * 0.99 * 0.04 / 3
    est = stratified_mean({"A": [0.0, 1.0], "B": VALUES["B"]}, {"A": 2, "B": 300})
    expected_var = (300 / 302) ** 2 * 0.99 * 0.04 / 3
    assert est.high - est.value == pytest.approx(1.959964 * expected_var**0.5, rel=1e-5)
    assert stratified_mean({"A": [0.4]}, {"A": 1}).low == pytest.approx(0.4)


def test_one_sampled_unit_of_many_gives_no_interval() -> None:
    est = stratified_mean({"A": [1.0], "B": VALUES["B"]}, {"A": 50, "B": 300})
    assert est.value == pytest.approx((50 * 1.0 + 300 * 0.7) / 350)
    assert (est.low, est.high) == (None, None)
    assert est.note is not None and "A" in est.note


def test_nothing_sampled_is_undefined() -> None:
    est = stratified_mean({}, {"A": 10})
    assert (est.value, est.low, est.high, est.n, est.unsampled) == (None, None, None, 0, ("A",))


@pytest.mark.parametrize(
    ("values", "population"),
    [
        ({"A": [1.0, 0.0]}, {"A": 1}),
        ({"A": [1.0], "X": [0.0]}, {"A": 5}),
        ({"A": [float("nan")]}, {"A": 5}),
        ({"A": [1.0]}, {"A": -1}),
    ],
)
def test_inconsistent_input_raises(values: dict, population: dict) -> None:
    with pytest.raises(ValueError):
        stratified_mean(values, population)


def test_wider_confidence_widens_the_interval() -> None:
    narrow = stratified_mean(VALUES, POPULATION, confidence=0.80)
    wide = stratified_mean(VALUES, POPULATION, confidence=0.99)
    assert wide.high - wide.low > narrow.high - narrow.low
