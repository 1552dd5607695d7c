"""What `agent-factory audit` and `agent-factory agreement` print: one screen of rich renderables built from the
audit's report models (`evaluators.audit.model`), worst first, every estimate with its interval and n, and the
`next:` commands to paste.

Pure: a report in, a `rich.console.Group` out (`audit_view`, `agreement_view`); `plain` renders one to text at
a fixed width (tests, logs). Every text that may come from a suite or a label file (item ids, rater names, notes)
enters as a `rich.text.Text`, never as markup, so a `[bold]` in an item id prints as it is.
"""

from __future__ import annotations

import io
import shlex
from collections.abc import Sequence

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from agent_factory.evaluators.audit.model import (
    AgreementReport,
    AuditReport,
    Corrected,
    Correction,
    Criterion,
    ItemAgreement,
    RuleCheck,
)
from agent_factory.evaluators.stats import ADMISSION_THRESHOLD
from agent_factory.factory.views.results import command_lines

VERSION = "1"
WIDTH = 98
"""Columns the view is laid out for (a 100-column terminal), as the summary's."""
ITEMS_SHOWN = 10
"""Items listed by `audit` (worst first); every one in `--json`."""
AGREEMENT_ITEMS_SHOWN = 30
"""Items listed by `agreement`, which prints nothing else."""
RULES_SHOWN = 4
"""Rule checks listed (those to collect by model first)."""
CRITERIA_SHOWN = 5
"""Flag-outcome pairs listed (those pointing the wrong way first)."""
CORRECTED_SHOWN = 4
"""Corrected estimates listed."""
CORRECTIONS_SHOWN = 3
"""Corrections listed."""


def num(x: float | None, digits: int = 2) -> str:
    """A figure at `digits` decimals, `—` when undefined."""
    return "—" if x is None else f"{x:.{digits}f}"


def interval(low: float | None, high: float | None, digits: int = 2) -> str:
    """`[low, high]`, or empty without an interval."""
    return "" if low is None or high is None else f"[{low:.{digits}f}, {high:.{digits}f}]"


def decision(item: ItemAgreement) -> str:
    """An item's admission in words: `admitted`, `retired` or `undecided` (kappa undefined), and `near the
    line` when its interval holds the admission line."""
    word = "undecided" if item.admitted is None else ("admitted" if item.admitted else "below the line")
    return f"{word}, near the line" if item.near_line else word


def _item_rank(item: ItemAgreement) -> tuple[int, float, str]:
    # Below the line first, then undecided, then near the line, then the admitted; lowest kappa first in each.
    group = 0 if item.admitted is False else 1 if item.admitted is None else 2 if item.near_line else 3
    return group, item.kappa if item.kappa is not None else 0.0, item.item


def worst_items(items: Sequence[ItemAgreement]) -> list[ItemAgreement]:
    """Items in the order a person should read them: below the admission line, undecided, near it, admitted
    (lowest kappa first within each)."""
    return sorted(items, key=_item_rank)


def _criterion_rank(c: Criterion) -> tuple[int, float, str, str]:
    auc = c.auc if c.auc is not None else 0.5
    return 0 if c.fails else 1 if c.auc is not None else 2, -abs(auc - 0.5), c.flag, c.outcome


def ranked_criteria(criteria: Sequence[Criterion]) -> list[Criterion]:
    """Flag-outcome pairs pointing the wrong way first, then by how far the AUC is from 0.5."""
    return sorted(criteria, key=_criterion_rank)


def corrected_text(c: Corrected) -> str:
    """`judge 0.838 [0.827, 0.849] -> corrected 0.715 [0.684, 0.746], 600 labels` (the note when undefined)."""
    if c.corrected is None:
        return (f"judge {num(c.judge, 3)} {interval(c.judge_low, c.judge_high, 3)}".rstrip()
                + f"; not corrected: {c.note or 'no estimate'}")
    return (f"judge {num(c.judge, 3)} {interval(c.judge_low, c.judge_high, 3)}".rstrip()
            + f" -> corrected {num(c.corrected, 3)} {interval(c.low, c.high, 3)}".rstrip()
            + f", {c.labels:,} labels")


def criterion_text(c: Criterion) -> str:
    """One flag against one outcome: AUC and difference with their intervals, n, and the verdict."""
    if c.auc is None:
        return f"{c.flag} vs {c.outcome}: {c.note or 'no AUC'} (n={c.n:,})"
    diff = "" if c.difference is None else (
        f", difference {c.difference:+.2f}"
        + ("" if c.difference_low is None or c.difference_high is None
           else f" [{c.difference_low:+.2f}, {c.difference_high:+.2f}]"))
    verdict = "wrong way: " if c.fails else ""  # first: the verdict before the figures
    meaning = "" if c.meaning == "bad" else f" ({c.meaning})"
    return f"{verdict}{c.flag}{meaning} vs {c.outcome}: AUC {c.auc:.3f} {interval(c.low, c.high, 3)}{diff} (n={c.n:,})"


def rule_text(r: RuleCheck) -> str:
    """A rule against a model rater: precision and recall with intervals, n, and the verdict."""
    mark = "collect by model: " if r.collect_by_model else ""
    return (f"{mark}{r.item}: precision {num(r.precision)} {interval(r.precision_low, r.precision_high)}".rstrip()
            + f", recall {num(r.recall)} {interval(r.recall_low, r.recall_high)}".rstrip()
            + f" vs {r.rater} (n={r.n:,})")


def correction_text(c: Correction) -> str:
    """One entry of the corrections log: what, to which item version, and why."""
    return f"{c.action.replace('_', ' ')} {c.item} (v {c.item_version}): {c.why}"


def _line(text: str, style: str = "") -> Text:
    # Text, not markup: item ids, rater names and notes print as they are; a long line wraps (never cut: its
    # last figure matters as much as its first).
    return Text(text, style=style, overflow="fold")


def _indented(text: str, style: str = "") -> Padding:
    # A listed entry: its wrapped lines stay under it, two columns in.
    return Padding(_line(text, style), (0, 0, 0, 2), expand=False)


def _command(text: str) -> Text:
    # Printed whole even past the width: the terminal folds it and a copy still pastes as one command.
    return Text(text, no_wrap=True, overflow="ignore")


def _heading(text: str) -> Text:
    return _line(text, "bold")


def _more(shown: int, total: int, where: str = "--json") -> list[Padding]:
    return [_indented(f"{total - shown} more in {where}")] if total > shown else []


def items_table(items: Sequence[ItemAgreement], *, limit: int) -> tuple[Table, list[Padding]]:
    """The items worst first, at most `limit` of them (raters, units, kappa with its interval, alpha, the
    decision), and a line for each undecided item saying why."""
    table = Table(box=None, show_edge=False, pad_edge=False, padding=(0, 1), header_style="bold")
    # The figures keep their width on a narrow terminal (80 columns): only the item's name is cut (--json has it).
    table.add_column("item", overflow="ellipsis", no_wrap=True, min_width=12, max_width=36)
    table.add_column("raters", justify="right", no_wrap=True, min_width=6)
    table.add_column("n", justify="right", no_wrap=True, min_width=3)
    table.add_column("kappa [95% CI]", no_wrap=True, min_width=20)
    table.add_column("alpha", justify="right", no_wrap=True, min_width=6)
    table.add_column("decision", no_wrap=True, min_width=14, overflow="ellipsis")
    undecided: dict[str, list[str]] = {}
    for it in worst_items(items)[:limit]:
        kappa = f"{it.kappa:.3f} {interval(it.kappa_low, it.kappa_high)}".rstrip() if it.kappa is not None else "—"
        table.add_row(Text(it.item), Text(str(len(it.raters))), Text(f"{it.n:,}"), Text(kappa),
                      Text(num(it.alpha, 3)), Text(decision(it)))
        if it.kappa is None and it.reason:
            # One line per reason, not per item: most undecided items share one (every label alike), and the
            # bootstrap's caveats after its first clause repeat it (`agreement --json` has every reason whole).
            undecided.setdefault(it.reason.split("; ", 1)[0], []).append(it.item)
    why = [_indented(f"undecided ({len(names)}): {reason} ({', '.join(names[:3])}"
                     f"{', ...' if len(names) > 3 else ''})") for reason, names in undecided.items()]
    return table, why


def _items_heading(items: Sequence[ItemAgreement]) -> Text:
    admitted = sum(1 for i in items if i.admitted)
    below = sum(1 for i in items if i.admitted is False)
    undecided = sum(1 for i in items if i.admitted is None)
    near = sum(1 for i in items if i.near_line)
    return _heading(f"Agreement per item: {len(items)} item(s), {admitted} admitted, {below} below the "
                    f"{ADMISSION_THRESHOLD:.2f} line, {undecided} undecided, {near} near the line (Cohen's kappa "
                    "for two raters, Fleiss' for more, at two decimals; intervals resample users)")


def _with(options: str) -> str:
    return f" {options}" if options else ""


def audit_next(report: AuditReport, *, options: str = "", suite: str | None = None) -> list[str]:
    """The commands to run after this audit: review a proposed rewrite, see the report, rerun what a
    retirement changed, label by hand when no person has."""
    out: list[str] = []
    proposed = any(c.action == "rewrite_proposed" for c in report.corrections)
    if proposed and suite:
        q = shlex.quote(suite)
        out += [f"agent-factory diff {shlex.quote(suite.rstrip('/') + '/approved')} {q}",
                f"agent-factory approve {q}"]
    if any(c.action == "retired" for c in report.corrections):
        out.append(f"agent-factory run{_with(options)}")
    if not any(r.startswith("human:") for r in report.raters):
        out.append(f"agent-factory review export{_with(options)}")
    out += [f"agent-factory report{_with(options)}", f"agent-factory audit{_with(options)} --json"]
    return out


def _next_block(commands: Sequence[str]) -> list[Text]:
    return [_heading("next:"), *(_command(line) for cmd in commands for line in command_lines(cmd))]


def audit_view(report: AuditReport, *, options: str = "", suite: str | None = None) -> Group:
    """What `agent-factory audit` prints: the audit in one line, agreement per item (worst first), rules
    against models, the flags pointing the wrong way, corrected estimates, retired items, corrections, what it
    could not do, and the next commands. `options`: the `--store S --suite D` to repeat; `suite`: the suite
    directory, for the diff and approve of a proposed rewrite."""
    parts: list[RenderableType] = []
    raters = ", ".join(report.raters) or "none"
    sample = (f"sample {report.sample.size:,} units (seed {report.sample.seed})" if report.sample is not None
              else "no sample re-collected")
    parts.append(_line(f"audit {report.audit_id} at {report.started_at} ({report.seconds:.1f} s): "
                       f"{report.model_calls:,} model call(s), {sample}; raters: {raters}"))
    if report.items:
        table, why = items_table(report.items, limit=ITEMS_SHOWN)
        parts += [_items_heading(report.items), table, *why,
                  *_more(min(ITEMS_SHOWN, len(report.items)), len(report.items), "`agreement` and --json")]
    else:
        parts.append(_line("Agreement per item: no item has two raters yet"))
    if report.rules:
        rules = sorted(report.rules, key=lambda r: (not r.collect_by_model, r.recall if r.recall is not None
                                                    else 2.0, r.item))
        low = sum(1 for r in report.rules if r.collect_by_model)
        parts.append(_heading(f"Rules against models: {len(rules)} rule(s), {low} to collect by model"))
        parts += [_indented(rule_text(r)) for r in rules[:RULES_SHOWN]]
        parts += _more(RULES_SHOWN, len(rules))
    if report.criterion:
        ranked = ranked_criteria(report.criterion)
        wrong = [c for c in ranked if c.fails]
        parts.append(_heading(f"Criterion validity: {len(ranked)} flag-outcome pair(s), {len(wrong)} pointing the "
                              "wrong way (AUC for a bad outcome; 0.5: no information)"))
        shown = ranked[:max(CRITERIA_SHOWN, len(wrong))] if len(wrong) <= 2 * CRITERIA_SHOWN else wrong
        parts += [_indented(criterion_text(c), "red" if c.fails else "") for c in shown]
        parts += _more(len(shown), len(ranked))
    if report.corrected:
        parts.append(_heading("Corrected estimates (judge only -> prediction-powered with the labels)"))
        parts += [_indented(f"{c.metric}: {corrected_text(c)} ({c.reference})")
                  for c in report.corrected[:CORRECTED_SHOWN]]
        parts += _more(CORRECTED_SHOWN, len(report.corrected))
    parts += _other_findings(report)
    if report.retired:
        parts.append(_line(f"Retired (out of the analyses): {', '.join(report.retired)}"))
    if report.corrections:
        parts.append(_heading(f"Corrections: {len(report.corrections)}"))
        parts += [_indented(correction_text(c)) for c in report.corrections[:CORRECTIONS_SHOWN]]
        parts += _more(CORRECTIONS_SHOWN, len(report.corrections), "`agent-factory report` and --json")
    parts += [_line(f"note: {n}", "yellow") for n in report.notes]
    parts += _next_block(audit_next(report, options=options, suite=suite))
    return Group(*parts)


def _other_findings(report: AuditReport) -> list[RenderableType]:
    """Reliability, discriminant and Goodhart, a line each at most."""
    out: list[RenderableType] = []
    rel = [r for r in report.reliability if r.icc1_single is not None]
    if rel:
        out.append(_line("Score reliability: " + "; ".join(
            f"{r.score} ICC(1) {num(r.icc1_single)} one rater, {num(r.icc1_k)} {len(r.raters)} raters "
            f"(n={r.n_units:,})" for r in rel[:3])))
    d = report.discriminant
    if d.component_jaccard or d.near_duplicates:
        top = sorted(d.component_jaccard, key=lambda p: -p.jaccard)[:2]
        said = [f"{p.a}–{p.b} Jaccard {p.jaccard:.2f} (n={p.n:,})" for p in top]
        if d.near_duplicates:
            said.append(f"{len(d.near_duplicates)} near-duplicate pair(s): "
                        + ", ".join(f"{p.a}~{p.b}" for p in d.near_duplicates[:3]))
        out.append(_line("Discriminant: most overlap " + "; ".join(said)))
    for g in report.goodhart[:2]:
        out.append(_line(f"Goodhart: {g.metric} improved {g.metric_change:+.3f} while {g.next_layer} worsened "
                         f"{g.next_change:+.3f} ({g.before} -> {g.after})", "red"))
    return out


def agreement_view(report: AgreementReport, *, options: str = "") -> Group:
    """What `agent-factory agreement` prints: agreement over every item, then per item (worst first)."""
    o = report.overall
    parts: list[RenderableType] = [_line(
        f"Agreement over every item: Krippendorff's alpha {num(o.krippendorff_alpha, 3)}, Fleiss' kappa "
        f"{num(o.fleiss_kappa, 3)}; {o.units:,} (unit, item) pairs, {o.labels:,} labels, {o.raters} raters")]
    if report.items:
        table, why = items_table(report.items, limit=AGREEMENT_ITEMS_SHOWN)
        parts += [_items_heading(report.items), table, *why,
                  *_more(min(AGREEMENT_ITEMS_SHOWN, len(report.items)), len(report.items))]
    else:
        parts.append(_line("no item has two raters: import labels (`agent-factory labels import FILE`) or run "
                           "`agent-factory audit --rater MODEL`"))
    parts += _next_block([f"agent-factory agreement{_with(options)} --json", f"agent-factory audit{_with(options)}"])
    return Group(*parts)


def plain(renderable: RenderableType, *, width: int = WIDTH) -> str:
    """A renderable as plain text at `width` columns (no colour, no markup): for tests and logs."""
    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False, emoji=False,
                      markup=False, legacy_windows=False, force_terminal=False)
    console.print(renderable)
    out = str(console.file.getvalue())  # type: ignore[attr-defined]
    return "\n".join(line.rstrip() for line in out.split("\n"))  # a table's or a padding's trailing spaces


__all__ = [
    "WIDTH", "agreement_view", "audit_next", "audit_view", "corrected_text", "correction_text", "criterion_text",
    "decision", "interval", "items_table", "num", "plain", "ranked_criteria", "rule_text", "worst_items",
]
