"""Precision and recall of a detector (a rule) against a reference rater, with user-bootstrap intervals
(docs/method.md section 6: "rule recall against collected data decides what a model must collect instead").

Per unit: did the detector fire, did the reference. Precision = both / detector's detections, recall = both /
reference's detections. Both are ratios of counts that add over units, so each user is reduced to its three
counts (both, detector, reference) and a bootstrap replicate is a weighted sum (`stats.agreement_ci`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from pydantic import Field

from agent_factory.evaluators.stats.agreement_ci import percentile_interval, replicate_sums
from agent_factory.frozen import Frozen

VERSION = "1"


class Detection(Frozen):
    """A detector's precision and recall against a reference, with 95% intervals resampling users."""

    n: int = Field(ge=0)
    """Units compared."""
    detected: int = Field(ge=0)
    """Units the detector fired on."""
    reference: int = Field(ge=0)
    """Units the reference fired on."""
    both: int = Field(ge=0)
    """Units both fired on."""
    precision: float | None
    """both / detected; None when the detector never fired."""
    precision_low: float | None = None
    """Lower end of precision's interval."""
    precision_high: float | None = None
    """Upper end."""
    recall: float | None
    """both / reference; None when the reference never fired."""
    recall_low: float | None = None
    """Lower end of recall's interval."""
    recall_high: float | None = None
    """Upper end."""
    n_clusters: int = Field(ge=0)
    """Users among the units."""
    note: str | None = None
    """Why a value or an interval is missing."""


def detection_rates(
    detected: Sequence[bool] | np.ndarray,
    reference: Sequence[bool] | np.ndarray,
    clusters: Sequence[Hashable],
    *,
    seed: int = 0,
    n_boot: int = 1000,
    confidence: float = 0.95,
) -> Detection:
    """Precision and recall of `detected` against `reference` (one bool each per unit, `clusters` its user),
    with percentile intervals from a bootstrap over users (replicates where a ratio's denominator is 0 are
    handled by `percentile_interval`)."""
    d = np.asarray(detected, dtype=bool).ravel()
    r = np.asarray(reference, dtype=bool).ravel()
    labels = list(clusters)
    if d.size != r.size or len(labels) != d.size:
        raise ValueError(f"detected ({d.size}), reference ({r.size}) and clusters ({len(labels)}) differ in length")
    order = {key: i for i, key in enumerate(sorted(set(labels), key=repr))}
    g = len(order)
    member = np.fromiter((order[key] for key in labels), dtype=np.intp, count=d.size)
    both = d & r
    counts = dict(n=int(d.size), detected=int(d.sum()), reference=int(r.sum()), both=int(both.sum()), n_clusters=g)
    precision = counts["both"] / counts["detected"] if counts["detected"] else None
    recall = counts["both"] / counts["reference"] if counts["reference"] else None
    notes = [
        why for why, missing in (
            ("the detector never fired: no precision", precision is None),
            ("the reference never fired: no recall", recall is None),
        ) if missing
    ]
    if g < 2:
        notes.append("fewer than 2 users: no user-clustered interval")
        return Detection(precision=precision, recall=recall, note="; ".join(notes) or None, **counts)
    per_cluster = np.stack(
        [np.bincount(member, weights=x.astype(float), minlength=g) for x in (both, d, r)], axis=1
    )
    sums = replicate_sums(per_cluster, n_boot, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_reps = np.where(sums[:, 1] > 0, sums[:, 0] / sums[:, 1], np.nan)
        r_reps = np.where(sums[:, 2] > 0, sums[:, 0] / sums[:, 2], np.nan)
    p_low = p_high = r_low = r_high = None
    if precision is not None:
        p_low, p_high, p_note = percentile_interval(p_reps, confidence)
        if p_note:
            notes.append(f"precision: {p_note}")
    if recall is not None:
        r_low, r_high, r_note = percentile_interval(r_reps, confidence)
        if r_note:
            notes.append(f"recall: {r_note}")
    return Detection(
        precision=precision, precision_low=p_low, precision_high=p_high, recall=recall, recall_low=r_low,
        recall_high=r_high, note="; ".join(notes) or None, **counts,
    )
