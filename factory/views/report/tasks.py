"""The report's Tasks section: pass^k by k, every task's dimensions and efficiency, and where runs first leave
their expected steps. Pure: it reads `ReportData.task_runs`, which `read.read_report` fills from the store's task
runs, and summarises them with the task report's own `task_report`, so the page and `agent-factory tasks report`
give the same numbers. A store without task runs gets no such section (the report's other sections do not depend
on tasks).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from agent_factory.evaluators.tasks.model import TaskReport, TaskRun, TaskSummary
from agent_factory.evaluators.tasks.passk import task_report
from agent_factory.factory.views.report.blocks import ChartIds
from agent_factory.factory.views.report.charts import Point, count_chart, interval_chart
from agent_factory.factory.views.report.model import Block, ReportData, Section, Table

KEY, TITLE = "tasks", "Long-horizon tasks"
TASKS_SHOWN = 50
"""Tasks the per-task table lists, worst first (`agent-factory tasks report --json` has every one)."""
NOT_COLLECTED = "not collected"
"""How a dimension none of a task's runs measured reads: never 0, which would be a measured failure."""
NONE = "—"
"""A cell with nothing recorded (tokens or time the source lacks, no deviation)."""


def _num(x: float | None, digits: int = 2) -> str:
    return NONE if x is None else f"{x:,.{digits}f}"


def _label(run: TaskRun, suites: int) -> str:
    # The task report names a task `suite/task` only when the store holds more than one suite; so does this.
    return run.task_id if suites == 1 else f"{run.suite}/{run.task_id}"


def _pass_hat_block(ids: ChartIds, report: TaskReport) -> Block:
    n_tasks = len(report.tasks)
    title = "pass^k by k"
    unlabelled = (f" {report.unlabelled:,} run(s) without a success label are left out of every task's n."
                  if report.unlabelled else "")
    if not report.pass_hat:
        return Block(title=title, note="No labelled trial: pass^k needs a success label." + unlabelled)
    note = ("The chance that k trials of a task, drawn without replacement from its labelled trials, all succeed "
            "(C(c, k) / C(n, k)), averaged over tasks (tau-bench's definition); a task of fewer than k labelled "
            "trials is left out of k's mean, so each k says how many tasks it is over." + unlabelled)
    rows = tuple((k, f"{v:.3f}", f"{report.tasks_counted[k]:,} of {n_tasks:,}") for k, v in report.pass_hat.items())
    pts = [Point(label=f"pass^{k}", value=v, n=report.tasks_counted[k]) for k, v in report.pass_hat.items()]
    chart = ids.chart(title, interval_chart(pts, x_title="pass^k (mean over tasks)", share=True))
    return Block(title=title, note=note, chart=chart, table=Table(columns=("k", "pass^k", "tasks"), rows=rows))


def _dimension_names(tasks: Sequence[TaskSummary]) -> list[str]:
    # The dimensions as the report gives them (its `DIMENSIONS` order), any a task adds after them: none is named
    # here, so a dimension added to the task report appears as a column without a change to this section.
    return list(dict.fromkeys(d for t in tasks for d in t.dimensions))


def _task_row(t: TaskSummary, dims: Sequence[str], *, suite: bool) -> tuple[str, ...]:
    record = f"{t.successes}/{t.labelled}" + (f" (+{t.trials - t.labelled} unlabelled)" if t.trials > t.labelled
                                               else "")
    p1 = t.pass_hat.get("1")
    values = [t.dimensions.get(d) for d in dims]
    return (t.id, *((t.suite,) if suite else ()), record, "no label" if p1 is None else f"{p1:.2f}",
            *(NOT_COLLECTED if v is None else f"{v:.2f}" for v in values),
            _num(t.steps, 1), _num(t.tokens, 0), _num(t.seconds, 3),
            NONE if t.first_deviation is None else f"step {t.first_deviation}")


def _tasks_block(report: TaskReport) -> Block:
    dims = _dimension_names(report.tasks)
    shown = report.tasks[:TASKS_SHOWN]
    cut = (f" The first {len(shown):,} of {len(report.tasks):,} tasks; `agent-factory tasks report --json` has every "
           "one." if len(shown) < len(report.tasks) else "")
    note = ("Worst first (lowest pass^1). Completion is the task's successes over its labelled trials; every other "
            f"dimension is the mean over the task's runs that measured it, \"{NOT_COLLECTED}\" when none did (never "
            "0: an imported benchmark gives completion alone). Steps, tokens and seconds are means per trial "
            f"({NONE}: not recorded by the runs' source); first deviation is the earliest step where one of the "
            f"task's runs left its expected steps ({NONE}: none did, or none are known)." + cut)
    # One suite is named in the section's intro: a column repeating it on every row would push the table past the
    # page's width.
    suite = len(report.suites) > 1
    columns = ("task", *(("suite",) if suite else ()), "successes / labelled", "pass^1",
               *(d.replace("_", " ") for d in dims), "steps", "tokens", "seconds", "first deviation")
    return Block(title="Per task", note=note,
                 table=Table(columns=columns, rows=tuple(_task_row(t, dims, suite=suite) for t in shown)))


def _deviation_block(ids: ChartIds, runs: Sequence[TaskRun]) -> Block:
    title = "Where runs first deviate"
    suites = len({r.suite for r in runs})
    deviated = [r for r in runs if r.first_deviation is not None]
    rest = len(runs) - len(deviated)
    quiet = (f"{rest:,} run(s) recorded no deviation: they followed their expected steps, or their task has none "
             "known (an imported benchmark's runs carry none).") if rest else ""
    if not deviated:
        return Block(title=title, note=f"No run recorded a first deviation. {quiet}")
    by_step: dict[int, Counter[str]] = {}
    for r in runs:
        if r.first_deviation is not None:
            by_step.setdefault(r.first_deviation, Counter())[_label(r, suites)] += 1
    steps = sorted(by_step)
    rows = tuple((f"step {s}", f"{sum(by_step[s].values()):,}",
                  ", ".join(f"{task} ({n})" for task, n in sorted(by_step[s].items(), key=lambda kv: (-kv[1], kv[0]))))
                 for s in steps)
    chart = ids.chart(title, count_chart([(f"step {s}", float(sum(by_step[s].values()))) for s in steps],
                                         x_title="runs whose first deviation is at this step"))
    note = (f"{len(deviated):,} of {len(runs):,} runs left their expected steps: each is counted at the first step "
            "(from 1) whose tool call does not meet the expected one, a missing call included, and its task named "
            f"with its runs there. {quiet}").rstrip()
    return Block(title=title, note=note, chart=chart,
                 table=Table(columns=("first deviation", "runs", "tasks (runs)"), rows=rows))


def task_sections(data: ReportData) -> list[Section]:
    """The Tasks section over the store's task runs; none when the store holds no task run."""
    if not data.task_runs:
        return []
    report = task_report(data.task_runs)
    ids = ChartIds(KEY)
    intro = (f"{report.runs:,} task run(s) of {len(report.tasks):,} task(s) from {', '.join(report.suites)} "
             "(`agent-factory tasks run` / `tasks import`): whether the agent finishes multi-step tasks over "
             "repeated trials, how each task fares on every dimension, and at which step runs leave the expected "
             "path. `agent-factory tasks report` prints the same numbers.")
    blocks = (_pass_hat_block(ids, report), _tasks_block(report), _deviation_block(ids, data.task_runs))
    return [Section(key=KEY, title=TITLE, intro=intro, blocks=blocks)]


__all__ = ["KEY", "NOT_COLLECTED", "TASKS_SHOWN", "task_sections"]
