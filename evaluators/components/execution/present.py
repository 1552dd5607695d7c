"""How Execution presents itself (`evaluators.core.present`): the metrics its analyses emit (declared in
`metrics`, which the analyses name them through), its headline, its summary lines and its report section.
Nothing here is imported by an analysis: rewording a line reruns none."""

from __future__ import annotations

import math
from collections.abc import Sequence

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
    METRICS,
    SPAN_ERROR_RATE,
    STEPS,
    STOP_MEDIAN,
    UNCOLLECTED,
)
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.core.present import (
    Block,
    Line,
    Presentation,
    Row,
    Rows,
    Section,
    decided,
    estimate,
    number,
)

_STEP_WORDS = {"retrieval": "retrieval", "thinking": "thinking", "chain_complete": "a complete chain"}


def mode(r: Row) -> str:
    """A row's stratum as a mode name (`mode=deep` -> `deep`)."""
    return (r.stratum or "all").removeprefix("mode=")


def band_edge(r: Row) -> tuple[float, str]:
    """A latency band's natural place: its lower edge in seconds (`<5s` 0, `5-10s` 5, `>120s` 120)."""
    band = BAND.param(r.metric)
    head = band.removesuffix("s")
    try:
        low = 0.0 if head.startswith("<") else float(head.lstrip(">").split("-")[0])
    except ValueError:
        low = math.inf
    return (low + (0.5 if head.startswith(">") else 0.0), r.stratum or "all")


def _summary(rows: Rows, flags: Sequence[FlagSpec]) -> list[Line]:
    overall = rows.get(FAILURE_RATE)
    if not decided(overall):
        return []
    out = [Line(f"delivery failure {estimate(overall, 'rate')} turns", overall)]
    modes = sorted((r for r in rows.of(FAILURE_RATE, stratum=None) if (r.stratum or "all") != "all" and decided(r)),
                   key=lambda r: -(number(r) or 0))
    if len(modes) > 1:
        out.extend(Line(f"  by mode, {mode(r)}: {estimate(r, 'rate')}", r) for r in modes)
    steps = []
    for step in STEPS:
        without, with_ = rows.get(FAILURE_WITHOUT, step=step), rows.get(FAILURE_WITH, step=step)
        if decided(without) and decided(with_):
            steps.append(((number(without) or 0) - (number(with_) or 0), _STEP_WORDS[step], without, with_))
    for gap, words, without, with_ in sorted(steps, key=lambda s: -s[0])[:2]:
        if gap > 0:
            out.append(Line(f"without {words} {estimate(without, 'rate')} vs with it {estimate(with_, 'rate')}",
                            without))
    bands = [r for r in rows.of(BAND) if decided(r)]
    if bands:
        worst = max(bands, key=lambda r: number(r) or 0)
        out.append(Line(f"worst latency band {BAND.param(worst.metric)}: {estimate(worst, 'rate')} fail", worst))
    return out


def _goodness(rows: Rows) -> float | None:
    fail = number(rows.get(FAILURE_RATE))
    return None if fail is None else 1 - fail


def _step(r: Row) -> str:
    return FAILURE_WITHOUT.param(r.metric) if FAILURE_WITHOUT.parse(r.metric) else FAILURE_WITH.param(r.metric)


SECTION = Section(
    uncollected=(UNCOLLECTED,),
    intro="Did each turn deliver, how fast, and what the chain looked like.",
    decisive=(FAILURE_RATE,),
    blocks=(
        Block("Delivery failure by mode", (FAILURE_RATE,), label=mode, x_title="turns that failed to deliver",
              note="User-clustered 95% intervals; hand-offs to a person are neither delivered nor failed."),
        Block("Failure by chain step (all modes)", (FAILURE_WITHOUT, FAILURE_WITH), stratum="all", label=_step,
              group=lambda r: "without the step" if FAILURE_WITHOUT.parse(r.metric) else "with the step",
              x_title="failure rate", note="Turns without a step against turns with it; the table below gives "
                                           "each mode."),
        Block("Failure by chain step and mode", (FAILURE_WITHOUT, FAILURE_WITH), stratum="strata", chart="none"),
        Block("Latency against the per-mode baseline", (LATENCY_RATIO,), label=mode, rule_at=1.0,
              rule_label="the baseline", x_title="geometric-mean latency / the pack's baseline",
              note="Delivered turns; 1 is the pack's baseline for the mode."),
        Block("Latency", (LATENCY_SECONDS,), chart="none"),
        Block("The fast-failure band (all modes)", (BAND,), stratum="all", label=lambda r: BAND.param(r.metric),
              order=band_edge, x_title="failure rate by latency band",
              note="Answers faster than the pack's fast edge fail far more often when something broke early."),
        Block("Band by mode", (BAND,), stratum="strata", chart="none", order=band_edge),
        Block("Other execution results", (HANDED_OFF, SPAN_ERROR_RATE, EARLY_STOP, STOP_MEDIAN, UNCOLLECTED),
              chart="none"),
    ),
)

PRESENTATION = Presentation(
    title="Execution", place="spine", metrics=METRICS, headline=(("delivery failure", FAILURE_RATE),),
    summary=_summary, summary_rank=1, section=SECTION, rollup=FAILURE_ROLLUP, goodness=_goodness, weight=0.25,
)
"""Execution as the views show it."""
