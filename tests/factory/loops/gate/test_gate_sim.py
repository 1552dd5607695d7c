"""The gate end to end on simulated agent versions (issue 34's Done-when, at test scale): a candidate from the same
config with another seed passes (exit 0); one with 5% more blanked answers fails Execution on `failure_rate`
(exit 4); one that names the operating company where a confirmed invariant forbids it opens an incident (exit 5),
listed by `incidents`, with a fix proposed and re-checked on the next candidate."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from agent_factory.factory.cli.app import app
from agent_factory.factory.simulate import SimConfig, simulate
from tests.factory.conftest import NO_MODEL

USERS = 500
"""Users per simulated version: enough for a 5-point rise in failures to be seen by a clustered test (the
calibration at the default scale of 1,136 users, in docs/gate.md, puts the failure MDE well under 5 points)."""
ROOT = Path(__file__).resolve().parents[4]
SPEC = ROOT / "specs" / "business_analysis_zh.md"


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env=NO_MODEL)


def _version(root: Path, name: str, suite: Path, **knobs: Any) -> Path:
    """One agent version: simulated, ingested and run with `suite`; its store."""
    simulate(SimConfig(users=USERS, **knobs), root / f"sim-{name}")
    store = root / f"{name}.duckdb"
    for args in (("ingest", str(root / f"sim-{name}"), "--pack", "business_analysis"), ("run", "--suite", str(suite))):
        res = _cli(*args, "--store", str(store))
        assert res.exit_code == 0, res.output
    return store


def _suite(root: Path, name: str, *, confirm: tuple[str, ...] = ()) -> Path:
    suite = root / name
    res = _cli("build", "--spec", str(SPEC), "--pack", "business_analysis", "--out", str(suite))
    assert res.exit_code == 0, res.output
    if confirm:
        path = suite / "invariants.yaml"
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for entry in doc["invariants"]:
            entry["confirmed"] = entry["clause"] in confirm
        path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    res = _cli("approve", str(suite))
    assert res.exit_code == 0, res.output
    return suite


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gate-versions")
    suite = _suite(root, "suite")
    guarded = _suite(root, "guarded", confirm=("no_unprompted_disclosure",))
    # One config for every version: the simulator's defaults, but an agent that never names its operator unasked,
    # so that the disclosure clause can be confirmed as an invariant and hold.
    quiet = {"natural_disclosure_rate": 0.0}
    return {
        "suite": suite, "guarded": guarded,
        "baseline": _version(root, "baseline", suite, seed=0, **quiet),
        "reseeded": _version(root, "reseeded", suite, seed=1, **quiet),
        "blanked": _version(root, "blanked", suite, seed=1, plant_blank_rate=0.05, **quiet),
        "disclosing": _version(root, "disclosing", suite, seed=1, plant_disclosure_rate=0.01, **quiet),
    }


def _gate(versions: dict[str, Path], baseline: str, candidate: str, *, suite: str = "suite",
          tmp: Path) -> tuple[int, dict[str, Any]]:
    # The gate records into the baseline's store and runs both with its suite: copies, per test.
    base, cand = tmp / f"{baseline}.duckdb", tmp / f"{candidate}.duckdb"
    for name, path in ((baseline, base), (candidate, cand)):
        if not path.exists():
            shutil.copy(versions[name], path)
    res = _cli("gate", "--baseline", str(base), "--candidate", str(cand),
               "--suite", str(versions[suite]), "--json")
    assert res.exit_code in (0, 4, 5), res.output
    return res.exit_code, json.loads(res.stdout)


def _component(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in report["components"] if c["component"] == name)


def test_another_seed_passes(versions: dict[str, Path], tmp_path: Path) -> None:
    code, report = _gate(versions, "baseline", "reseeded", tmp=tmp_path)
    assert code == 0, [(c["component"], c["verdict"], c["reason"]) for c in report["components"]]
    assert report["verdict"] == "pass"
    execution = _component(report, "execution")
    assert execution["verdict"] == "pass"
    assert all(m["statistic"] is not None for m in execution["metrics"])
    assert {c["component"]: c["verdict"] for c in report["components"]}["provenance"] is None


def test_five_percent_more_blanked_answers_fail_execution_on_failure_rate(versions: dict[str, Path],
                                                                         tmp_path: Path) -> None:
    code, report = _gate(versions, "baseline", "blanked", tmp=tmp_path)
    assert code == 4
    execution = _component(report, "execution")
    assert execution["verdict"] == "fail"
    failed = {m["metric"]: m for m in execution["metrics"] if m["verdict"] == "fail"}
    assert "failure_rate" in failed
    m = failed["failure_rate"]
    assert m["delta"] > 3.0 and m["unit"] == "pp"  # 5% of delivered answers blanked: about +4.8 points
    assert m["statistic"] > m["threshold"]
    assert "failure_rate" in execution["reason"]
    # The failure becomes a fix bound to its acceptance metric, stored and listed.
    assert any(f["metric"] == "failure_rate" and f["status"] == "open" for f in report["fixes"])
    res = _cli("fixes", "--store", str(tmp_path / "baseline.duckdb"), "--json")
    assert res.exit_code == 0, res.output
    assert any(f["metric"] == "failure_rate" for f in json.loads(res.stdout))
    # Re-checked on the next candidate: the reseeded version meets it.
    code, report = _gate(versions, "baseline", "reseeded", tmp=tmp_path)
    assert code == 0
    fix = next(f for f in report["fixes"] if f["metric"] == "failure_rate")
    assert fix["status"] == "met" and fix["checks"][-1]["status"] == "met"


def test_a_confirmed_invariant_broken_opens_an_incident(versions: dict[str, Path], tmp_path: Path) -> None:
    # With the disclosure clause confirmed as an invariant, the reseeded version still passes; one that names its
    # operator unasked in 1% of its answers opens an incident per such answer.
    code, report = _gate(versions, "baseline", "reseeded", suite="guarded", tmp=tmp_path)
    assert code == 0, [(c["component"], c["verdict"], c["reason"]) for c in report["components"]]
    code, report = _gate(versions, "baseline", "disclosing", suite="guarded", tmp=tmp_path)
    assert code == 5
    conduct = _component(report, "conduct")
    assert conduct["verdict"] == "incident"
    assert conduct["incidents"] and all(i["clause"] == "no_unprompted_disclosure" for i in conduct["incidents"])
    res = _cli("incidents", "--store", str(tmp_path / "baseline.duckdb"), "--json")
    assert res.exit_code == 0, res.output
    listed = json.loads(res.stdout)
    assert {i["unit_id"] for i in listed} >= {i["unit_id"] for i in conduct["incidents"]}
