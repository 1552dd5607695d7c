"""The gate's test (`evaluators.gate.stats`) against statsmodels, on random data of every scale a measure has:
a rate (y 0/1, x 1), a mean of logs (y real, x 1) and a ratio of sums (x counts opportunities, x != 1). The
clustered change is the group coefficient of WLS(y/x ~ 1 + b, weights x) with CR1 errors clustered by user
(`cov_type="cluster"`); the per-turn change is the same regression with HC1 errors (each row its own cluster:
G/(G-1) * (N-1)/(N-2) = N/(N-2), HC1's factor), and for x = 1 that is plain OLS with HC1."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from scipy.stats import norm

from agent_factory.evaluators.gate.columns import CLUSTERS, F64, MeasureRows, user_stats
from agent_factory.evaluators.gate.stats import bonferroni_threshold, change, group_sums, split_change, totals

SCALES = ("rate", "log", "ratio")


def _rows(rng: np.random.Generator, scale: str, n_users: int) -> MeasureRows:
    """Rows of one measure: users with 0-9 rows (some none), a user effect so rows of a user correlate."""
    counts = rng.integers(0, 10, size=n_users)
    user = np.repeat(np.arange(n_users), counts)
    effect = rng.normal(0.0, 1.0, n_users)[user]
    if scale == "rate":
        x = np.ones(len(user))
        y = (rng.random(len(user)) < 1.0 / (1.0 + np.exp(1.0 - effect))).astype(float)
    elif scale == "log":
        x = np.ones(len(user))
        y = effect + rng.normal(0.0, 0.7, len(user))
    else:
        x = 1.0 + rng.poisson(3.0, len(user)).astype(float)
        y = rng.binomial(x.astype(int), 1.0 / (1.0 + np.exp(1.5 - effect))).astype(float)
    return MeasureRows(unit_ids=tuple(f"r{i}" for i in range(len(user))), user=user, y=y, x=x)


def _reference(rows: MeasureRows, mask: F64, sign: float, cov: str) -> tuple[float, float, float]:
    """statsmodels' delta, se and worse-direction z of b (mask 1) against a."""
    b = mask[rows.user]
    exog = sm.add_constant(b, has_constant="add")
    model = sm.WLS(rows.y / rows.x, exog, weights=rows.x)
    fit = (model.fit(cov_type="cluster", cov_kwds={"groups": rows.user}) if cov == "cluster"
           else model.fit(cov_type="HC1"))
    delta, se = float(fit.params[1]), float(fit.bse[1])
    return delta, se, sign * delta / se


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= 1e-10 * max(1.0, abs(want))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clustered_and_per_turn_changes_are_statsmodels_wls_cluster_and_hc1(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_users = 60
    measures = [_rows(rng, s, n_users) for s in SCALES]
    assert all(np.any(m.x != 1.0) for m in measures[2:])  # the ratio scale really weighs rows
    stats = np.stack([user_stats(m, n_users) for m in measures])
    sign = np.array([1.0, -1.0, 1.0])
    masks = (rng.random((6, n_users)) < 0.5).astype(float)
    for test, cov in (("clustered", "cluster"), ("per_turn", "HC1")):
        got = split_change(stats, masks, sign, test=test)  # type: ignore[arg-type]
        assert got.z.shape == (6, 3)
        for s in range(len(masks)):
            for m, rows in enumerate(measures):
                delta, se, z = _reference(rows, masks[s], float(sign[m]), cov)
                assert _close(float(got.delta[s, m]), delta), (test, s, SCALES[m])
                assert _close(float(got.se[s, m]), se), (test, s, SCALES[m])
                assert _close(float(got.z[s, m]), z), (test, s, SCALES[m])
                b = masks[s][rows.user] == 1.0
                assert _close(float(got.b[s, m]), rows.y[b].sum() / rows.x[b].sum())
                assert _close(float(got.a[s, m]), rows.y[~b].sum() / rows.x[~b].sum())


def test_the_per_turn_test_is_the_clustered_one_with_each_row_its_own_user() -> None:
    rng = np.random.default_rng(7)
    rows = _rows(rng, "ratio", 50)
    mask = (rng.random(50) < 0.5).astype(float)
    per_turn = split_change(user_stats(rows, 50)[None], mask[None], np.array([1.0]), test="per_turn")
    n = len(rows.user)
    as_users = MeasureRows(unit_ids=rows.unit_ids, user=np.arange(n), y=rows.y, x=rows.x)
    clustered = split_change(user_stats(as_users, n)[None], mask[rows.user][None], np.array([1.0]))
    assert _close(float(per_turn.se[0, 0]), float(clustered.se[0, 0]))
    assert _close(float(per_turn.z[0, 0]), float(clustered.z[0, 0]))


def test_change_over_any_leading_shape_is_the_change_of_each_group() -> None:
    rng = np.random.default_rng(3)
    stats = np.stack([user_stats(_rows(rng, s, 40), 40) for s in SCALES])
    masks = (rng.random((4, 40)) < 0.5).astype(float)
    b = group_sums(stats, masks)
    a = totals(stats)[None] - b
    sign = np.array([1.0, 1.0, -1.0])
    whole = change(a.reshape(2, 2, 3, -1), b.reshape(2, 2, 3, -1), sign)
    for s in range(4):
        one = change(a[s], b[s], sign)
        np.testing.assert_array_equal(whole.z.reshape(4, 3)[s], one.z)
        np.testing.assert_array_equal(whole.se.reshape(4, 3)[s], one.se)


def test_no_row_on_a_side_or_no_variance_is_undefined() -> None:
    rng = np.random.default_rng(4)
    rows = _rows(rng, "rate", 30)
    stats = user_stats(rows, 30)[None]
    has_rows = stats[0, :, CLUSTERS] > 0
    nobody, only_rowless = np.zeros(30), (~has_rows).astype(float)
    got = split_change(stats, np.stack([nobody, only_rowless]), np.array([1.0]))
    assert np.isnan(got.b).all() and np.isnan(got.delta).all() and np.isnan(got.z).all()
    assert np.isfinite(got.a).all()
    constant = MeasureRows(unit_ids=rows.unit_ids, user=rows.user, y=np.zeros(len(rows.user)), x=rows.x)
    flat = split_change(user_stats(constant, 30)[None], (rng.random((3, 30)) < 0.5).astype(float), np.array([1.0]))
    assert (flat.delta == 0.0).all() and (flat.se == 0.0).all() and np.isnan(flat.z).all()


@pytest.mark.parametrize("n", [1, 7, 20])
def test_the_bonferroni_threshold_splits_alpha_over_the_measures(n: int) -> None:
    assert norm.sf(bonferroni_threshold(n)) * n == pytest.approx(0.05, rel=1e-12)
