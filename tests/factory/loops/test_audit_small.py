"""An audit decides nothing on too few units: a person's two labels that contradict a rule retire nothing."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from agent_factory.factory.cli.app import app
from agent_factory.factory.loops.audit.run import MIN_ITEM_UNITS
from agent_factory.factory.simulate import SimConfig, simulate
from agent_factory.factory.store import Store

NO_MODEL = {"AGENT_FACTORY_SMALL_MODEL": "", "AGENT_FACTORY_JURY": "", "AGENT_FACTORY_CONFIG": "",
            "AGENT_FACTORY_AUDIT_MODELS": ""}


def test_two_contradicting_labels_retire_nothing(tmp_path: Path) -> None:
    simulate(SimConfig(users=4, seed=2), tmp_path / "sim")
    store = tmp_path / "s.duckdb"
    runner = CliRunner()
    for args in (["ingest", str(tmp_path / "sim"), "--pack", "business_analysis"], ["run"]):
        res = runner.invoke(app, [*args, "--store", str(store)], env=NO_MODEL)
        assert res.exit_code == 0, res.output
    with Store(store, read_only=True) as st:
        rows = st.con.execute("SELECT unit_id, value FROM atomic_data WHERE item = 'execution.delivered'"
                              " AND rater = 'primary' AND value IN ('yes', 'no') ORDER BY unit_id LIMIT 2").fetchall()
    assert len(rows) == 2 < MIN_ITEM_UNITS
    flipped = [f"{u},execution.delivered,human:ana,{'no' if v == 'yes' else 'yes'}" for u, v in rows]
    labels = tmp_path / "l.csv"
    labels.write_text("unit_id,item,rater,value\n" + "\n".join(flipped) + "\n", encoding="utf-8")
    res = runner.invoke(app, ["labels", "import", str(labels), "--format", "csv", "--store", str(store)], env=NO_MODEL)
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["audit", "--store", str(store), "--json"], env=NO_MODEL)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    [item] = [i for i in doc["items"] if i["item"] == "execution.delivered"]
    assert item["n"] == 2 and item["admitted"] is False  # below the line, but on two units: reported, kept
    assert doc["retired"] == [] and doc["corrections"] == []
