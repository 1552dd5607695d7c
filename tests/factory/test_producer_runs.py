"""A rules-only run over traces the real instrumentation wrote reports no friction the app did not have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_factory.factory.cli.app import app
from agent_factory.factory.store import Store

PRODUCERS = Path(__file__).resolve().parents[1] / "fixtures" / "producers"
# One shape per producer, the client-only one among them (its turns are grouped from single calls).
SHAPES = [s for s in ("pydantic_ai_v5", "openinference_client", "genai_agent") if (PRODUCERS / s).is_dir()]


def _metric(report: dict, component: str, name: str) -> dict:
    return next(m for m in report["components"][component]["metrics"] if m["metric"] == name
                and m["stratum"] == "all")


@pytest.mark.parametrize("shape", SHAPES)
def test_rules_only_run_reports_only_what_the_app_had(shape: str, no_model: Path) -> None:
    truth = json.loads((PRODUCERS / shape / "truth.json").read_text(encoding="utf-8"))
    store = str(no_model / "s.duckdb")
    runner = CliRunner()
    files = [str(PRODUCERS / shape / f) for f in truth["files"]["traces"]]
    assert runner.invoke(app, ["ingest", *files, "--store", store]).exit_code == 0
    result = runner.invoke(app, ["run", "--store", store, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    failed = [t for t in truth["turns"] if t["delivery"] != "delivered"]
    assert _metric(report, "execution", "failure_rate")["value"] == pytest.approx(len(failed) / 12)
    assert _metric(report, "execution", "failure_rate")["n"] == 12
    for name in ("event_count.request_replay", "event_count.verbatim_replay", "event_count.frustration",
                 "event_count.abandonment"):
        assert _metric(report, "trajectory", name)["value"] == 0, name
    assert _metric(report, "results", "redo_rate")["value"] == 0
    # The one session the app ended on a failed answer (its last turn was cut off) is the one that struggled.
    last = {}
    for t in truth["turns"]:
        last[t["session_id"]] = t
    ended_on_failure = {s for s, t in last.items() if t["delivery"] != "delivered"}
    with Store(store, read_only=True) as st:
        outcomes = dict(st.con.execute(
            "SELECT unit_id, value FROM results WHERE component = 'trajectory' AND metric = 'outcome'").fetchall())
    assert {s for s, v in outcomes.items() if json.loads(v) in ("struggled", "blocked")} == ended_on_failure
    assert len(outcomes) == 6
