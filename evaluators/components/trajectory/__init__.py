"""Trajectory: how each session went, read from what the user did next (docs/method.md section 4).

Importing this package registers the rules (`rules`) and the component: its conversation-layer data definitions
(`definitions.DEFINITIONS`: recovery events, abandonment, frustration, turn count, replayed turns) and analyses
(`analysis.ANALYSES`: friction and the smooth / struggled / blocked / censored outcome rule per session and as
shares, and the replay rate after a failed vs a delivered turn).
"""

from agent_factory.evaluators.components.trajectory.analysis import (
    ANALYSES,
    OUTCOMES,
    VERSION,
    SessionOutcome,
    replay_after_failure,
    session_outcome,
)
from agent_factory.evaluators.components.trajectory.definitions import BLOCKING_EVENTS, DEFINITIONS, RECOVERY_EVENTS
from agent_factory.evaluators.components.trajectory.flags import FLAGS
from agent_factory.evaluators.components.trajectory.gate import measures as gate_measures
from agent_factory.evaluators.components.trajectory.present import PRESENTATION
from agent_factory.evaluators.core.registry import ComponentSpec

SPEC = ComponentSpec(
    name="trajectory",
    present=PRESENTATION,
    definitions=DEFINITIONS,
    flags=FLAGS,
    gate=gate_measures,
    analyses=ANALYSES,
    description="Recovery events per session (replays, context repair, clarification loops, termination), "
                "abandonment and frustration; friction, the outcome rule, and replay after failure vs success.",
)

__all__ = ["ANALYSES", "FLAGS", "BLOCKING_EVENTS", "DEFINITIONS", "OUTCOMES", "RECOVERY_EVENTS", "SPEC", "VERSION",
           "SessionOutcome", "replay_after_failure", "session_outcome"]
