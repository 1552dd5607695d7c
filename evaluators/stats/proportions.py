"""Binomial proportions: a confidence interval for one rate and a z test comparing two.

Trials here are treated as independent. For turns of the same user that is false (docs/method.md section 7: a
per-turn A/A test raised a false alarm in 98% of splits); use `clustered` for anything the gate decides on.
"""

from __future__ import annotations

import math
from numbers import Integral
from typing import Literal

from pydantic import Field

from agent_factory.evaluators.stats.estimate import Estimate, check_confidence, normal_quantile, normal_sf
from agent_factory.frozen import Frozen

VERSION = "1"

ProportionMethod = Literal["wilson", "clopper_pearson"]
"""`wilson`: score interval, good coverage at small n; `clopper_pearson`: exact, conservative."""

_SCIPY_METHOD: dict[str, Literal["wilson", "exact"]] = {"wilson": "wilson", "clopper_pearson": "exact"}


class ProportionTest(Frozen):
    """A comparison of two rates: group 1 against group 2, difference taken as p1 - p2."""

    p1: float | None
    """Rate of group 1; None when group 1 is empty."""
    p2: float | None
    """Rate of group 2; None when group 2 is empty."""
    diff: float | None
    """p1 - p2; None when either rate is undefined."""
    se: float | None
    """Standard error of the difference used for z; None when it cannot be computed."""
    z: float | None
    """diff / se; None when undefined (empty group, or no variation at all so se = 0)."""
    p_value: float | None
    """Two-sided p value of z under the standard normal; None when z is None."""
    n1: int = Field(ge=0)
    """Trials in group 1."""
    n2: int = Field(ge=0)
    """Trials in group 2."""
    clusters1: int | None = Field(default=None, ge=0)
    """Clusters (users) in group 1 for a clustered test; None for a per-trial test."""
    clusters2: int | None = Field(default=None, ge=0)
    """Clusters (users) in group 2 for a clustered test; None for a per-trial test."""
    method: str
    """`pooled_z` (per-trial) or `cluster_ratio_z` (user-clustered)."""
    note: str | None = None
    """Why z is missing, when it is."""


def check_count(successes: object, n: object) -> tuple[int, int]:
    """Both counts as plain ints; ValueError unless they are integers with 0 <= successes <= n."""
    if not isinstance(successes, Integral) or not isinstance(n, Integral):
        raise ValueError(f"successes and n must be integers, got {successes!r}, {n!r}")
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    return int(successes), int(n)


def proportion_ci(
    successes: int,
    n: int,
    *,
    confidence: float = 0.95,
    method: ProportionMethod = "wilson",
) -> Estimate:
    """Rate successes / n with a two-sided interval (scipy's binomtest intervals).

    n = 0 gives value, low and high None with a note: an empty denominator is reported, never divided by.
    """
    successes, n = check_count(successes, n)
    check_confidence(confidence)
    if method not in _SCIPY_METHOD:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(_SCIPY_METHOD)}")
    if n == 0:
        return Estimate(
            value=None, low=None, high=None, n=0, method=method, confidence=confidence,
            note="n = 0: no trials, the rate is undefined",
        )
    if method == "wilson":
        low, high = wilson_interval(successes, n, confidence=confidence)
    else:
        from scipy import stats  # scipy.stats takes half a second to import: only for the exact interval
        ci = stats.binomtest(successes, n).proportion_ci(confidence_level=confidence, method=_SCIPY_METHOD[method])
        low, high = float(ci.low), float(ci.high)
    return Estimate(value=successes / n, low=low, high=high, n=n, method=method, confidence=confidence)


def wilson_interval(successes: float, n: int, *, confidence: float) -> tuple[float, float]:
    """The two-sided Wilson score interval (Newcombe 1998, no continuity correction), as scipy's
    `binomtest(...).proportion_ci(method="wilson")` computes it, operation for operation, so the bounds are the
    same floats (the tests check it over a grid of counts), without importing scipy.stats."""
    p = successes / n
    z = normal_quantile(0.5 + 0.5 * confidence)
    denom = 2 * (n + z**2)
    center = (2 * n * p + z**2) / denom
    delta = z / denom * math.sqrt(4 * n * p * (1 - p) + z**2)
    return (0.0 if successes == 0 else center - delta), (1.0 if successes == n else center + delta)


def newcombe_interval(x1: float, n1: int, x2: float, n2: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Newcombe's hybrid score interval of p1 - p2 (Newcombe 1998, method 10; statsmodels'
    `confint_proportions_2indep(method="newcomb")`) from the two Wilson intervals (l_i, u_i):
    low = d - sqrt((p1 - l1)^2 + (u2 - p2)^2), high = d + sqrt((u1 - p1)^2 + (p2 - l2)^2).

    Unlike a Wald interval it does not shrink to a point when a group has no variation (0 of n or n of n):
    the Wilson bound of that group stays away from its rate by about z^2 / (n + z^2). The counts may be sums
    of values in [0, 1] (a mean reward), for which the binomial variance p (1 - p) is an upper bound.
    Both groups need at least one trial; trials are treated as independent."""
    check_confidence(confidence)
    if n1 <= 0 or n2 <= 0:
        raise ValueError(f"newcombe_interval needs trials in both groups, got n1={n1}, n2={n2}")
    if not (0.0 <= x1 <= n1 and 0.0 <= x2 <= n2):
        raise ValueError(f"need 0 <= x <= n in both groups, got x1={x1}, n1={n1}, x2={x2}, n2={n2}")
    p1, p2 = x1 / n1, x2 / n2
    l1, u1 = wilson_interval(x1, n1, confidence=confidence)
    l2, u2 = wilson_interval(x2, n2, confidence=confidence)
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def two_proportion_z(x1: int, n1: int, x2: int, n2: int) -> ProportionTest:
    """Pooled two-sample z test of x1/n1 against x2/n2, trials assumed independent.

    se = sqrt(p (1 - p) (1/n1 + 1/n2)) with p the pooled rate. When all trials agree (p = 0 or 1) the
    difference is 0 and se is 0: z is then None with a note rather than 0/0.
    """
    x1, n1 = check_count(x1, n1)
    x2, n2 = check_count(x2, n2)
    p1 = x1 / n1 if n1 else None
    p2 = x2 / n2 if n2 else None
    if p1 is None or p2 is None:
        return ProportionTest(
            p1=p1, p2=p2, diff=None, se=None, z=None, p_value=None, n1=n1, n2=n2, method="pooled_z",
            note="a group has no trials",
        )
    pooled = (x1 + x2) / (n1 + n2)
    se = math.sqrt(pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2))
    return finish_test(p1, p2, se, n1=n1, n2=n2, method="pooled_z")


def finish_test(
    p1: float,
    p2: float,
    se: float | None,
    *,
    n1: int,
    n2: int,
    method: str,
    clusters1: int | None = None,
    clusters2: int | None = None,
    undefined_se: str = "standard error undefined",
) -> ProportionTest:
    """Build the test result from two rates and the standard error of their difference (None: say why)."""
    diff = p1 - p2
    if se is None or se == 0.0 or not math.isfinite(se):
        note = "no variation in either group: se = 0, z undefined" if se == 0.0 else undefined_se
        return ProportionTest(
            p1=p1, p2=p2, diff=diff, se=se, z=None, p_value=None, n1=n1, n2=n2,
            clusters1=clusters1, clusters2=clusters2, method=method, note=note,
        )
    z = diff / se
    return ProportionTest(
        p1=p1, p2=p2, diff=diff, se=se, z=z, p_value=2.0 * normal_sf(abs(z)), n1=n1, n2=n2,
        clusters1=clusters1, clusters2=clusters2, method=method,
    )
