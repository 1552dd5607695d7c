"""The result types shared by the statistics helpers: a point estimate with its interval."""

from __future__ import annotations

from pydantic import Field

from agent_factory.frozen import Frozen

VERSION = "1"



class Estimate(Frozen):
    """A point estimate with a two-sided confidence interval.

    `value` is None when the quantity is undefined for the data (no units, zero variance where a ratio needs
    it, ...); `note` then says why. The interval may be None while the value is defined (for example a single
    cluster gives a mean but no cluster interval); `note` says why in that case too.
    """

    value: float | None
    """The point estimate; None when undefined for this data."""
    low: float | None
    """Lower end of the interval; None when no interval can be computed."""
    high: float | None
    """Upper end of the interval; None when no interval can be computed."""
    n: int = Field(ge=0)
    """Number of observations (trials, sampled units, ratings) the estimate rests on."""
    method: str
    """The rule that produced the estimate (e.g. `wilson`, `stratified_normal`, `cluster_bootstrap_percentile`)."""
    confidence: float = Field(gt=0.0, lt=1.0)
    """Nominal two-sided coverage of the interval (0.95 for a 95% interval)."""
    n_clusters: int | None = Field(default=None, ge=0)
    """Number of independent clusters (users) when the estimate accounts for clustering; else None."""
    note: str | None = None
    """Why the value or the interval is missing, or a caveat on how to read it; None when nothing to say."""


def check_confidence(confidence: float) -> None:
    """Raise ValueError unless 0 < confidence < 1."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")


def normal_quantile(p: float) -> float:
    """The standard normal quantile at `p` (`scipy.stats.norm.ppf`, bit for bit: both are `scipy.special.ndtri`).
    scipy.special, not scipy.stats: importing scipy.stats took half a second of a one-second analysis phase."""
    from scipy.special import ndtri

    return float(ndtri(p))


def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z (`scipy.stats.norm.sf`, bit for bit: both are `scipy.special.ndtr(-z)`)."""
    from scipy.special import ndtr

    return float(ndtr(-z))
