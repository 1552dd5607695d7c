"""`agent-factory run` end to end: simulate -> ingest -> run, rules only and with a model behind a local server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_factory.factory.cli.app import app
from agent_factory.factory.simulate import SimConfig, simulate
from agent_factory.factory.store import Store
from tests.fakes.openai_server import FakeOpenAIServer, fake_openai  # noqa: F401


@pytest.fixture(scope="module")
def sim_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding 40 simulated users' traffic (ingested once; tests copy it)."""
    root = tmp_path_factory.mktemp("sim")
    simulate(SimConfig(users=40, seed=3), root / "sim")
    store = root / "store.duckdb"
    res = CliRunner().invoke(app, ["ingest", str(root / "sim"), "--store", str(store), "--pack",
                                   "business_analysis", "--json"])
    assert res.exit_code == 0, res.output
    return store


def _copy(store: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "store.duckdb"
    dst.write_bytes(store.read_bytes())
    return dst


def _run(store: Path, *extra: str, env: dict[str, str] | None = None) -> dict:
    res = CliRunner().invoke(app, ["run", "--store", str(store), "--json", *extra], env=env)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _stored(store: Path) -> tuple[list[tuple], list[tuple]]:
    with Store(store) as st:
        data = st.con.execute(
            "SELECT unit_id, item, value, fact, reason, evidence FROM atomic_data ORDER BY unit_id, item"
        ).fetchall()
        results = st.con.execute(
            "SELECT component, layer, metric, stratum, unit_id, value, low, high, n FROM results"
            " ORDER BY component, layer, metric, stratum, unit_id"
        ).fetchall()
    return data, results


def test_rules_only_run_then_rerun_reuses_everything(sim_store: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("AGENT_FACTORY_SMALL_MODEL", "AGENT_FACTORY_JURY", "AGENT_FACTORY_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    store = _copy(sim_store, tmp_path)
    first = _run(store)
    assert set(first) >= {"model_calls", "items", "components"}
    assert first["model_calls"] == 0
    assert set(first["components"]) == {"execution", "substance", "trajectory", "results", "conduct",
                                        "provenance", "adjudication"}
    # With no model configured, model-tier items are uncollected with that reason, never guessed.
    assert first["uncollected_reasons"].get("no model configured", 0) > 0
    assert first["components"]["substance"]["data"].get("yes", 0) == 0
    assert first["items"]["collected"] > 1000 and first["items"]["reused"] == 0
    data1, results1 = _stored(store)
    metrics = {m["metric"] for m in first["components"]["execution"]["metrics"]}
    assert "failure_rate" in metrics

    # Nothing changed: the pipeline collects and analyses nothing, and every stored row stays as it was. Run
    # through the console entry, the reported seconds are the wall time a user waits (imports, suite, plan).
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "agent_factory", "run", "--store", str(store), "--json"],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    wall = time.perf_counter() - t0
    assert done.returncode == 0, done.stderr
    second = json.loads(done.stdout)
    assert 0.5 * wall <= second["seconds"] <= wall
    assert second["plan"]["trigger"] == "nothing changed"
    assert second["model_calls"] == 0 and second["units"] == {}
    assert second["plan"]["users_visited"] == 0 and second["plan"]["analyses_rerun"] == 0
    assert second["items"]["collected"] == 0 and second["items"]["reused"] == 0
    assert second["items"]["kept"] == first["items"]["collected"] + first["items"]["uncollected"] == len(data1)
    assert second["results"] == {"added": 0, "removed": 0, "unchanged": len(results1)}
    data2, results2 = _stored(store)
    assert data2 == data1 and results2 == results1
    assert second["components"] == first["components"]

    # Rule data live in the store, not the cache (which holds model answers only, none here): with the cache
    # deleted, a rerun still recollects nothing.
    cache = store.parent / "cache"
    assert sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) < 1_000_000
    shutil.rmtree(cache)
    again = _run(store)
    assert again["plan"]["trigger"] == "nothing changed" and again["items"]["collected"] == 0
    assert again["items"]["kept"] == len(data1)

    # --full walks every unit again: rules are recomputed (never cached), to the same data and results.
    third = _run(store, "--full")
    assert third["plan"]["trigger"] == "full" and third["model_calls"] == 0
    assert third["items"]["collected"] == first["items"]["collected"] and third["items"]["reused"] == 0
    assert third["results"]["added"] == 0 and third["results"]["unchanged"] == len(results1)
    data3, results3 = _stored(store)
    assert data3 == data1 and results3 == results1


def test_model_items_go_to_the_model_once_per_unit(sim_store: Path, tmp_path: Path,
                                                   fake_openai: FakeOpenAIServer,  # noqa: F811
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = _copy(sim_store, tmp_path)
    env = {"AGENT_FACTORY_SMALL_MODEL": "openai/fake-small", "AGENT_FACTORY_API_BASE": fake_openai.base_url,
           "OPENAI_API_KEY": "test", "AGENT_FACTORY_JURY": ""}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    first = _run(store)
    calls = fake_openai.calls
    assert calls == first["model_calls"] > 0
    with Store(store) as st:
        delivered = st.con.execute(
            "SELECT count(*) FROM turns WHERE segment = 'real' AND delivery = 'delivered'"
        ).fetchone()[0]  # type: ignore[index]
        substance_units = st.con.execute(
            "SELECT count(DISTINCT unit_id) FROM atomic_data WHERE item LIKE 'substance.%' AND tier != 'rule'"
            " AND value IN ('yes', 'no', 'not_applicable')"
        ).fetchone()[0]  # type: ignore[index]
    # All checklist items of one turn travel in one structured call, so calls are bounded by units, not items.
    assert substance_units > 0 and substance_units <= delivered
    assert calls < 2 * (delivered + first["units"]["conversation"])
    assert first["components"]["substance"]["data"].get("yes", 0) > 0
    again = _run(store)
    assert again["model_calls"] == 0 and fake_openai.calls == calls
    assert again["items"]["collected"] == 0
