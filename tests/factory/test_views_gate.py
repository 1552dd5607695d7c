"""What `gate`, `gate calibrate`, `incidents` and `fixes` print (`factory.views.gate`) and the report's Gate
section (`factory.views.report.gate`), from reports built by hand: pure, no store."""

from __future__ import annotations

from agent_factory.evaluators.gate.model import (
    AAReport,
    CalibrationRef,
    CalibrationReport,
    ComponentVerdict,
    DefectPower,
    Fix,
    FixCheck,
    GateReport,
    Incident,
    MetricAA,
    MetricVerdict,
    PowerPoint,
    PowerReport,
)
from agent_factory.factory.views.gate import (
    UNCALIBRATED,
    WIDTH,
    calibration_lines,
    delta_text,
    fix_lines,
    gate_lines,
    incident_lines,
    metric_line,
    value_text,
)
from agent_factory.factory.views.report import report_sections
from agent_factory.factory.views.report.gate import HOW_TO_RUN, gate_section
from agent_factory.factory.views.report.model import ReportData
from agent_factory.factory.views.results import StoreFacts

AT = "2026-12-06T22:00:00+00:00"


def verdict(metric: str = "failure_rate", *, component: str = "execution", base: float | None = 0.035,
            cand: float | None = 0.081, z: float | None = 6.1, threshold: float = 2.9, calibrated: bool = False,
            unit: str = "pp", decided: str | None = None, reason: str | None = None) -> MetricVerdict:
    """A metric's verdict; its delta is computed here from the two values, in its unit."""
    delta = None if base is None or cand is None else (100 * (cand - base) if unit == "pp" else
                                                       100 * (cand / base - 1) if unit == "%" else cand - base)
    if decided is None and reason is None:
        decided = "fail" if z is not None and z > threshold else "pass"
    return MetricVerdict(component=component, metric=metric, label=metric.replace("_", " "), layer="trace",
                         worse="higher", unit=unit, baseline=base, candidate=cand, delta=delta,
                         statistic=z, per_turn_statistic=None if z is None else 2 * z, threshold=threshold,
                         calibrated=calibrated, verdict=decided, reason=reason,
                         users_baseline=200, users_candidate=190, rows_baseline=1500, rows_candidate=1400)


def incident(unit: str, *, clause: str = "no_unprompted_disclosure") -> Incident:
    return Incident(id=f"inc-{unit}", component="conduct", clause=clause, metric=f"violation_rate.{clause}",
                    unit_id=unit, evidence=f"conduct.{clause}.obligation: {unit}#answer[3:20]", candidate="b.duckdb",
                    opened_at=AT)


def fix(metric: str, *, status: str = "open", checks: tuple[FixCheck, ...] = (), opened_at: str = AT) -> Fix:
    return Fix(id=f"fix-{metric}", component="execution", kind="metric", metric=metric,
               finding=f"{metric} 3.5% -> 8.1% (+4.6 pp), z 6.1 > threshold 2.9",
               acceptance=f"{metric} not significantly above 3.5% (the baseline's) on the next candidate",
               target=0.035, opened_at=opened_at, opened_by="b.duckdb", status=status,
               checks=checks)


def gate_report(*, incidents: tuple[Incident, ...] = (), calibrated: bool = False, sequential: bool = False,
                fixes: tuple[Fix, ...] = ()) -> GateReport:
    """Execution fails on failure_rate (latency passes); Conduct holds `incidents`; Provenance is not gated."""
    execution = ComponentVerdict(component="execution", verdict="fail", reason="significantly worse: failure_rate",
                                 metrics=(verdict(calibrated=calibrated),
                                          verdict("latency_gm_ratio", base=1.0, cand=1.05, z=0.8, unit="%",
                                                  calibrated=calibrated)))
    conduct = ComponentVerdict(
        component="conduct", verdict="incident" if incidents else "pass", incidents=incidents,
        reason=f"{len(incidents)} unit(s) broke confirmed invariant(s) no_unprompted_disclosure" if incidents else None,
        metrics=(verdict("violation_rate.no_unprompted_disclosure", component="conduct", base=0.0, cand=0.01, z=1.0),
                 verdict("violation_rate.never_applies", component="conduct", base=None, cand=None, z=None,
                         reason="no trace unit of the baseline has this metric's data")))
    provenance = ComponentVerdict(component="provenance", verdict=None, reason="not gated: an instrument, not the agent")
    worst = "incident" if incidents else "fail"
    return GateReport(baseline="a.duckdb", candidate="b.duckdb", suite=None,
                      components=(execution, conduct, provenance), verdict=worst,
                      exit_code=5 if incidents else 4, sequential=sequential, looks=3 if sequential else None,
                      calibration=CalibrationRef(key="k1", at=AT, splits=4000, family_false_alarm_heldout=0.046)
                      if calibrated else None, fixes=fixes, users_baseline=200, users_candidate=190, seconds=1.25)


def calibration_report(*, power: bool = True) -> CalibrationReport:
    per_metric = {"execution:failure_rate": MetricAA(threshold=2.41, false_alarm_heldout=0.012,
                                                     per_turn_false_alarm=0.43),
                  "results:redo_rate": MetricAA(threshold=2.2, false_alarm_heldout=0.02, per_turn_false_alarm=0.07,
                                                undefined_splits=3),
                  "conduct:violation_rate.never": MetricAA(threshold=float("inf"), false_alarm_heldout=0.0,
                                                           per_turn_false_alarm=0.0, undefined_splits=4000)}
    aa = AAReport(splits=4000, level=0.0071, family_false_alarm_calibration=0.05, family_false_alarm_heldout=0.046,
                  per_turn_family_false_alarm=0.98, per_metric=per_metric)
    curve = (PowerPoint(strength=0.02, effect=1.9, power=0.4, family=0.45),
             PowerPoint(strength=0.05, effect=4.8, power=0.99, family=0.99))
    defects = {
        "blank": DefectPower(metric="execution:failure_rate", unit="pp", mde=3.2, draws=300, curve=curve,
                             cross_talk={"execution:failure_rate": 0.99, "results:redo_rate": 0.12,
                                         "trajectory:replay_per_next_message": 0.04}),
        "latency": DefectPower(metric="execution:latency_gm_ratio", unit="%", mde=46.0, draws=300, curve=curve,
                               cross_talk={"execution:latency_gm_ratio": 0.97}),
        "template": DefectPower(metric="conduct:violation_rate.file_summary_needs_upload", unit="pp", mde=None,
                                draws=300, curve=curve, cross_talk={}),
    }
    return CalibrationReport(key="k1", baseline="a.duckdb", suite=None, users=200, measures=tuple(per_metric),
                             thresholds={k: m.threshold for k, m in per_metric.items()}, aa=aa,
                             power=PowerReport(defects=defects) if power else None, seconds=12.5, at=AT)


def _fits(lines: list[str]) -> bool:
    return all(len(line) <= WIDTH for line in lines)


# ---- the gate's screen ----------------------------------------------------------------------------------------

def test_a_failed_metric_reads_baseline_to_candidate_in_its_unit_against_its_threshold() -> None:
    lines = gate_lines(gate_report(), options="--store a.duckdb")
    assert lines[0] == "gate: FAIL (exit 4): b.duckdb (190 users) against a.duckdb (200 users), 1.2 s"
    assert lines[1].split()[:2] == ["execution", "fail"]
    # 3.5% -> 8.1% is +4.6 percentage points; z 6.1 over the Bonferroni threshold 2.9.
    assert "      failure_rate 3.5% -> 8.1%, +4.6 pp, z 6.10 > 2.90 (Bonferroni)" in lines
    assert not any("latency_gm_ratio" in line for line in lines)  # a passing metric of a failed component
    conduct = next(line for line in lines if line.split()[0] == "conduct")
    assert conduct.split()[1] == "pass" and "1 undecided" in conduct and "largest z 1.00" in conduct
    assert next(line for line in lines if line.split()[0] == "provenance").split()[1:3] == ["not", "gated"]
    assert UNCALIBRATED in lines
    assert lines[lines.index("next:") + 1:] == ["  agent-factory gate calibrate --store a.duckdb"]
    assert _fits(lines)


def test_incidents_name_their_units_with_show_on_the_candidates_store() -> None:
    units = tuple(incident(f"turn-{i}") for i in range(5))
    lines = gate_lines(gate_report(incidents=units, calibrated=True, fixes=(fix("failure_rate"),)),
                       options="--store a.duckdb", show_options="--store b.duckdb")
    assert lines[0].startswith("gate: INCIDENT (exit 5)")
    assert "incidents: 5 unit(s) broke a confirmed invariant: conduct/no_unprompted_disclosure (5)" in lines
    assert "  first: turn-0, turn-1, turn-2" in lines  # the first three, not all five
    assert "fixes: 1 opened, 0 re-checked (0 met)" in lines
    assert ("calibration: 4,000 A/A splits of this baseline, held-out family false alarms 4.6% "
            f"({AT})") in " ".join(x.strip() for x in lines) and UNCALIBRATED not in lines
    nxt = lines[lines.index("next:") + 1:]
    assert nxt == ["  agent-factory show turn-0 --store b.duckdb", "  agent-factory incidents --store a.duckdb",
                   "  agent-factory fixes --store a.duckdb"]
    assert "z 6.10 > 2.90" in "\n".join(lines) and "(Bonferroni)" not in "\n".join(lines)
    assert _fits(lines)


def test_sequential_mode_says_the_look_and_a_bound_decides() -> None:
    lines = gate_lines(gate_report(sequential=True))
    assert any(line.startswith("sequential: look 3 at this pair") for line in lines)
    bounded = verdict(z=1.0, decided="fail").model_copy(update={"bound": 1.2})  # in the metric's unit: points
    assert metric_line(bounded).endswith("always-valid bound of the worse change +1.2 pp > 0")


def test_values_and_changes_read_in_their_units() -> None:
    assert (value_text(0.035, "pp"), value_text(0.0004, "pp"), value_text(1.234, "%"), value_text(None, "pp")) == (
        "3.5%", "0.04%", "1.23", "—")
    assert (delta_text(4.6, "pp"), delta_text(-0.04, "pp"), delta_text(46.2, "%"), delta_text(0.125, "abs")) == (
        "+4.6 pp", "-0.0 pp", "+46%", "+0.125")
    undecided = verdict(base=None, cand=None, z=None, reason="no rows on a side")
    assert metric_line(undecided) == "failure_rate: undecided: no rows on a side"


def test_long_reasons_wrap_within_the_screen() -> None:
    long = "x " * 120
    report = gate_report().model_copy(update={"components": (ComponentVerdict(
        component="substance", verdict=None, reason=f"undecided: {long}"),)})
    lines = gate_lines(report)
    assert _fits(lines) and sum(1 for line in lines if line.startswith(" " * 26 + "x")) >= 2


# ---- calibrate, incidents, fixes ------------------------------------------------------------------------------

def test_calibrate_shows_false_alarms_thresholds_mdes_and_cross_talk_above_five_percent() -> None:
    lines = calibration_lines(calibration_report(), baseline_options="--baseline a.duckdb")
    text = "\n".join(lines)
    assert "A/A family false alarms (any metric): 4.6% held out, 5.0% on the calibration half" in lines
    assert "  per-turn |z| >= 2 test, for contrast: 98.0%" in lines
    # Most held-out false alarms first; a metric no split could test is counted on its own line.
    rows = [line.split() for line in lines if line.startswith("  ") and line.split()[0].count(":") == 1]
    assert [r[0] for r in rows[:2]] == ["results:redo_rate", "execution:failure_rate"]
    assert rows[1][1:4] == ["2.41", "1.2%", "43.0%"]
    assert "untestable on every split (no rows on a side): 1 metric(s), conduct:violation_rate.never" in text
    assert "  blank       execution:failure_rate: MDE +3.2 pp" in lines
    assert "  latency     execution:latency_gm_ratio: MDE +46%" in lines
    assert "not reached at 80% power" in text
    talk = next(line for line in lines if "cross-talk" in line)
    assert talk.strip() == "cross-talk: results:redo_rate 12.0%"  # the target and the 4% entry are left out
    assert lines[-1] == "  agent-factory gate --baseline a.duckdb --candidate CANDIDATE"
    assert _fits(lines)
    assert "power: not measured (--no-power)" in calibration_lines(calibration_report(power=False))


def test_incidents_and_fixes_lists() -> None:
    assert incident_lines([])[0].startswith("incidents: none recorded")
    assert fix_lines([])[0].startswith("fixes: none proposed")
    found = [incident(f"turn-{i}") for i in range(25)]
    lines = incident_lines(found, options="--store b.duckdb")
    assert lines[0] == "incidents: 25 recorded; the newest 20"
    assert "turn-24" in lines[1] and not any("turn-4 " in line for line in lines)  # newest first, 20 of them
    assert lines[-1] == "  agent-factory show turn-24 --store b.duckdb"
    met = fix("latency_gm_ratio", status="met", opened_at="2026-12-01T00:00:00+00:00",
              checks=(FixCheck(at=AT, candidate="c.duckdb", value=1.0, status="met"),))
    lines = fix_lines([met, fix("failure_rate")])
    assert lines[0] == "fixes: 1 open, 1 met"
    assert lines[1].startswith("  open  execution/failure_rate:")  # open first, though opened later
    assert "last check met on c.duckdb" in " ".join(lines)
    assert lines[-1] == "  agent-factory gate --baseline BASELINE --candidate CANDIDATE"
    assert _fits(lines)


# ---- the report's section -------------------------------------------------------------------------------------

def _data(**extra: object) -> ReportData:
    facts = StoreFacts(path="a.duckdb", turns=10, sessions=4, users=2, spans=30, segments={"real": 10},
                       quarantined=0, units={"trace": 10}, last_run=AT)
    return ReportData(facts=facts, rows=(), per_unit={}, **extra)


def test_report_section_says_how_to_run_a_gate_when_there_is_none() -> None:
    section = gate_section(_data())
    assert section.key == "gate" and section.absent == HOW_TO_RUN and not section.blocks
    assert [s.key for s in report_sections(_data())].count("gate") == 1
    only_calibrated = gate_section(_data(calibration=calibration_report()))
    assert only_calibrated.absent is None
    assert [b.title for b in only_calibrated.blocks] == ["No gate run yet", "A/A calibration", "Power: seeded defects"]


def test_report_section_shows_verdicts_metrics_incidents_and_the_calibration() -> None:
    report = gate_report(incidents=(incident("turn-1"),), calibrated=True, fixes=(fix("failure_rate"),))
    section = gate_section(_data(gate=report, calibration=calibration_report()))
    blocks = {b.title: b for b in section.blocks}
    assert list(blocks) == ["Verdict per component", "Metrics, baseline against candidate", "Incidents",
                            "Fixes opened or re-checked", "A/A calibration", "Power: seeded defects"]
    verdicts = blocks["Verdict per component"]
    assert verdicts.table is not None and [r[:2] for r in verdicts.table.rows] == [
        ("execution", "fail"), ("conduct", "incident"), ("provenance", "not gated")]
    assert "INCIDENT, exit 5" in verdicts.note and "held-out family false alarms 4.6%" in verdicts.note
    metrics = blocks["Metrics, baseline against candidate"].table
    assert metrics is not None and metrics.rows[0][:6] == ("execution", "failure_rate", "3.5%", "8.1%", "+4.6 pp",
                                                           "6.10 vs 2.90")
    power = blocks["Power: seeded defects"].table
    assert power is not None and power.rows[0] == ("blank", "execution:failure_rate", "+3.2 pp", "300",
                                                   "results:redo_rate 12.0%")


def test_a_calibration_that_certified_nothing_says_so_and_what_the_gate_uses_instead() -> None:
    report = calibration_report(power=False)
    lines = calibration_lines(report.model_copy(update={"aa": report.aa.model_copy(update={"level": 0.0})}))
    text = " ".join(line.strip() for line in lines)
    assert "too few splits (4,000) to certify 5% family false alarms" in text and "uses Bonferroni" in text
    assert not any("too few splits" in line for line in calibration_lines(report))
    assert _fits(lines)


def test_a_passing_component_shows_what_it_noticed_beside_the_tests() -> None:
    report = gate_report()
    noted = "6 unit(s) broke the pack's invariant(s) confirm_before_write, which no person confirmed: no incident"
    comps = tuple(c.model_copy(update={"reason": noted}) if c.verdict == "pass" else c for c in report.components)
    assert any(c.verdict == "pass" for c in comps)
    text = " ".join(line.strip() for line in gate_lines(report.model_copy(update={"components": comps})))
    assert "none significantly worse" in text and "confirm_before_write, which no person confirmed" in text
