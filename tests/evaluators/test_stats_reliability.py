from __future__ import annotations

import pytest

from agent_factory.evaluators.stats import icc, two_way_anova, variance_components
from agent_factory.evaluators.stats.reliability import VERSION

# Shrout & Fleiss (1979), Table 2: 6 targets rated by 4 judges.
SHROUT_FLEISS = [
    [9, 2, 5, 8],
    [6, 1, 3, 2],
    [8, 4, 6, 8],
    [7, 1, 2, 6],
    [10, 5, 6, 9],
    [6, 2, 4, 7],
]


def test_module_is_versioned() -> None:
    assert VERSION == "1"


def test_mean_squares_match_the_paper() -> None:
    a = two_way_anova(SHROUT_FLEISS)
    # paper: BMS 11.24, WMS 6.26, JMS 32.49, EMS 1.02
    assert (a.n_units, a.n_raters) == (6, 4)
    assert a.ms_units == pytest.approx(11.24, abs=0.005)
    assert a.ms_within == pytest.approx(6.26, abs=0.005)
    assert a.ms_raters == pytest.approx(32.49, abs=0.005)
    assert a.ms_error == pytest.approx(1.02, abs=0.005)


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("ICC(1,1)", 0.17),
        ("ICC(2,1)", 0.29),
        ("ICC(3,1)", 0.71),
        ("ICC(1,k)", 0.44),
        ("ICC(2,k)", 0.62),
        ("ICC(3,k)", 0.91),
    ],
)
def test_icc_values_match_the_paper(kind: str, value: float) -> None:
    est = icc(SHROUT_FLEISS, kind=kind)  # type: ignore[arg-type]
    assert round(est.value, 2) == value
    assert (est.method, est.n) == (kind, 24)
    assert est.low < est.value < est.high


@pytest.mark.parametrize(
    ("kind", "low", "high"),
    [("ICC(1,1)", -0.13, 0.72), ("ICC(2,1)", 0.02, 0.76), ("ICC(3,1)", 0.34, 0.95)],
)
def test_icc_intervals_match_the_paper(kind: str, low: float, high: float) -> None:
    est = icc(SHROUT_FLEISS, kind=kind)  # type: ignore[arg-type]
    assert (round(est.low, 2), round(est.high, 2)) == (low, high)


def test_icc_default_is_two_way_random_single_rater() -> None:
    assert icc(SHROUT_FLEISS) == icc(SHROUT_FLEISS, kind="ICC(2,1)")


def test_icc_degenerate_scores() -> None:
    constant = icc([[3, 3], [3, 3], [3, 3]])
    assert constant.value is None and constant.note is not None
    perfect = icc([[1, 1], [2, 2], [3, 3]], kind="ICC(3,1)")
    assert (perfect.value, perfect.low, perfect.high) == (1.0, None, None)
    with pytest.raises(ValueError):
        icc([[1, 2, 3]])
    with pytest.raises(ValueError):
        icc([[1, 2], [3, float("nan")]])


def test_variance_components_of_the_paper_data() -> None:
    # unit (11.2417 - 1.0194) / 4 = 2.5556; rater (32.4861 - 1.0194) / 6 = 5.2444; residual 1.0194
    vc = variance_components(SHROUT_FLEISS)
    assert vc.unit_variance == pytest.approx(2.5556, abs=1e-4)
    assert vc.rater_variance == pytest.approx(5.2444, abs=1e-4)
    assert vc.residual_variance == pytest.approx(1.0194, abs=1e-4)
    assert vc.unit + vc.rater + vc.residual == pytest.approx(1.0)
    assert vc.unit == pytest.approx(icc(SHROUT_FLEISS, kind="ICC(2,1)").value)
    assert (vc.truncated, vc.n_units, vc.n_raters) == ((), 6, 4)


def test_negative_component_is_truncated_and_reported() -> None:
    # identical rater means (JMS = 0 < EMS): the rater estimate is negative and is set to 0
    vc = variance_components([[1, 2], [2, 1], [3, 3]])
    assert vc.truncated == ("rater",)
    assert (vc.rater_variance, vc.rater) == (0.0, 0.0)
    assert vc.unit + vc.residual == pytest.approx(1.0)


def test_variance_components_of_constant_scores() -> None:
    vc = variance_components([[2, 2], [2, 2]])
    assert (vc.unit, vc.rater, vc.residual) == (None, None, None)
