"""Judge-only and prediction-powered rates side by side (issue 33, point 9; `audit --json`'s `corrected`).

The judge is the rater whose data the suite's analyses read (the `primary` cascade) on every unit; the reference
is the labels on the audit's sample (people, or a second rater). Per item, the rate is the share of applicable
units rated `yes`; the corrected rate is `stats.ppi.ppi_rate` (PPI++ with users as clusters), the judge-only rate
`stats.ppi.judge_rate` (user-clustered too), so the two intervals are comparable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from agent_factory.evaluators.audit.agreement import MISSING_VALUE
from agent_factory.evaluators.audit.model import RATED_VALUES, Corrected, Rating
from agent_factory.evaluators.stats.ppi import METHOD, judge_rate, ppi_rate

VERSION = "1"

MIN_LABELS = 10
"""Labelled units a correction needs: with fewer, the labels' rectifier rests on a handful of units whose spread
says nothing (two labels that agree give a zero-width interval), so the corrected value is left undefined with
the reason rather than printed beside the judge's as if it were an estimate."""


def _check(r: Rating) -> bool:
    """Whether the rating counts (False for a missing label); a value outside the rated values raises."""
    if r.value == MISSING_VALUE:
        return False
    if r.value not in RATED_VALUES:
        raise ValueError(
            f"rating of item {r.item!r} by {r.rater!r} on unit {r.unit_id!r} has value {r.value!r}, "
            f"not one of {', '.join(RATED_VALUES)}"
        )
    return True


def _one_item(
    item: str, judged: dict[str, Rating], labelled: dict[str, list[Rating]], weights: Mapping[str, float] | None,
    metrics: tuple[str, ...], min_labels: int,
) -> list[Corrected]:
    units = sorted(judged)
    position = {unit: i for i, unit in enumerate(units)}
    users = [judged[u].user for u in units]
    f_yes = np.array([judged[u].value == "yes" for u in units], dtype=float)
    f_app = np.array([judged[u].value != "not_applicable" for u in units], dtype=float)
    used = sorted(u for u in labelled if u in position)
    reference = ",".join(sorted({r.rater for u in labelled for r in labelled[u]}))
    notes = []
    outside = len(labelled) - len(used)
    if outside:
        notes.append(f"{outside} labelled unit(s) the judge did not rate were left out")
    missing_weight = [u for u in used if weights is not None and u not in weights]
    if missing_weight:
        raise ValueError(f"item {item!r}: no sampling weight for labelled unit(s) {', '.join(missing_weight[:5])}")
    # Several reference raters on one unit: their shares of yes and of applicable (each rater counts once).
    y_yes = np.array([sum(r.value == "yes" for r in labelled[u]) / len(labelled[u]) for u in used], dtype=float)
    y_app = np.array(
        [sum(r.value != "not_applicable" for r in labelled[u]) / len(labelled[u]) for u in used], dtype=float
    )
    w = None if weights is None else [float(weights[u]) for u in used]
    judge = judge_rate(f_yes, f_app, users)
    if len(used) < min_labels:
        notes.append(f"corrected: {len(used)} labelled unit(s); a correction needs at least {min_labels}")
        return [Corrected(metric=metric, item=item, reference=reference, judge=judge.value, judge_low=judge.low,
                          judge_high=judge.high, corrected=None, labels=len(used), units=len(units), method=METHOD,
                          note="; ".join(notes)) for metric in metrics]
    ppi = ppi_rate(f_yes, f_app, users, [position[u] for u in used], y_yes, y_app, weights=w)
    for why in (judge.note and f"judge: {judge.note}", ppi.note and f"corrected: {ppi.note}"):
        if why:
            notes.append(why)
    return [
        Corrected(
            metric=metric, item=item, reference=reference, judge=judge.value, judge_low=judge.low,
            judge_high=judge.high, corrected=ppi.value, low=ppi.low, high=ppi.high, labels=len(used),
            units=len(units), lam=ppi.lam, method=METHOD, note="; ".join(notes) or None,
        )
        for metric in metrics
    ]


def corrected_rates(
    judge: Sequence[Rating],
    reference: Sequence[Rating],
    *,
    weights: Mapping[str, float] | None = None,
    metric_names: Mapping[str, tuple[str, ...]] | None = None,
    min_labels: int = MIN_LABELS,
) -> list[Corrected]:
    """Per item that has reference labels, its rate judged on every unit and corrected with the labels (left
    undefined, with the reason, on fewer than `min_labels` labelled units).

    `judge`: one rater's ratings on all units (each unit once per item); `reference`: the labels on the sampled
    units, from one or more raters (averaged per unit); `weights`: each labelled unit's sampling weight
    (`unit_id` -> w_h = N_h / n_h), equal when None; `metric_names`: per item, the metrics that read it (one
    `Corrected` each; `rate.<item>` when not given). Missing labels (`uncollected`) are left out; labelled units
    the judge did not rate cannot be corrected against and are left out (the note counts them). Sorted by item.
    """
    judged: dict[str, dict[str, Rating]] = {}
    for r in judge:
        if not _check(r):
            continue
        seen = judged.setdefault(r.item, {})
        if r.unit_id in seen:
            raise ValueError(f"the judge rated item {r.item!r} on unit {r.unit_id!r} more than once")
        seen[r.unit_id] = r
    labelled: dict[str, dict[str, list[Rating]]] = {}
    for r in reference:
        if not _check(r):
            continue
        on_unit = labelled.setdefault(r.item, {}).setdefault(r.unit_id, [])
        if any(other.rater == r.rater for other in on_unit):
            raise ValueError(f"rater {r.rater!r} labelled item {r.item!r} on unit {r.unit_id!r} more than once")
        on_unit.append(r)
    out: list[Corrected] = []
    for item in sorted(set(judged) & set(labelled)):
        metrics = (metric_names or {}).get(item) or (f"rate.{item}",)
        out += _one_item(item, judged[item], labelled[item], weights, metrics, min_labels)
    return out
