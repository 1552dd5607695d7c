"""The airline policy's rule-checkable obligations on the real tau-bench trajectories, through ingest and run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_factory.factory.cli.app import app
from agent_factory.factory.store import Store
from tests.conftest import shared_data

CLAUSES = ("confirm_before_write", "one_tool_call_at_a_time", "no_reply_with_tool_call")


@pytest.mark.realdata
def test_airline_obligations_for_all_128_conversations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = shared_data("tau-bench-airline-gpt4o", "gpt-4o-airline.json")
    monkeypatch.chdir(tmp_path)
    for var in ("AGENT_FACTORY_SMALL_MODEL", "AGENT_FACTORY_JURY", "AGENT_FACTORY_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    store = tmp_path / "s.duckdb"
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(src), "--pack", "airline", "--store", str(store)]).exit_code == 0
    res = runner.invoke(app, ["run", "--store", str(store), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["model_calls"] == 0
    with Store(store) as st:
        for clause in CLAUSES:
            for part in ("trigger", "obligation"):
                rows = st.con.execute(
                    "SELECT value, count(DISTINCT unit_id) FROM atomic_data WHERE item = ? GROUP BY value",
                    [f"conduct.{clause}.{part}"],
                ).fetchall()
                counts = dict(rows)
                assert "uncollected" not in counts
                assert sum(counts.values()) == 128, (clause, part, counts)
        violations = st.con.execute(
            "SELECT unit_id, item, evidence FROM atomic_data WHERE item LIKE 'conduct.%.obligation' AND value = 'no'"
        ).fetchall()
    assert violations
    for unit_id, _item, evidence in violations:
        pointers = json.loads(evidence)
        assert pointers, unit_id
        # Every pointer names a message of that conversation: <conversation>/m<index>...
        assert all(re.match(rf"{re.escape(unit_id)}/(m\d+|turn-\d+)", p["unit_id"]) for p in pointers), pointers
    metrics = {m["metric"]: m for m in report["components"]["conduct"]["metrics"]}
    assert metrics["A(r).confirm_before_write"]["n"] == 128
    assert metrics["C(r).one_tool_call_at_a_time"]["value"] == 1.0
