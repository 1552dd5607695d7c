"""Rank AUC of a score against a binary outcome, with a cluster bootstrap interval.

The AUC is the probability that a randomly chosen positive unit (e.g. a failed task) scores higher than a
randomly chosen negative one, ties counting one half: the Mann-Whitney U statistic over n1 * n0. A flag that
means "bad" should have an AUC above 0.5 against failure; one whose interval lies wholly under 0.5 points the
other way. Units of one cluster (the trials of one task, the sessions of one user) are not independent, so
the interval resamples whole clusters. Pure and deterministic: randomness only through `seed`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from agent_factory.frozen import Frozen

VERSION = "1"
"""Version of the AUC estimator and its interval."""


class AUC(Frozen):
    """A rank AUC with its cluster bootstrap percentile interval."""

    value: float | None
    """The AUC; None when either class is empty."""
    low: float | None = None
    """Lower end of the interval (None when it cannot be computed)."""
    high: float | None = None
    """Upper end of the interval."""
    n_pos: int
    """Positive units (outcome true)."""
    n_neg: int
    """Negative units."""
    clusters: int
    """Distinct clusters."""
    note: str = ""
    """Why the interval is missing or degenerate, if it is."""
    version: str = VERSION
    """Version of the estimator."""


def rank_auc(scores: Sequence[float] | np.ndarray, outcomes: Sequence[bool] | np.ndarray) -> float | None:
    """P(score of a positive > score of a negative) + P(tie) / 2; None when a class is empty."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(outcomes, dtype=bool)
    if s.shape != y.shape:
        raise ValueError(f"scores and outcomes differ in length ({s.size} vs {y.size})")
    n1 = int(y.sum())
    n0 = int(y.size - n1)
    if n1 == 0 or n0 == 0:
        return None
    from scipy.stats import rankdata  # scipy.stats takes seconds to import: only where an interval is computed
    ranks = rankdata(s)  # mid-ranks: ties count one half
    u = float(ranks[y].sum()) - n1 * (n1 + 1) / 2.0
    return u / (n1 * n0)


def cluster_auc(
    scores: Sequence[float], outcomes: Sequence[bool], clusters: Sequence[Hashable], *,
    n_boot: int = 2000, seed: int = 0, confidence: float = 0.95,
) -> AUC:
    """The AUC and a percentile interval from resampling whole clusters with replacement."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(outcomes, dtype=bool)
    if not (s.size == y.size == len(clusters)):
        raise ValueError("scores, outcomes and clusters must have the same length")
    keys = {c: i for i, c in enumerate(dict.fromkeys(clusters))}
    cid = np.fromiter((keys[c] for c in clusters), dtype=np.int64, count=len(clusters))
    value = rank_auc(s, y)
    n1 = int(y.sum())
    base = {"n_pos": n1, "n_neg": int(y.size) - n1, "clusters": len(keys)}
    if value is None:
        return AUC(value=None, note="one outcome class is empty", **base)
    if len(keys) < 2:
        return AUC(value=value, note="a single cluster: no interval", **base)
    members = [np.flatnonzero(cid == k) for k in range(len(keys))]
    rng = np.random.default_rng(seed)
    draws: list[float] = []
    for _ in range(n_boot):
        pick = np.concatenate([members[k] for k in rng.integers(0, len(keys), size=len(keys))])
        a = rank_auc(s[pick], y[pick])
        if a is not None:
            draws.append(a)
    if len(draws) < n_boot // 2:
        return AUC(value=value, note=f"only {len(draws)} of {n_boot} resamples had both classes", **base)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(np.asarray(draws), [alpha, 1.0 - alpha])
    return AUC(value=value, low=float(low), high=float(high),
               note=f"cluster bootstrap over {len(keys)} clusters, {len(draws)} resamples", **base)
