"""What `agent-factory tasks report` and `tasks import` print: one screen each, from the task models
(`evaluators.tasks.model`).

Pure: a report in, lines out, printed as they are (`cli.base.print_lines`). The report's screen is pass^k by k
(each over how many tasks) and the worst tasks (lowest pass^1 first); every task is in `--json`.
"""

from __future__ import annotations

from agent_factory.evaluators.tasks.model import TaskReport, TaskSummary
from agent_factory.factory.views.results import command_lines

WORST_SHOWN = 10
"""Tasks listed on the report's screen, worst first."""


def _num(value: float | None, fmt: str = ".1f") -> str:
    return "—" if value is None else format(value, fmt)


def _task_line(t: TaskSummary) -> str:
    p1 = t.pass_hat.get("1")
    record = f"{t.successes}/{t.labelled}" + (f" (+{t.trials - t.labelled} unlabelled)" if t.trials > t.labelled
                                               else "")
    return f"  {t.id[:28]:<28} {record:<24} {_num(p1, '.2f'):>6}  {_num(t.steps):>6}  {_num(t.tokens, '.0f'):>8}"


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
    lines += ["", "next:"]
    lines += command_lines(f"agent-factory tasks report {options} --json".replace("  ", " "))
    return lines


__all__ = ["WORST_SHOWN", "report_lines"]
