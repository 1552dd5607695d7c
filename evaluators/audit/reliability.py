"""Score reliability across raters (docs/method.md section 6), pure: how much of a score's variance is the units'.

A component's score of a unit, as one rater's data make it: the share of the component's items, among those every
rater judged applicable on that unit, that the rater answered `yes` (the items' own polarity is the same for every
rater, so agreement on the score is agreement on the items taken together). Over the units every rater scored, the
units x raters matrix gives the variance shares (unit / rater / residual, `stats.variance_components`) and
ICC(1,1) and ICC(1,k) (`stats.icc`: one-way random, each unit its own draw of raters; the k-rater form is the
reliability of the raters' mean).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from agent_factory.evaluators.audit.model import Rating, ScoreReliability
from agent_factory.evaluators.stats import icc, variance_components

VERSION = "1"

MIN_UNITS = 5
"""Units a score needs, scored by every rater, before its reliability is reported: fewer give mean squares with
one or two degrees of freedom, an ICC that says nothing."""


def _scores(ratings: Sequence[Rating], raters: tuple[str, ...]) -> dict[str, list[float]]:
    """unit -> each rater's score (in `raters` order), for the units every rater judged an item applicable on."""
    by_unit: dict[str, dict[str, dict[str, str]]] = defaultdict(lambda: defaultdict(dict))
    for r in ratings:
        by_unit[r.unit_id][r.item][r.rater] = r.value
    out: dict[str, list[float]] = {}
    for unit, items in by_unit.items():
        shared = [vals for vals in items.values()
                  if all(vals.get(rt) in ("yes", "no") for rt in raters)]
        if shared:
            out[unit] = [float(np.mean([vals[rt] == "yes" for vals in shared])) for rt in raters]
    return out


def score_reliability(ratings: Sequence[Rating], *, raters: Sequence[str] | None = None) -> list[ScoreReliability]:
    """Per component (the items' first part), the reliability of its score across `raters` (default: every rater
    present in that component's ratings, when there are at least two)."""
    by_component: dict[str, list[Rating]] = defaultdict(list)
    for r in ratings:
        by_component[r.item.split(".", 1)[0]].append(r)
    out: list[ScoreReliability] = []
    for component in sorted(by_component):
        rows = by_component[component]
        chosen = tuple(sorted(set(raters) if raters is not None else {r.rater for r in rows}))
        if len(chosen) < 2:
            continue
        scores = _scores([r for r in rows if r.rater in chosen], chosen)
        score = f"{component}.share_yes"
        if len(scores) < MIN_UNITS:
            out.append(ScoreReliability(score=score, n_units=len(scores), raters=chosen,
                                        note=f"{len(scores)} unit(s) scored by every rater; {MIN_UNITS} needed"))
            continue
        matrix = np.array([scores[u] for u in sorted(scores)])
        if float(matrix.var()) == 0.0:
            out.append(ScoreReliability(score=score, n_units=len(scores), raters=chosen,
                                        note="every score is the same: no variance to share out"))
            continue
        parts = variance_components(matrix)
        out.append(ScoreReliability(
            score=score, n_units=len(scores), raters=chosen, unit=parts.unit, rater=parts.rater,
            residual=parts.residual, icc1_single=icc(matrix, kind="ICC(1,1)").value,
            icc1_k=icc(matrix, kind="ICC(1,k)").value))
    return out


__all__ = ["MIN_UNITS", "score_reliability"]
