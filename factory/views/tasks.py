"""What `agent-factory tasks report`, `tasks run` and `tasks compare` print: one screen each, from the task models
(`evaluators.tasks.model`, `.compare`, `.composites`).

Pure: a report in, lines out, printed as they are (`cli.base.print_lines`). The report's screen is pass^k by k
(each over how many tasks) and the worst tasks (lowest pass^1 first), then the composite when one was asked for,
under its own heading as the view it is; every task is in `--json`. The comparison's screen is each side's
completion, the test, the verdict and the per-task changes, worst first.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from agent_factory.evaluators.tasks.composites import Composite, CompositeReport
from agent_factory.evaluators.tasks.model import EndingReason, TaskReport, TaskSummary
from agent_factory.factory.views.results import command_lines

if TYPE_CHECKING:
    # Annotations only: `tasks report` need not import scipy, which the comparison's test does.
    from collections.abc import Sequence

    from agent_factory.evaluators.tasks.compare import TaskChange, TaskComparison, TaskSide

WORST_SHOWN = 10
"""Tasks listed on the report's and the comparison's screens, worst first."""

NAME_WIDTH = 52
"""Characters of a side's name (a selector, a store path) the comparison's screen shows: its end, on 100 columns."""


def _num(value: float | None, fmt: str = ".1f") -> str:
    return "—" if value is None else format(value, fmt)


def _task_line(t: TaskSummary) -> str:
    p1 = t.pass_hat.get("1")
    record = f"{t.successes}/{t.labelled}" + (f" (+{t.trials - t.labelled} unlabelled)" if t.trials > t.labelled
                                               else "")
    return f"  {t.id[:28]:<28} {record:<24} {_num(p1, '.2f'):>6}  {_num(t.steps):>6}  {_num(t.tokens, '.0f'):>8}"


REASONS_SHOWN = 3
"""Distinct reasons a run's unanswered trials ended, shown on `tasks run`'s screen (all in --json)."""


def ending_lines(reasons: Sequence[EndingReason]) -> list[str]:
    """Why trials ended without answering, most frequent first, each reason cut to a line or two."""
    if not reasons:
        return []
    lines = [f"ended without an answer ({len(reasons)} reason(s); all in --json):"]
    for e in reasons[:REASONS_SHOWN]:
        tasks = ", ".join(e.tasks[:3]) + (f" +{len(e.tasks) - 3}" if len(e.tasks) > 3 else "")
        why = e.reason or "no reason given"
        why = why if len(why) <= 180 else why[:179] + "…"
        lines += textwrap.wrap(f"{e.trials} {e.ended_by} ({tasks}): {why}", width=100, initial_indent="  ",
                               subsequent_indent="    ")
    return lines


def report_lines(report: TaskReport, *, options: str = "") -> list[str]:
    """The lines `tasks report` prints: pass^k by k, then the worst tasks."""
    n_tasks = len(report.tasks)
    lines = [f"tasks: {n_tasks} task(s), {report.runs} run(s) from {', '.join(report.suites)}"
             + (f"; {report.unlabelled} run(s) without a label, left out of pass^k" if report.unlabelled else ""),
             "", "  k   pass^k   tasks"]
    for k, value in report.pass_hat.items():
        counted = report.tasks_counted[k]
        short = f"  ({n_tasks - counted} with fewer than {k} labelled trials left out)" if counted < n_tasks else ""
        lines.append(f"  {k:<3} {value:>6.3f}   {counted:>5}{short}")
    if not report.pass_hat:
        lines.append("  (no labelled trial: pass^k needs a success label)")
    lines += ["", f"worst tasks ({min(WORST_SHOWN, n_tasks)} of {n_tasks}; all in --json)",
              f"  {'task':<28} {'successes/trials':<24} {'pass^1':>6}  {'steps':>6}  {'tokens':>8}"]
    lines += [_task_line(t) for t in report.tasks[:WORST_SHOWN]]
    if isinstance(report, CompositeReport):
        lines += ["", *composite_lines(report.composite)]
    lines += ["", "next:"]
    lines += command_lines(f"agent-factory tasks report {options} --json".replace("  ", " "))
    return lines


def composite_lines(c: Composite) -> list[str]:
    """A composite under its heading: its label, value, weighted parts and what is missing."""
    scale = ".1f" if c.name == "intelligence-index" else ".3f"
    lines = ["view (composite, on request)", f"  {c.name}: {'null' if c.value is None else format(c.value, scale)}",
             *textwrap.wrap(c.label, width=96, initial_indent="  ", subsequent_indent="    ")]
    for part in c.parts:
        head = f"    {part.weight:>4.1f} x {part.name:<18} {_num(part.value, scale):>7}  "
        lines += textwrap.wrap(part.measure, width=100, initial_indent=head, subsequent_indent=" " * len(head))
    lines += [f"  missing: {m}" for m in c.missing]
    return lines


def _side_cell(s: TaskSide | None) -> str:
    return "—" if s is None else f"{s.successes}/{s.labelled} {_num(s.completion, '.2f')}"


def _change_cell(c: TaskChange) -> str:
    if c.only_in is not None:
        return f"{c.only_in} only"
    return "no label" if c.change is None else f"{c.change:+.2f}"


def compare_lines(cmp: TaskComparison, *, options: str = "") -> list[str]:
    """The lines `tasks compare` prints: each side's completion, the test, the verdict, per-task changes worst
    first (changed tasks and tasks on one side; all in --json)."""
    t = cmp.test
    lines = ["tasks compare: completion, candidate against baseline", "",
             f"  {'side':<10} {'runs':>5} {'tasks':>6} {'completion':>11}  selector / store"]
    for role, side in (("baseline", cmp.baseline), ("candidate", cmp.candidate)):
        name = side.name if len(side.name) <= NAME_WIDTH else "…" + side.name[1 - NAME_WIDTH:]
        lines.append(f"  {role:<10} {side.runs:>5} {side.tasks:>6} {_num(side.completion, '.3f'):>11}  {name}")
    stat = "" if t.statistic is None else f"W+ {t.statistic:g}, "
    lines += ["", f"paired: {t.tasks} task(s) labelled on both sides (matched by {cmp.matched_by}), {t.changed} "
                  f"changed; mean change {cmp.mean_change:+.3f}",
              f"test: {t.name} ({t.method}): {stat}p {t.p_value:.4g}, alpha {t.alpha:g}",
              f"verdict: {'BELOW the baseline (exit 4)' if cmp.below else 'not below the baseline'}"
              f"{', --strict' if cmp.strict else ''}",
              f"  {cmp.reason}"]
    if not cmp.below and not cmp.strict and cmp.mean_change < 0:
        lines.append("  (--strict fails any drop in mean completion)")
    shown = [c for c in cmp.tasks if c.change != 0]
    lines += ["", f"per-task changes, worst first ({min(WORST_SHOWN, len(shown))} of {len(shown)} changed or "
                  f"one-sided; {len(cmp.tasks)} task(s) in --json)",
              f"  {'task':<32} {'baseline':>12} {'candidate':>12}  change"]
    lines += [f"  {c.id[:32]:<32} {_side_cell(c.baseline):>12} {_side_cell(c.candidate):>12}  {_change_cell(c)}"
              for c in shown[:WORST_SHOWN]]
    if not shown:
        lines.append("  (no task changed)")
    lines += ["", "next:"]
    lines += command_lines(f"agent-factory tasks compare {options} --json".replace("  ", " "))
    return lines


__all__ = ["NAME_WIDTH", "REASONS_SHOWN", "WORST_SHOWN", "compare_lines", "composite_lines", "ending_lines",
           "report_lines"]
