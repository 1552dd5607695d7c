"""What Execution puts before the gate: delivery failure per turn, and latency against the pack's per-mode
baselines (the mean log ratio, read back as a geometric-mean ratio), both as per-turn contributions that reuse the
analyses' own helpers (`evaluators.core.gate`)."""

from __future__ import annotations

import math

from agent_factory.evaluators.components.execution.analysis import _latency_s, failed, mode_of
from agent_factory.evaluators.components.execution.definitions import DELIVERED, LATENCY_MS, MODE
from agent_factory.evaluators.components.execution.metrics import FAILURE_RATE, LATENCY_RATIO
from agent_factory.evaluators.core.gate import GateMeasure
from agent_factory.evaluators.core.registry import UnitRow
from agent_factory.knowledge_packs import KnowledgePack


def _failure(row: UnitRow) -> tuple[float, float] | None:
    f = failed(row)
    return None if f is None else (1.0 if f else 0.0, 1.0)


def measures(pack: KnowledgePack) -> tuple[GateMeasure, ...]:
    """Delivery failure (`failure_rate`, every decided turn) and latency / the mode's baseline
    (`latency_gm_ratio`, delivered turns of a mode the pack gives a baseline for)."""
    baselines = {mode: b.geomean_seconds for mode, b in pack.baselines.modes.items()}

    def latency(row: UnitRow) -> tuple[float, float] | None:
        if failed(row) is not False:
            return None
        s, base = _latency_s(row), baselines.get(mode_of(row) or "")
        return None if s is None or not base else (math.log(s / base), 1.0)

    out = [GateMeasure(component="execution", metric=FAILURE_RATE, name=FAILURE_RATE.name, layer="trace",
                       items=(DELIVERED,), contribution=_failure)]
    if baselines:
        out.append(GateMeasure(component="execution", metric=LATENCY_RATIO, name=LATENCY_RATIO.name, layer="trace",
                               items=(DELIVERED, LATENCY_MS, MODE), contribution=latency, scale="log"))
    return tuple(out)
