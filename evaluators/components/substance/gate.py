"""What Substance puts before the gate: S per delivered turn, the plain mean of `turn_score` over the delivered
turns whose S is defined (`scale="mean"`). Failed turns (S = 0 by definition) are left to Execution's
`failure_rate`, so a blanked answer is one component's failure, not two; turns with no collected checklist item
have no S and are left out. Unlike the analysis' population S (stratified by mode x delivery) it is a plain mean:
the gate compares like with like across two sides, and a rules-only run, which scores no turn, gives it no row
(the gate says undecided) (`evaluators.core.gate`)."""

from __future__ import annotations

from agent_factory.evaluators.components.execution.definitions import DELIVERED
from agent_factory.evaluators.components.substance.analysis import turn_score
from agent_factory.evaluators.components.substance.definitions import ITEMS
from agent_factory.evaluators.components.substance.metrics import SCORE
from agent_factory.evaluators.core.gate import GateMeasure
from agent_factory.evaluators.core.registry import UnitRow
from agent_factory.knowledge_packs import KnowledgePack


def _score(row: UnitRow) -> tuple[float, float] | None:
    s = turn_score(row)
    return (s.score, 1.0) if s.delivered and s.score is not None else None


def measures(pack: KnowledgePack) -> tuple[GateMeasure, ...]:
    """S per delivered turn, on the trace rows (reading the delivery datum and the checklist items)."""
    return (GateMeasure(component="substance", metric=SCORE, name=SCORE.name, layer="trace",
                        items=(DELIVERED, *ITEMS), contribution=_score, scale="mean"),)
