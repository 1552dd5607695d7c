"""The A/A calibration (`evaluators.gate.calibrate`) against planted truth: users whose rows share a user-level
random effect (strong within-user correlation), seven measures of every scale (rates, a rare rate, means of logs,
a ratio with x != 1, one read on half the rows), some driven by the same effect so they move together.

The truth: under A/A every split's halves come from one population, so thresholds calibrated to a family rate of
5% on 2,000 splits must give 5% on 2,000 others, up to the binomial noise of both halves; and the per-turn test,
which treats a user's correlated rows as independent, must fire far more often than its nominal 4.55% per metric."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom, norm

from agent_factory.evaluators.gate import calibrate as cal
from agent_factory.evaluators.gate.calibrate import (
    calibrate,
    certified_rate,
    family_rate,
    half_masks,
    tail_level,
    thresholds_at,
)
from agent_factory.evaluators.gate.columns import F64, MeasureRows, user_stats
from agent_factory.evaluators.gate.model import FAMILY_ALPHA, AAReport

SIGN = np.array([1.0, 1.0, 1.0, 1.0, -1.0, 1.0, -1.0])
KEYS = tuple(f"c:m{i}" for i in range(len(SIGN)))
SPLITS = 4000


def _logistic(v: F64) -> F64:
    out: F64 = 1.0 / (1.0 + np.exp(-v))
    return out


def planted(seed: int, users: int, strength: float, rows_mean: float = 10.0) -> F64:
    """(7, users, F) per-user sums; `strength` scales the user effects (0: rows independent)."""
    rng = np.random.default_rng(seed)
    counts = 1 + rng.poisson(rows_mean - 1.0, users)
    user = np.repeat(np.arange(users), counts)
    n = len(user)
    e1, e2, e3 = (rng.normal(0.0, strength, users)[user] for _ in range(3))
    ones = np.ones(n)
    opportunities = 1.0 + rng.poisson(2.0, n)
    columns: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = [
        ((rng.random(n) < _logistic(-2.0 + e1)).astype(float), ones, ones > 0),  # a rate
        ((rng.random(n) < _logistic(-1.0 + 0.8 * e1 + 0.6 * e2)).astype(float), ones, ones > 0),  # moves with m0
        ((rng.random(n) < _logistic(-4.0 + e2)).astype(float), ones, ones > 0),  # a rare rate
        (0.5 * e1 + rng.normal(0.0, 1.0, n), ones, ones > 0),  # a mean of logs, moves with m0
        (e2 + rng.normal(0.0, 1.0, n), ones, ones > 0),  # a mean of logs, worse lower
        (rng.binomial(opportunities.astype(int), _logistic(-1.5 + e3)).astype(float), opportunities, ones > 0),
        ((rng.random(n) < _logistic(e3)).astype(float), ones, rng.random(n) < 0.5),  # half the rows eligible
    ]
    stacks = []
    for y, x, keep in columns:
        rows = MeasureRows(unit_ids=tuple(str(i) for i in np.flatnonzero(keep)), user=user[keep], y=y[keep],
                           x=x[keep])
        stacks.append(user_stats(rows, users))
    return np.stack(stacks)


def _sd(rate: float, seeds: int) -> float:
    """The sd of a mean over seeds of a held-out rate: the held-out splits' binomial noise plus that of the
    calibration splits the thresholds were read from (each 2,000 splits)."""
    half = SPLITS // 2
    return float(np.sqrt(rate * (1.0 - rate) * (1.0 / half + 1.0 / half) / seeds))


@pytest.fixture(scope="module", params=[(200, 30), (30, 30)], ids=["200-users", "30-users"])
def reports(request: pytest.FixtureRequest) -> list[AAReport]:
    users, seeds = request.param
    return [calibrate(planted(s, users, 1.5), SIGN, keys=KEYS, splits=SPLITS, seed=s)[1] for s in range(seeds)]


def test_the_heldout_family_false_alarm_is_at_most_five_percent_with_confidence(reports: list[AAReport]) -> None:
    k, n = len(reports), SPLITS // 2
    held = np.array([r.family_false_alarm_heldout for r in reports])
    calib = np.array([r.family_false_alarm_calibration for r in reports])
    # The in-sample rate sits where its 95% upper bound reaches 5%: about 1.645 binomial sds below it (the last step
    # of the tail level moves each of the 7 thresholds past one split at most).
    margin = 1.645 * np.sqrt(FAMILY_ALPHA * (1 - FAMILY_ALPHA) / n)
    slack = (2 * len(SIGN) + 1) / n
    assert (calib <= FAMILY_ALPHA - margin + 2 / n).all()
    assert (calib >= FAMILY_ALPHA - 1.4 * margin - slack).all()
    # A fresh split alarms at about the in-sample rate: the held-out mean over seeds sits there, under 5%, and not
    # far under it (the confidence costs about a point at 2,000 calibration splits, no more).
    band = 3.5 * _sd(FAMILY_ALPHA, k)
    assert calib.mean() - band <= held.mean() <= calib.mean() + band + 1 / n
    assert held.mean() <= FAMILY_ALPHA
    # Seeds whose held-out rate exceeds 5%: the bound holds with 95% confidence, and the held-out half adds its own
    # binomial noise, so a few may; most may not.
    assert (held > FAMILY_ALPHA).mean() <= 0.25


def test_each_metric_holds_the_calibrated_level_on_heldout_splits(reports: list[AAReport]) -> None:
    k, n = len(reports), SPLITS // 2
    for key in KEYS:
        held = np.array([r.per_metric[key].false_alarm_heldout for r in reports])
        # A fresh split exceeds the threshold over n_def defined calibration splits, floor(q n_def) of them above it,
        # with probability (floor(q n_def) + 1)/(n_def + 1) when it is defined itself (order statistics).
        defined = np.array([1.0 - r.per_metric[key].undefined_splits / r.splits for r in reports])
        n_def = np.round(defined * n)
        level = np.array([r.level for r in reports])
        expected = np.where(n_def > 0, (np.floor(level * n_def) + 1) / (n_def + 1), 0.0) * defined
        assert abs(held.mean() - expected.mean()) <= 4.0 * _sd(float(expected.mean()), k), key
        assert held.mean() <= FAMILY_ALPHA, key


def test_the_per_turn_test_fires_far_above_five_percent_when_rows_of_a_user_correlate() -> None:
    strong = calibrate(planted(0, 200, 1.5), SIGN, keys=KEYS, splits=SPLITS, seed=0)[1]
    independent = calibrate(planted(0, 200, 0.0), SIGN, keys=KEYS, splits=SPLITS, seed=0)[1]
    assert strong.per_turn_family_false_alarm > 0.5
    # Rows independent: each metric's two-sided |z| >= 2 fires 4.55% of the time, and by Sidak's inequality
    # (normal statistics) seven of them together fire at most as often as seven independent ones would.
    nominal = 2.0 * float(norm.sf(2.0))
    sidak = 1.0 - (1.0 - nominal) ** len(SIGN)
    assert independent.per_turn_family_false_alarm <= sidak + 4.0 * np.sqrt(sidak * (1.0 - sidak) / SPLITS)
    # The metrics carrying a strong user effect on every row: the per-turn test fires several times its 4.55%.
    for key in ("c:m0", "c:m3", "c:m4"):
        assert strong.per_metric[key].per_turn_false_alarm > 0.2, key
    # With rows truly independent it is the valid test it claims to be (4.55% per metric, loosely).
    assert all(m.per_turn_false_alarm < 2 * nominal for m in independent.per_metric.values())
    # The clustered test holds 5% either way.
    assert strong.family_false_alarm_heldout <= FAMILY_ALPHA + 4.5 * _sd(FAMILY_ALPHA, 1)


def test_the_calibration_is_reproducible_by_seed_and_independent_of_the_chunking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stats = planted(3, 50, 1.0)
    thr, rep = calibrate(stats, SIGN, keys=KEYS, splits=600, seed=11)
    assert calibrate(stats, SIGN, keys=KEYS, splits=600, seed=11) == (thr, rep)
    assert calibrate(stats, SIGN, keys=KEYS, splits=600, seed=12)[1] != rep
    monkeypatch.setattr(cal, "CHUNK_CELLS", 7 * 50)  # chunks of 7 splits
    assert calibrate(stats, SIGN, keys=KEYS, splits=600, seed=11) == (thr, rep)
    assert thr == {k: m.threshold for k, m in rep.per_metric.items()} and rep.splits == 600


def _thresholds(z: F64, q: float) -> F64:
    """Each metric's (1 - q) quantile by the definition of `inverted_cdf`: the smallest defined z whose empirical
    CDF reaches 1 - q (computed here by sorting, apart from numpy's quantile)."""
    out = np.full(z.shape[1], np.inf)
    for m in range(z.shape[1]):
        asc = np.sort(z[:, m][~np.isnan(z[:, m])])
        if len(asc):
            out[m] = asc[max(int(np.ceil((1.0 - q) * len(asc))) - 1, 0)]
    return out


def test_the_tail_level_is_the_largest_the_certified_family_rate_allows() -> None:
    stats = planted(5, 80, 1.0)
    stats[6, 6:] = 0.0  # a metric of 6 users: undefined in some splits, so its levels step at other points
    z = cal.split_statistics(stats, SIGN, splits=2000, seed=5).z
    assert 0 < np.isnan(z[:, 6]).sum() < 2000
    q = tail_level(z, 0.05)
    # Independently: every level where a threshold moves is j/n_def; try each gap's midpoint and keep the largest
    # whose thresholds hold the one-sided 95% Clopper-Pearson bound of B of n at <= 5%, B the splits at or above some
    # threshold (the bound computed here from the binomial tail itself, not scipy's beta quantile).
    n_def = [int((~np.isnan(z[:, m])).sum()) for m in range(z.shape[1])]
    steps = np.unique(np.concatenate([np.arange(0, nd + 1) / nd for nd in n_def if nd] + [np.array([0.0, 1.0])]))
    best = 0.0
    for mid in (steps[:-1] + steps[1:]) / 2.0:
        with np.errstate(invalid="ignore"):
            b = (z >= _thresholds(z, float(mid))[None, :]).any(axis=1).sum()
        if binom.cdf(b, len(z), 0.05) <= 0.05:  # the upper bound is <= 5% iff P(Bin(n, 5%) <= b) <= 5%
            best = max(best, float(mid))
    # q itself sits a float below the step its bisection stopped at: compared at the gap's midpoint, no rounding.
    np.testing.assert_array_equal(thresholds_at(z, q), _thresholds(z, best))
    assert certified_rate(z, thresholds_at(z, q)) <= 0.05 < certified_rate(z, thresholds_at(z, q + 1e-9))
    assert family_rate(z, thresholds_at(z, q)) <= certified_rate(z, thresholds_at(z, q))


def test_half_masks_put_an_exact_half_in_b_each_user_equally_often() -> None:
    masks = half_masks(np.random.default_rng(0), 4000, 31)
    assert (masks.sum(axis=1) == 15).all() and set(np.unique(masks)) == {0.0, 1.0}
    share = masks.mean(axis=0)
    assert (np.abs(share - 15 / 31) <= 4.0 * np.sqrt((15 / 31) * (16 / 31) / 4000)).all()


def test_a_metric_without_variance_never_alarms_and_its_undefined_splits_are_counted() -> None:
    stats = planted(2, 40, 1.0)
    stats[2] = 0.0  # no rows at all: undefined in every split
    thr, rep = calibrate(stats, SIGN, keys=KEYS, splits=400, seed=2)
    assert thr["c:m2"] == float("inf") and rep.per_metric["c:m2"].undefined_splits == 400
    assert rep.per_metric["c:m2"].false_alarm_heldout == 0.0 and rep.per_metric["c:m2"].per_turn_false_alarm == 0.0
    assert AAReport.model_validate_json(rep.model_dump_json()) == rep  # +inf survives JSON
    # A rare metric on few users is undefined in some splits, counted and never an alarm.
    sparse = planted(2, 40, 1.0)
    sparse[6, 3:] = 0.0  # only 3 users have rows
    rep2 = calibrate(sparse, SIGN, keys=KEYS, splits=400, seed=2)[1]
    assert 0 < rep2.per_metric["c:m6"].undefined_splits < 400


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"splits": 1}, "1 split"), ({"alpha": 0.0}, "alpha 0.0"), ({"keys": KEYS[:3]}, "3 keys"),
])
def test_bad_inputs_name_what_failed(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"keys": KEYS, "splits": 10, **kwargs}
    with pytest.raises(ValueError, match=message):
        calibrate(planted(0, 20, 1.0), SIGN, **args)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="1 user"):
        calibrate(planted(0, 1, 1.0), SIGN, keys=KEYS)
