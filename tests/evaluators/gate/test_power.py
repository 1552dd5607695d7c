"""The gate's power (`evaluators.gate.power`) on planted per-user data: the vectorized mixture's sums against the
mixed rows summed one by one (`columns.user_stats`), power growing with the strength, the MDE between the tried
effects, a defect with no effect caught at about the false-alarm rate, latency's factors read exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from agent_factory.evaluators.components.execution.metrics import FAILURE_RATE, LATENCY_RATIO
from agent_factory.evaluators.core.gate import GateMeasure
from agent_factory.evaluators.gate.columns import GateColumns, MeasureRows, user_stats
from agent_factory.evaluators.gate.power import MDE_POWER, align, mixture_sums, power
from agent_factory.evaluators.gate.stats import change

USERS = 300


def _measure(name: str, scale: str = "rate") -> GateMeasure:
    metric = LATENCY_RATIO if scale == "log" else FAILURE_RATE
    return GateMeasure(component=name, metric=metric, name=metric.name, layer="trace", items=("x.y",),
                       contribution=lambda row: None, scale=scale)  # type: ignore[arg-type]


def _planted(seed: int, *, effect: float = 1.0, extra: bool = True) -> tuple[GateColumns, GateColumns]:
    """Two measures over USERS users with 1-9 rows each and a per-user failure propensity: `a` is blanked in
    the defected side (every row fails, times `effect`), `b` is untouched; with `extra`, the defect also makes
    rows `b` did not have (as a disclosure makes a clause's triggered rows) and removes some of `a`'s."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 10, size=USERS)
    user = np.repeat(np.arange(USERS), counts)
    p = 1.0 / (1.0 + np.exp(2.5 - rng.normal(0.0, 0.8, USERS)))[user]
    ids = tuple(f"t{i}" for i in range(len(user)))
    y_a = (rng.random(len(user)) < p).astype(float)
    y_b = (rng.random(len(user)) < 0.1).astype(float)
    a0 = MeasureRows(unit_ids=ids, user=user, y=y_a, x=np.ones(len(user)))
    a1 = MeasureRows(unit_ids=ids, user=user, y=np.where(rng.random(len(user)) < effect, 1.0, y_a),
                     x=np.ones(len(user)))
    b0 = MeasureRows(unit_ids=ids, user=user, y=y_b, x=np.ones(len(user)))
    b1 = b0
    if extra:
        keep = rng.random(len(user)) < 0.95
        a1 = MeasureRows(unit_ids=tuple(i for i, k in zip(ids, keep, strict=True) if k), user=user[keep],
                         y=a1.y[keep], x=a1.x[keep])
        new = rng.random(len(user)) < 0.2
        b1 = MeasureRows(unit_ids=ids + tuple(f"n{i}" for i in np.flatnonzero(new)),
                         user=np.concatenate([user, user[new]]), y=np.concatenate([y_b, np.ones(int(new.sum()))]),
                         x=np.ones(len(user) + int(new.sum())))
    users = tuple(f"u{i}" for i in range(USERS))
    measures = (_measure("a"), _measure("b"))
    return (GateColumns(users=users, measures=measures, rows=(a0, b0)),
            GateColumns(users=users, measures=measures, rows=(a1, b1)))


def _present(r: MeasureRows) -> MeasureRows:
    keep = r.x != 0
    return MeasureRows(unit_ids=tuple(i for i, k in zip(r.unit_ids, keep, strict=True) if k), user=r.user[keep],
                       y=r.y[keep], x=r.x[keep])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mixture_sums_are_the_mixed_rows_summed_one_by_one(seed: int) -> None:
    clean, defected = _planted(seed)
    c, d = align(clean, defected)
    rng = np.random.default_rng(100 + seed)
    cand = (rng.random((4, USERS)) < 0.5).astype(float)
    n_rows = sum(len(r.y) for r in c.rows)
    uniforms = rng.random((4, n_rows))
    a, b = mixture_sums(clean, defected, cand, uniforms, 0.3)
    offsets = np.cumsum([0] + [len(r.y) for r in c.rows])
    for k in range(4):
        for m, (r0, r1) in enumerate(zip(c.rows, d.rows, strict=True)):
            hit = (cand[k][r0.user] == 1) & (uniforms[k, offsets[m]:offsets[m + 1]] < 0.3)
            mixed = _present(MeasureRows(unit_ids=r0.unit_ids, user=r0.user, y=np.where(hit, r1.y, r0.y),
                                         x=np.where(hit, r1.x, r0.x)))
            want_b = cand[k] @ user_stats(mixed, USERS)
            want_a = (1 - cand[k]) @ user_stats(_present(r0), USERS)
            np.testing.assert_allclose(b[k, m], want_b, rtol=1e-12, atol=1e-9)
            np.testing.assert_allclose(a[k, m], want_a, rtol=1e-12, atol=1e-9)


def test_power_grows_with_strength_and_the_mde_lies_between_the_tried_effects() -> None:
    clean, defected = _planted(3, extra=False)
    thr = float(norm.isf(0.05 / 2))
    got = power(clean, defected, np.array([1.0, 1.0]), {"a:failure_rate": thr, "b:failure_rate": thr},
                strengths=(0.01, 0.03, 0.1), draws=300, seed=0)
    assert got.metric == "a:failure_rate" and got.unit == "pp"
    powers = [p.power for p in got.curve]
    effects = [p.effect for p in got.curve]
    assert powers == sorted(powers)  # common random numbers: never less power at a higher strength
    assert powers[-1] >= 0.95 and powers[0] < MDE_POWER
    assert effects == sorted(effects) and effects[0] > 0
    assert got.mde is not None and effects[0] < got.mde < effects[-1]
    crossing = next(i for i, p in enumerate(powers) if p >= MDE_POWER)
    assert effects[crossing - 1] <= got.mde <= effects[crossing]
    assert got.per_metric_mde == {"a:failure_rate": got.mde}
    # The untouched measure fails no more often than by chance (its one-sided 2.5% level, 300 draws).
    assert got.cross_talk["b:failure_rate"] <= 0.06


def test_power_agrees_with_draws_mixed_row_by_row_and_tested_by_stats_change() -> None:
    # An independent Monte Carlo: other halves and row draws, each draw's rows mixed one by one, summed by
    # `columns.user_stats` and tested by `stats.change`; the two power estimates agree within their noise.
    clean, defected = _planted(7)
    c, d = align(clean, defected)
    sign = np.array([1.0, 1.0])
    thr = float(norm.isf(0.05 / 2))
    strength = 0.03
    got = power(clean, defected, sign, {"a:failure_rate": thr, "b:failure_rate": thr}, strengths=(strength,),
                draws=400, seed=0)
    point = next(p for p in got.curve if p.strength == strength)
    rng = np.random.default_rng(99)
    fails = []
    for _ in range(400):
        cand = np.zeros(USERS)
        cand[rng.permutation(USERS)[: USERS // 2]] = 1.0
        r0, r1 = c.rows[0], d.rows[0]
        hit = (cand[r0.user] == 1) & (rng.random(len(r0.y)) < strength)
        mixed = _present(MeasureRows(unit_ids=r0.unit_ids, user=r0.user, y=np.where(hit, r1.y, r0.y),
                                     x=np.where(hit, r1.x, r0.x)))
        a = (1 - cand) @ user_stats(_present(r0), USERS)
        b = cand @ user_stats(mixed, USERS)
        fails.append(float(change(a[None, :], b[None, :], sign[:1]).z[0] > thr))
    want = float(np.mean(fails))
    assert 0.2 < want < 0.9  # a strength where power is informative
    noise = math.sqrt(want * (1 - want) * (1 / 400 + 1 / 400))
    assert abs(point.power - want) < 4 * noise, (point.power, want)


def test_a_defect_with_no_effect_is_caught_at_the_false_alarm_rate() -> None:
    clean, _ = _planted(4, extra=False)
    thr = float(norm.isf(0.05))  # one metric at a one-sided 5% level
    got = power(clean, clean, np.array([1.0, 1.0]), {"a:failure_rate": thr, "b:failure_rate": thr},
                strengths=(0.5, 1.0), draws=2000, seed=1)
    assert [p.strength for p in got.curve] == [0.5, 1.0]  # nothing to extend: the strongest is all rows
    for p in got.curve:
        assert p.effect == 0.0
        assert 0.025 <= p.power <= 0.08  # 5% +- 3.5 binomial sd of 2,000 draws, with the test's own slack
    assert got.mde is None and got.per_metric_mde == {}


def test_latency_factors_move_the_log_measure_by_exactly_the_factor() -> None:
    rng = np.random.default_rng(5)
    counts = rng.integers(1, 8, size=USERS)
    user = np.repeat(np.arange(USERS), counts)
    y0 = rng.normal(0.0, 0.8, USERS)[user] + rng.normal(0.0, 0.5, len(user))
    ids = tuple(f"t{i}" for i in range(len(user)))
    users = tuple(f"u{i}" for i in range(USERS))
    m = (_measure("lat", "log"),)
    clean = GateColumns(users=users, measures=m, rows=(MeasureRows(ids, user, y0, np.ones(len(user))),))
    defected = GateColumns(users=users, measures=m,
                           rows=(MeasureRows(ids, user, y0 + math.log(2.0), np.ones(len(user))),))
    got = power(clean, defected, np.array([1.0]), {"lat:latency_gm_ratio": float(norm.isf(0.05))},
                strengths=(1.05, 1.1, 1.3), draws=200, seed=0, scale_from=2.0)
    assert got.unit == "%"
    for p in got.curve:
        assert p.effect == pytest.approx((p.strength - 1.0) * 100.0, rel=1e-9)
    assert got.curve[-1].power >= 0.95
    assert got.mde is not None and 5.0 < got.mde < 30.0


def test_power_refuses_a_measure_without_threshold() -> None:
    clean, defected = _planted(6)
    with pytest.raises(ValueError, match="no threshold for measure"):
        power(clean, defected, np.array([1.0, 1.0]), {"a:failure_rate": 2.0}, strengths=(0.1,))

