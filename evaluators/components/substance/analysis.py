"""Substance's analysis (f): the checklist score S per turn, its population estimate, and per-item pass rates.

    S(x) = D(x) * (1 / |A(x)|) * sum_{j in A(x)} a_j(x)

D(x) is `execution.delivered` (1 yes, 0 no); A(x) the admitted items present for the turn with a collected
yes/no (not_applicable items are outside A; uncollected ones are never a pass and never a fail: they are left
out and counted). A failed turn scores 0 without any item. A delivered turn with no collected item has no S:
it is counted (`no_collected_items`), never imputed. A turn whose delivery is undecided has no S either.

Population S is a stratified mean with weights w_h = N_h / n_h (`evaluators.stats.stratified_mean`). Strata
are mode x delivery state: failed turns are a census (S = 0 for every one), while delivered turns are scored
only where a model collected items, so their share of the population must come from N_h, not from how many
were scored. When a stratum with turns has none scored, S is undefined (value None) and the note names the
strata: reporting the mean of the other strata would pass off failed turns, or one mode, as the population.

Per-item pass rates (yes / (yes + no)) are unweighted and user-clustered, overall and per mode, with 95%
intervals. Pure and versioned.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import NamedTuple

from agent_factory.evaluators.components.execution.definitions import DELIVERED
from agent_factory.evaluators.components.execution.rollup import (
    Meta,
    cluster_of,
    count_result,
    rate_result,
    uncollected_results,
)
from agent_factory.evaluators.components.substance.definitions import ITEMS
from agent_factory.evaluators.components.substance.metrics import DELIVERY_UNDECIDED, NO_ITEMS, PASS_RATE, SCORE
from agent_factory.evaluators.core.model import Result
from agent_factory.evaluators.core.registry import Analysis, Observations, UnitRow
from agent_factory.evaluators.stats import stratified_mean
from agent_factory.knowledge_packs import KnowledgePack

VERSION = "1"

NO_MODE = "unknown"
"""Stratum name of turns whose mode the source does not record."""

_META = Meta("substance", "substance.score", VERSION)


class TurnScore(NamedTuple):
    """S of one turn and what it rests on."""

    delivered: bool | None
    """D(x); None when the delivery datum is undecided or missing."""
    score: float | None
    """S(x); None when undefined (delivery undecided, or delivered with no collected item)."""
    passed: int
    """Items answered yes."""
    collected: int
    """|A(x)|: items answered yes or no."""
    uncollected: int
    """Items present but uncollected."""


def turn_score(row: UnitRow) -> TurnScore:
    """S(x) of one trace row."""
    d = row.values.get(DELIVERED)
    values = [row.values[i] for i in ITEMS if i in row.values]
    passed = sum(1 for v in values if v == "yes")
    collected = sum(1 for v in values if v in ("yes", "no"))
    uncollected = sum(1 for v in values if v == "uncollected")
    if d not in ("yes", "no"):
        return TurnScore(None, None, passed, collected, uncollected)
    if d == "no":
        return TurnScore(False, 0.0, passed, collected, uncollected)
    return TurnScore(True, passed / collected if collected else None, passed, collected, uncollected)


def _mode(row: UnitRow) -> str:
    return row.mode or NO_MODE


def _s_result(scored: Sequence[tuple[UnitRow, TurnScore]], *, stratum: str) -> Result:
    """Stratified S over mode x delivery strata of the given turns."""
    values: dict[str, list[float]] = defaultdict(list)
    population: dict[str, int] = defaultdict(int)
    for row, s in scored:
        h = f"{_mode(row)}|{'delivered' if s.delivered else 'failed'}"
        population[h] += 1
        if s.score is not None:
            values[h].append(s.score)
    base = dict(component=_META.component, layer="trace", metric=SCORE.name, stratum=stratum, analysis=_META.analysis,
                analysis_version=_META.version)
    if not population:
        return Result(value=None, n=0, note="no turn with a decided delivery state", **base)
    est = stratified_mean(values, dict(population))
    weights = ", ".join(f"{s.name}: N={s.population} n={s.sampled}" for s in est.strata)
    if est.unsampled:
        covered = est.population_covered or 0.0
        return Result(
            value=None, n=est.n,
            note=f"no collected items for the turns of stratum {', '.join(est.unsampled)} (the strata scored cover "
                 f"{covered:.1%} of turns): S is not imputed; strata {weights}", **base)
    note = "; ".join(p for p in (f"stratified by mode x delivery, w_h = N_h / n_h ({weights})", est.note) if p)
    return Result(value=est.value, low=est.low, high=est.high, n=est.n, note=note, **base)


def score(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Population S and S by mode; per-item pass rates overall and by mode; counts of what was not scored."""
    rows = obs.layer("trace")
    scored_all = [(r, turn_score(r)) for r in rows]
    scored = [(r, s) for r, s in scored_all if s.delivered is not None]
    by_mode: dict[str, list[tuple[UnitRow, TurnScore]]] = defaultdict(list)
    for r, s in scored:
        by_mode[_mode(r)].append((r, s))

    out = [_s_result(scored, stratum="all")]
    out += [_s_result(group, stratum=f"mode={m}") for m, group in sorted(by_mode.items())]

    delivered = [(r, s) for r, s in scored if s.delivered]
    for item in ITEMS:
        name = PASS_RATE.of(item=item.split(".", 1)[1])
        pairs: dict[str, list[tuple[Hashable, bool]]] = defaultdict(list)
        for r, _ in delivered:
            v = r.values.get(item)
            if v in ("yes", "no"):
                pairs["all"].append((cluster_of(r), v == "yes"))
                pairs[f"mode={_mode(r)}"].append((cluster_of(r), v == "yes"))
        for stratum in ["all", *sorted(k for k in pairs if k != "all")]:
            out.append(rate_result(pairs.get(stratum, []), _META, layer="trace", metric=name, stratum=stratum,
                                   note="delivered turns where the item applied and was collected; unweighted"))
    out.extend(uncollected_results([r for r, _ in delivered], ITEMS, _META, layer="trace"))

    unscored = sum(1 for _, s in delivered if s.score is None)
    out.append(count_result(_META, layer="trace", metric=NO_ITEMS.name, value=unscored, n=len(delivered),
                            note="delivered turns with no collected checklist item: S undefined, not imputed"))
    undecided = len(scored_all) - len(scored)
    out.append(count_result(_META, layer="trace", metric=DELIVERY_UNDECIDED.name, value=undecided, n=len(scored_all),
                            note=f"turns whose {DELIVERED} is undecided or missing: no S"))
    return out


ANALYSES: tuple[Analysis, ...] = (Analysis(name=_META.analysis, version=VERSION, fn=score, reads=("execution",),
                                                  layers=("trace",)),)
