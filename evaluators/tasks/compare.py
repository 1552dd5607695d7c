"""A candidate's task runs against a baseline's (`agent-factory tasks compare`, issue 35): does the candidate fall
below the baseline on completion?

Tasks are matched by task id when each side holds one suite (two imports of one benchmark under different file
names), else by `suite/task`. A task's completion is its successes over its labelled trials (pass^1); a side's is
the mean over its tasks, as `tasks report` gives it. The decision is over the tasks labelled on both sides, each
a pair (baseline, candidate) of completions:

- **the test** (default): a one-sided Wilcoxon signed-rank test over tasks of the per-task change in completion
  (candidate - baseline), tasks of no change dropped (Wilcoxon's rule). A task is a cluster of trials, so trials of
  one task never count as independent evidence, and the rank test assumes nothing of the changes' distribution
  (bounded, tied, few tasks). The p value is exact (every sign flip of the changes, ties at their mid-ranks) up to
  `EXACT_UP_TO` changed tasks, scipy's normal approximation with the tie correction beyond. The candidate is
  below when its mean change is negative and p < alpha: a drop that chance explains (one task 3/4 -> 2/4: p 0.5)
  does not fail a release.
- **strict**: below when the mean change over the shared tasks is negative at all (computed exactly, as fractions).

Pure: runs in, a comparison out; the selectors (`KEY=V1,V2` over `SELECTOR_KEYS`) are parsed and applied here too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from fractions import Fraction
from typing import Literal

import numpy as np
from pydantic import Field
from scipy import stats

from agent_factory.evaluators.tasks.model import TaskRun, TaskSummary
from agent_factory.evaluators.tasks.passk import summarise_task
from agent_factory.frozen import Frozen

SELECTOR_KEYS = ("suite", "agent", "source", "trial")
"""The task run's fields a selector `KEY=V1,V2` may name."""

EXACT_UP_TO = 200
"""Changed tasks up to which the p value is exact (`exact_lower_p`, quadratic in the tasks); scipy's normal
approximation beyond, where it is close to the exact figure."""

TEST_NAME = "one-sided Wilcoxon signed-rank over tasks"


class SideSummary(Frozen):
    """One side of a comparison as a whole."""

    name: str
    """How the side was given (`agent=script:succeed`, a store file)."""
    runs: int = Field(ge=0)
    """Its task runs."""
    tasks: int = Field(ge=0)
    """Its tasks."""
    suites: list[str]
    """The suites its tasks come from."""
    completion: float | None
    """The mean over its tasks with a label of their completion (pass^1); None when no run has a label."""


class TaskSide(Frozen):
    """One task on one side."""

    trials: int = Field(ge=0)
    labelled: int = Field(ge=0)
    successes: int = Field(ge=0)
    completion: float | None
    """successes / labelled; None when no trial has a label."""
    pass_hat: dict[str, float]
    """k -> pass^k of the task on this side, k = 1..labelled."""


class TaskChange(Frozen):
    """One task's completion before (baseline) and after (candidate)."""

    id: str
    """The task (`suite/task` when matched by suite and task)."""
    baseline: TaskSide | None
    """None when the task is only on the candidate's side."""
    candidate: TaskSide | None
    """None when the task is only on the baseline's side."""
    change: float | None
    """Candidate's completion minus the baseline's; None unless both sides have labelled trials of it."""
    only_in: Literal["baseline", "candidate"] | None = None
    """The one side the task is on, when it is not on both."""


class PairedTest(Frozen):
    """The test of the per-task changes."""

    name: str = TEST_NAME
    method: Literal["exact", "normal approximation", "none"]
    """How the p value was computed ("none": no task changed, p is 1)."""
    tasks: int = Field(ge=0)
    """Tasks labelled on both sides (the pairs)."""
    changed: int = Field(ge=0)
    """Pairs whose completion changed (the test's n)."""
    statistic: float | None
    """W+, the sum of the ranks of the gains (small when the candidate falls); None when no task changed."""
    p_value: float = Field(ge=0, le=1)
    """The chance, were the sides alike, of changes at least this far below."""
    alpha: float = Field(gt=0, lt=1)


class TaskComparison(Frozen):
    """A candidate's task runs against a baseline's: completion per task and over the suite, the test, the
    verdict."""

    baseline: SideSummary
    candidate: SideSummary
    matched_by: Literal["task id", "suite/task"]
    mean_change: float
    """The mean over the shared tasks (labelled on both sides) of the change in completion."""
    test: PairedTest
    strict: bool
    """Whether any drop in mean completion counts as below (`--strict`), not only one the test confirms."""
    below: bool
    """The verdict: the candidate falls below the baseline on completion (`tasks compare` exits 4)."""
    reason: str
    """The verdict in words."""
    tasks: list[TaskChange]
    """Every task, worst first: largest drop first, then the tasks on one side only, ties by id."""


def parse_selector(text: str) -> tuple[str, tuple[str, ...]] | None:
    """`KEY=V1,V2` as (key, values); None when `text` has no `=`. A key outside `SELECTOR_KEYS`, or no value,
    is a ValueError naming the valid keys."""
    if "=" not in text:
        return None
    key, _, raw = text.partition("=")
    key = key.strip()
    values = tuple(v.strip() for v in raw.split(",") if v.strip())
    if key not in SELECTOR_KEYS:
        raise ValueError(f"{text!r}: a selector's key is one of {', '.join(SELECTOR_KEYS)}, got {key!r}")
    if not values:
        raise ValueError(f"{text!r}: a selector needs a value after '=' (e.g. {key}=A,B)")
    return key, values


def selector_value(run: TaskRun, key: str) -> str | None:
    """The run's value of a selector's key, as text; None when the run has none (an import names no agent)."""
    value: str | None = getattr(run, key)
    return value


def select_runs(runs: Sequence[TaskRun], key: str, values: Sequence[str]) -> list[TaskRun]:
    """The runs whose `key` is one of `values` (compared as text)."""
    wanted = set(values)
    return [r for r in runs if selector_value(r, key) in wanted]


def _side_tasks(runs: Sequence[TaskRun], *, by_id: bool) -> dict[str, TaskSummary]:
    grouped: dict[tuple[str, str], list[TaskRun]] = defaultdict(list)
    for r in runs:
        grouped[(r.suite, r.task_id)].append(r)
    tasks = {}
    for (suite, task), trials in grouped.items():
        label = task if by_id else f"{suite}/{task}"
        tasks[label] = summarise_task(suite, task, trials, label=label)
    return tasks


def _side(t: TaskSummary) -> TaskSide:
    return TaskSide(trials=t.trials, labelled=t.labelled, successes=t.successes,
                    completion=t.successes / t.labelled if t.labelled else None, pass_hat=t.pass_hat)


def _summary(name: str, runs: Sequence[TaskRun], tasks: dict[str, TaskSummary]) -> SideSummary:
    labelled = [t.successes / t.labelled for t in tasks.values() if t.labelled]
    return SideSummary(name=name, runs=len(runs), tasks=len(tasks), suites=sorted({r.suite for r in runs}),
                       completion=float(np.mean(labelled)) if labelled else None)


def exact_lower_p(nonzero: np.ndarray) -> tuple[float, float]:
    """(W+, P(W+ <= observed)) over every sign flip of the non-zero changes, ties at their mid-ranks.

    scipy's exact Wilcoxon distribution assumes no ties, and its permutation method enumerates the 2^n flips one
    by one (seconds at 14 tasks); the distribution of W+ is the product over changes of (1 + x^rank) / 2, so it is
    built rank by rank here. Doubled mid-ranks are integers, so the sums are exact indices."""
    doubled = np.rint(2 * stats.rankdata(np.abs(nonzero))).astype(int)
    dist = np.zeros(int(doubled.sum()) + 1)
    dist[0] = 1.0
    for r in doubled:
        shifted = np.zeros_like(dist)
        shifted[r:] = dist[:-r]
        dist = 0.5 * (dist + shifted)  # the change's rank counts toward W+ or not, each with chance 1/2
    observed = int(doubled[nonzero > 0].sum())
    return observed / 2, float(dist[:observed + 1].sum())


def signed_rank_test(changes: Sequence[float], *, alpha: float) -> PairedTest:
    """The one-sided Wilcoxon signed-rank test that the changes lie below 0, zeros dropped: exact up to
    `EXACT_UP_TO` non-zero changes, scipy's normal approximation with the tie correction beyond."""
    nonzero = np.asarray([c for c in changes if c != 0], dtype=float)
    n = len(nonzero)
    if n == 0:
        return PairedTest(method="none", tasks=len(changes), changed=0, statistic=None, p_value=1.0, alpha=alpha)
    if n <= EXACT_UP_TO:
        statistic, p = exact_lower_p(nonzero)
    else:
        res = stats.wilcoxon(nonzero, alternative="less", method="approx")  # normal, tie-corrected
        statistic, p = float(res.statistic), float(res.pvalue)
    return PairedTest(method="exact" if n <= EXACT_UP_TO else "normal approximation", tasks=len(changes),
                      changed=n, statistic=statistic, p_value=min(1.0, p), alpha=alpha)


def _order(c: TaskChange) -> tuple[bool, float, int, int, str]:
    # Worst first; among equal changes, ids in numeric order when they are numbers (tau-bench's), else by name.
    return (c.change is None, c.change if c.change is not None else 0.0, *_id_key(c.id))


def _id_key(task: str) -> tuple[int, int, str]:
    return (0, int(task), "") if task.isdigit() else (1, 0, task)


def compare_tasks(baseline: Sequence[TaskRun], candidate: Sequence[TaskRun], *, baseline_name: str,
                  candidate_name: str, alpha: float = 0.05, strict: bool = False) -> TaskComparison:
    """The candidate's runs against the baseline's (see the module): per task completion on each side and its
    change, the signed-rank test over the shared tasks, and whether the candidate falls below. A ValueError when
    no task has labelled trials on both sides (there is nothing to compare)."""
    by_id = len({r.suite for r in baseline}) == 1 and len({r.suite for r in candidate}) == 1
    base, cand = _side_tasks(baseline, by_id=by_id), _side_tasks(candidate, by_id=by_id)
    changes: list[TaskChange] = []
    paired: list[Fraction] = []
    for task in sorted(base.keys() | cand.keys()):
        b, c = base.get(task), cand.get(task)
        delta: Fraction | None = None
        if b is not None and c is not None and b.labelled and c.labelled:
            delta = Fraction(c.successes, c.labelled) - Fraction(b.successes, b.labelled)
            paired.append(delta)
        changes.append(TaskChange(
            id=task, baseline=None if b is None else _side(b), candidate=None if c is None else _side(c),
            change=None if delta is None else float(delta),
            only_in="baseline" if c is None else "candidate" if b is None else None))
    if not paired:
        raise ValueError(f"no task has labelled trials on both sides: baseline {baseline_name} has "
                         f"{len(base)} task(s) ({', '.join(sorted(base)[:5]) or 'none'}), candidate {candidate_name} "
                         f"{len(cand)} ({', '.join(sorted(cand)[:5]) or 'none'}); matched by "
                         f"{'task id' if by_id else 'suite/task'}")
    # Exact fractions: a mean change of 0 is 0, so --strict never fails on a rounding error.
    mean = sum(paired, Fraction(0)) / len(paired)
    test = signed_rank_test([float(d) for d in paired], alpha=alpha)
    if strict:
        below = mean < 0
        reason = (f"strict: mean completion changed by {float(mean):+.3f} over {len(paired)} shared task(s)"
                  + (": any drop fails" if below else ": no drop"))
    else:
        below = mean < 0 and test.p_value < alpha
        if mean >= 0:
            reason = f"mean completion changed by {float(mean):+.3f} over {len(paired)} shared task(s): no drop"
        else:
            reason = (f"mean completion fell by {float(-mean):.3f} over {len(paired)} shared task(s); p "
                      f"{test.p_value:.3g} {'<' if below else '>='} alpha {alpha:g}: "
                      + ("beyond chance" if below else "chance explains it"))
    return TaskComparison(
        baseline=_summary(baseline_name, baseline, base), candidate=_summary(candidate_name, candidate, cand),
        matched_by="task id" if by_id else "suite/task", mean_change=float(mean), test=test, strict=strict,
        below=below, reason=reason, tasks=sorted(changes, key=_order))


__all__ = ["EXACT_UP_TO", "SELECTOR_KEYS", "TEST_NAME", "PairedTest", "SideSummary", "TaskChange", "TaskComparison",
           "TaskSide", "compare_tasks", "exact_lower_p", "parse_selector", "select_runs", "selector_value",
           "signed_rank_test"]
