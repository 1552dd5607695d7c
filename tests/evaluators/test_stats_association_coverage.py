"""Coverage of the flag-outcome interval by simulation: small groups (3 to 30 units a side), rates near 0 and 1,
sides without variation, users holding several units. A planted truth is covered at least at the nominal rate
less a Monte-Carlo tolerance.

The tolerance: each check pools R independent draws, each covering the truth or not; if the true coverage were
the nominal 0.95, the share covered would have a standard error sqrt(0.95 * 0.05 / R) (0.0031 at R = 5,000), and
it falls more than 3 of those below 0.95 with probability 0.0013. So a check fails for a real shortfall, not for
a seed's luck. Coverage is pooled over settings drawn at random (Newcombe 1998 judged intervals by coverage over
the parameter space), because a discrete outcome's coverage zigzags from one (n, p) to the next.

The old interval (the cluster-robust normal one alone) is run on the same draws as a control: it must fail the
check, or the simulation would not tell a good interval from a bad one.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.findings.flags import FlagRow
from agent_factory.evaluators.findings.outcomes import MIN_GROUP_N, TOO_SMALL, associations
from agent_factory.evaluators.stats.association import cluster_mean_difference
from agent_factory.evaluators.stats.proportions import newcombe_interval, wilson_interval

NOMINAL = 0.95
Z = 1.959963984540054
DRAWS = 5000
NEAR_EDGES = (0.0, 0.02, 0.05, 0.1, 0.9, 0.95, 0.98, 1.0)
"""Rates near 0 and 1, where a side most often shows no variation (0 of n or n of n)."""
ANY_RATE = (*NEAR_EDGES, 0.3, 0.5, 0.7)


def floor(draws: int) -> float:
    """Nominal coverage less three Monte-Carlo standard errors of a share over `draws` draws (module docstring)."""
    return NOMINAL - 3.0 * math.sqrt(NOMINAL * (1.0 - NOMINAL) / draws)


def covered(values: list[float], flagged: list[bool], users: list[int], truth: float) -> tuple[bool, bool]:
    """Whether the interval covers `truth`, and whether the old normal interval diff +- z se would have."""
    md = cluster_mean_difference(values, flagged, users)
    assert md.diff is not None and md.se is not None and md.low is not None and md.high is not None
    return md.low <= truth <= md.high, md.diff - Z * md.se <= truth <= md.diff + Z * md.se


def test_binary_outcome_small_groups_rates_near_0_and_1_cover() -> None:
    """Independent units (one per user), n 3..30 a side, rates drawn near 0 and 1: the difference of rates."""
    rng = np.random.default_rng(2026)
    new = old = 0
    for _ in range(DRAWS):
        n1, n0 = (int(k) for k in rng.integers(3, 31, size=2))
        p1, p0 = (float(p) for p in rng.choice(NEAR_EDGES, size=2))
        y = [*(rng.random(n1) < p1).astype(float), *(rng.random(n0) < p0).astype(float)]
        a, b = covered(y, [True] * n1 + [False] * n0, list(range(n1 + n0)), p1 - p0)
        new, old = new + a, old + b
    assert new / DRAWS >= floor(DRAWS)
    assert old / DRAWS < floor(DRAWS)  # the control: the interval this replaces collapses on 0 of n


def test_binary_outcome_clustered_users_cover() -> None:
    """Users with 1 to 4 conversations each and a user effect (half the users are hard: every rate lower), the
    flag drawn per conversation; the truth is the difference of the two marginal rates."""
    rng = np.random.default_rng(32)
    new = draws = 0
    while draws < DRAWS:
        users = int(rng.integers(3, 16))
        p1e, p0e = (float(p) for p in rng.choice(ANY_RATE, size=2))
        hard = 0.5  # a hard user's rates are half the easy one's
        sizes = rng.integers(1, 5, size=users)
        member = np.repeat(np.arange(users), sizes)
        is_hard = rng.random(users) < 0.5
        flag = rng.random(member.size) < 0.4
        rate = np.where(flag, p1e, p0e) * np.where(is_hard[member], hard, 1.0)
        y = (rng.random(member.size) < rate).astype(float)
        if min(len(set(member[flag])), len(set(member[~flag]))) < 2:
            continue  # no interval by design (one user on a side); not a draw of the interval
        truth = (p1e - p0e) * (1.0 + hard) / 2.0
        a, _ = covered(y.tolist(), flag.tolist(), member.tolist(), truth)
        new, draws = new + a, draws + 1
    assert new / DRAWS >= floor(DRAWS)


def test_continuous_outcome_with_a_constant_side_covers() -> None:
    """A reward on an open scale: the flagged side constant (every flagged task scored the same), the other
    normal; n 3..30 a side. The old interval takes the constant side as certain."""
    rng = np.random.default_rng(7)
    new = old = 0
    for _ in range(DRAWS):
        n1, n0 = (int(k) for k in rng.integers(3, 31, size=2))
        mu1, mu0, sd0 = 2.0, float(rng.normal(2.0, 1.0)), float(rng.uniform(0.5, 3.0))
        y = [*([mu1] * n1), *rng.normal(mu0, sd0, n0)]
        a, b = covered(y, [True] * n1 + [False] * n0, list(range(n1 + n0)), mu1 - mu0)
        new, old = new + a, old + b
    assert new / DRAWS >= floor(DRAWS)
    assert old / DRAWS < floor(DRAWS)  # the control: the constant side counted as certain


@pytest.mark.parametrize(("x1", "n1", "x2", "n2", "low", "high"), [
    # statsmodels 0.15.0 `confint_proportions_2indep(x1, n1, x2, n2, method="newcomb", compare="diff")`
    (0, 5, 3, 10, -0.6032218525388546, 0.17509915711284824),
    (5, 5, 0, 3, 0.29003244519640947, 1.0),
    (2, 7, 9, 12, -0.7238047856798366, -0.010445630270473127),
    (0, 4, 4, 4, -1.0, -0.30718973500360847),
    (13, 30, 1, 29, 0.18836866079639902, 0.5758327313241722),
    (3, 3, 30, 30, -0.5614970317550456, 0.11351339317396891),
])
def test_newcombe_matches_statsmodels(x1: int, n1: int, x2: int, n2: int, low: float, high: float) -> None:
    assert newcombe_interval(x1, n1, x2, n2) == pytest.approx((low, high), abs=1e-12)


def test_newcombe_refuses_empty_groups_and_impossible_counts() -> None:
    with pytest.raises(ValueError, match="trials in both groups"):
        newcombe_interval(0, 0, 1, 3)
    with pytest.raises(ValueError, match="0 <= x <= n"):
        newcombe_interval(4, 3, 1, 3)


def test_five_failed_conversations_get_an_interval_as_wide_as_five_allow() -> None:
    """The issue's case: a flag on 5 conversations, all failed, against 30 with 40% success. The old interval
    was [-0.56, -0.30]-like; now the upper end leaves the five room to be a chance run of failures."""
    y = [0.0] * 5 + [1.0] * 12 + [0.0] * 18
    md = cluster_mean_difference(y, [True] * 5 + [False] * 30, list(range(35)))
    assert md.low is not None and md.high is not None and md.diff is not None and md.se is not None
    low, high = newcombe_interval(0, 5, 12, 30)
    # The union of Newcombe's and the cluster interval: here the cluster one reaches lower, Newcombe's higher.
    assert md.low == pytest.approx(min(low, md.diff - Z * md.se), abs=1e-12)
    assert md.high == pytest.approx(max(high, md.diff + Z * md.se), abs=1e-12)
    assert md.low < -0.56 and md.high > -0.15 and md.method == "newcombe_or_cluster"


def test_min_group_n_is_the_smallest_n_whose_extreme_rate_excludes_a_coin_flip() -> None:
    """MIN_GROUP_N from its definition: below it, even 0 of n has a Wilson interval holding 0.5."""
    assert wilson_interval(0, MIN_GROUP_N - 1, confidence=NOMINAL)[1] > 0.5
    assert wilson_interval(0, MIN_GROUP_N, confidence=NOMINAL)[1] < 0.5


def test_associations_print_no_interval_below_min_group_n() -> None:
    spec = FlagSpec(id="x.bad", component="x", layer="conversation", label="bad", item="x.bad", raised=("yes",))

    def rows(n_with: int, n_without: int) -> tuple[list[FlagRow], dict[str, float]]:
        out = [FlagRow(unit_id=f"c{i}", layer="conversation", conversation_id=f"c{i}", user_id=f"u{i}",
                       component="x", flag="x.bad", value=1 if i < n_with else 0)
               for i in range(n_with + n_without)]
        return out, {r.unit_id: (0.0 if r.value == 1 else float(i % 2)) for i, r in enumerate(out)}

    small, reward = rows(MIN_GROUP_N - 1, 20)
    (a,) = associations((spec,), small, {"task_reward": reward}, level="conversation")
    assert a.diff is not None and a.low is None and a.high is None and a.note == TOO_SMALL
    assert "n too small" in TOO_SMALL and str(MIN_GROUP_N) in TOO_SMALL
    enough, reward = rows(MIN_GROUP_N, 20)
    (b,) = associations((spec,), enough, {"task_reward": reward}, level="conversation")
    assert b.low is not None and b.high is not None and b.diff is not None and b.low < b.diff < b.high
    assert b.note is None
