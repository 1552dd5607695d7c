"""Findings become fixes (docs/method.md section 7): each failed metric and each broken invariant of a gate run
becomes a proposed `Fix` bound to its acceptance metric, and every fix already proposed is re-checked on the run.

A metric fix is met when its metric passes the gate's test against the baseline (no longer significantly worse
than the baseline's value, the fix's `target`); it reopens when the metric fails again. An incident fix (one per
invariant clause, however many units broke it) is met when the clause has no incident in the run and its measure
was tested on the candidate (rows to test it on): zero tolerance, no statistics. A fix is identified by its
component and acceptance metric, so a finding that recurs is the same fix, re-checked, not a new one.

Pure: verdicts in, fixes out; `factory/loops/gate/run.py` reads and writes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agent_factory.digest import stable_id
from agent_factory.evaluators.gate.model import ComponentVerdict, Fix, FixCheck, Incident, MetricVerdict
from agent_factory.evaluators.gate.text import bound_text, delta_text, value_text

SHOWN_UNITS = 3
"""Units an incident fix's finding names (the rest are counted; `agent-factory incidents` lists them all)."""


def fix_id(component: str, metric: str) -> str:
    """A fix's id: stable over runs, so a recurring finding is re-checked rather than proposed again."""
    return stable_id(component, metric, prefix="fix-")


def metric_finding(m: MetricVerdict) -> str:
    """A failed metric in one line: `delivery failure 3.5% -> 8.1% (+4.6 pp), z 6.10 > threshold 2.87`."""
    parts = [m.label]
    if m.baseline is not None and m.candidate is not None:
        change = f"{value_text(m.baseline, m.unit)} -> {value_text(m.candidate, m.unit)}"
        parts.append(change if m.delta is None else f"{change} ({delta_text(m.delta, m.unit)})")
    line = " ".join(parts)
    if m.bound is not None:
        return f"{line}, {bound_text(m)}"
    if m.statistic is not None and m.threshold is not None:
        return f"{line}, z {m.statistic:.2f} > threshold {m.threshold:.2f}"
    return f"{line}, {m.reason}" if m.reason else line


def _metric_acceptance(m: MetricVerdict) -> str:
    direction = "above" if m.worse == "higher" else "below"
    if m.baseline is None:
        return f"{m.metric} not significantly {direction} the baseline's on the next candidate"
    target = value_text(m.baseline, m.unit)
    return f"{m.metric} not significantly {direction} {target} (the baseline's) on the next candidate"


def _metric_fix(m: MetricVerdict, *, candidate: str, at: str) -> Fix:
    return Fix(id=fix_id(m.component, m.metric), component=m.component, kind="metric", metric=m.metric,
               finding=metric_finding(m), acceptance=_metric_acceptance(m), target=m.baseline, opened_at=at,
               opened_by=candidate, status="open")


def _incident_fix(incidents: Sequence[Incident], *, candidate: str, at: str) -> Fix:
    first = incidents[0]
    units = sorted({i.unit_id for i in incidents})
    named = ", ".join(units[:SHOWN_UNITS]) + (f" and {len(units) - SHOWN_UNITS} more" if len(units) > SHOWN_UNITS
                                               else "")
    return Fix(id=fix_id(first.component, first.metric), component=first.component, kind="incident",
               metric=first.metric, finding=f"invariant {first.clause} broken in {len(units)} unit(s): {named}",
               acceptance=f"{first.metric} = 0 (zero tolerance)", target=0.0, opened_at=at, opened_by=candidate,
               status="open")


def _recheck(fix: Fix, *, verdicts: Mapping[tuple[str, str], MetricVerdict],
             incidents: Mapping[tuple[str, str], Sequence[Incident]], candidate: str, at: str) -> Fix:
    m = verdicts.get((fix.component, fix.metric))
    value = None if m is None else m.candidate
    if fix.kind == "incident":
        if incidents.get((fix.component, fix.metric)):
            check = FixCheck(at=at, candidate=candidate, value=value, status="not_met")
        elif m is not None and m.rows_candidate > 0:
            check = FixCheck(at=at, candidate=candidate, value=value, status="met")
        else:
            # Not tested (no candidate unit had the clause's trigger collected): no violation is not compliance.
            check = FixCheck(at=at, candidate=candidate, value=value, status="undecided")
    else:
        status = {"pass": "met", "fail": "not_met"}.get(m.verdict or "", "undecided") if m is not None else "undecided"
        check = FixCheck(at=at, candidate=candidate, value=value, status=status)
    # An undecided check leaves the fix as it stood; a decided one sets it (a met fix that fails again reopens).
    new_status = fix.status if check.status == "undecided" else ("met" if check.status == "met" else "open")
    return fix.model_copy(update={"status": new_status, "checks": (*fix.checks, check)})


def propose_fixes(components: Sequence[ComponentVerdict], *, existing: Sequence[Fix], candidate: str,
                  at: str) -> list[Fix]:
    """Every fix in `existing` re-checked against this run (a `FixCheck` appended, its status updated), then a new
    fix for each failed metric and each broken invariant clause that has none yet: every fix created or
    re-checked, existing ones first. An incident takes precedence over a failed metric of the same clause."""
    verdicts = {(m.component, m.metric): m for c in components for m in c.metrics}
    incidents: dict[tuple[str, str], list[Incident]] = {}
    for c in components:
        for i in c.incidents:
            incidents.setdefault((i.component, i.metric), []).append(i)
    out = [_recheck(f, verdicts=verdicts, incidents=incidents, candidate=candidate, at=at) for f in existing]
    known = {f.id for f in out}
    for c in components:
        new: list[Fix] = []
        for key, found in incidents.items():
            if key[0] == c.component:
                new.append(_incident_fix(found, candidate=candidate, at=at))
        new += [_metric_fix(m, candidate=candidate, at=at) for m in c.metrics if m.verdict == "fail"]
        for f in new:
            if f.id not in known:
                known.add(f.id)
                out.append(f)
    return out


__all__ = ["SHOWN_UNITS", "fix_id", "metric_finding", "propose_fixes"]
