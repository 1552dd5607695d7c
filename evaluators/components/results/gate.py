"""What Results puts before the gate: `redo_rate`, the share of sessions whose next session opens by redoing the
last request, per conversation row that has a decided `results.redo` datum. The row is read by the rollup's own
`row_flagged` with `REDO_FLAG`, the classification `redo_rate` (stratum `all`) and `redo_share` count from
(`evaluators.core.gate`)."""

from __future__ import annotations

from agent_factory.evaluators.components.execution.rollup import row_flagged
from agent_factory.evaluators.components.results.definitions import REDO
from agent_factory.evaluators.components.results.metrics import REDO_RATE
from agent_factory.evaluators.components.results.rollup import REDO_FLAG
from agent_factory.evaluators.core.gate import GateMeasure
from agent_factory.evaluators.core.registry import UnitRow
from agent_factory.knowledge_packs import KnowledgePack


def _redo(row: UnitRow) -> tuple[float, float] | None:
    flag = row_flagged(row, (REDO_FLAG,))
    return None if flag is None else (1.0 if flag else 0.0, 1.0)


def measures(pack: KnowledgePack) -> tuple[GateMeasure, ...]:
    """Redo per session, on the conversation rows."""
    return (GateMeasure(component="results", metric=REDO_RATE, name=REDO_RATE.name, layer="conversation",
                        items=(REDO,), contribution=_redo),)
