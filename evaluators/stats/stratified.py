"""Stratified mean: the Substance score S over a sample drawn per stratum (docs/method.md section 4).

Each sampled unit of stratum h stands for w_h = N_h / n_h units of the population, so the estimate is
sum_h N_h * mean_h / sum_h N_h. Its variance is the textbook stratified formula with a finite population
correction, sum_h W_h^2 (1 - n_h / N_h) s_h^2 / n_h with W_h = N_h / N, and the interval is the normal
approximation mean +/- z * sqrt(variance). The interval is not clipped to any range.

A stratum with population but no sampled unit cannot be estimated: it is listed in `unsampled`, the estimate
covers the sampled strata only, and `population_covered` says which share of the population that is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Integral

import numpy as np
from pydantic import Field

from agent_factory.evaluators.stats.estimate import Estimate, check_confidence, normal_quantile
from agent_factory.frozen import Frozen

VERSION = "1"


class StratumSummary(Frozen):
    """One stratum's part in a stratified estimate."""

    name: str
    """Stratum name (e.g. a mode: `deep`, `normal`, `simple`)."""
    population: int = Field(ge=0)
    """N_h: units of the population in this stratum."""
    sampled: int = Field(ge=0)
    """n_h: sampled units with a value."""
    mean: float | None
    """Mean of the sampled values; None when n_h = 0."""
    variance: float | None
    """Sample variance s_h^2 (ddof = 1); None when n_h < 2."""
    weight: float | None
    """w_h = N_h / n_h, the population units each sampled unit stands for; None when n_h = 0."""


class StratifiedEstimate(Estimate):
    """A stratified mean with the strata it rests on, including those that could not be estimated."""

    strata: tuple[StratumSummary, ...]
    """Every stratum named in either input, sorted by name."""
    unsampled: tuple[str, ...]
    """Strata with population > 0 but no sampled unit; the estimate does not cover them."""
    population_covered: float | None
    """Share of the total population that lies in sampled strata; None when the population is empty."""


def _values(name: str, raw: Sequence[float]) -> np.ndarray:
    arr = np.asarray(list(raw), dtype=float)
    if arr.ndim != 1 or not np.all(np.isfinite(arr)):
        raise ValueError(f"stratum {name!r}: values must be a flat sequence of finite numbers")
    return arr


def stratified_mean(
    values_by_stratum: Mapping[str, Sequence[float]],
    population_by_stratum: Mapping[str, int],
    *,
    confidence: float = 0.95,
) -> StratifiedEstimate:
    """Population-weighted mean over strata with a normal-approximation interval.

    `values_by_stratum[h]` are the values of the sampled units of stratum h; `population_by_stratum[h]` is
    N_h. A stratum only in the population mapping counts as sampled with n_h = 0. Raises ValueError for a
    sampled stratum with no population entry, n_h > N_h, or non-finite values.

    The interval is None when a stratum has exactly one sampled unit out of more than one (its variance
    cannot be estimated); a fully enumerated stratum (n_h = N_h) adds no variance whatever its size.
    """
    check_confidence(confidence)
    missing = sorted(set(values_by_stratum) - set(population_by_stratum))
    if missing:
        raise ValueError(f"strata with values but no population size: {', '.join(missing)}")

    summaries: list[StratumSummary] = []
    arrays: dict[str, np.ndarray] = {}
    for name in sorted(population_by_stratum):
        raw_n: object = population_by_stratum[name]  # checked: callers may pass floats or numpy values
        if not isinstance(raw_n, Integral) or raw_n < 0:
            raise ValueError(f"stratum {name!r}: population must be a non-negative integer, got {raw_n!r}")
        big_n = int(raw_n)
        arr = _values(name, values_by_stratum.get(name, ()))
        n_h = int(arr.size)
        if n_h > big_n:
            raise ValueError(f"stratum {name!r}: {n_h} sampled units exceed its population {big_n}")
        arrays[name] = arr
        summaries.append(
            StratumSummary(
                name=name,
                population=big_n,
                sampled=n_h,
                mean=float(arr.mean()) if n_h else None,
                variance=float(arr.var(ddof=1)) if n_h >= 2 else None,
                weight=big_n / n_h if n_h else None,
            )
        )

    total_population = sum(s.population for s in summaries)
    sampled = [s for s in summaries if s.sampled > 0]
    covered = sum(s.population for s in sampled)
    unsampled = tuple(s.name for s in summaries if s.sampled == 0 and s.population > 0)
    n_total = sum(s.sampled for s in sampled)
    common = dict(
        n=n_total,
        method="stratified_normal",
        confidence=confidence,
        strata=tuple(summaries),
        unsampled=unsampled,
        population_covered=covered / total_population if total_population else None,
    )
    notes: list[str] = []
    if unsampled:
        notes.append(f"strata without a sampled unit are not covered: {', '.join(unsampled)}")
    if not sampled:
        notes.insert(0, "no sampled unit in any stratum: the mean is undefined")
        return StratifiedEstimate(value=None, low=None, high=None, note="; ".join(notes), **common)

    value = sum(s.population * s.mean for s in sampled if s.mean is not None) / covered  # sampled: all have one
    variance = 0.0
    single = []
    for s in sampled:
        fpc = 1.0 - s.sampled / s.population
        if fpc == 0.0:
            continue  # a census of the stratum: no sampling error, whatever its size
        if s.variance is None:
            single.append(s.name)
            continue
        share = s.population / covered
        variance += share * share * fpc * s.variance / s.sampled
    if single:
        notes.append(f"one sampled unit out of several, variance not estimable: {', '.join(single)}")
        return StratifiedEstimate(value=value, low=None, high=None, note="; ".join(notes), **common)

    half = normal_quantile(0.5 + confidence / 2.0) * math.sqrt(variance)
    return StratifiedEstimate(
        value=value, low=value - half, high=value + half, note="; ".join(notes) or None, **common,
    )
