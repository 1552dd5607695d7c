"""Conduct analysis (f): applicability and conditional compliance of each clause, violations, invariants.

For clause r on its layer's units, with trigger phi_t and obligation psi:

- `A(r).<id>` = P(phi_t): units where the trigger fired / units where the trigger was collected (Wilson);
  `A(r).<id>.clustered` the same rate with a user-clustered interval.
- `C(r).<id>` = P(psi | phi_t): complied / triggered units whose obligation was collected (Wilson);
  `C(r).<id>.clustered` with a user-clustered interval.
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

from agent_factory.evaluators.components.conduct.definitions import obligation_id, trigger_id
from agent_factory.evaluators.components.conduct.metrics import (
    APPLIES,
    COMPLIES,
    INVARIANT,
    UNCOLLECTED,
    VIOLATION,
    VIOLATIONS,
)
from agent_factory.evaluators.core.model import Result
from agent_factory.evaluators.core.present import Metric
from agent_factory.evaluators.core.registry import Observations, UnitRow
from agent_factory.evaluators.stats import Estimate, cluster_proportion_ci, proportion_ci
from agent_factory.knowledge_packs import KnowledgePack
from agent_factory.knowledge_packs.model import Clause

VERSION = "1"
NAME = "conduct.clauses"


def cluster_of(row: UnitRow) -> str:
    """The independent unit a row belongs to: its user, else its conversation, else itself."""
    return row.user_id or row.conversation_id or row.unit_id


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


def clause_results(clause: Clause, rows: Sequence[UnitRow]) -> list[Result]:
    """Every result of one clause from the rows of its layer."""
    tid, oid = trigger_id(clause.id), obligation_id(clause.id)
    applic: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    comply: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    uncollected = {"trigger": 0, "obligation": 0}
    inconsistent = 0
    violations: list[UnitRow] = []
    for row in rows:
        trig = row.values.get(tid)
        if trig is None or trig == "not_applicable":
            continue
        if trig == "uncollected":
            uncollected["trigger"] += 1
            continue
        key = cluster_of(row)
        applic[key][1] += 1
        if trig != "yes":
            continue
        applic[key][0] += 1
        ob = row.values.get(oid)
        if ob is None or ob == "uncollected":
            uncollected["obligation"] += 1
            continue
        if ob == "not_applicable":
            inconsistent += 1  # trigger fired but the obligation's collector found nothing to judge
            continue
        comply[key][1] += 1
        if ob == "yes":
            comply[key][0] += 1
        else:
            violations.append(row)

    out = _rate_results(APPLIES, clause, applic, "P(trigger)")
    out += _rate_results(COMPLIES, clause, comply, "P(obligation | trigger)")
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
