"""The seeds' composites over a task report (`evaluators.tasks.composites`): seed 000's gated total against its
formula worked here trial by trial, None with the reason whenever an input is not collected (never a 0), seed
003's index and its parts, and the registry's names."""

from __future__ import annotations

from statistics import fmean

import pytest

from agent_factory.evaluators.tasks.composites import COMPOSITES, CompositeReport, composite
from agent_factory.evaluators.tasks.model import DIMENSIONS, IMPORTED, TaskRun
from agent_factory.evaluators.tasks.passk import task_report


def trials(task: str, outcomes: list[bool], dims: dict[str, float], *, reason: dict[str, str] | None = None
           ) -> list[TaskRun]:
    """One task's trials, each with the same measures `dims` (so the task's mean of each is `dims`)."""
    return [TaskRun(suite="s", task_id=task, trial=str(i), success=ok, source="f", source_digest="d",
                    conversation_id=f"{task}-{i}", steps=2, dimensions=dims, not_collected=reason or {})
            for i, ok in enumerate(outcomes)]


FULL_A = {"final_quality": 0.8, "state_consistency": 1.0, "error_recovery": 0.5, "overlap": 0.75}
FULL_B = {"final_quality": 0.2, "state_consistency": 0.5, "error_recovery": 1.0, "overlap": 0.5}


def _seed_000_trial(success: bool, d: dict[str, float]) -> float:
    """Seed 000's total of one trial: 0.4 completion + 0.3 quality + 0.2 state + 0.1 recovery, x0.3 on failure."""
    total = 0.4 * success + 0.3 * d["final_quality"] + 0.2 * d["state_consistency"] + 0.1 * d["error_recovery"]
    return total if success else 0.3 * total


def test_gated_total_is_the_mean_over_tasks_of_the_mean_trial_total() -> None:
    a, b = [True, True, False, True], [False, False, True]
    report = task_report(trials("a", a, FULL_A) + trials("b", b, FULL_B))
    got = composite(report, "gated-total").composite
    expected = fmean([fmean(_seed_000_trial(ok, FULL_A) for ok in a), fmean(_seed_000_trial(ok, FULL_B) for ok in b)])
    assert got.value == pytest.approx(expected, abs=1e-12)
    assert got.missing == []
    assert got.label.startswith("view: ")
    assert [p.name for p in got.parts] == ["completion", "final_quality", "state_consistency", "error_recovery"]
    assert [p.weight for p in got.parts] == [0.4, 0.3, 0.2, 0.1]
    assert [p.value for p in got.parts] == pytest.approx([(3 / 4 + 1 / 3) / 2, 0.5, 0.75, 0.75])


def test_a_task_whose_trials_agree_gets_the_seeds_figure_exactly() -> None:
    done = composite(task_report(trials("a", [True, True], FULL_A)), "gated-total").composite
    assert done.value == pytest.approx(0.4 + 0.3 * 0.8 + 0.2 * 1.0 + 0.1 * 0.5)
    failed = composite(task_report(trials("a", [False, False], FULL_A)), "gated-total").composite
    assert failed.value == pytest.approx(0.3 * (0.3 * 0.8 + 0.2 * 1.0 + 0.1 * 0.5))


def test_an_input_not_collected_makes_the_composite_null_never_a_zero() -> None:
    partial = {k: v for k, v in FULL_B.items() if k != "final_quality"}
    runs = trials("a", [True], FULL_A) + trials("b", [True], partial, reason={"final_quality": "no model configured"})
    got = composite(task_report(runs), "gated-total").composite
    assert got.value is None
    assert got.missing == ["final_quality: not collected for 1 of 2 task(s) (no model configured)"]
    assert {p.name: p.value for p in got.parts}["final_quality"] is None
    # An imported benchmark carries completion alone: every other input is missing, each named with the reason.
    unrecorded = {d: IMPORTED for d in DIMENSIONS if d != "completion"}
    imported = composite(task_report(trials("a", [True, False], {}, reason=unrecorded)), "gated-total").composite
    assert imported.value is None
    assert [m.split(":")[0] for m in imported.missing] == ["final_quality", "state_consistency", "error_recovery"]
    assert all(m.endswith(f"({IMPORTED})") for m in imported.missing)
    index = composite(task_report(trials("a", [True, False], {}, reason=unrecorded)), "intelligence-index")
    assert index.composite.value is None
    assert [m.split(":")[0] for m in index.composite.missing] == ["overlap", "stability", "efficiency"]
    # A task without a label has no completion: missing too, not a failure.
    unlabelled = trials("a", [True], FULL_A) + [r.model_copy(update={"success": None})
                                                for r in trials("u", [True], FULL_A)]
    assert composite(task_report(unlabelled), "gated-total").composite.value is None


def test_the_index_shows_its_parts_and_stays_null_without_stability_and_efficiency() -> None:
    report = task_report(trials("a", [True, False], FULL_A) + trials("b", [True, True], FULL_B))
    got = composite(report, "intelligence-index").composite
    assert got.value is None
    assert [(p.name, p.weight) for p in got.parts] == [("success", 0.4), ("process", 0.3), ("stability", 0.2),
                                                       ("efficiency", 0.1)]
    assert [p.value for p in got.parts[:2]] == pytest.approx([100 * (0.5 + 1.0) / 2, 100 * (0.75 + 0.5) / 2])
    assert [p.value for p in got.parts[2:]] == [None, None]
    assert [m.split(":")[0] for m in got.missing] == ["stability", "efficiency"]
    assert sum(p.weight for p in got.parts) == pytest.approx(1.0)


def test_the_report_carries_the_composite_only_on_request() -> None:
    report = task_report(trials("a", [True], FULL_A))
    assert "composite" not in report.model_dump(mode="json")
    with_it = composite(report, "gated-total")
    assert isinstance(with_it, CompositeReport)
    dumped = with_it.model_dump(mode="json")
    assert set(dumped["composite"]) == {"name", "label", "value", "parts", "missing"}
    assert {k: v for k, v in dumped.items() if k != "composite"} == report.model_dump(mode="json")
    with pytest.raises(ValueError, match="gated-total, intelligence-index"):
        composite(report, "overall")
    assert set(COMPOSITES) == {"gated-total", "intelligence-index"}


def _runner_trials(task: str, outcomes: list[bool], dims: dict[str, float], *, steps: int, redundant: int,
                   failed: int, faults: list[bool]) -> list[TaskRun]:
    """Trials as the runner records them: calls counted, faults said."""
    return [r.model_copy(update={"steps": steps, "redundant_calls": redundant, "failed_calls": failed,
                                 "fault": fault})
            for r, fault in zip(trials(task, outcomes, dims), faults, strict=True)]


def test_the_index_of_runner_trials_is_the_seeds_weighted_sum_of_its_parts() -> None:
    # Task a: 1 of 2 succeed, overlap 0.75, 4 calls of which 1 redundant, one trial ended by a fault.
    # Task b: 2 of 2, no expected steps (overlap does not apply), no call at all.
    a = _runner_trials("a", [True, False], {"overlap": 0.75}, steps=4, redundant=1, failed=0, faults=[False, True])
    b = _runner_trials("b", [True, True], {}, steps=0, redundant=0, failed=0, faults=[False, False])
    got = composite(task_report(a + b), "intelligence-index").composite
    success, process, stability, efficiency = 100 * (0.5 + 1) / 2, 100 * 0.75, 100 * (0.5 + 1) / 2, 100 * (0.75 + 1) / 2
    assert [p.value for p in got.parts] == pytest.approx([success, process, stability, efficiency])
    assert got.missing == []
    assert got.value == pytest.approx(0.4 * success + 0.3 * process + 0.2 * stability + 0.1 * efficiency)


def test_gated_total_scores_recovery_full_without_a_failed_call_and_leaves_out_what_does_not_apply() -> None:
    # No call failed (error recovery None, failed calls 0: the seed's full score); no state criterion (None, no
    # reason: does not apply, so quality and recovery share the 0.6 in their ratio 0.3 : 0.1).
    runs = _runner_trials("a", [True, True], {"final_quality": 0.5}, steps=2, redundant=0, failed=0,
                          faults=[False, False])
    got = composite(task_report(runs), "gated-total").composite
    assert got.missing == []
    assert got.value == pytest.approx(0.4 + 0.6 * (0.3 * 0.5 + 0.1 * 1.0) / 0.4)
    assert {p.name: p.value for p in got.parts}["state_consistency"] is None
