"""The report's Adjudication section from the latest stored audit, and the corrections log. Pure.

Adjudication shows what the audit (docs/method.md section 6) found: agreement per data item (kappa and alpha with
their user-clustered intervals, admitted / below the line / near it), rules against models, criterion validity
(the flags pointing the wrong way named), corrected estimates beside the judge-only ones with the labels they
used, score reliability, discriminant validity, Goodhart signals and the sample. Without an audit it keeps the
Adjudication component's own section and says how to run one.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_factory.evaluators.audit.model import AuditReport, Corrected, Correction, Criterion, ItemAgreement, RuleCheck
from agent_factory.evaluators.stats import ADMISSION_THRESHOLD
from agent_factory.factory.views.report.blocks import ChartIds
from agent_factory.factory.views.report.charts import Point, interval_chart
from agent_factory.factory.views.report.model import Block, ReportData, Section, Table

KEY = "adjudication"
"""The section's anchor: the Adjudication component's (the audit fills the component's place in the report)."""

HOW_TO_RUN = ("Run one: `agent-factory audit --rater MODEL` re-collects a stratified sample with a second model "
              "(of another family than the collector's); `agent-factory labels import FILE` or `agent-factory "
              "review export` / `review import` add people's labels, and `agent-factory agreement` compares them.")
"""What the section says when the store holds no audit."""


def _n(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


NBSP = "\u00a0"
"""Joins an estimate to its interval: a table cell breaks between words, never inside `0.299 [0.205, 0.399]`."""


def _est(x: float | None, low: float | None, high: float | None, *, digits: int = 3, signed: bool = False) -> str:
    """`0.299 [0.205, 0.399]` (`+0.49 [+0.30, +0.68]` when `signed`), the interval left out when there is none."""
    if x is None:
        return "—"
    f = f"{{:+.{digits}f}}" if signed else f"{{:.{digits}f}}"
    ci = "" if low is None or high is None else f"{NBSP}[{f.format(low)},{NBSP}{f.format(high)}]"
    return f.format(x) + ci


def _decision(it: ItemAgreement) -> str:
    word = "undecided" if it.admitted is None else "admitted" if it.admitted else "below the line"
    return f"{word}, near the line" if it.near_line else word


def _worst_items(items: Sequence[ItemAgreement]) -> list[ItemAgreement]:
    # Below the line, undecided, near the line, admitted; lowest kappa first within each (as `audit` prints).
    def rank(it: ItemAgreement) -> tuple[int, float, str]:
        group = 0 if it.admitted is False else 1 if it.admitted is None else 2 if it.near_line else 3
        return group, it.kappa if it.kappa is not None else 0.0, it.item

    return sorted(items, key=rank)


NOTE_CHARS = 90
"""Characters of an item's reason the table shows: its first clause (the bootstrap's caveats that follow would
make every row a column of words); `audit --json` has the whole reason."""


def _short(reason: str | None) -> str:
    first = (reason or "").split("; ", 1)[0]
    return first if len(first) <= NOTE_CHARS else first[:NOTE_CHARS - 1].rstrip() + "…"


def _items_block(ids: ChartIds, audit: AuditReport) -> Block:
    items = _worst_items(audit.items)
    # The component is the item's first part, and the kind of kappa follows from the raters: the table keeps to
    # what a reader compares, so it fits the page (`audit --json` has every field).
    rows = tuple((it.item, ", ".join(it.raters), f"{it.n:,}",
                  _est(it.kappa, it.kappa_low, it.kappa_high)
                  + (f" ({it.kappa_method})" if it.kappa_method and it.kappa is not None else ""),
                  _est(it.alpha, it.alpha_low, it.alpha_high), _decision(it), _short(it.reason)) for it in items)
    table = Table(columns=("item", "raters", "units", "kappa [95% CI]", "alpha [95% CI]", "decision", "note"),
                  rows=rows)
    pts = [Point(label=it.item, value=it.kappa, low=it.kappa_low, high=it.kappa_high, n=it.n)
           for it in items if it.kappa is not None]
    chart = ids.chart("Kappa per item", interval_chart(
        pts, x_title="kappa (95% CI, users resampled)", share=False, rule_at=ADMISSION_THRESHOLD,
        rule_label=f"admission line {ADMISSION_THRESHOLD:.2f}")) if pts else None
    note = (f"Worst first. Kappa is Cohen's for two raters and Fleiss' for more (on units every rater rated), shown "
            f"unrounded; an item is admitted when kappa at two decimals is >= {ADMISSION_THRESHOLD:.2f}, and is near "
            "the line when its interval holds the line. Alpha: Krippendorff's (nominal, missing labels allowed). "
            "Intervals: 95%, bootstrap over users, never units.")
    return Block(title="Agreement per data item", note=note, table=table, chart=chart)


def _decisions_block(audit: AuditReport) -> Block:
    groups = (("admitted", [i.item for i in audit.items if i.admitted]),
              ("below the line", [i.item for i in audit.items if i.admitted is False]),
              ("undecided (kappa undefined)", [i.item for i in audit.items if i.admitted is None]),
              ("near the line (could go either way)", [i.item for i in audit.items if i.near_line]),
              ("retired (out of the analyses)", list(audit.retired)))
    rows = tuple((what, f"{len(names):,}", ", ".join(names)) for what, names in groups)
    return Block(title="Admitted, retired, near the line", table=Table(columns=("", "items", "which"), rows=rows),
                 note="Retired items (this audit's and those still retired from before) leave the analyses; "
                      "the analyses that read them rerun, nothing is recollected.")


def _rules_block(rules: Sequence[RuleCheck]) -> Block:
    ordered = sorted(rules, key=lambda r: (not r.collect_by_model, r.item))
    rows = tuple((r.item, r.rater, f"{r.n:,}", _est(r.precision, r.precision_low, r.precision_high),
                  _est(r.recall, r.recall_low, r.recall_high), "collect by model" if r.collect_by_model else "",
                  r.note or "") for r in ordered)
    return Block(title="Rules against models", table=Table(columns=(
        "item", "reference rater", "units", "precision [95% CI]", "recall [95% CI]", "verdict", "note"), rows=rows),
        note="A rule-collected item collected again by a model on the sample: of the rule's detections, the share "
             "the model agrees with (precision); of the model's, the share the rule also made (recall). An item "
             "whose rule misses too much is to be collected by a model.")


def _criterion_rank(c: Criterion) -> tuple[int, float, str, str]:
    return (0 if c.fails else 1 if c.auc is not None else 2, -abs((c.auc if c.auc is not None else 0.5) - 0.5),
            c.flag, c.outcome)


def _criterion_block(ids: ChartIds, criteria: Sequence[Criterion]) -> Block:
    ordered = sorted(criteria, key=_criterion_rank)
    wrong = [c.flag for c in ordered if c.fails]
    rows = tuple((c.flag, c.component, c.meaning, c.outcome, f"{c.n:,}", _est(c.auc, c.low, c.high),
                  _est(c.difference, c.difference_low, c.difference_high, digits=2, signed=True),
                  "points the wrong way" if c.fails else "", c.note or "") for c in ordered)
    levels = ", ".join(dict.fromkeys(c.level for c in ordered))
    # One outcome: rows are the flags; several: each flag's outcomes side by side, coloured.
    several = len({c.outcome for c in ordered}) > 1
    pts = [Point(label=c.flag, group=c.outcome if several else "", value=c.auc, low=c.low, high=c.high, n=c.n)
           for c in ordered if c.auc is not None]
    chart = ids.chart("Flag AUC for a bad outcome", interval_chart(
        pts, x_title="rank AUC for a bad outcome (95% CI, users resampled)", share=False, rule_at=0.5,
        rule_label="no information (0.5)")) if pts else None
    said = (f"Pointing the wrong way: {', '.join(dict.fromkeys(wrong))}." if wrong
            else "No flag meant as bad goes with good outcomes.")
    note = (f"{said} Every per-unit flag against the outcomes the traces carry ({levels} level): the rank AUC of "
            "the flag for a bad outcome (0.5: no information) and the mean outcome with the flag minus without, "
            "both with user-clustered 95% intervals. A flag meant as bad fails when it goes with good outcomes; a "
            "descriptive one is shown, not judged. Failing first.")
    return Block(title="Criterion validity", note=note, chart=chart, table=Table(columns=(
        "flag", "component", "meaning", "outcome", "units", "AUC [95% CI]", "difference [95% CI]", "verdict",
        "note"), rows=rows))


def _corrected_block(ids: ChartIds, corrected: Sequence[Corrected]) -> Block:
    rows = tuple((c.metric, _est(c.judge, c.judge_low, c.judge_high), _est(c.corrected, c.low, c.high),
                  f"{c.labels:,}", f"{c.units:,}", c.reference, _n(c.lam, 2), c.method, c.note or "")
                 for c in corrected)
    pts = [p for c in corrected for p in (
        Point(label=c.metric, group="judge only", value=c.judge, low=c.judge_low, high=c.judge_high, n=c.units)
        if c.judge is not None else None,
        Point(label=c.metric, group=f"corrected ({c.labels:,} labels)", value=c.corrected, low=c.low, high=c.high,
              n=c.labels) if c.corrected is not None else None) if p is not None]
    shares = all(0.0 <= p.value <= 1.0 for p in pts)
    chart = ids.chart("Judge-only and corrected rates", interval_chart(
        pts, x_title="rate (95% CI, users resampled)", share=shares)) if pts else None
    note = ("Each rate the judge (the suite's cascade) measured on every unit, beside its prediction-powered "
            "correction (PPI++) with the labelled units of the sample: the labels correct the judge's bias, the "
            "judge's many units narrow the interval. Intervals resample users. λ: the power-tuning weight (0: "
            "labels alone; 1: classic PPI).")
    return Block(title="Corrected estimates", note=note, chart=chart, table=Table(columns=(
        "rate", "judge only [95% CI]", "corrected [95% CI]", "labels", "units judged", "labels from", "λ",
        "estimator", "note"), rows=rows))


def _reliability_block(audit: AuditReport) -> Block:
    rows = tuple((r.score, ", ".join(r.raters), f"{r.n_units:,}", _n(r.unit, 2), _n(r.rater, 2), _n(r.residual, 2),
                  _n(r.icc1_single), _n(r.icc1_k), r.note or "") for r in audit.reliability)
    return Block(title="Score reliability", note="Variance of each score across raters split into units, raters "
                 "and residual; ICC(1) of one rater and of the mean of the raters.", table=Table(columns=(
                     "score", "raters", "units", "unit share", "rater share", "residual", "ICC(1,1)", "ICC(1,k)",
                     "note"), rows=rows))


def _discriminant_block(audit: AuditReport) -> Block | None:
    d = audit.discriminant
    rows = [("components", f"{p.a} – {p.b}", f"{p.jaccard:.2f}", f"{p.n:,}")
            for p in sorted(d.component_jaccard, key=lambda p: -p.jaccard)]
    rows += [("near-duplicate", f"{p.a} – {p.b}", f"{p.jaccard:.2f}", f"{p.n:,}") for p in d.near_duplicates]
    rows += [("flagged by it alone", c, "", f"{n:,}") for c, n in sorted(d.unique.items())]
    if not rows:
        return None
    return Block(title="Discriminant validity", note="Jaccard of the sessions two components flag (any bad flag); "
                 "item or flag pairs raised on nearly the same units (Jaccard >= 0.9: one may be redundant); "
                 "sessions each component alone flags.",
                 table=Table(columns=("what", "which", "Jaccard", "units"), rows=tuple(rows)))


def _goodhart_block(audit: AuditReport) -> Block:
    rows = tuple((g.metric, f"{g.metric_change:+.3f}", g.next_layer, f"{g.next_change:+.3f}", g.before, g.after)
                 for g in audit.goodhart)
    return Block(title="Goodhart signals", note="A metric that improved while the layer above it got worse, "
                 "between two audits in the store's history.", table=Table(columns=(
                     "metric", "improved by", "next layer", "worsened by", "from", "to"), rows=rows))


def _sample_block(audit: AuditReport) -> Block | None:
    s = audit.sample
    if s is None:
        return None
    rows = tuple((st.component, st.layer, st.stratum, f"{st.population:,}", f"{st.sampled:,}",
                  "—" if st.weight is None else f"{st.weight:.2f}") for st in s.strata)
    return Block(title="The sample", note=f"{s.size:,} units drawn with seed {s.seed}, stratified by component, "
                 "layer and stratum (hard units oversampled); weights w = N / n.",
                 table=Table(columns=("component", "layer", "stratum", "units (N)", "drawn (n)", "weight"),
                             rows=rows))


def audit_blocks(audit: AuditReport) -> tuple[Block, ...]:
    """The audit's blocks, in reading order; a part the audit did not produce is left out."""
    ids = ChartIds(KEY)
    blocks: list[Block | None] = [
        _items_block(ids, audit) if audit.items else None,
        _decisions_block(audit) if audit.items or audit.retired else None,
        _rules_block(audit.rules) if audit.rules else None,
        _criterion_block(ids, audit.criterion) if audit.criterion else None,
        _corrected_block(ids, audit.corrected) if audit.corrected else None,
        _reliability_block(audit) if audit.reliability else None,
        _discriminant_block(audit),
        _goodhart_block(audit) if audit.goodhart else None,
        _sample_block(audit),
    ]
    if audit.notes:
        blocks.append(Block(title="What the audit could not do", note=" ".join(audit.notes)))
    return tuple(b for b in blocks if b is not None)


def adjudication(data: ReportData, component: Section) -> Section:
    """The Adjudication section: the latest audit's findings (then the component's own blocks, if any), or,
    with no audit, the component's section saying how to run one."""
    audit = data.audit
    if audit is None:
        if component.absent is None:
            return component
        return component.model_copy(update={"absent": f"{component.absent.rstrip('.')}. {HOW_TO_RUN}"})
    raters = ", ".join(audit.raters) or "no rater besides the suite's own"
    intro = (f"From audit {audit.audit_id} ({audit.started_at}, {audit.model_calls:,} model calls; raters: "
             f"{raters}). Whether the evaluators agree and measure what they say: an item enters the analyses only "
             f"if its kappa is >= {ADMISSION_THRESHOLD:.2f}.")
    blocks = (*audit_blocks(audit), *(component.blocks if component.absent is None else ()))
    if not blocks:
        return Section(key=KEY, title=component.title, intro=intro,
                       absent="the audit found nothing to compare: no item had two raters and no outcome was stored")
    return Section(key=KEY, title=component.title, intro=intro, blocks=blocks)


def _figures(d: dict[str, float | str | None]) -> str:
    return ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v if v is not None else '—'}"
                     for k, v in d.items())


def corrections_log(data: ReportData) -> Section:
    """The corrections log: every change an audit made or proposed, with why and the figures before and after;
    without a log, why there is none."""
    key, title = "corrections", "Corrections log"
    intro = ("Every change the audit made to a data definition, rule, evidence scope or metric, with its version, "
             "why, and the figures before and after.")
    log: Sequence[Correction] = data.corrections_log
    if not log:
        absent = ("no correction yet: the audits so far retired and rewrote nothing" if data.audit is not None
                  else f"no audit yet: its corrections will go here. {HOW_TO_RUN}")
        return Section(key=key, title=title, intro=intro, absent=absent)
    rows = tuple((c.at, c.audit_id, c.item, c.item_version, c.action.replace("_", " "), c.why, _figures(c.before),
                  _figures(c.after)) for c in log)
    return Section(key=key, title=title, intro=intro, blocks=(Block(
        title=f"{len(log):,} correction(s), oldest first", table=Table(columns=(
            "when", "audit", "item", "version", "action", "why", "before", "after"), rows=rows)),))


__all__ = ["HOW_TO_RUN", "adjudication", "audit_blocks", "corrections_log"]
