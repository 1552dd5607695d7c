"""The gate on real trajectories: tau-bench's airline agent (gpt-4o), trials 0-1 as the baseline and trials 2-3 as
the candidate of the same agent, selected by the `trial` attribute of one store. Nothing changed, so it passes."""

from __future__ import annotations

import shutil
from pathlib import Path

from agent_factory import open_project


def test_trials_of_the_same_agent_pass(tau_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "tau.duckdb"
    shutil.copy(tau_store, store)
    with open_project(store=store, pack="airline") as project:
        report = project.gate(baseline="trial=0,1", candidate="trial=2,3")
    assert report.exit_code == 0, [(c.component, c.verdict, c.reason) for c in report.components]
    assert report.verdict == "pass"
    # Users are tau-bench's simulated customers: 21 over the 32 tasks, each in both trial pairs.
    assert report.users_baseline == report.users_candidate == 21
    tested = [m for c in report.components for m in c.metrics if m.statistic is not None]
    assert len(tested) >= 3, [m.metric for c in report.components for m in c.metrics]
    assert report.calibration is None  # nothing calibrated on this store: the Bonferroni thresholds
    # The airline pack's own invariant (confirm before a write) is broken by this agent in every trial pair; with
    # no suite, no person confirmed it for this agent: counted in the reason, no incident.
    conduct = next(c for c in report.components if c.component == "conduct")
    assert not conduct.incidents and "confirm_before_write" in (conduct.reason or "")
