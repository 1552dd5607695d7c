"""The run's seams: `RunReport` is typed and its `--json` output keeps the keys and shapes it had as dicts (a
contract), and a run's inputs are a snapshot read in one call, which a `Runner` takes instead of reading them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agent_factory.factory.cli.app import app
from agent_factory.factory.pipeline.report import ComponentReport, MetricReport, PlanReport, RunReport
from agent_factory.factory.simulate import SimConfig, simulate
from agent_factory.factory.store import Store
from agent_factory.factory.store.inputs import RunInputs, read_run_inputs

# The keys of `run --json` as the dict-valued report printed them (in this order), before its parts were typed.
TOP = ["run_id", "seconds", "plan", "units", "model_calls", "tokens", "cost_usd", "items", "uncollected_reasons",
       "results", "components"]
PLAN = ["trigger", "users_visited", "users_total", "users_rebuilt", "definitions_recollected", "definitions_total",
        "analyses_rerun", "analyses_total", "graph", "retry_next_run", "workers"]
GRAPH = ["trigger", "traces", "knowledge", "clause", "definition", "data", "audit", "admission", "act", "component", "analysis"]
COMPONENTS = ["execution", "substance", "trajectory", "results", "conduct", "provenance", "adjudication"]
COMPONENT = ["data", "results", "metrics"]
METRIC = ["metric", "layer", "stratum", "value", "low", "high", "n"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    simulate(SimConfig(users=12, seed=5), root / "sim")
    path = root / "store.duckdb"
    res = CliRunner().invoke(app, ["ingest", str(root / "sim"), "--store", str(path), "--pack",
                                   "business_analysis", "--json"])
    assert res.exit_code == 0, res.output
    return path


def _run(store: Path, *extra: str) -> dict[str, Any]:
    res = CliRunner().invoke(app, ["run", "--store", str(store), "--json", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_the_json_report_keeps_its_keys_and_shapes(store: Path) -> None:
    for report in (_run(store), _run(store)):  # a first run, then one with nothing changed
        assert list(report) == TOP
        plan = report["plan"]
        assert list(plan) == PLAN and list(plan["graph"]) == GRAPH
        assert isinstance(plan["trigger"], str) and isinstance(plan["retry_next_run"], list)
        assert all(isinstance(plan[k], int) for k in PLAN if k not in ("trigger", "graph", "retry_next_run"))
        assert all(isinstance(n, int) for n in plan["graph"].values())
        assert list(report["items"]) == ["collected", "reused", "kept", "uncollected"]
        assert list(report["results"]) == ["added", "removed", "unchanged"]
        assert list(report["components"]) == COMPONENTS
        for comp in report["components"].values():
            assert list(comp) == COMPONENT and isinstance(comp["results"], int)
            assert all(isinstance(n, int) for n in comp["data"].values())
            assert all(list(m) == METRIC for m in comp["metrics"])
        assert sum(len(c["metrics"]) for c in report["components"].values()) > 20
        # What the store keeps of the run is the same JSON.
        with Store(store, read_only=True) as st:
            stored = st.con.execute("SELECT report FROM runs WHERE run_id = ?", [report["run_id"]]).fetchone()
        assert stored is not None and json.loads(stored[0]) == report


def test_the_report_is_typed_and_reads_back_from_its_json(store: Path) -> None:
    data = _run(store)
    report = RunReport.model_validate(data)
    assert isinstance(report.plan, PlanReport) and report.plan.trigger == data["plan"]["trigger"]
    assert all(isinstance(c, ComponentReport) for c in report.components.values())
    metric = report.components["execution"].metrics[0]
    assert isinstance(metric, MetricReport) and metric.metric == data["components"]["execution"]["metrics"][0]["metric"]
    assert report.model_dump(mode="json") == data
    with pytest.raises(ValueError, match="plan.users_visited\n  Field required"):  # a dropped key is refused
        RunReport.model_validate({**data, "plan": {k: v for k, v in data["plan"].items() if k != "users_visited"}})


def test_a_runner_takes_the_inputs_it_is_given(store: Path) -> None:
    from agent_factory.evaluators.collect import Budget, Cascade, DatumCache, ModelConfig
    from agent_factory.factory.pipeline.engine import Runner
    from agent_factory.factory.suite.read import load_suite

    with Store(store, read_only=True) as st:
        inputs = read_run_inputs(st)
        assert inputs.sources and inputs.horizon_at == st.horizon()
        assert inputs.horizon == inputs.horizon_at.timestamp()  # type: ignore[union-attr]
        suite = load_suite(None, pack="business_analysis", store=st)
        cfg = ModelConfig()

        def runner(given: RunInputs) -> Runner:
            cascade = Cascade(cfg, cache=DatumCache(None), budget=Budget(cfg.budget))
            return Runner(st, pack=suite.pack, collector=cascade, specs=suite.components, inputs=given)

        assert runner(inputs).plan().users_total > 0
        earlier = datetime(2020, 1, 1, tzinfo=UTC)
        given = runner(RunInputs(sources=frozenset({"a-file"}), injections={}, horizon_at=earlier))
        assert given.sources == frozenset({"a-file"}) and given.horizon == earlier.timestamp()
        assert given.traces.sources == frozenset({"a-file"})  # the graph is built from the snapshot
        assert given.collect_plan(given.plan()).injections == {}
        assert runner(inputs).collect_plan(given.plan()).injections == inputs.injections
        with pytest.raises(ValueError, match="source\n  Extra inputs are not permitted"):  # a typo is refused
            RunInputs(sources=frozenset(), injections={}, horizon_at=None, source=1)  # type: ignore[call-arg]
