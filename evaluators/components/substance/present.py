"""How Substance presents itself (`evaluators.core.present`): the metrics its analyses emit (declared in
`metrics`, which the analyses name them through), its headline, its summary lines and its report section.
Nothing here is imported by an analysis: rewording a line reruns none."""

from __future__ import annotations

from collections.abc import Sequence

from agent_factory.evaluators.components.substance.metrics import (
    DELIVERY_UNDECIDED,
    METRICS,
    NO_ITEMS,
    PASS_RATE,
    SCORE,
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


def _mode(r: Row) -> str:
    return (r.stratum or "all").removeprefix("mode=")


def _summary(rows: Rows, flags: Sequence[FlagSpec]) -> list[Line]:
    scores = [r for r in rows.of(SCORE, stratum=None) if decided(r)]
    passes = sorted((r for r in rows.of(PASS_RATE, stratum=None) if decided(r)), key=lambda r: number(r) or 0)
    out = [Line(f"S {r.stratum or 'all'}: {estimate(r, 'score')}", r) for r in scores[:2]]
    out.extend(Line(f"{PASS_RATE.param(r.metric)} passes {estimate(r, 'rate')}", r) for r in passes[:3])
    if not out:
        none = number(rows.get(NO_ITEMS))
        if none:
            out.append(Line(f"needs a model: no checklist item collected on {int(none):,} delivered turns",
                            value=none))
    return out


SECTION = Section(
    uncollected=(UNCOLLECTED,),
    intro="Whether delivered answers did the work: the checklist items.",
    decisive=(SCORE, PASS_RATE),
    blocks=(
        Block("Substance score S by mode", (SCORE,), label=_mode, x_title="S (0-1)",
              note="S = delivery x the mean of the admitted applicable checklist items, stratum-weighted."),
        Block("Checklist pass rates by item and mode", (PASS_RATE,), label=lambda r: PASS_RATE.param(r.metric),
              group=_mode, x_title="pass rate"),
        Block("What was not scored", (NO_ITEMS, DELIVERY_UNDECIDED, UNCOLLECTED), chart="none"),
    ),
)

PRESENTATION = Presentation(
    title="Substance", place="spine", metrics=METRICS, headline=(("S", SCORE),), summary=_summary,
    summary_rank=4, section=SECTION, absent="no checklist result (its items need a model)",
    goodness=lambda rows: number(rows.get(SCORE)), weight=0.25,
)
"""Substance as the views show it."""
