"""pass^k by tau-bench's definition, and the task report over task runs.

pass^k (Yao et al. 2024, tau-bench, arXiv:2406.12045) is the chance that k trials of a task, drawn without
replacement from its n trials, all succeed, averaged over tasks: mean over tasks of C(c, k) / C(n, k), where c
is the task's successes. tau-bench computes it with one n for every task (the number of trials); here each task
has its own n, so:

- a trial without a success label (`TaskRun.success is None`, a missing reward) is left out of its task's n and
  counted in `TaskReport.unlabelled`: no label is not a failure;
- a task of fewer than k labelled trials is left out of k's mean (C(n, k) is 0), and `TaskReport.tasks_counted`
  says how many tasks each k is over. With every task at the same n, as in tau-bench, this is tau-bench's figure.

K is the largest n of any task. Pure: runs in, a report out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from math import comb
from statistics import fmean

from agent_factory.evaluators.tasks.model import DIMENSIONS, TaskReport, TaskRun, TaskSummary


def task_pass_hat(n: int, c: int, k: int) -> float:
    """C(c, k) / C(n, k): the chance that k of a task's n trials, drawn without replacement, all succeed."""
    if not 0 <= c <= n:
        raise ValueError(f"pass^k: successes {c} must lie between 0 and the trials {n}")
    if not 1 <= k <= n:
        raise ValueError(f"pass^k: k {k} must lie between 1 and the trials {n}")
    return comb(c, k) / comb(n, k)


def pass_hat(counts: Iterable[tuple[int, int]]) -> tuple[dict[int, float], dict[int, int]]:
    """pass^k for k = 1..K over tasks given as (n, c), labelled trials and successes, and how many tasks each k's
    mean is over (those with n >= k); tasks of no labelled trial count for no k."""
    tasks = [(n, c) for n, c in counts if n > 0]
    top = max((n for n, _ in tasks), default=0)
    values: dict[int, float] = {}
    counted: dict[int, int] = {}
    for k in range(1, top + 1):
        ratios = [task_pass_hat(n, c, k) for n, c in tasks if n >= k]
        values[k] = fmean(ratios)
        counted[k] = len(ratios)
    return values, counted


def _trial_key(trial: str) -> tuple[int, int, str]:
    """Trials in numeric order when they are numbers (tau-bench's 0..3), else by name."""
    return (0, int(trial), "") if trial.isdigit() else (1, 0, trial)


def _mean(values: Sequence[float | int | None]) -> float | None:
    known = [float(v) for v in values if v is not None]
    return fmean(known) if known else None


def summarise_task(suite: str, task_id: str, runs: Sequence[TaskRun], *, label: str) -> TaskSummary:
    """One task's trials as its summary, named `label`."""
    labelled = [r for r in runs if r.success is not None]
    n, c = len(labelled), sum(1 for r in labelled if r.success)
    # Completion is what the labels say; every other dimension is the mean over the runs that measured it.
    dims: dict[str, float | None] = {d: _mean([r.dimensions.get(d) for r in runs]) for d in DIMENSIONS}
    dims["completion"] = c / n if n else None
    deviations = [r.first_deviation for r in runs if r.first_deviation is not None]
    # Why a dimension is None, as its runs said; a dimension some run measured has a value and needs none.
    reasons: dict[str, list[str]] = defaultdict(list)
    for r in runs:
        for d, why in r.not_collected.items():
            if dims.get(d) is None and why not in reasons[d]:
                reasons[d].append(why)
    return TaskSummary(
        id=label, suite=suite, trials=len(runs), labelled=n, successes=c,
        pass_hat={str(k): task_pass_hat(n, c, k) for k in range(1, n + 1)}, dimensions=dims,
        first_deviation=min(deviations, default=None),
        steps=_mean([r.steps for r in runs]), tokens=_mean([r.tokens for r in runs]),
        seconds=_mean([r.seconds for r in runs]), redundant_calls=_mean([r.redundant_calls for r in runs]),
        failed_calls=_mean([r.failed_calls for r in runs]),
        faults=None if all(r.fault is None for r in runs) else sum(1 for r in runs if r.fault),
        not_collected={d: "; ".join(why) for d, why in sorted(reasons.items())},
    )


def task_report(runs: Sequence[TaskRun]) -> TaskReport:
    """The report over task runs: pass^k for k = 1..K and every task, worst first (lowest pass^1; tasks without
    a label last), ties by id."""
    grouped: dict[tuple[str, str], list[TaskRun]] = defaultdict(list)
    for r in runs:
        grouped[(r.suite, r.task_id)].append(r)
    suites = sorted({s for s, _ in grouped})
    summaries = []
    for (suite, task), trials in grouped.items():
        label = task if len(suites) == 1 else f"{suite}/{task}"
        ordered = sorted(trials, key=lambda r: _trial_key(r.trial))
        summaries.append(summarise_task(suite, task, ordered, label=label))
    summaries.sort(key=lambda s: (s.labelled == 0, s.pass_hat.get("1", 0.0), _trial_key(s.id)))
    values, counted = pass_hat((s.labelled, s.successes) for s in summaries)
    return TaskReport(
        pass_hat={str(k): v for k, v in values.items()}, tasks_counted={str(k): m for k, m in counted.items()},
        tasks=summaries, runs=len(runs), unlabelled=sum(1 for r in runs if r.success is None), suites=suites,
    )


__all__ = ["pass_hat", "summarise_task", "task_pass_hat", "task_report"]
