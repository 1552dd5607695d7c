"""Krippendorff's alpha for nominal data with missing labels, from the coincidence matrix (docs/method.md
section 6).

A reliability data matrix is units x raters of category indices, -1 where a rater gave no label. Per unit u with
m_u >= 2 labels (a *pairable* unit) and n_uc labels in category c, the unit adds
(n_uc n_uk - [c = k] n_uc) / (m_u - 1) to the coincidence o_ck; units with fewer than two labels add nothing.
With n_c = sum_k o_ck and n = sum_c n_c (the pairable labels),

    alpha = 1 - D_o / D_e = 1 - (n - 1) * sum_{c != k} o_ck / sum_{c != k} n_c n_k   (nominal distance).

Coincidences add over units, so the coincidence matrix of any set of units (a bootstrap replicate of users) is
a sum of per-unit (or per-user) matrices: `alpha_from_coincidence` takes a stack of them at once.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from agent_factory.frozen import Frozen

VERSION = "1"

MISSING = -1
"""The category index of a missing label in a reliability data matrix."""


class Alpha(Frozen):
    """Krippendorff's alpha (nominal) with what it rests on."""

    value: float | None
    """Alpha; None when undefined (`reason` says why)."""
    units: int = Field(ge=0)
    """Pairable units (at least two labels)."""
    labels: int = Field(ge=0)
    """Labels on the pairable units (n, the coincidence matrix's total)."""
    observed_disagreement: float | None = None
    """D_o: the share of off-diagonal coincidences."""
    expected_disagreement: float | None = None
    """D_e: the disagreement expected from the pooled label shares."""
    reason: str | None = None
    """Why `value` is None."""


def unit_counts(values: np.ndarray, categories: int) -> np.ndarray:
    """Units x categories label counts of a units x raters matrix of category indices (`MISSING` for none)."""
    data = np.asarray(values, dtype=np.int64)
    if data.ndim != 2:
        raise ValueError(f"the reliability data must be units x raters, got {data.ndim} dimension(s)")
    if np.any((data < MISSING) | (data >= categories)):
        raise ValueError(f"category indices must lie in [0, {categories}) or be {MISSING} (missing)")
    counts = np.zeros((data.shape[0], categories), dtype=np.int64)
    rows, cols = np.nonzero(data != MISSING)
    np.add.at(counts, (rows, data[rows, cols]), 1)
    return counts


def unit_coincidences(counts: np.ndarray) -> np.ndarray:
    """Per unit, its K x K coincidence contribution (units x K x K); zero for units with fewer than two labels."""
    n = np.asarray(counts, dtype=float)
    m = n.sum(axis=1)
    outer = n[:, :, None] * n[:, None, :]
    idx = np.arange(n.shape[1])
    outer[:, idx, idx] -= n
    scale = np.where(m >= 2, 1.0 / np.maximum(m - 1.0, 1.0), 0.0)
    result: np.ndarray = outer * scale[:, None, None]
    return result


def alpha_from_coincidence(coincidence: np.ndarray) -> np.ndarray:
    """Alpha of each coincidence matrix in a stack (... x K x K); NaN where undefined (fewer than two labels,
    or every label in one category so that D_e = 0)."""
    o = np.asarray(coincidence, dtype=float)
    total = o.sum(axis=(-2, -1))
    n_c = o.sum(axis=-1)
    off_observed = total - np.trace(o, axis1=-2, axis2=-1)
    off_expected = total * total - (n_c * n_c).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1.0 - (total - 1.0) * off_observed / off_expected
    defined = (total >= 2.0) & (off_expected > 0.0)
    result: np.ndarray = np.where(defined, alpha, np.nan)
    return result


def krippendorff_alpha(values: np.ndarray, categories: int) -> Alpha:
    """Krippendorff's alpha (nominal) of a units x raters matrix of category indices, `MISSING` where a rater
    gave no label. Units with fewer than two labels are left out (they carry no pairs)."""
    counts = unit_counts(values, categories)
    pairable = counts.sum(axis=1) >= 2
    o = unit_coincidences(counts[pairable]).sum(axis=0) if categories else np.zeros((0, 0))
    total = float(o.sum())
    units, labels = int(pairable.sum()), int(counts[pairable].sum())
    if total < 2.0:
        return Alpha(value=None, units=units, labels=labels, reason="fewer than two pairable labels")
    n_c = o.sum(axis=1)
    d_o = float((total - np.trace(o)) / total)
    d_e = float((total * total - n_c @ n_c) / (total * (total - 1.0)))
    if d_e == 0.0:
        return Alpha(
            value=None, units=units, labels=labels, observed_disagreement=d_o, expected_disagreement=d_e,
            reason="every label fell in one category: no disagreement is expected, alpha is undefined",
        )
    return Alpha(
        value=float(alpha_from_coincidence(o)), units=units, labels=labels, observed_disagreement=d_o,
        expected_disagreement=d_e,
    )
