"""One gate run (docs/method.md section 7): a candidate agent version against its baseline, per component.

1. Each side's rows of every gated measure (`data.side_rows`): the last run's stored data, a selector applied.
2. Per measure the user-clustered test of the change (`evaluators.gate.stats.change`), signed so that positive is
   worse, against the threshold the stored A/A calibration of this baseline and suite gives (`calibrate`), or the
   Bonferroni fallback when there is none (said in the report). The per-turn test is computed for contrast only.
   With `sequential`, the always-valid bound decides instead (`evaluators.gate.sequential`), and the look is
   counted: a team may check after every ingest without inflating its false alarms.
3. Confirmed invariants (`GateMeasure.invariant`) have zero tolerance: every candidate unit that broke one opens an
   incident with its evidence, whatever the statistics say.
4. Each failed metric and incident becomes a proposed fix bound to its acceptance metric; open fixes are re-checked
   (`evaluators.gate.fixes`).
5. Everything is recorded in the baseline's store (`store.gate`): the baseline is what persists between
   candidates.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import numpy as np

from agent_factory.digest import stable_id
from agent_factory.evaluators.core.gate import GateMeasure
from agent_factory.evaluators.core.model import Layer
from agent_factory.evaluators.core.registry import ComponentSpec, UnitRow
from agent_factory.evaluators.gate.columns import CLUSTERS, ROWS, GateColumns, gate_columns
from agent_factory.evaluators.gate.fixes import propose_fixes
from agent_factory.evaluators.gate.model import (
    EXIT_FAIL,
    EXIT_INCIDENT,
    EXIT_PASS,
    CalibrationRef,
    CalibrationReport,
    ComponentVerdict,
    GateReport,
    Incident,
    MetricVerdict,
    MetricVerdictValue,
    Verdict,
)
from agent_factory.evaluators.gate.power import in_unit, unit_of
from agent_factory.evaluators.gate.stats import Change, bonferroni_threshold, change, totals
from agent_factory.factory.loops.gate.calibrate import calibration_key
from agent_factory.factory.loops.gate.data import Side, gate_measures, retired_measures, side_rows
from agent_factory.factory.store import Store
from agent_factory.factory.store.gate import (
    read_calibration,
    read_fixes,
    record_gate,
    record_incidents,
    take_look,
    write_fixes,
)
from agent_factory.knowledge_packs import KnowledgePack

MIN_USERS = 2
"""Users a side needs for a metric to be tested (a clustered variance needs two clusters)."""
MAX_INCIDENTS = 200
"""Incidents kept per invariant and run (the count is always reported)."""
_ORDER: dict[Verdict | None, int] = {None: 0, "pass": 1, "fail": 2, "incident": 3}


def shown(m: GateMeasure, r: float) -> float | None:
    """The metric's value from its ratio R (a geometric mean ratio for a log measure)."""
    if not math.isfinite(r):
        return None
    return math.exp(r) if m.scale == "log" else r


def delta_in_unit(m: GateMeasure, d: float) -> float | None:
    """The change b - a (of R) in the measure's unit (`power.in_unit`: pp, %, or as is)."""
    return float(in_unit(np.asarray(d), unit_of(m))) if math.isfinite(d) else None


def worse_in_unit(m: GateMeasure, b: float) -> float:
    """A worse-direction change `b` of R (an always-valid bound) as a worse change in the measure's unit: positive
    is worse, whichever direction the metric declares (the change itself is `sign * b`)."""
    return m.sign * float(in_unit(np.asarray(m.sign * b), unit_of(m)))


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def _decide(m: GateMeasure, k: int, *, a: np.ndarray, b: np.ndarray, ch: Change, threshold: float,
            bound: float | None, sequential: bool, retired: str | None) -> tuple[MetricVerdictValue | None, str | None]:
    if retired is not None:
        return None, f"its item {retired} was retired by the audit: its data are not trusted"
    for side, s in (("baseline", a), ("candidate", b)):
        if s[k, ROWS] == 0:
            return None, f"no {m.layer} unit of the {side} has this metric's data (not collected or not applicable)"
        if s[k, CLUSTERS] < MIN_USERS:
            return None, f"the {side} has {int(s[k, CLUSTERS])} user(s) with data; a clustered test needs {MIN_USERS}"
    worse = m.sign * float(ch.delta[k])
    if sequential:
        if bound is None:
            return None, "no always-valid bound (no variance on either side)"
        return ("fail", None) if bound > 0 else ("pass", None)
    z = float(ch.z[k])
    if not math.isfinite(z):
        # No variance on either side (every unit alike): the change is exact.
        return ("fail", "no variance: every unit alike on both sides") if worse > 0 else ("pass", None)
    return ("fail", None) if z > threshold else ("pass", None)


def _evidence(row: UnitRow, m: GateMeasure) -> str:
    facts = [f"{i}: {row.facts[i]}" for i in m.items if isinstance(row.facts.get(i), str) and row.facts[i]]
    return "; ".join(facts) if facts else f"atomic data {', '.join(m.items)} of unit {row.unit_id}"


def incidents_of(m: GateMeasure, rows: Sequence[UnitRow], *, baseline: str, candidate: str, at: str) -> list[Incident]:
    """One incident per candidate unit that broke the invariant `m` (y > 0)."""
    out = []
    for row in rows:
        got = m.contribution(row)
        if got is None or got[0] <= 0:
            continue
        out.append(Incident(id=stable_id(baseline, candidate, m.key, row.unit_id, prefix="inc-"),
                            component=m.component, clause=m.name.partition(".")[2] or m.name, metric=m.name,
                            unit_id=row.unit_id, evidence=_evidence(row, m), candidate=candidate, opened_at=at))
    return out


def _columns(store: Store, side: Side, measures: Sequence[GateMeasure]) -> tuple[GateColumns,
                                                                                    Mapping[Layer, Sequence[UnitRow]]]:
    rows = side_rows(store, side, measures)
    return gate_columns(measures, rows), rows


def run_gate(base_store: Store, cand_store: Store, *, baseline: Side, candidate: Side, pack: KnowledgePack,
             components: Sequence[ComponentSpec], suite: str | None, sequential: bool = False,
             confirmed: bool = True) -> GateReport:
    """Gate `candidate` against `baseline` (their stores already run with the suite); record it in `base_store`.

    `confirmed`: whether the suite's invariants were confirmed by a person (an approved suite's `invariants.yaml`);
    a pack's own invariant flags, run without a suite, are the pack author's proposal for some agent: their
    breaches are counted in the component's reason, and open no incident."""
    started = time.monotonic()
    at = datetime.now(UTC).isoformat(timespec="seconds")
    measures = gate_measures(pack, components)
    a_cols, _ = _columns(base_store, baseline, measures)
    b_cols, b_rows = _columns(cand_store, candidate, measures)
    retired = {**retired_measures(cand_store, measures), **retired_measures(base_store, measures)}
    cal: CalibrationReport | None = read_calibration(base_store, calibration_key(a_cols, suite=suite))
    fallback = bonferroni_threshold(len(measures))
    sign = np.array([m.sign for m in measures], dtype=np.float64)
    a, b = totals(a_cols.user_stats()), totals(b_cols.user_stats())
    ch = change(a, b, sign) if measures else None
    per_turn = change(a, b, sign, test="per_turn") if measures else None
    bounds: list[float | None] = [None] * len(measures)
    looks = None
    if sequential and measures:
        from agent_factory.evaluators.gate.sequential import always_valid_bound

        level = cal.aa.level if cal is not None else 0.05 / len(measures)
        raw = always_valid_bound(a, b, sign, level=level)
        bounds = [_finite(float(v)) for v in np.asarray(raw, dtype=np.float64)]
        looks = take_look(base_store, f"{baseline.label} -> {candidate.label}", len(b_cols.users))

    verdicts: list[MetricVerdict] = []
    incidents: list[Incident] = []
    proposed: dict[str, list[Incident]] = {}
    for k, m in enumerate(measures):
        assert ch is not None and per_turn is not None
        # A threshold the calibration could not certify (+inf: too few splits, or a metric with no variance in the
        # baseline) would make the gate blind to that metric: the Bonferroni fallback tests it instead.
        calibrated = cal is not None and math.isfinite(cal.thresholds.get(m.key, math.inf))
        threshold = cal.thresholds[m.key] if cal is not None and calibrated else fallback
        verdict, reason = _decide(m, k, a=a, b=b, ch=ch, threshold=threshold, bound=bounds[k],
                                  sequential=sequential, retired=retired.get(m.key))
        verdicts.append(MetricVerdict(
            component=m.component, metric=m.name, label=m.metric.label, layer=m.layer,
            worse=m.metric.worse or "higher", unit=unit_of(m), baseline=shown(m, float(ch.a[k])),
            candidate=shown(m, float(ch.b[k])), delta=delta_in_unit(m, float(ch.delta[k])),
            statistic=_finite(float(ch.z[k])), per_turn_statistic=_finite(float(per_turn.z[k])),
            threshold=_finite(threshold), calibrated=calibrated, verdict=verdict,
            bound=None if (bk := bounds[k]) is None else worse_in_unit(m, bk),
            reason=reason, users_baseline=int(a[k, CLUSTERS]), users_candidate=int(b[k, CLUSTERS]),
            rows_baseline=int(a[k, ROWS]), rows_candidate=int(b[k, ROWS])))
        if m.invariant and m.key not in retired:
            broke = incidents_of(m, b_rows.get(m.layer, ()), baseline=baseline.label, candidate=candidate.label,
                                 at=at)
            (incidents if confirmed else proposed.setdefault(m.component, [])).extend(broke)

    comps = [_component(spec.name, [v for v in verdicts if v.component == spec.name],
                        [i for i in incidents if i.component == spec.name], gated=spec.gate is not None,
                        unconfirmed=proposed.get(spec.name, ()))
             for spec in components]
    fixes = propose_fixes(comps, existing=read_fixes(base_store), candidate=candidate.label, at=at)
    write_fixes(base_store, fixes)
    record_incidents(base_store, incidents)
    worst = max((c.verdict for c in comps), key=lambda v: _ORDER[v], default=None)
    report = GateReport(
        baseline=baseline.label, candidate=candidate.label, suite=suite, components=tuple(comps), verdict=worst,
        exit_code={"incident": EXIT_INCIDENT, "fail": EXIT_FAIL}.get(worst or "", EXIT_PASS),
        calibration=None if cal is None else CalibrationRef(key=cal.key, at=cal.at, splits=cal.aa.splits,
                                                            family_false_alarm_heldout=cal.aa.family_false_alarm_heldout),
        sequential=sequential, looks=looks, fixes=tuple(fixes), users_baseline=len(a_cols.users),
        users_candidate=len(b_cols.users), seconds=round(time.monotonic() - started, 3))
    record_gate(base_store, report)
    return report


def _component(name: str, metrics: list[MetricVerdict], incidents: list[Incident], *, gated: bool,
               unconfirmed: Sequence[Incident] = ()) -> ComponentVerdict:
    verdict = _verdict(name, metrics, incidents, gated=gated)
    if not unconfirmed:
        return verdict
    clauses = ", ".join(sorted({i.clause for i in unconfirmed}))
    note = (f"{len(unconfirmed)} unit(s) broke the pack's invariant(s) {clauses}, which no person confirmed for this "
            f"agent (run with a suite whose invariants.yaml confirms them to gate on them): no incident")
    return verdict.model_copy(update={"reason": f"{verdict.reason}; {note}" if verdict.reason else note})


def _verdict(name: str, metrics: list[MetricVerdict], incidents: list[Incident], *, gated: bool) -> ComponentVerdict:
    if not gated:
        return ComponentVerdict(component=name, verdict=None, reason="not gated: an instrument, not the agent")
    shown_incidents = tuple(incidents[:MAX_INCIDENTS])
    if incidents:
        clauses = sorted({i.clause for i in incidents})
        return ComponentVerdict(component=name, verdict="incident", metrics=tuple(metrics), incidents=shown_incidents,
                                reason=f"{len(incidents)} unit(s) broke confirmed invariant(s) {', '.join(clauses)}")
    failed = [m.metric for m in metrics if m.verdict == "fail"]
    if failed:
        return ComponentVerdict(component=name, verdict="fail", metrics=tuple(metrics),
                                reason=f"significantly worse: {', '.join(failed)}")
    if any(m.verdict == "pass" for m in metrics):
        return ComponentVerdict(component=name, verdict="pass", metrics=tuple(metrics))
    why = metrics[0].reason if metrics else "it declares no gated metric over this suite's pack"
    return ComponentVerdict(component=name, verdict=None, metrics=tuple(metrics), reason=f"undecided: {why}")


__all__ = ["MAX_INCIDENTS", "MIN_USERS", "delta_in_unit", "incidents_of", "run_gate", "shown", "worse_in_unit"]
