"""What Conduct puts before the gate: each clause's violation rate (`violation_rate.<clause>`), per unit of the
clause's layer, read by the same per-unit classifier as the analysis (`analysis.unit_state`, `analysis.violated`),
so the gate's rate over all users is the analysis' (`evaluators.core.gate`). A confirmed invariant clause's
measure is zero-tolerance (`invariant=True`): any violation in the candidate opens an incident."""

from __future__ import annotations

from agent_factory.evaluators.components.conduct.analysis import unit_state, violated
from agent_factory.evaluators.components.conduct.definitions import obligation_id, trigger_id
from agent_factory.evaluators.components.conduct.metrics import VIOLATION_RATE
from agent_factory.evaluators.core.gate import Contribution, GateMeasure
from agent_factory.evaluators.core.registry import UnitRow
from agent_factory.knowledge_packs import KnowledgePack
from agent_factory.knowledge_packs.model import Clause


def _contribution(clause: Clause) -> Contribution:
    def contribution(row: UnitRow) -> tuple[float, float] | None:
        v = violated(unit_state(row, clause))
        return None if v is None else (1.0 if v else 0.0, 1.0)

    return contribution


def measures(pack: KnowledgePack) -> tuple[GateMeasure, ...]:
    """One `violation_rate.<clause>` per clause of the pack, on the clause's layer, reading its trigger and
    obligation data."""
    return tuple(
        GateMeasure(component="conduct", metric=VIOLATION_RATE, name=VIOLATION_RATE.of(clause=c.id), layer=c.layer,
                    items=(trigger_id(c.id), obligation_id(c.id)), contribution=_contribution(c),
                    invariant=c.invariant)
        for c in pack.clauses)
