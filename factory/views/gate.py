"""What `agent-factory gate`, `gate calibrate`, `incidents` and `fixes` print: one screen each, built from the
gate's report models (`evaluators.gate.model`), worst first, and the `next:` commands to paste.

Pure: a report in, lines of at most `WIDTH` columns out (a suggested command may run past on a line of its own
only when one path is longer). Lines are printed as they are (`cli.base.print_lines`: no markup), so a clause id
or a unit id from traffic prints as it is.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Sequence

from agent_factory.evaluators.gate.model import (
    CalibrationReport,
    ComponentVerdict,
    DefectPower,
    Fix,
    GateReport,
    Incident,
    MetricVerdict,
)
from agent_factory.evaluators.gate.text import CROSS_TALK_SHOWN, bound_text, delta_text, pct, value_text
from agent_factory.factory.views.results import command_lines

WIDTH = 98
"""Columns the view is laid out for (a 100-column terminal), as the summary's."""
METRICS_SHOWN = 4
"""Failed (or undecided) metrics listed per component; every one in `--json`."""
INCIDENTS_SHOWN = 3
"""Incident units named on the gate's screen (`agent-factory incidents` lists them all)."""
LISTED = 20
"""Incidents or fixes `incidents` and `fixes` list (the newest; every one in `--json`)."""
METRICS_LISTED = 15
"""Metrics `gate calibrate` lists (most false alarms held out first; every one in `--json`)."""
UNCALIBRATED = "uncalibrated: Bonferroni thresholds; run `agent-factory gate calibrate`"


def cut(line: str, width: int = WIDTH) -> str:
    """`line` cut to `width` columns, with an ellipsis where cut."""
    return line if len(line) <= width else line[:width - 1] + "…"


def wrap(line: str, *, indent: int) -> list[str]:
    """`line` broken between words into lines of at most `WIDTH` columns, the rest indented by `indent`."""
    return textwrap.wrap(line, width=WIDTH, subsequent_indent=" " * indent, break_long_words=True,
                         break_on_hyphens=False, drop_whitespace=True) or [line]


def decided_by(m: MetricVerdict) -> str:
    """What decided: `z 6.10 > 2.90` (calibrated or Bonferroni), or the always-valid bound in sequential mode."""
    if m.bound is not None:
        return bound_text(m)
    if m.statistic is None or m.threshold is None:
        return "z —"
    op = ">" if m.statistic > m.threshold else "<="
    return f"z {m.statistic:.2f} {op} {m.threshold:.2f}{'' if m.calibrated else ' (Bonferroni)'}"


def metric_line(m: MetricVerdict) -> str:
    """One metric: `failure_rate 3.5% -> 8.1%, +4.6 pp, z 6.10 > 2.90`, or why it is undecided."""
    if m.verdict is None:
        return f"{m.metric}: undecided: {m.reason or 'not tested'}"
    change = f"{value_text(m.baseline, m.unit)} -> {value_text(m.candidate, m.unit)}"
    return f"{m.metric} {change}, {delta_text(m.delta, m.unit)}, {decided_by(m)}"


def component_word(c: ComponentVerdict) -> str:
    """`pass`, `fail`, `incident`, `undecided`, or `not gated` (an instrument)."""
    if c.verdict is not None:
        return c.verdict
    return "not gated" if (c.reason or "").startswith("not gated") else "undecided"


def _component_reason(c: ComponentVerdict) -> str:
    if c.verdict == "pass":
        tested = [m for m in c.metrics if m.verdict is not None]
        zs = [m.statistic for m in tested if m.statistic is not None]
        worst = f" (largest z {max(zs):.2f})" if zs else ""
        left = sum(1 for m in c.metrics if m.verdict is None)
        undecided = f", {left} undecided" if left else ""
        # A passing component's reason is what it noticed beside the tests (a pack's unconfirmed invariant broken).
        note = f"; {c.reason}" if c.reason else ""
        return f"{len(tested)} tested, none significantly worse{worst}{undecided}{note}"
    reason = c.reason or ""
    return reason.removeprefix("not gated: ").removeprefix("undecided: ")


def _show_command(unit_id: str, show_options: str) -> str:
    return f"agent-factory show {unit_id} {show_options}".rstrip()


def gate_lines(report: GateReport, *, options: str = "", show_options: str = "") -> list[str]:
    """The gate's one screen: the verdict, a line per component, the failed metrics, incidents, fixes, the
    calibration used, sequential looks and the next commands. `options` repeat the baseline's store and suite in
    the commands suggested; `show_options` the candidate's (where an incident's unit is)."""
    word = (report.verdict or "undecided").upper()
    lines = wrap(f"gate: {word} (exit {report.exit_code}): {report.candidate} ({report.users_candidate:,} users) "
                 f"against {report.baseline} ({report.users_baseline:,} users), {report.seconds:.1f} s", indent=2)
    for c in report.components:
        lines += wrap(f"  {c.component:<12} {component_word(c):<10} {_component_reason(c)}".rstrip(), indent=26)
        if c.verdict in ("fail", "incident"):
            failed = [m for m in c.metrics if m.verdict == "fail"]
            for m in failed[:METRICS_SHOWN]:
                lines += wrap(f"      {metric_line(m)}", indent=8)
            if len(failed) > METRICS_SHOWN:
                lines.append(f"      and {len(failed) - METRICS_SHOWN} more failed metric(s) (--json lists them)")
    incidents = [i for c in report.components for i in c.incidents]
    if incidents:
        clauses = Counter(f"{i.component}/{i.clause}" for i in incidents)
        lines += wrap(f"incidents: {len(incidents):,} unit(s) broke a confirmed invariant: "
                      + ", ".join(f"{k} ({n:,})" for k, n in clauses.most_common()), indent=2)
        lines += wrap("  first: " + ", ".join(i.unit_id for i in incidents[:INCIDENTS_SHOWN]), indent=9)
    opened = [f for f in report.fixes if not f.checks]
    rechecked = [f for f in report.fixes if f.checks]
    if report.fixes:
        met = sum(1 for f in rechecked if f.checks[-1].status == "met")
        lines.append(f"fixes: {len(opened)} opened, {len(rechecked)} re-checked ({met} met)")
    if report.calibration is not None:
        cal = report.calibration
        lines += wrap(f"calibration: {cal.splits:,} A/A splits of this baseline, held-out family false alarms "
                      f"{pct(cal.family_false_alarm_heldout)} ({cal.at})", indent=2)
    else:
        lines.append(UNCALIBRATED)
    if report.sequential:
        lines.append(f"sequential: look {report.looks or 1} at this pair; always-valid bounds decide, so checking "
                     "after every ingest keeps false alarms at the calibrated level")
    nxt: list[str] = []
    if incidents:
        nxt += [_show_command(incidents[0].unit_id, show_options), f"agent-factory incidents {options}".rstrip()]
    if report.fixes:
        nxt.append(f"agent-factory fixes {options}".rstrip())
    if report.calibration is None:
        nxt.append(f"agent-factory gate calibrate {options}".rstrip())
    if nxt:
        lines.append("next:")
        for cmd in nxt:
            lines += command_lines(cmd)
    return lines


# ---- gate calibrate ------------------------------------------------------------------------------------------

def mde_text(d: DefectPower) -> str:
    """A defect's MDE beside its unit: `+3.2 pp`, `+46%`, or why there is none."""
    if d.mde is None:
        return "not reached at 80% power (the strongest strength tried missed)"
    return delta_text(d.mde, d.unit)


def calibration_lines(report: CalibrationReport, *, baseline_options: str = "") -> list[str]:
    """`gate calibrate`'s one screen: family false alarms held out against the per-turn test's, each metric's
    threshold and rate, the MDE of each seeded defect beside its unit and its cross-talk above 5%.
    `baseline_options` name the baseline in the `gate` command suggested (`--baseline a.duckdb --suite D`)."""
    aa = report.aa
    lines = [cut(f"gate calibrate: {report.baseline}, {report.users:,} users, {len(report.measures)} metrics, "
                 f"{aa.splits:,} A/A splits, {report.seconds:.1f} s"),
             f"A/A family false alarms (any metric): {pct(aa.family_false_alarm_heldout)} held out, "
             f"{pct(aa.family_false_alarm_calibration)} on the calibration half",
             f"  per-turn |z| >= 2 test, for contrast: {pct(aa.per_turn_family_false_alarm)}"]
    if aa.level <= 0.0:
        # Too few calibration splits to certify 5%: every threshold is +inf, and `gate` falls back to Bonferroni.
        lines += wrap(f"  too few splits ({aa.splits:,}) to certify 5% family false alarms: no threshold "
                      f"calibrated, so `gate` uses Bonferroni ones; calibrate with --splits 4000", indent=4)
    lines.append(f"  {'metric':<54} {'threshold':>9} {'held out':>9} {'per-turn':>9}")
    # A metric no split could test (no row on a side: a clause that never applied) is counted, not listed.
    untestable = sorted(k for k, m in aa.per_metric.items() if m.undefined_splits >= aa.splits)
    ranked = sorted(((k, m) for k, m in aa.per_metric.items() if k not in untestable),
                    key=lambda kv: (-kv[1].false_alarm_heldout, kv[0]))
    for key, m in ranked[:METRICS_LISTED]:
        undefined = f"  untestable in {m.undefined_splits:,}" if m.undefined_splits else ""
        lines.append(cut(f"  {cut(key, 54):<54} {m.threshold:>9.2f} {pct(m.false_alarm_heldout):>9} "
                         f"{pct(m.per_turn_false_alarm):>9}{undefined}"))
    if len(ranked) > METRICS_LISTED:
        lines.append(f"  and {len(ranked) - METRICS_LISTED} more metric(s), fewer false alarms (--json lists them)")
    if untestable:
        lines += wrap(f"  untestable on every split (no rows on a side): {len(untestable)} metric(s), "
                      + ", ".join(untestable), indent=4)
    if report.power is None:
        lines.append("power: not measured (--no-power)")
    else:
        draws = max((d.draws for d in report.power.defects.values()), default=0)
        lines.append(f"power: seeded defects in half the users, {draws} draws per strength; MDE at 80% power")
        for kind, d in report.power.defects.items():
            lines.append(cut(f"  {kind:<11} {d.metric}: MDE {mde_text(d)}"))
            talk = sorted(((k, share) for k, share in d.cross_talk.items() if k != d.metric
                           and share > CROSS_TALK_SHOWN), key=lambda kv: (-kv[1], kv[0]))
            if talk:
                lines.append(cut("      cross-talk: " + ", ".join(f"{k} {pct(s)}" for k, s in talk)))
        others = [share for d in report.power.defects.values() for k, share in d.cross_talk.items() if k != d.metric]
        if others:
            lines.append(f"  cross-talk: at most {pct(max(others))} of draws fail another metric (at the target's "
                         f"95% strength)")
    lines.append("next:")
    lines += command_lines(f"agent-factory gate {baseline_options} --candidate CANDIDATE".replace("  ", " "))
    return lines


# ---- incidents and fixes -------------------------------------------------------------------------------------

def incident_lines(incidents: Sequence[Incident], *, options: str = "") -> list[str]:
    """`agent-factory incidents`: the newest incidents, each with its unit's `show` command."""
    if not incidents:
        return ["incidents: none recorded (a gate run records those of its candidate in the baseline's store)"]
    lines = [f"incidents: {len(incidents):,} recorded" + (f"; the newest {LISTED}" if len(incidents) > LISTED else "")]
    for i in list(incidents)[-LISTED:][::-1]:
        lines.append(cut(f"  {i.opened_at[:16]}  {i.component}/{i.clause}  {i.unit_id}  ({i.candidate})"))
        lines.append(cut(f"      {i.evidence}"))
    lines.append("next:")
    lines += command_lines(_show_command(incidents[-1].unit_id, options))
    return lines


def fix_lines(fixes: Sequence[Fix], *, baseline_options: str = "--baseline BASELINE") -> list[str]:
    """`agent-factory fixes`: open fixes first, each with its finding, what accepts it and its last check; the
    `gate` that re-checks them next, its baseline named by `baseline_options` (the store holding the fixes)."""
    if not fixes:
        return ["fixes: none proposed (a gate run proposes one per failed metric or broken invariant)"]
    ordered = sorted(fixes, key=lambda f: (f.status != "open", f.opened_at, f.id))
    n_open = sum(1 for f in fixes if f.status == "open")
    lines = [f"fixes: {n_open} open, {len(fixes) - n_open} met"
             + (f"; the first {LISTED}" if len(fixes) > LISTED else "")]
    for f in ordered[:LISTED]:
        lines += wrap(f"  {f.status:<5} {f.component}/{f.metric}: {f.finding}", indent=8)
        last = f"; last check {f.checks[-1].status} on {f.checks[-1].candidate}" if f.checks else ""
        lines += wrap(f"        accept: {f.acceptance}{last}", indent=16)
    if n_open:
        lines.append("next:")
        lines += command_lines(f"agent-factory gate {baseline_options} --candidate CANDIDATE")
    return lines


__all__ = [
    "UNCALIBRATED", "WIDTH", "calibration_lines", "component_word", "cut", "decided_by", "delta_text", "fix_lines",
    "gate_lines", "incident_lines", "mde_text", "metric_line", "pct", "value_text", "wrap",
]
