"""`agent-factory gate`, `gate calibrate`, `incidents`, `fixes` and the report's Gate section, end to end through
`Project` (`GateJobs`) on small simulated stores: a built suite with the disclosure clause confirmed as an
invariant; candidates simulated from the baseline's config with another seed (planted truth: none, blanked
answers, disclosures), each gated against one baseline store, where everything is recorded."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_factory.factory.simulate import SimConfig, simulate
from agent_factory.factory.store import Store
from agent_factory.factory.store.lookup import locate
from tests.factory.conftest import Res, cli

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SPEC = Path(__file__).resolve().parents[2] / "specs" / "business_analysis_zh.md"
USERS = 40
CLAUSE = "no_unprompted_disclosure"



def _store(root: Path, name: str, **knobs: float | int) -> Path:
    """Traffic simulated with `knobs` and ingested (not run: the gate runs each store with the suite)."""
    simulate(SimConfig(users=USERS, **knobs), root / name)
    store = root / f"{name}.duckdb"
    res = cli("ingest", str(root / name), "--store", str(store), "--pack", "business_analysis")
    assert res.code == 0, res.err
    return store


@dataclass
class Course:
    """One baseline's course: a calibration, then gates of four candidates, then the records read back."""

    root: Path
    base: Path
    suite: Path
    cand: dict[str, Path]
    calibrate: Res
    gates: dict[str, Res]
    incidents: Res
    fixes: Res


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Course:
    root = tmp_path_factory.mktemp("gate")
    suite = root / "suite"
    assert cli("build", "--spec", str(SPEC), "--pack", "business_analysis", "--out", str(suite)).code == 0
    invariants = suite / "invariants.yaml"
    text = invariants.read_text(encoding="utf-8")
    at = text.index(f"clause: {CLAUSE}")
    end = text.index("confirmed: false", at) + len("confirmed: false")
    invariants.write_text(text[:at] + text[at:end].replace("confirmed: false", "confirmed: true") + text[end:],
                          encoding="utf-8")
    assert cli("approve", str(suite)).code == 0
    # Natural disclosures off on the candidates that must open no incident: the clause is an invariant.
    base = _store(root, "base", seed=1)
    cand = {"same": _store(root, "same", seed=2, natural_disclosure_rate=0.0),
            "blank": _store(root, "blank", seed=3, natural_disclosure_rate=0.0, plant_blank_rate=0.3),
            "disclose": _store(root, "disclose", seed=4, plant_disclosure_rate=0.3)}
    opts = ("--store", str(base), "--suite", str(suite))
    # Three candidates gated before any calibration (Bonferroni thresholds); the last one again after it.
    gates = {name: cli("gate", "--baseline", str(base), "--candidate", str(cand[name]), *opts, *json_flag)
             for name, json_flag in (("disclose", ["--json"]), ("blank", []), ("same", ["--json"]))}
    calibrate = cli("gate", "calibrate", *opts, "--splits", "400", "--no-power", "--json")
    gates["calibrated"] = cli("gate", "--baseline", str(base), "--candidate", str(cand["same"]), *opts, "--json")
    return Course(root=root, base=base, suite=suite, cand=cand, calibrate=calibrate, gates=gates,
                  incidents=cli("incidents", "--store", str(base), "--json"),
                  fixes=cli("fixes", "--store", str(base), "--json"))


def test_calibrate_prints_the_aa_check_as_json_and_stores_it_for_the_gate(course: Course) -> None:
    res = course.calibrate
    assert res.code == 0, res.err
    got = res.json()
    assert {"splits", "family_false_alarm_heldout", "per_turn_family_false_alarm", "per_metric"} <= set(got["aa"])
    assert got["aa"]["splits"] == 400 and got["power"] is None and got["seconds"] >= 0
    assert 0.0 <= got["aa"]["family_false_alarm_heldout"] <= 1.0
    assert "execution:failure_rate" in got["aa"]["per_metric"]
    assert "gate calibrate: A/A: 400 splits" in res.err  # progress on stderr
    # The next gate of this baseline uses it (the same key); the ones before it had none.
    used = course.gates["calibrated"].json()["calibration"]
    assert used is not None and used["key"] == got["key"] and used["splits"] == 400
    assert course.gates["same"].json()["calibration"] is None


def test_disclosures_in_the_candidate_open_incidents_exit_5(course: Course) -> None:
    res = course.gates["disclose"]
    assert res.code == 5, res.err
    report = res.json()
    assert report["verdict"] == "incident" and report["exit_code"] == 5
    conduct = next(c for c in report["components"] if c["component"] == "conduct")
    assert conduct["verdict"] == "incident" and conduct["incidents"]
    assert {i["clause"] for i in conduct["incidents"]} == {CLAUSE}
    with Store(course.cand["disclose"], read_only=True) as st:  # the units are the candidate's
        assert all(locate(st, i["unit_id"]) is not None for i in conduct["incidents"][:5])
    stored = course.incidents.json()
    assert course.incidents.code == 0 and {i["id"] for i in conduct["incidents"]} <= {i["id"] for i in stored}
    listed = cli("incidents", "--store", str(course.base))
    assert listed.code == 0 and f"conduct/{CLAUSE}" in listed.out


def test_a_candidate_of_the_same_config_passes_exit_0(course: Course) -> None:
    res = course.gates["same"]
    assert res.code == 0, res.out + res.err
    report = res.json()
    assert report["verdict"] == "pass" and report["users_candidate"] == USERS
    verdicts = {c["component"]: c["verdict"] for c in report["components"]}
    assert verdicts["execution"] == "pass" and verdicts["conduct"] == "pass" and verdicts["provenance"] is None


def test_blanked_answers_fail_execution_naming_the_metric_exit_4_on_one_screen(course: Course) -> None:
    res = course.gates["blank"]
    assert res.code == 4, res.out + res.err
    lines = res.out.splitlines()
    assert lines[0].startswith(f"gate: FAIL (exit 4): {course.cand['blank']}")
    assert re.search(r"^  execution +fail +significantly worse: failure_rate", res.out, re.M)
    line = next(x for x in lines if x.startswith("      failure_rate "))
    base, cand = (float(v) for v in re.findall(r"([\d.]+)%", line)[:2])
    assert cand > base and re.search(r"z [\d.]+ > [\d.]+ \(Bonferroni\)", line)
    assert re.search(r"^  provenance +not gated ", res.out, re.M)
    assert "uncalibrated: Bonferroni thresholds; run `agent-factory gate calibrate`" in lines
    assert "  agent-factory fixes" in res.out and "  agent-factory gate calibrate" in res.out
    assert len(lines) <= 30 and all(len(x) <= 100 for x in lines if not x.startswith("  agent-factory"))


def test_fixes_are_opened_and_rechecked_on_the_next_candidates(course: Course) -> None:
    assert course.fixes.code == 0
    fixes = {f["metric"]: f for f in course.fixes.json()}
    disclosure = fixes[f"violation_rate.{CLAUSE}"]
    # Opened by the disclosing candidate, met on the three later gates whose candidates disclosed nothing.
    assert disclosure["kind"] == "incident" and disclosure["opened_by"] == str(course.cand["disclose"])
    assert [c["candidate"] for c in disclosure["checks"]] == [str(course.cand[n]) for n in ("blank", "same", "same")]
    assert [c["status"] for c in disclosure["checks"]] == ["met"] * 3 and disclosure["status"] == "met"
    failure = fixes["failure_rate"]
    assert failure["kind"] == "metric" and failure["opened_by"] == str(course.cand["blank"])
    assert [c["candidate"] for c in failure["checks"]] == [str(course.cand["same"])] * 2
    assert failure["checks"][0]["status"] == "met"  # the same-config candidate's failure rate passes
    text = cli("fixes", "--store", str(course.base))
    assert text.code == 0 and text.out.startswith("fixes: ") and "execution/failure_rate" in text.out


def test_usage_and_user_errors(course: Course) -> None:
    assert cli("gate", "--store", str(course.base)).code == 2  # no --baseline/--candidate, no subcommand
    res = cli("gate", "--baseline", "nope.duckdb", "--candidate", str(course.cand["same"]), "--store",
              str(course.base))
    assert res.code == 1 and "--baseline 'nope.duckdb'" in res.err
    res = cli("gate", "--baseline", str(course.base), "--candidate", str(course.base), "--store", str(course.base))
    assert res.code == 1 and "same traffic" in res.err
    res = cli("incidents", "--store", str(course.root / "none.duckdb"))
    assert res.code == 1 and "none.duckdb" in res.err


def test_two_store_files_need_no_store_of_the_project(course: Course) -> None:
    # --store names no file: both sides are files, each run by its own project, the pack read from the baseline.
    absent = course.root / "absent" / "store.duckdb"
    res = cli("gate", "--baseline", str(course.cand["same"]), "--candidate", str(course.cand["disclose"]),
              "--store", str(absent), "--json")
    assert res.code in (0, 4, 5), res.err
    report = res.json()
    assert report["baseline"] == str(course.cand["same"]) and report["suite"] is None
    assert {c["component"] for c in report["components"]} >= {"execution", "conduct"}
    assert not absent.exists() and not absent.parent.exists()


def test_the_report_shows_the_verdicts_and_the_calibration_in_chromium(course: Course, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    res = cli("report", "--store", str(course.base), "--out", str(out), "--json")
    assert res.code == 0, res.err
    assert "gate" in res.json()["sections"] and "gate" not in res.json()["absent"]
    page = out.read_text(encoding="utf-8")
    assert "Verdict per component" in page and "A/A calibration" in page and "failure_rate" in page
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian package `chromium`; .ci/run installs it)")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             f"--user-data-dir={tmp_path / 'ud'}", "--enable-logging=stderr", "--v=0",
             "--virtual-time-budget=20000"]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", out.as_uri()], capture_output=True, text=True,
                         timeout=120, check=False)
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console
    at = dom.stdout.index('id="gate"')
    assert "Verdict per component" in dom.stdout[at:] and "fail" in dom.stdout[at:]


def test_tau_bench_trials_split_by_selector_on_one_store(tau_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "tau.duckdb"
    shutil.copyfile(tau_store, store)  # the session's store is read-only for tests
    res = cli("gate", "--baseline", "trial=0,1", "--candidate", "trial=2,3", "--store", str(store), "--pack",
              "airline", "--json")
    assert res.code in (0, 4, 5), res.err
    report = res.json()
    assert report["baseline"] == f"{store}[trial=0,1]" and report["candidate"] == f"{store}[trial=2,3]"
    assert report["users_baseline"] > 0 and report["users_candidate"] > 0
    assert report["exit_code"] == res.code
    # A selector that picks nothing is one line naming the side as given, brackets and all (not read as markup).
    res = cli("gate", "--baseline", "trial=0,1", "--candidate", "trial=7", "--store", str(store), "--pack", "airline")
    assert res.code == 1
    assert res.err.strip().startswith(f"error: {store}[trial=7]: the selector picks no conversation"), res.err
    assert "values seen: 0, 1, 2, 3" in res.err


def test_sequential_looks_are_counted_per_pair_and_the_bound_decides(course: Course) -> None:
    # Recorded in another baseline's store (the same-config candidate's), so the course's records stay as they are.
    args = ("gate", "--baseline", str(course.cand["same"]), "--candidate", str(course.cand["blank"]), "--store",
            str(course.cand["same"]), "--suite", str(course.suite), "--sequential")
    first = cli(*args, "--json")
    assert first.code == 4, first.err
    report = first.json()
    assert report["sequential"] is True and report["looks"] == 1
    failure = next(m for c in report["components"] for m in c["metrics"] if m["metric"] == "failure_rate")
    assert failure["verdict"] == "fail" and failure["bound"] > 0  # 30% of answers blanked: caught at any look
    second = cli(*args)
    assert second.code == 4 and "sequential: look 2 at this pair" in second.out
    assert "always-valid bound of the worse change +" in second.out


def test_calibrate_with_power_gives_each_defect_its_mde_unit_and_cross_talk(course: Course) -> None:
    # On another store than the course's baseline, whose calibration the other tests read.
    store = course.cand["disclose"]
    res = cli("gate", "calibrate", "--store", str(store), "--suite", str(course.suite), "--splits", "200",
              "--draws", "20", "--json")
    assert res.code == 0, res.err
    got = res.json()
    defects = got["power"]["defects"]
    assert set(defects) == {"blank", "replay", "disclosure", "template", "latency"}
    for name, d in defects.items():
        assert {"mde", "unit", "cross_talk"} <= set(d), name
        assert d["unit"] in ("pp", "%", "abs") and d["metric"] in got["measures"]
        assert all(0.0 <= share <= 1.0 for share in d["cross_talk"].values())
    assert defects["blank"]["metric"] == "execution:failure_rate" and defects["blank"]["unit"] == "pp"
    assert defects["latency"]["unit"] == "%"
    assert "gate calibrate: power: blank" in res.err
