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


def _labels(path: Path, rows: list[tuple[str, str]], *, flip: bool) -> Path:
    body = [f"{u},execution.has_retrieval,human:ana,{('no' if v == 'yes' else 'yes') if flip else v}" for u, v in rows]
    path.write_text("unit_id,item,rater,value\n" + "\n".join(body) + "\n", encoding="utf-8")
    return path


def test_labels_corrected_later_reinstate_the_item_and_log_it(tmp_path: Path) -> None:
    simulate(SimConfig(users=12, seed=2), tmp_path / "sim")
    store = tmp_path / "s.duckdb"
    runner = CliRunner()

    def cli(*args: str) -> dict[str, object]:
        res = runner.invoke(app, [*args, "--store", str(store), "--json"], env=NO_MODEL)
        assert res.exit_code == 0, res.output
        return dict(json.loads(res.stdout))

    cli("ingest", str(tmp_path / "sim"), "--pack", "business_analysis")
    cli("run")
    with Store(store, read_only=True) as st:
        rows = [r for value in ("yes", "no") for r in st.con.execute(
            "SELECT unit_id, value FROM atomic_data WHERE item = 'execution.has_retrieval' AND rater = 'primary'"
            " AND value = ? ORDER BY unit_id LIMIT 6", [value]).fetchall()]  # both values: kappa is defined
    assert len(rows) == 12 >= MIN_ITEM_UNITS
    cli("labels", "import", str(_labels(tmp_path / "wrong.csv", rows, flip=True)), "--format", "csv")
    first = cli("audit")
    assert first["retired"] == ["execution.has_retrieval"]
    assert [c["action"] for c in first["corrections"] if c["item"] == "execution.has_retrieval"] == ["retired"]
    retired_run = cli("run")
    assert retired_run["plan"]["definitions_recollected"] == 0 and retired_run["plan"]["analyses_rerun"] > 0
    # The person fixes their labels (same units, item and rater: the new file replaces them).
    cli("labels", "import", str(_labels(tmp_path / "right.csv", rows, flip=False)), "--format", "csv")
    second = cli("audit")
    assert second["retired"] == []
    [back] = [c for c in second["corrections"] if c["item"] == "execution.has_retrieval"]
    assert back["action"] == "reinstated" and back["after"]["kappa"] == 1.0
    after = cli("run")
    assert after["plan"]["definitions_recollected"] == 0 and after["items"]["collected"] == 0
    assert after["plan"]["analyses_rerun"] == retired_run["plan"]["analyses_rerun"]  # they take it back
    assert cli("audit")["corrections"] == []  # logged once
