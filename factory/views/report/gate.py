"""The report's Gate section: the latest gate run's verdicts per component, its metrics and incidents, and the
calibration it used (A/A family false alarms held out against the per-turn test's, each metric's threshold, the
MDE of each seeded defect). Pure: it reads `ReportData.gate` and `ReportData.calibration`, which
`read.read_report` fills from the store's gate tables. Without a gate run or a calibration, it says how to run
them.
"""

from __future__ import annotations

from agent_factory.evaluators.gate.model import CalibrationReport, GateReport, MetricVerdict
from agent_factory.evaluators.gate.text import CROSS_TALK_SHOWN, bound_text, delta_text, pct, value_text
from agent_factory.factory.views.report.model import Block, ReportData, Section, Table

KEY, TITLE = "gate", "Gate verdicts"
INTRO = ("Per component pass / fail / incident of a candidate agent version against a baseline: each metric tested "
         "clustered by user against a threshold calibrated on the baseline alone (A/A splits), confirmed invariants "
         "with zero tolerance. No composite.")
HOW_TO_RUN = ("no gate run yet: run `agent-factory gate --baseline BASELINE --candidate CANDIDATE` (each a store, "
              "or KEY=VALUE on --store), after `agent-factory gate calibrate` on the baseline's store")


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def _metric_row(m: MetricVerdict) -> tuple[str, ...]:
    test = (bound_text(m) if m.bound is not None
            else f"{_num(m.statistic)} vs {_num(m.threshold)}{'' if m.calibrated else ' (Bonferroni)'}")
    return (m.component, m.metric, value_text(m.baseline, m.unit), value_text(m.candidate, m.unit),
            delta_text(m.delta, m.unit),
            test, _num(m.per_turn_statistic), m.verdict or f"undecided: {m.reason or 'not tested'}",
            f"{m.users_baseline:,} / {m.users_candidate:,}")


def _gate_blocks(g: GateReport) -> list[Block]:
    rows = []
    for c in g.components:
        word = c.verdict or ("not gated" if (c.reason or "").startswith("not gated") else "undecided")
        failed = [m.metric for m in c.metrics if m.verdict == "fail"]
        tested = sum(1 for m in c.metrics if m.verdict is not None)
        rows.append((c.component, word, f"{tested} of {len(c.metrics)}", ", ".join(failed) or "—",
                     str(len(c.incidents)) if c.incidents else "—", c.reason or ""))
    cal = ("thresholds uncalibrated (Bonferroni); run `agent-factory gate calibrate` on the baseline"
           if g.calibration is None else
           f"thresholds from {g.calibration.splits:,} A/A splits of the baseline ({g.calibration.at}), held-out family "
           f"false alarms {pct(g.calibration.family_false_alarm_heldout)}")
    seq = f"; sequential mode, look {g.looks}" if g.sequential else ""
    note = (f"Candidate {g.candidate} ({g.users_candidate:,} users) against baseline {g.baseline} "
            f"({g.users_baseline:,} users): {(g.verdict or 'undecided').upper()}, exit {g.exit_code}; {cal}{seq}.")
    blocks = [Block(title="Verdict per component", note=note, table=Table(
        columns=("component", "verdict", "metrics tested", "failed", "incidents", "why"), rows=tuple(rows)))]
    every = [m for c in g.components for m in c.metrics]
    # A metric with no row on either side (a clause that never applied) is named in the note, not given a row.
    empty = [m.metric for m in every if m.rows_baseline == 0 and m.rows_candidate == 0]
    metrics = [m for m in every if m.rows_baseline or m.rows_candidate]
    if every:
        ordered = sorted(metrics, key=lambda m: (m.verdict != "fail", m.verdict is None, m.component, m.metric))
        blocks.append(Block(
            title="Metrics, baseline against candidate",
            note=("Change in the metric's unit (pp: percentage points; %: relative change of a geometric mean). z is "
                  "clustered by user, signed so that positive is worse; the per-turn z treats turns as independent "
                  "and is shown for contrast only. Failed first."
                  + (f" No data on either side: {', '.join(empty)}." if empty else "")),
            table=Table(columns=("component", "metric", "baseline", "candidate", "change", "z vs threshold",
                                 "per-turn z", "verdict", "users (base / cand)"),
                        rows=tuple(_metric_row(m) for m in ordered))))
    incidents = [i for c in g.components for i in c.incidents]
    if incidents:
        blocks.append(Block(
            title="Incidents", note=(f"{len(incidents):,} candidate unit(s) broke a confirmed invariant; "
                                     "`agent-factory show UNIT` prints one with its evidence, `agent-factory "
                                     "incidents` lists every one stored."),
            table=Table(columns=("component", "clause", "unit", "evidence"),
                        rows=tuple((i.component, i.clause, i.unit_id, i.evidence) for i in incidents[:20]))))
    if g.fixes:
        blocks.append(Block(title="Fixes opened or re-checked", table=Table(
            columns=("component", "acceptance metric", "status", "finding", "accepted when"),
            rows=tuple((f.component, f.metric, f.status, f.finding, f.acceptance) for f in g.fixes))))
    return blocks


def _calibration_blocks(cal: CalibrationReport) -> list[Block]:
    aa = cal.aa
    note = (f"{aa.splits:,} random halves of the baseline's {cal.users:,} users ({cal.baseline}, {cal.at}): "
            f"family false alarms (any metric over its threshold) {pct(aa.family_false_alarm_heldout)} on the "
            f"held-out half, {pct(aa.family_false_alarm_calibration)} on the calibration half; the per-turn |z| >= 2 "
            f"test raises one in {pct(aa.per_turn_family_false_alarm)} of the splits.")
    ranked = sorted(aa.per_metric.items(), key=lambda kv: (-kv[1].false_alarm_heldout, kv[0]))
    rows = tuple((k, _num(m.threshold), pct(m.false_alarm_heldout), pct(m.per_turn_false_alarm),
                  f"{m.undefined_splits:,}" if m.undefined_splits else "—") for k, m in ranked)
    blocks = [Block(title="A/A calibration", note=note, table=Table(
        columns=("metric", "threshold (z)", "false alarms, held out", "per-turn false alarms", "untestable splits"),
        rows=rows))]
    if cal.power is not None:
        prow = []
        for kind, d in cal.power.defects.items():
            mde = "not reached" if d.mde is None else delta_text(d.mde, d.unit)
            talk = ", ".join(f"{k} {pct(s)}" for k, s in sorted(d.cross_talk.items(), key=lambda kv: -kv[1])
                             if k != d.metric and s > CROSS_TALK_SHOWN)
            prow.append((kind, d.metric, mde, f"{d.draws:,}", talk or "—"))
        blocks.append(Block(
            title="Power: seeded defects", table=Table(
                columns=("defect", "target metric", "MDE at 80% power", "draws per strength", "cross-talk over 5%"),
                rows=tuple(prow)),
            note=("Each defect seeded into half the users at growing strengths: the smallest change of its target "
                  "metric the gate catches in 80% of draws, and how often it fails other metrics (at the strength "
                  "where the target is caught in 95%).")))
    return blocks


def gate_section(data: ReportData) -> Section:
    """The latest gate run and the calibration it used (else the latest stored), or how to run them."""
    blocks = [*(_gate_blocks(data.gate) if data.gate is not None else ()),
              *(_calibration_blocks(data.calibration) if data.calibration is not None else ())]
    if not blocks:
        return Section(key=KEY, title=TITLE, intro=INTRO, absent=HOW_TO_RUN)
    if data.gate is None:
        how = HOW_TO_RUN.removeprefix("no gate run yet: ")
        blocks.insert(0, Block(title="No gate run yet", note=f"{how[0].upper()}{how[1:]}."))
    return Section(key=KEY, title=TITLE, intro=INTRO, blocks=tuple(blocks))


__all__ = ["HOW_TO_RUN", "KEY", "gate_section"]
