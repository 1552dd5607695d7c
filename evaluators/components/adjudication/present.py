"""How Adjudication presents itself (`evaluators.core.present`): the metrics its analyses emit (declared in
`metrics`, which the analyses name them through), its headline, its summary lines and its report section.
Nothing here is imported by an analysis: rewording a line reruns none."""

from __future__ import annotations

from collections.abc import Sequence

from agent_factory.evaluators.components.adjudication.audit import ADMITTED, BELOW, RETIRED, UNDECIDED, audit_rows
from agent_factory.evaluators.components.adjudication.metrics import ADMISSION, KAPPA, METRICS
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.core.present import Block, Line, Presentation, Row, Rows, Section, fmt, interval, number
from agent_factory.evaluators.stats import ADMISSION_THRESHOLD, admit

KAPPAS_SHOWN = 3
"""Items listed by kappa in the summary (lowest first); every one in `agent-factory audit`."""


def _decisions(rows: Rows) -> dict[str, list[str]]:
    """Admission label -> the items with it (in item order)."""
    out: dict[str, list[str]] = {}
    for r in sorted(rows.of(ADMISSION, stratum=None), key=lambda r: r.metric):
        out.setdefault(str(r.value), []).append(ADMISSION.param(r.metric))
    return out


def _counts(rows: Rows) -> str | None:
    """`3 of 5 audited items admitted, 1 below the 0.60 line, not retired, 1 retired`; None with no admission."""
    by = _decisions(rows)
    audited = sum(len(v) for v in by.values())
    if not audited:
        return None
    said = [f"{len(by.get(ADMITTED, []))} of {audited} audited items admitted"]
    if by.get(BELOW):
        said.append(f"{len(by[BELOW])} below the {ADMISSION_THRESHOLD:.2f} line, not retired")
    if by.get(UNDECIDED):
        said.append(f"{len(by[UNDECIDED])} undecided")
    if by.get(RETIRED):
        said.append(f"{len(by[RETIRED])} retired")  # named in the audit's own lines and the report
    return ", ".join(said)


def _summary(rows: Rows, flags: Sequence[FlagSpec]) -> list[Line]:
    out = [Line(counted)] if (counted := _counts(rows)) is not None else []
    kappas = sorted((r for r in rows.of(KAPPA, stratum=None) if number(r) is not None), key=lambda r: number(r) or 0)
    line = f"below the {ADMISSION_THRESHOLD:.2f} line"
    for r in kappas[:KAPPAS_SHOWN]:
        ci = interval(r, "score")
        # Below the line as admission reads it: at two decimals (0.596 reads 0.60 and is admitted).
        below = '' if admit(number(r)).admitted else f' ({line})'
        out.append(Line(f"{KAPPA.param(r.metric)}: kappa {fmt(number(r), 'score')}{f' [{ci}]' if ci else ''}"
                        f"{below} n={r.n or 0:,}", r))
    return out


def _box(rows: Rows) -> list[str]:
    counted = _counts(rows)
    if counted is None:
        return ["no second rater yet: no kappa"]
    return [counted]


def _item_label(r: Row) -> str:
    return f"{KAPPA.param(r.metric)} ({r.layer})" if r.layer else KAPPA.param(r.metric)


SECTION = Section(
    intro=f"Whether the evaluators agree: an item enters the analyses only if cross-model kappa >= "
          f"{ADMISSION_THRESHOLD:.2f}.",
    decisive=(KAPPA,),
    never="needs a second rater: no audit sample has been re-collected by a second model yet (the audit loop), "
          "so no kappa or admission exists",
    blocks=(
        Block("Cross-rater kappa per item", (KAPPA,), label=_item_label,
              x_title="Cohen's kappa", rule_at=ADMISSION_THRESHOLD,
              rule_label=f"admission line {ADMISSION_THRESHOLD:.2f}"),
        Block("Admission", (ADMISSION,), chart="none"),
    ),
)

PRESENTATION = Presentation(
    title="Adjudication", place="apart", metrics=METRICS, headline=(("kappa", KAPPA),), box=_box,
    summary=_summary, summary_rank=6, section=SECTION, names_unmeasured=True, from_audit=audit_rows,
    absent="needs a second rater: no item has two raters yet (`agent-factory audit --rater MODEL`, or people's "
           "labels: `labels import`), so no kappa",
)
"""Adjudication as the views show it: from the latest stored audit (`audit.audit_rows`), or from the pipeline's
own kappa rows where a run produced them."""
