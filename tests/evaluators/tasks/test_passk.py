"""pass^k (`evaluators.tasks.passk`) against tau-bench's worked case, against an enumeration of every k-subset of
trials over many random suites (independent of the C(c, k)/C(n, k) formula), and the task report's handling of
unlabelled trials, short tasks and several suites."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from agent_factory.evaluators.tasks.model import DIMENSIONS, TaskRun
from agent_factory.evaluators.tasks.passk import pass_hat, task_pass_hat, task_report


def run(task: str, trial: int, success: bool | None, *, suite: str = "s", steps: int = 3,
        tokens: int | None = None) -> TaskRun:
    return TaskRun(suite=suite, task_id=task, trial=str(trial), success=success,
                   reward=None if success is None else float(success), source="f.json", source_digest="d",
                   conversation_id=f"{suite}-{task}-{trial}", steps=steps, tokens=tokens)


def test_three_trials_two_successes() -> None:
    values, counted = pass_hat([(3, 2)])
    assert values == pytest.approx({1: 2 / 3, 2: 1 / 3, 3: 0.0})
    assert counted == {1: 1, 2: 1, 3: 1}


def _by_enumeration(outcomes: list[bool], k: int) -> float:
    """The share of k-subsets of the trials that all succeed (what C(c, k)/C(n, k) counts)."""
    subsets = list(itertools.combinations(outcomes, k))
    return sum(all(s) for s in subsets) / len(subsets)


def test_pass_hat_equals_enumerated_subsets_over_many_seeds() -> None:
    for seed in range(60):
        rng = np.random.default_rng(seed)
        tasks = [list(rng.random(int(rng.integers(1, 7))) < rng.random()) for _ in range(int(rng.integers(1, 9)))]
        values, counted = pass_hat((len(t), sum(t)) for t in tasks)
        assert max(values) == max(len(t) for t in tasks)
        for k, value in values.items():
            eligible = [t for t in tasks if len(t) >= k]
            assert counted[k] == len(eligible)
            assert value == pytest.approx(float(np.mean([_by_enumeration(t, k) for t in eligible])), abs=1e-12)


def test_pass_hat_is_non_increasing_in_k_when_every_task_has_n_trials() -> None:
    rng = np.random.default_rng(7)
    cs = [int(c) for c in rng.integers(0, 6, size=40)]
    values, _ = pass_hat((5, c) for c in cs)
    assert values[5] == pytest.approx(sum(c == 5 for c in cs) / 40)
    assert values[2] == pytest.approx(float(np.mean([math.comb(c, 2) / 10 for c in cs])))
    seq = [values[k] for k in sorted(values)]
    assert all(a >= b for a, b in itertools.pairwise(seq))


def test_bad_counts_name_what_failed() -> None:
    with pytest.raises(ValueError, match="successes 4 must lie between 0 and the trials 3"):
        task_pass_hat(3, 4, 1)
    with pytest.raises(ValueError, match="k 4 must lie between 1 and the trials 3"):
        task_pass_hat(3, 2, 4)


def test_unlabelled_trials_leave_n_and_short_tasks_leave_k() -> None:
    runs = [run("a", 0, True), run("a", 1, True), run("a", 2, None), run("a", 3, False),
            run("b", 0, True), run("b", 1, None),
            run("c", 0, None)]
    report = task_report(runs)
    assert report.unlabelled == 3
    assert report.runs == 7
    # a: n 3, c 2; b: n 1, c 1; c: no label, in no k's mean.
    assert report.pass_hat == pytest.approx({"1": (2 / 3 + 1) / 2, "2": 1 / 3, "3": 0.0})
    assert report.tasks_counted == {"1": 2, "2": 1, "3": 1}
    by_id = {t.id: t for t in report.tasks}
    assert (by_id["a"].trials, by_id["a"].labelled, by_id["a"].successes) == (4, 3, 2)
    assert by_id["c"].pass_hat == {}
    assert by_id["c"].dimensions["completion"] is None
    # Worst first, a task without a label last.
    assert [t.id for t in report.tasks] == ["a", "b", "c"]


def test_dimensions_of_an_import_are_completion_alone_and_means_skip_missing() -> None:
    report = task_report([run("t", 0, True, steps=2, tokens=100), run("t", 1, False, steps=4)])
    task = report.tasks[0]
    assert set(task.dimensions) == set(DIMENSIONS)
    assert task.dimensions["completion"] == 0.5
    assert all(v is None for k, v in task.dimensions.items() if k != "completion")
    assert (task.steps, task.tokens, task.seconds) == (3.0, 100.0, None)
    assert task.first_deviation is None


def test_tasks_of_two_suites_stay_apart() -> None:
    report = task_report([run("1", 0, True, suite="airline"), run("1", 0, False, suite="retail")])
    assert sorted(t.id for t in report.tasks) == ["airline/1", "retail/1"]
    assert report.pass_hat == {"1": 0.5}
    assert report.suites == ["airline", "retail"]


def test_no_runs_give_an_empty_report() -> None:
    report = task_report([])
    assert (report.pass_hat, report.tasks, report.runs) == ({}, [], 0)


def test_measured_dimensions_average_over_runs_and_the_first_deviation_is_the_earliest() -> None:
    runs = [run("t", 0, True).model_copy(update={"dimensions": {"step_pass_rate": 1.0}, "first_deviation": 5}),
            run("t", 1, False).model_copy(update={"dimensions": {"step_pass_rate": 0.5, "completion": 1.0},
                                                  "first_deviation": 3}),
            run("t", 2, True)]
    task = task_report(runs).tasks[0]
    assert task.dimensions["step_pass_rate"] == 0.75
    assert task.dimensions["completion"] == pytest.approx(2 / 3)  # the labels', not a run's own claim
    assert task.dimensions["error_recovery"] is None
    assert task.first_deviation == 3


def test_redundant_calls_average_and_reasons_name_what_was_not_collected() -> None:
    no_model = {"final_quality": "no model configured"}
    runs = [run("t", 0, True).model_copy(update={"redundant_calls": 3, "not_collected": no_model}),
            run("t", 1, False).model_copy(update={"redundant_calls": 0, "not_collected": no_model}),
            run("t", 2, False)]  # an import's run: not counted
    task = task_report(runs).tasks[0]
    assert task.redundant_calls == 1.5
    assert task.dimensions["final_quality"] is None
    assert task.not_collected == {"final_quality": "no model configured"}
    # A dimension one run measured has a value, and so no reason; different reasons are all kept.
    judged = run("u", 0, True).model_copy(update={"dimensions": {"final_quality": 0.75}})
    failed = run("u", 1, True).model_copy(update={"not_collected": {"final_quality": "m: budget exhausted"}})
    mixed = run("v", 0, True).model_copy(update={"not_collected": {"final_quality": "no final answer to judge"}})
    by_id = {t.id: t for t in task_report([judged, failed, mixed, failed.model_copy(update={"task_id": "v"})]).tasks}
    assert (by_id["u"].dimensions["final_quality"], by_id["u"].not_collected) == (0.75, {})
    assert by_id["v"].not_collected == {"final_quality": "no final answer to judge; m: budget exhausted"}
    assert task_report([run("w", 0, True)]).tasks[0].redundant_calls is None
