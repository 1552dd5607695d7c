"""User-clustered bootstrap intervals for agreement coefficients, vectorised (docs/method.md sections 6 and 7).

Cohen's kappa, Fleiss' kappa and Krippendorff's alpha are functions of counts that add over units: a contingency
table (Cohen), per-category totals and sums of squared counts (Fleiss), a coincidence matrix (alpha). So each user
(cluster) is reduced once to its counts, and a bootstrap replicate, which draws G users with replacement, is a
weighted sum of those per-user counts: the weights are the multinomial draw counts, and every replicate is one
row of a matrix product. Nothing loops over units or Python objects per replicate.

Replicates where a coefficient is undefined (e.g. every drawn label in one category) are left out of the
percentile interval as long as they are at most `MAX_UNDEFINED_SHARE` of the replicates; beyond that the
interval is not given, because the percentiles of the rest would describe a different population.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from agent_factory.evaluators.stats.estimate import check_confidence

VERSION = "1"

MAX_UNDEFINED_SHARE = 0.05
"""Largest share of bootstrap replicates with an undefined statistic that still gives an interval: a few
degenerate draws are a small-sample accident; more mean the coefficient is unstable on these data."""

_CHUNK_CELLS = 4_000_000
"""Largest replicates x clusters weight matrix drawn at once (32 MB of int64): bounds memory for many users."""


def bootstrap_weights(n_clusters: int, n_boot: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Chunks of the replicate x cluster weight matrix: row b counts how often each cluster was drawn in
    replicate b (G draws with replacement, so each row is multinomial(G, 1/G) and sums to G)."""
    if n_clusters < 1 or n_boot < 1:
        raise ValueError(f"need at least one cluster and one replicate, got {n_clusters} and {n_boot}")
    step = max(1, _CHUNK_CELLS // n_clusters)
    done = 0
    while done < n_boot:
        size = min(step, n_boot - done)
        # G uniform draws per replicate, counted per cluster in one bincount (row b's draws offset by b * G)
        drawn = rng.integers(0, n_clusters, size=(size, n_clusters)) + (np.arange(size) * n_clusters)[:, None]
        yield np.bincount(drawn.ravel(), minlength=size * n_clusters).reshape(size, n_clusters)
        done += size


def replicate_sums(per_cluster: np.ndarray, n_boot: int, seed: int | np.random.Generator) -> np.ndarray:
    """n_boot x d sums of per-cluster statistics (G x d) over user-bootstrap replicates."""
    stats = np.asarray(per_cluster, dtype=float)
    if stats.ndim != 2:
        raise ValueError(f"per-cluster statistics must be clusters x d, got shape {stats.shape}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    # float weights: an integer matrix product does not reach BLAS and measured ten times slower
    parts = [weights.astype(np.float64) @ stats for weights in bootstrap_weights(stats.shape[0], n_boot, rng)]
    return np.concatenate(parts, axis=0)


def cohen_from_tables(tables: np.ndarray) -> np.ndarray:
    """Cohen's kappa of each K x K contingency table in a stack (... x K x K); NaN where undefined (no items
    or P_e = 1)."""
    t = np.asarray(tables, dtype=float)
    n = t.sum(axis=(-2, -1))
    agree = np.trace(t, axis1=-2, axis2=-1)
    chance = (t.sum(axis=-1) * t.sum(axis=-2)).sum(axis=-1)
    denominator = n * n - chance
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = (n * agree - chance) / denominator
    result: np.ndarray = np.where((n > 0) & (denominator > 0), kappa, np.nan)
    return result


def fleiss_from_sums(squares: np.ndarray, units: np.ndarray, totals: np.ndarray, raters: int) -> np.ndarray:
    """Fleiss' kappa from summed unit statistics: `squares` = sum over units of sum_j n_ij^2, `units` = number
    of units, `totals` (... x K) = sum over units of n_ij, every unit rated by `raters` raters. NaN where
    undefined (no units, or every rating in one category)."""
    sq, n = np.asarray(squares, dtype=float), np.asarray(units, dtype=float)
    tot = np.asarray(totals, dtype=float)
    m = float(raters)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_bar = (sq - m * n) / (m * (m - 1.0) * n)
        shares = tot / (m * n)[..., None]
        p_e = (shares * shares).sum(axis=-1)
        kappa = (p_bar - p_e) / (1.0 - p_e)
    result: np.ndarray = np.where((n > 0) & (np.count_nonzero(tot, axis=-1) > 1), kappa, np.nan)
    return result


def percentile_interval(
    replicates: np.ndarray, confidence: float
) -> tuple[float | None, float | None, str | None]:
    """Percentile interval of bootstrap replicates: (low, high, note). Undefined (NaN) replicates are dropped
    up to `MAX_UNDEFINED_SHARE`, and the note counts them; beyond it no interval."""
    check_confidence(confidence)
    reps = np.asarray(replicates, dtype=float).ravel()
    if reps.size == 0:
        return None, None, "no bootstrap replicates"
    finite = reps[np.isfinite(reps)]
    bad = reps.size - finite.size
    if bad > MAX_UNDEFINED_SHARE * reps.size:
        return None, None, f"undefined on {bad} of {reps.size} bootstrap replicates: no interval"
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    notes = [f"undefined on {bad} of {reps.size} bootstrap replicates (left out)"] if bad else []
    if low == high:
        # e.g. no disagreement in any drawn user: the data show no variation, not certainty
        notes.append(f"every replicate gave {float(low):.3g}: a single-point interval understates the uncertainty")
    return float(low), float(high), "; ".join(notes) or None
