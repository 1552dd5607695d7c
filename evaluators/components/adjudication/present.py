"""How Adjudication presents itself (`evaluators.core.present`): the metrics its analyses emit (declared in
`metrics`, which the analyses name them through), its headline, its summary lines and its report section.
Nothing here is imported by an analysis: rewording a line reruns none."""

from __future__ import annotations

from collections.abc import Sequence

from agent_factory.evaluators.components.adjudication.metrics import ADMISSION, KAPPA, METRICS
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.core.present import Block, Line, Presentation, Rows, Section, fmt, number
from agent_factory.evaluators.stats import ADMISSION_THRESHOLD

ADMITTED = "admitted"
"""The admission label of an item that passed (`analysis.adjudicate`)."""


def _summary(rows: Rows, flags: Sequence[FlagSpec]) -> list[Line]:
    kappas = sorted((r for r in rows.of(KAPPA, stratum=None) if number(r) is not None), key=lambda r: number(r) or 0)
    line = f"below the {ADMISSION_THRESHOLD:.2f} line"
    return [Line(f"{KAPPA.param(r.metric)}: kappa {fmt(number(r), 'score')}"
                 f"{'' if (number(r) or 0) >= ADMISSION_THRESHOLD else f' ({line})'} n={r.n or 0:,}", r)
            for r in kappas[:3]]


def _box(rows: Rows) -> list[str]:
    kappas = rows.of(KAPPA, stratum=None)
    if not kappas:
        return ["no audit yet: no kappa"]
    admitted = [r for r in rows.of(ADMISSION, stratum=None) if r.value == ADMITTED]
    return [f"{len(admitted)} of {len(kappas)} audited items admitted"]


SECTION = Section(
    intro=f"Whether the evaluators agree: an item enters the analyses only if cross-model kappa >= "
          f"{ADMISSION_THRESHOLD:.2f}.",
    decisive=(KAPPA,),
    never="needs a second rater: no audit sample has been re-collected by a second model yet (the audit loop), "
          "so no kappa or admission exists",
    blocks=(
        Block("Cross-rater kappa per item", (KAPPA,), label=lambda r: f"{KAPPA.param(r.metric)} ({r.layer})",
              x_title="Cohen's kappa", rule_at=ADMISSION_THRESHOLD,
              rule_label=f"admission line {ADMISSION_THRESHOLD:.2f}"),
        Block("Admission", (ADMISSION,), chart="none"),
    ),
)

PRESENTATION = Presentation(
    title="Adjudication", place="apart", metrics=METRICS, headline=(("kappa", KAPPA),), box=_box,
    summary=_summary, summary_rank=6, section=SECTION,
    absent="needs a second rater (the audit loop): no kappa yet",
)
"""Adjudication as the views show it."""
