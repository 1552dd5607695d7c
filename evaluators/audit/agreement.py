"""Agreement per data item among any raters (the suite's cascade, audit models, people), and admission
(docs/method.md section 6; `agreement --json`).

Per item: Cohen's kappa when two raters are compared (units both rated), Fleiss' kappa when more (units every
rater rated), Krippendorff's alpha (nominal) over every unit with at least two labels, missing labels allowed.
Intervals come from a bootstrap over users, never units: turns of one user are not independent. Each user is
reduced once to the counts the coefficients are made of (`stats.agreement_ci`), so a replicate is a weighted sum.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from typing import NamedTuple

import numpy as np

from agent_factory.evaluators.audit.model import RATED_VALUES, AgreementReport, ItemAgreement, OverallAgreement, Rating
from agent_factory.evaluators.stats.agreement import ADMISSION_THRESHOLD, Kappa, admit, cohen_kappa, fleiss_kappa
from agent_factory.evaluators.stats.agreement_ci import (
    cohen_from_tables,
    fleiss_from_sums,
    percentile_interval,
    replicate_sums,
)
from agent_factory.evaluators.stats.alpha import (
    MISSING,
    alpha_from_coincidence,
    krippendorff_alpha,
    unit_coincidences,
    unit_counts,
)

VERSION = "1"

MISSING_VALUE = "uncollected"
"""A value that is a missing label, not a rating: left out, never counted."""

_K = len(RATED_VALUES)
_INDEX = {value: i for i, value in enumerate(RATED_VALUES)}


class _Matrix(NamedTuple):
    """Reliability data: units x raters of category indices (`MISSING` where none), and each unit's user."""

    values: np.ndarray
    users: np.ndarray
    raters: tuple[str, ...]


def _matrix(ratings: Sequence[Rating], key: str) -> _Matrix:
    """The reliability data of `ratings`; a unit is (unit_id) for one item, (unit_id, item) across items."""
    raters = tuple(sorted({r.rater for r in ratings}))
    column = {name: j for j, name in enumerate(raters)}
    rows: dict[Hashable, int] = {}
    user_of: list[str] = []
    cells: list[tuple[int, int, int]] = []
    seen: set[tuple[int, int]] = set()
    for r in ratings:
        unit: Hashable = r.unit_id if key == "unit" else (r.unit_id, r.item)
        i = rows.setdefault(unit, len(rows))
        if i == len(user_of):
            user_of.append(r.user)
        elif user_of[i] != r.user:
            raise ValueError(f"unit {r.unit_id!r} is given two users, {user_of[i]!r} and {r.user!r}")
        j = column[r.rater]
        if (i, j) in seen:
            raise ValueError(f"rater {r.rater!r} rated item {r.item!r} on unit {r.unit_id!r} more than once")
        seen.add((i, j))
        cells.append((i, j, _INDEX[r.value]))
    values = np.full((len(rows), len(raters)), MISSING, dtype=np.int64)
    if cells:
        idx = np.asarray(cells, dtype=np.int64)
        values[idx[:, 0], idx[:, 1]] = idx[:, 2]
    return _Matrix(values=values, users=np.asarray(user_of, dtype=object), raters=raters)


def _clean(ratings: Sequence[Rating]) -> list[Rating]:
    """Ratings with the missing labels left out; a value that is neither a rating nor missing raises."""
    kept = []
    for r in ratings:
        if r.value == MISSING_VALUE:
            continue
        if r.value not in _INDEX:
            raise ValueError(
                f"rating of item {r.item!r} by {r.rater!r} on unit {r.unit_id!r} has value {r.value!r}, "
                f"not one of {', '.join(RATED_VALUES)}"
            )
        kept.append(r)
    return kept


def _kappa(data: _Matrix, counts: np.ndarray) -> tuple[Kappa | None, np.ndarray]:
    """Cohen's (two raters) or Fleiss' (more) kappa, and the mask of the units it reads."""
    present = data.values != MISSING
    if len(data.raters) < 2:
        return None, np.zeros(len(data.values), dtype=bool)
    if len(data.raters) == 2:
        both = present.all(axis=1)
        a = [RATED_VALUES[i] for i in data.values[both, 0]]
        b = [RATED_VALUES[i] for i in data.values[both, 1]]
        return cohen_kappa(a, b, labels=RATED_VALUES), both
    every = present.all(axis=1)
    return fleiss_kappa(counts[every], labels=RATED_VALUES), every


def _intervals(
    data: _Matrix, counts: np.ndarray, kappa_units: np.ndarray, *, seed: int, n_boot: int, confidence: float
) -> tuple[tuple[float | None, float | None, str | None], tuple[float | None, float | None, str | None]]:
    """(kappa's, alpha's) percentile intervals from one set of user-bootstrap replicates."""
    pairable = counts.sum(axis=1) >= 2
    cluster_names, member = np.unique(data.users[pairable].astype(str), return_inverse=True)
    g = len(cluster_names)
    if g < 2:
        none = (None, None, "fewer than 2 users: no user-clustered interval")
        return none, none
    c = counts[pairable]
    # Per unit, the columns every coefficient adds: alpha's coincidences, Cohen's table or Fleiss' sums.
    columns = [unit_coincidences(c).reshape(len(c), _K * _K)]
    in_kappa = kappa_units[pairable].astype(float)
    two = len(data.raters) == 2
    if two:
        table = np.zeros((len(c), _K * _K))
        v = data.values[pairable]
        rows = np.nonzero(kappa_units[pairable])[0]
        table[rows, v[rows, 0] * _K + v[rows, 1]] = 1.0
        columns.append(table)
    else:
        columns += [((c * c).sum(axis=1) * in_kappa)[:, None], in_kappa[:, None], c * in_kappa[:, None]]
    per_unit = np.concatenate(columns, axis=1)
    per_cluster = np.zeros((g, per_unit.shape[1]))
    np.add.at(per_cluster, member, per_unit)
    sums = replicate_sums(per_cluster, n_boot, seed)
    alpha_reps = alpha_from_coincidence(sums[:, : _K * _K].reshape(-1, _K, _K))
    rest = sums[:, _K * _K :]
    if two:
        kappa_reps = cohen_from_tables(rest.reshape(-1, _K, _K))
    else:
        kappa_reps = fleiss_from_sums(rest[:, 0], rest[:, 1], rest[:, 2:], len(data.raters))
    return percentile_interval(kappa_reps, confidence), percentile_interval(alpha_reps, confidence)


def _component(item: str) -> str:
    return item.split(".", 1)[0]


def _one_item(
    item: str, ratings: list[Rating], *, seed: int, n_boot: int, confidence: float
) -> ItemAgreement:
    data = _matrix(ratings, "unit")
    counts = unit_counts(data.values, _K)
    pairable = counts.sum(axis=1) >= 2
    base = dict(
        item=item, component=_component(item), raters=data.raters, n=int(pairable.sum()),
        labels=int(counts[pairable].sum()),
    )
    kappa, kappa_units = _kappa(data, counts)
    if kappa is None:
        return ItemAgreement(kappa=None, reason=f"rated by {len(data.raters)} rater(s): agreement needs two", **base)
    alpha = krippendorff_alpha(data.values[pairable], _K)
    (k_low, k_high, k_note), (a_low, a_high, a_note) = _intervals(
        data, counts, kappa_units, seed=seed, n_boot=n_boot, confidence=confidence
    )
    why_kappa = kappa.reason
    if kappa.n == 0:
        why_kappa = (f"no unit was rated by all {len(data.raters)} raters ({kappa.method}'s kappa needs them all; "
                     "alpha reads every unit with two labels; pass `raters` to compare fewer)"
                     if len(data.raters) > 2 else "no unit was rated by both raters")
    notes = [note for note in (why_kappa, alpha.reason, k_note and f"kappa: {k_note}", a_note and
                                f"alpha: {a_note}") if note]
    if kappa.value is None:
        k_low = k_high = None
    if alpha.value is None:
        a_low = a_high = None
    near = k_low is not None and k_high is not None and k_low <= ADMISSION_THRESHOLD <= k_high
    return ItemAgreement(
        kappa=kappa.value, kappa_low=k_low, kappa_high=k_high, kappa_method=kappa.method, alpha=alpha.value,
        alpha_low=a_low, alpha_high=a_high, admitted=admit(kappa).admitted if kappa.value is not None else None,
        near_line=near, reason="; ".join(notes) or None, **base,
    )


def item_agreements(
    ratings: Sequence[Rating],
    *,
    seed: int = 0,
    n_boot: int = 1000,
    confidence: float = 0.95,
    raters: Collection[str] | None = None,
) -> list[ItemAgreement]:
    """Agreement of every item's raters (those present, or only `raters` when given), sorted by item.

    `n` counts units with at least two labels; kappa reads the units both raters (Cohen) or every rater
    (Fleiss) rated, alpha every unit with two labels or more. Intervals: percentile, users resampled (each item
    with the same `seed`, so a result does not depend on which other items were given). `admitted` comes from
    `stats.admit` (kappa at two decimals >= 0.60), None when kappa is undefined; `near_line` when kappa's
    interval contains 0.60. A value `uncollected` is a missing label and is left out.
    """
    wanted = None if raters is None else set(raters)
    by_item: dict[str, list[Rating]] = {}
    for r in _clean(ratings):
        if wanted is None or r.rater in wanted:
            by_item.setdefault(r.item, []).append(r)
    return [
        _one_item(item, by_item[item], seed=seed, n_boot=n_boot, confidence=confidence) for item in sorted(by_item)
    ]


def overall_agreement(ratings: Sequence[Rating]) -> OverallAgreement:
    """Agreement over every item at once: each (unit, item) pair is one unit of analysis.

    Krippendorff's alpha over every pair with two labels or more; Fleiss' kappa over the pairs every rater rated
    (None when there are fewer than two raters or no pair has them all). `labels` counts the labels on the
    pairs with two labels or more (those the coefficients read).
    """
    kept = _clean(ratings)
    data = _matrix(kept, "pair")
    counts = unit_counts(data.values, _K)
    pairable = counts.sum(axis=1) >= 2
    alpha = krippendorff_alpha(data.values[pairable], _K)
    fleiss = None
    if len(data.raters) >= 2:
        every = (data.values != MISSING).all(axis=1)
        if every.any():
            fleiss = fleiss_kappa(counts[every], labels=RATED_VALUES).value
    return OverallAgreement(
        krippendorff_alpha=alpha.value, fleiss_kappa=fleiss, units=int(pairable.sum()),
        labels=int(counts[pairable].sum()), raters=len(data.raters),
    )


def agreement_report(
    ratings: Sequence[Rating],
    *,
    seed: int = 0,
    n_boot: int = 1000,
    raters: Collection[str] | None = None,
) -> AgreementReport:
    """`agreement --json`: overall agreement and agreement per item (both among `raters` when given)."""
    chosen = list(ratings) if raters is None else [r for r in ratings if r.rater in set(raters)]
    return AgreementReport(
        overall=overall_agreement(chosen),
        items=tuple(item_agreements(chosen, seed=seed, n_boot=n_boot)),
    )
