"""Execution's analyses (f): failure rates, failure given the chain, latency against baselines, the fast band,
progress at stop, and the layer rollup. Pure and versioned: results change only with the data or `VERSION`.

Every rate carries a 95% interval. Turns of one user are not independent, so rates over turns are
user-clustered; the headline failure rate is also given with a Wilson interval (metric `failure_rate.wilson`)
so the two can be compared. Uncollected data are left out of every rate and counted (metric `uncollected`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from itertools import pairwise

from agent_factory.evaluators.components.execution.definitions import (
    CHAIN_COMPLETE,
    DELIVERED,
    HAS_RETRIEVAL,
    HAS_THINKING,
    LATENCY_MS,
    MODE,
    PROGRESS_AT_STOP,
    SPAN_ERROR,
)
from agent_factory.evaluators.components.execution.metrics import (
    BAND,
    EARLY_STOP,
    FAILURE_RATE,
    FAILURE_ROLLUP,
    FAILURE_WITH,
    FAILURE_WITHOUT,
    HANDED_OFF,
    LATENCY_RATIO,
    LATENCY_SECONDS,
    SPAN_ERROR_RATE,
    STEPS,
    STOP_MEDIAN,
)
from agent_factory.evaluators.components.execution.rollup import (
    BOOTSTRAP_SEED,
    N_BOOT,
    FailureItem,
    Meta,
    cluster_of,
    count_result,
    failure_rollup,
    median_result,
    rate_result,
    uncollected_results,
)
from agent_factory.evaluators.components.execution.rollup import VERSION as ROLLUP_VERSION
from agent_factory.evaluators.core.model import Result
from agent_factory.evaluators.core.registry import Analysis, Observations, UnitRow
from agent_factory.evaluators.stats import cluster_bootstrap_ci
from agent_factory.knowledge_packs import KnowledgePack

VERSION = "2"

BAND_EDGES_S = (10.0, 120.0)
"""Latency band edges (seconds) after the pack's fast-failure edge: <fast, fast-10, 10-120, >120 (the study's)."""
EARLY_STOP_PROGRESS = 0.2
"""Progress at or under which an abnormal stop counts as early (study: 85% of abnormal deep stops)."""
ROLLUP = f"{VERSION}/rollup-{ROLLUP_VERSION}"
"""Version of the rollup analysis: this module's and the rollup module's."""


def _meta(name: str) -> Meta:
    return Meta("execution", name, ROLLUP if name == "execution.rollup" else VERSION)


def mode_of(row: UnitRow) -> str | None:
    """The turn's mode: the row's, else the collected `execution.mode` fact."""
    if row.mode:
        return row.mode
    fact = row.facts.get(MODE)
    return fact if isinstance(fact, str) and fact else None


def failed(row: UnitRow) -> bool | None:
    """Whether the turn failed to deliver; None when delivery was not decided or was no delivery at all (a
    hand-off to a person)."""
    v = row.values.get(DELIVERED)
    return None if v not in ("yes", "no") else v == "no"


def handed_off(row: UnitRow) -> bool:
    """Whether the turn handed the user to a person (neither delivered nor failed)."""
    return row.values.get(DELIVERED) == "not_applicable" and row.facts.get(DELIVERED) == "handed_off"


def _by_mode(rows: Sequence[UnitRow]) -> dict[str, list[UnitRow]]:
    groups: dict[str, list[UnitRow]] = defaultdict(list)
    for r in rows:
        m = mode_of(r)
        if m is not None:
            groups[m].append(r)
    return dict(sorted(groups.items()))


def _strata(rows: Sequence[UnitRow]) -> list[tuple[str, list[UnitRow]]]:
    return [("all", list(rows)), *((f"mode={m}", g) for m, g in _by_mode(rows).items())]


def _outcomes(rows: Sequence[UnitRow]) -> list[tuple[object, bool]]:
    return [(cluster_of(r), f) for r in rows if (f := failed(r)) is not None]


def failure_rate(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Delivery failure rate overall and by mode: user-clustered (`failure_rate`) and Wilson (`.wilson`)."""
    meta = _meta("execution.failure_rate")
    rows = obs.layer("trace")
    out: list[Result] = []
    for stratum, group in _strata(rows):
        outcomes = _outcomes(group)
        out.append(rate_result(outcomes, meta, layer="trace", metric=FAILURE_RATE.name, stratum=stratum))
        out.append(rate_result(outcomes, meta, layer="trace", metric=FAILURE_RATE.variant(".wilson"), stratum=stratum,
                               method="wilson", note="turns treated as independent"))
        if stratum == "all":
            decided = [r for r in group if failed(r) is not None or handed_off(r)]
            out.append(count_result(meta, layer="trace", metric=HANDED_OFF.name, value=sum(map(handed_off, group)),
                                    n=len(decided), note="turns handed to a person; neither delivered nor failed, "
                                                         "so outside the failure rate"))
    return out + uncollected_results(rows, (DELIVERED, MODE), meta, layer="trace")


def failure_by_chain(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Failure rate without vs with each chain step (thinking, retrieval, complete chain), overall and by mode."""
    meta = _meta("execution.failure_by_chain")
    rows = obs.layer("trace")
    out: list[Result] = []
    for item, step in zip((HAS_THINKING, HAS_RETRIEVAL, CHAIN_COMPLETE), STEPS, strict=True):
        for stratum, group in _strata(rows):
            for present, metric in (("no", FAILURE_WITHOUT.of(step=step)), ("yes", FAILURE_WITH.of(step=step))):
                sub = [r for r in group if r.values.get(item) == present]
                if stratum != "all" and not sub:
                    continue
                out.append(rate_result(_outcomes(sub), meta, layer="trace", metric=metric,
                                       stratum=stratum, note=f"turns with {item} = {present}"))
    return out + uncollected_results(rows, (HAS_THINKING, HAS_RETRIEVAL, CHAIN_COMPLETE), meta, layer="trace")


def _latency_s(row: UnitRow) -> float | None:
    if row.values.get(LATENCY_MS) != "yes":
        return None
    v = row.facts.get(LATENCY_MS)
    return float(v) / 1000.0 if isinstance(v, int | float) and v > 0 else None


def _geomean(meta: Meta, rows: Sequence[UnitRow], *, stratum: str, baseline_s: float | None) -> list[Result]:
    pairs = [(cluster_of(r), s) for r in rows if (s := _latency_s(r)) is not None]
    if not pairs:
        return [Result(component="execution", layer="trace", metric=LATENCY_SECONDS.name, stratum=stratum,
                       value=None, n=0, note="no delivered turn with a latency", analysis=meta.analysis,
                       analysis_version=meta.version)]
    logs = [math.log(s) for _, s in pairs]
    est = cluster_bootstrap_ci(logs, [c for c, _ in pairs], n_boot=N_BOOT, seed=BOOTSTRAP_SEED)
    note = "delivered turns; user-clustered bootstrap of mean log latency" + (f"; {est.note}" if est.note else "")

    def res(metric: str, scale: float, extra: str) -> Result:
        lo = None if est.low is None else math.exp(est.low) / scale
        hi = None if est.high is None else math.exp(est.high) / scale
        return Result(component="execution", layer="trace", metric=metric, stratum=stratum,
                      value=math.exp(est.value or 0.0) / scale, low=lo, high=hi, n=len(pairs), note=note + extra,
                      analysis=meta.analysis, analysis_version=meta.version)

    out = [res(LATENCY_SECONDS.name, 1.0, "")]
    if baseline_s is not None:
        out.append(res(LATENCY_RATIO.name, baseline_s, f"; baseline {baseline_s:g} s"))
    return out


def latency_vs_baseline(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Geometric-mean latency of delivered turns per mode, and its ratio to the pack's baseline, with 95% CIs."""
    meta = _meta("execution.latency_vs_baseline")
    rows = [r for r in obs.layer("trace") if failed(r) is False]
    out: list[Result] = []
    for mode, group in _by_mode(rows).items():
        base = pack.baselines.modes.get(mode)
        out.extend(_geomean(meta, group, stratum=f"mode={mode}", baseline_s=base.geomean_seconds if base else None))
    return out + uncollected_results(obs.layer("trace"), (LATENCY_MS,), meta, layer="trace")


def latency_bands(fast_s: float) -> list[tuple[str, float, float]]:
    """(name, low, high) seconds: under the fast edge, then up to 10 s, 10-120 s, over 120 s."""
    edges = [0.0, fast_s, *(e for e in BAND_EDGES_S if e > fast_s), math.inf]
    names = []
    for lo, hi in pairwise(edges):
        names.append((f"<{hi:g}s" if lo == 0 else f">{lo:g}s" if math.isinf(hi) else f"{lo:g}-{hi:g}s", lo, hi))
    return names


def fast_failure_band(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Failure rate by latency band (<5 s, 5-10, 10-120, >120 s with the pack's 5 s edge), overall and by mode."""
    meta = _meta("execution.fast_failure_band")
    bands = latency_bands(pack.baselines.fast_failure_seconds)
    rows = [r for r in obs.layer("trace") if r.values.get(LATENCY_MS) == "yes"]
    out: list[Result] = []
    for stratum, group in _strata(rows):
        for name, lo, hi in bands:
            sub = [r for r in group if (s := _latency_s(r)) is not None and lo <= s < hi]
            out.append(rate_result(_outcomes(sub), meta, layer="trace", metric=BAND.of(band=name),
                                   stratum=stratum))
    return out


def progress_at_stop(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """For abnormal stops that record progress, per mode: share stopped at <= 20% and the median time to stop."""
    meta = _meta("execution.progress_at_stop")
    rows = [r for r in obs.layer("trace")
            if failed(r) is True and r.values.get(PROGRESS_AT_STOP) == "yes"
            and isinstance(r.facts.get(PROGRESS_AT_STOP), int | float)]
    out: list[Result] = []
    for mode, group in _by_mode(rows).items():
        stratum = f"mode={mode}"
        early = [(cluster_of(r), float(r.facts[PROGRESS_AT_STOP]) <= EARLY_STOP_PROGRESS)  # type: ignore[arg-type]
                 for r in group]
        out.append(rate_result(early, meta, layer="trace", metric=EARLY_STOP.name, stratum=stratum,
                               note=f"progress <= {EARLY_STOP_PROGRESS:g} among abnormal stops"))
        timed = [(cluster_of(r), s) for r in group if (s := _latency_s(r)) is not None]
        out.append(median_result(meta, timed, metric=STOP_MEDIAN.name, stratum=stratum, layer="trace"))
    return out + uncollected_results(obs.layer("trace"), (PROGRESS_AT_STOP,), meta, layer="trace")


def span_error_rate(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Share of spans that ended in an error (user-clustered)."""
    meta = _meta("execution.span_error_rate")
    rows = obs.layer("span")
    outcomes = [(cluster_of(r), r.values[SPAN_ERROR] == "yes") for r in rows
                if r.values.get(SPAN_ERROR) in ("yes", "no")]
    return [rate_result(outcomes, meta, layer="span", metric=SPAN_ERROR_RATE.name),
            *uncollected_results(rows, (SPAN_ERROR,), meta, layer="span")]


def rollup(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Delivery failure at the turn, session and user layers (the 3.6% / 5.6% / 10.3% shape)."""
    return failure_rollup(obs, (FailureItem(DELIVERED, "no"),), _meta("execution.rollup"),
                          metric=FAILURE_ROLLUP.name)


_FNS: tuple[tuple[str, Callable[[Observations, KnowledgePack], list[Result]]], ...] = (
    ("execution.failure_rate", failure_rate),
    ("execution.failure_by_chain", failure_by_chain),
    ("execution.latency_vs_baseline", latency_vs_baseline),
    ("execution.fast_failure_band", fast_failure_band),
    ("execution.progress_at_stop", progress_at_stop),
    ("execution.span_error_rate", span_error_rate),
    ("execution.rollup", rollup),
)
ANALYSES: tuple[Analysis, ...] = tuple(Analysis(name, _meta(name).version, fn, layers=("trace", "span"))
                                    for name, fn in _FNS)
"""Execution's analyses, registered with the component."""
