"""Conduct analysis (f): applicability and conditional compliance of each clause, violations, invariants.

For clause r on its layer's units, with trigger phi_t and obligation psi:

- `A(r).<id>` = P(phi_t): units where the trigger fired / units where the trigger was collected (Wilson);
  `A(r).<id>.clustered` the same rate with a user-clustered interval.
- `C(r).<id>` = P(psi | phi_t): complied / triggered units whose obligation was collected (Wilson);
  `C(r).<id>.clustered` with a user-clustered interval.
- `violation_rate.<id>`: units that broke the clause (triggered, did not comply) / units whose trigger was
  collected, user-clustered: the rate the gate compares (`gate.py`); a triggered unit whose obligation is
  uncollected or inconsistent is in neither count, as in C(r).
- `violations.<id>`: count of triggered units that did not comply, and one per-unit `violation.<id>` result for
  each (value `violated`, note = the evidence pointers the rule recorded as the datum's fact, when present).
- `uncollected.<id>`: trigger or obligation data left uncollected (no model configured, unreadable input):
  they are in no denominator and never count as compliance.
- `invariant.<id>` for invariant clauses: `breached` at the first violation (zero tolerance), `held` when
  triggered units all complied, `untested` when the trigger never fired.

Units are clustered by user (falling back to the conversation, then the unit, when the source has no user).
Pure: reads `Observations` and the pack's clauses only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Literal

from agent_factory.evaluators.components.conduct.definitions import obligation_id, trigger_id
from agent_factory.evaluators.components.conduct.metrics import (
    APPLIES,
    COMPLIES,
    INVARIANT,
    UNCOLLECTED,
    VIOLATION,
    VIOLATION_RATE,
    VIOLATIONS,
)
from agent_factory.evaluators.core.model import Result
from agent_factory.evaluators.core.present import Metric
from agent_factory.evaluators.core.registry import Observations, UnitRow, cluster_of
from agent_factory.evaluators.stats import Estimate, cluster_proportion_ci, proportion_ci
from agent_factory.knowledge_packs import KnowledgePack
from agent_factory.knowledge_packs.model import Clause

VERSION = "2"
NAME = "conduct.clauses"


def _rate_results(
    metric: Metric, clause: Clause, per_cluster: dict[str, list[int]], what: str
) -> list[Result]:
    successes = sum(s for s, _ in per_cluster.values())
    trials = sum(t for _, t in per_cluster.values())
    wilson = proportion_ci(successes, trials)
    clustered = cluster_proportion_ci(
        [s for s, _ in per_cluster.values()], [t for _, t in per_cluster.values()]
    ) if per_cluster else None
    out = [_estimate_result(metric.of(clause=clause.id), clause, wilson, f"wilson; {what}")]
    if clustered is not None:
        note = f"user-clustered over {clustered.n_clusters} user(s); {what}"
        out.append(_estimate_result(metric.variant(".clustered", clause=clause.id), clause, clustered, note))
    return out


def _clustered_rate(metric: str, clause: Clause, per_cluster: dict[str, list[int]], what: str) -> Result:
    est = cluster_proportion_ci([s for s, _ in per_cluster.values()], [t for _, t in per_cluster.values()])
    return _estimate_result(metric, clause, est, f"user-clustered over {est.n_clusters} user(s); {what}")


def _estimate_result(metric: str, clause: Clause, est: Estimate, note: str) -> Result:
    caveat = f"; {est.note}" if est.note else ""
    return Result(
        component="conduct", layer=clause.layer, metric=metric, value=est.value, low=est.low, high=est.high,
        n=est.n, note=note + caveat, analysis=NAME, analysis_version=VERSION,
    )


def _count(metric: str, clause: Clause, value: float | str | None, n: int, note: str,
           unit_id: str | None = None) -> Result:
    return Result(
        component="conduct", layer=clause.layer, metric=metric, unit_id=unit_id, value=value, n=n, note=note,
        analysis=NAME, analysis_version=VERSION,
    )


UnitState = Literal["outside", "trigger_uncollected", "not_triggered", "obligation_uncollected", "inconsistent",
                   "complied", "violated"]
"""Where one unit stands on a clause: outside its scope (no trigger datum, or not_applicable), trigger left
uncollected, not triggered, triggered with the obligation uncollected, triggered with the obligation
not_applicable (inconsistent), triggered and complied, triggered and violated."""


def unit_state(row: UnitRow, clause: Clause) -> UnitState:
    """The one reading of a unit's trigger and obligation data that every result of the clause counts from (the
    analysis here and the gate's `violation_rate` measure alike)."""
    trig = row.values.get(trigger_id(clause.id))
    if trig is None or trig == "not_applicable":
        return "outside"
    if trig == "uncollected":
        return "trigger_uncollected"
    if trig != "yes":
        return "not_triggered"
    ob = row.values.get(obligation_id(clause.id))
    if ob is None or ob == "uncollected":
        return "obligation_uncollected"
    if ob == "not_applicable":
        return "inconsistent"  # trigger fired but the obligation's collector found nothing to judge
    return "complied" if ob == "yes" else "violated"


def violated(state: UnitState) -> bool | None:
    """Whether the unit counts as a violation of the clause in `violation_rate`; None when it is outside that
    rate's denominator (trigger not collected; triggered with the obligation uncollected or inconsistent)."""
    if state in ("not_triggered", "complied", "violated"):
        return state == "violated"
    return None


def clause_results(clause: Clause, rows: Sequence[UnitRow]) -> list[Result]:
    """Every result of one clause from the rows of its layer."""
    oid = obligation_id(clause.id)
    applic: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    comply: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    broke: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    uncollected = {"trigger": 0, "obligation": 0}
    inconsistent = 0
    violations: list[UnitRow] = []
    for row in rows:
        standing = unit_state(row, clause)
        if standing == "outside":
            continue
        if standing == "trigger_uncollected":
            uncollected["trigger"] += 1
            continue
        key = cluster_of(row)
        if (v := violated(standing)) is not None:
            broke[key][0] += v
            broke[key][1] += 1
        applic[key][1] += 1
        if standing == "not_triggered":
            continue
        applic[key][0] += 1
        if standing == "obligation_uncollected":
            uncollected["obligation"] += 1
            continue
        if standing == "inconsistent":
            inconsistent += 1
            continue
        comply[key][1] += 1
        if standing == "complied":
            comply[key][0] += 1
        else:
            violations.append(row)

    out = _rate_results(APPLIES, clause, applic, "P(trigger)")
    out += _rate_results(COMPLIES, clause, comply, "P(obligation | trigger)")
    out.append(_clustered_rate(VIOLATION_RATE.of(clause=clause.id), clause, broke,
                               "units that broke the clause / units whose trigger was collected"))
    triggered = sum(t for _, t in comply.values())
    out.append(_count(VIOLATIONS.of(clause=clause.id), clause, float(len(violations)), triggered,
                      f"{clause.kind}: triggered units that did not comply"))
    for row in violations:
        fact = row.facts.get(oid)
        where = f"evidence: {fact}" if isinstance(fact, str) and fact else f"evidence: atomic datum {oid}"
        out.append(_count(VIOLATION.of(clause=clause.id), clause, "violated", 1, where, unit_id=row.unit_id))
    n_unc = uncollected["trigger"] + uncollected["obligation"]
    note = f"trigger {uncollected['trigger']}, obligation {uncollected['obligation']}; left out of every rate"
    if inconsistent:
        note += f"; {inconsistent} triggered unit(s) whose obligation was not_applicable, also left out"
    out.append(_count(UNCOLLECTED.of(clause=clause.id), clause, float(n_unc), n_unc, note))
    if clause.invariant:
        state = "breached" if violations else ("held" if triggered else "untested")
        out.append(_count(INVARIANT.of(clause=clause.id), clause, state, triggered,
                          f"zero tolerance: {len(violations)} violation(s) in {triggered} triggered unit(s)"))
    return out


def conduct_analysis(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Results of every clause of the pack, in clause order."""
    out: list[Result] = []
    for clause in pack.clauses:
        out += clause_results(clause, obs.layer(clause.layer))
    return out
