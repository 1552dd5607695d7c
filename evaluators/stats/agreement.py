"""Agreement between raters on categorical data items, and the admission rule (docs/method.md section 6).

The two models of an audit are raters on the *data items* (each a yes/no or a category), not on scores.
An item enters the analysis only if cross-model kappa >= 0.60, compared at two decimals.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal
from typing import Literal

import numpy as np
from pydantic import Field

from agent_factory.frozen import Frozen

VERSION = "1"

ADMISSION_THRESHOLD = 0.60
"""Cross-model kappa an item needs to be admitted (docs/method.md section 6)."""


class Kappa(Frozen):
    """A chance-corrected agreement coefficient with the parts it is made of."""

    value: float | None
    """Kappa; None when undefined (no items, or chance agreement is 1), with `reason` saying which."""
    observed: float | None
    """Observed agreement P_o (Cohen) or mean per-item agreement P-bar (Fleiss); None with no items."""
    expected: float | None
    """Agreement expected by chance P_e; None with no items."""
    n: int = Field(ge=0)
    """Number of items rated."""
    raters: int = Field(ge=2)
    """Raters per item."""
    labels: tuple[str, ...]
    """Categories, in the order used for the tables (as `str` of the labels given)."""
    method: Literal["cohen", "fleiss"]
    """Which coefficient."""
    reason: str | None = None
    """Why `value` is None; None when it is defined."""


class Admission(Frozen):
    """Whether a data item is admitted to the analysis by its cross-model kappa."""

    admitted: bool
    """True when the kappa rounded to two decimals is at least the threshold rounded to two decimals."""
    kappa: float | None
    """The unrounded kappa, reported alongside the decision; None when undefined."""
    rounded: float | None
    """Kappa rounded to two decimals, half up; None when undefined."""
    threshold: float
    """The threshold compared against (two decimals)."""
    rule: str = "two_decimals_half_up"
    """The comparison rule, so a stored decision says how it was made."""
    reason: str
    """One line a reader can check: the values compared, or why no kappa was available."""


def _label_order(observed: Sequence[Hashable], labels: Sequence[Hashable] | None) -> list[Hashable]:
    if any(v is None for v in observed):
        raise ValueError("a rating is None: drop items a rater did not rate, or give 'not applicable' a label")
    if labels is None:
        return sorted(set(observed), key=repr)
    order = list(dict.fromkeys(labels))
    unknown = set(observed) - set(order)
    if unknown:
        raise ValueError(f"ratings outside the given labels: {sorted(map(repr, unknown))}")
    return order


def cohen_kappa(
    a: Sequence[Hashable],
    b: Sequence[Hashable],
    *,
    labels: Sequence[Hashable] | None = None,
) -> Kappa:
    """Cohen's kappa of two raters: a[i] and b[i] are their labels for item i.

    kappa = (P_o - P_e) / (1 - P_e), P_e = sum_k p_a(k) p_b(k). Computed from integer counts, so the
    degenerate case is exact: when both raters put every item in the same single category, P_e = 1 and kappa
    is None with a reason (perfect agreement that chance alone explains). `labels` fixes the category order
    and may list categories nobody used; a rating outside it raises ValueError, as does a None rating.
    """
    items_a, items_b = list(a), list(b)
    if len(items_a) != len(items_b):
        raise ValueError(f"the raters rated different numbers of items: {len(items_a)} and {len(items_b)}")
    order = _label_order(items_a + items_b, labels)
    index = {lab: i for i, lab in enumerate(order)}
    n, k = len(items_a), len(order)
    names = tuple(str(lab) for lab in order)
    if n == 0:
        return Kappa(
            value=None, observed=None, expected=None, n=0, raters=2, labels=names, method="cohen",
            reason="no items",
        )
    table = np.zeros((k, k), dtype=np.int64)
    np.add.at(table, ([index[x] for x in items_a], [index[y] for y in items_b]), 1)
    agree = int(np.trace(table))
    chance = int(table.sum(axis=1) @ table.sum(axis=0))  # n^2 * P_e, an exact integer
    common = dict(observed=agree / n, expected=chance / (n * n), n=n, raters=2, labels=names, method="cohen")
    if chance == n * n:
        return Kappa(
            value=None, reason="both raters used one and the same category for every item: P_e = 1", **common
        )
    return Kappa(value=(n * agree - chance) / (n * n - chance), **common)


def rating_counts(
    ratings: Sequence[Sequence[Hashable]],
    *,
    labels: Sequence[Hashable] | None = None,
) -> tuple[np.ndarray, tuple[Hashable, ...]]:
    """Items x categories count matrix for `fleiss_kappa` from each item's list of ratings, and the labels."""
    rows = [list(r) for r in ratings]
    order = _label_order([x for r in rows for x in r], labels)
    index = {lab: i for i, lab in enumerate(order)}
    matrix = np.zeros((len(rows), len(order)), dtype=np.int64)
    for i, row in enumerate(rows):
        for x in row:
            matrix[i, index[x]] += 1
    return matrix, tuple(order)


def fleiss_kappa(
    matrix: Sequence[Sequence[int]] | np.ndarray,
    *,
    labels: Sequence[Hashable] | None = None,
) -> Kappa:
    """Fleiss' kappa for m >= 2 raters per item: matrix[i][j] = raters who put item i in category j.

    Every row must sum to the same m. P-bar is the mean over items of
    (sum_j n_ij^2 - m) / (m (m - 1)), P_e = sum_j p_j^2. When every rating falls in one category P_e = 1 and
    kappa is None with a reason. `labels` only names the columns.
    """
    counts = np.asarray(matrix)
    if counts.ndim != 2 or counts.shape[1] == 0:
        raise ValueError("matrix must be items x categories with at least one category")
    if not np.issubdtype(counts.dtype, np.integer):
        if not np.all(np.isfinite(counts)) or np.any(counts != np.round(counts)):
            raise ValueError("matrix must hold whole counts")
        counts = counts.astype(np.int64)
    if np.any(counts < 0):
        raise ValueError("matrix must hold non-negative counts")
    names = tuple(map(str, labels)) if labels is not None else tuple(str(j) for j in range(counts.shape[1]))
    if len(names) != counts.shape[1]:
        raise ValueError(f"{len(names)} labels for {counts.shape[1]} categories")
    n = int(counts.shape[0])
    per_item = counts.sum(axis=1)
    if n == 0:
        return Kappa(
            value=None, observed=None, expected=None, n=0, raters=2, labels=names, method="fleiss",
            reason="no items",
        )
    m = int(per_item[0])
    if np.any(per_item != m) or m < 2:
        raise ValueError("every item needs the same number of raters, at least 2")
    p_bar = float(np.mean(((counts * counts).sum(axis=1) - m) / (m * (m - 1))))
    shares = counts.sum(axis=0) / (n * m)
    p_e = float(shares @ shares)
    common = dict(observed=p_bar, expected=p_e, n=n, raters=m, labels=names, method="fleiss")
    if np.count_nonzero(shares) == 1:
        return Kappa(value=None, reason="every rating fell in one category: P_e = 1", **common)
    return Kappa(value=(p_bar - p_e) / (1.0 - p_e), **common)


def two_decimals(x: float) -> Decimal:
    """x rounded to two decimals, half up, as read from its shortest decimal form.

    Binary noise is removed first (rounding half-even at 9 decimals), so 0.595 and a computed value
    0.59499999999999997 both read as 0.595 and round to 0.60, as a person reading the number would round it;
    Python's round(0.595, 2) gives 0.59 because the stored binary value is just below 0.595.
    """
    exact = Decimal(repr(float(x))).quantize(Decimal("1e-9"), rounding=ROUND_HALF_EVEN)
    return exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def admit(kappa: float | Kappa | None, threshold: float = ADMISSION_THRESHOLD) -> Admission:
    """Admit a data item when its kappa, rounded to two decimals half up, is >= the threshold (two decimals).

    Half up: 0.595 -> 0.60 (admitted), 0.594 -> 0.59 (retired), 0.605 -> 0.61. At the study's line both
    session termination (0.599) and context repair (0.596) read 0.60 and are admitted; the unrounded value is
    kept in the result. An undefined kappa (None, NaN, or a Kappa whose value is None) is not admitted.
    """
    if isinstance(kappa, Kappa):
        why = kappa.reason
        kappa = kappa.value
    else:
        why = None
    line = two_decimals(threshold)
    if kappa is None or not math.isfinite(kappa):
        return Admission(
            admitted=False, kappa=None, rounded=None, threshold=float(line),
            reason=f"kappa undefined ({why or 'no value'}): not admitted",
        )
    rounded = two_decimals(kappa)
    admitted = rounded >= line
    return Admission(
        admitted=admitted, kappa=float(kappa), rounded=float(rounded), threshold=float(line),
        reason=f"kappa {kappa!r} reads {rounded} at two decimals, {'>=' if admitted else '<'} {line}",
    )
