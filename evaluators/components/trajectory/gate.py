"""What Trajectory puts before the gate: the share of next messages that resend the previous request
(`replay_per_next_message`), per conversation: y = the session's replayed turns, x = its turns after the first,
counted by the analysis' own `replay_counts` (`evaluators.core.gate`).

`replay_after_failure` is not gated: it pairs each next message with the previous turn's `execution.delivered`,
a trace-layer datum, while a measure's contribution reads one row of one layer and a conversation row holds no
turn's delivery state."""

from __future__ import annotations

from agent_factory.evaluators.components.trajectory.analysis import replay_counts
from agent_factory.evaluators.components.trajectory.definitions import REPLAY_TURNS, TURNS
from agent_factory.evaluators.components.trajectory.metrics import REPLAY_SHARE
from agent_factory.evaluators.core.gate import GateMeasure
from agent_factory.evaluators.core.registry import UnitRow
from agent_factory.knowledge_packs import KnowledgePack


def _replays(row: UnitRow) -> tuple[float, float] | None:
    counts = replay_counts(row)
    return None if counts is None else (float(counts[0]), float(counts[1]))


def measures(pack: KnowledgePack) -> tuple[GateMeasure, ...]:
    """Replay per next message, on the conversation rows."""
    return (GateMeasure(component="trajectory", metric=REPLAY_SHARE, name=REPLAY_SHARE.name, layer="conversation",
                        items=(REPLAY_TURNS, TURNS), contribution=_replays),)
