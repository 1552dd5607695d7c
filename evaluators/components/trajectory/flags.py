"""Trajectory's flags: each recovery or blocking event in a session, and the session's outcome."""

from __future__ import annotations

from agent_factory.evaluators.components.trajectory.definitions import BLOCKING_EVENTS, RECOVERY_EVENTS
from agent_factory.evaluators.core.flags import FlagSpec

_LABELS = {
    "request_replay": "user re-asked the previous request",
    "verbatim_replay": "user resent the previous request verbatim",
    "context_repair": "user repaired lost context",
    "clarification_loop": "clarification loop",
    "session_termination": "session ended on a failed answer",
    "abandonment": "user gave up",
    "frustration": "user expressed frustration",
}

FLAGS: tuple[FlagSpec, ...] = (
    *(FlagSpec(id=item, component="trajectory", layer="conversation", label=_LABELS[item.split(".", 1)[1]],
               item=item, raised=("yes",), clear=("no",))
      for item in (*RECOVERY_EVENTS, *BLOCKING_EVENTS)),
    # The outcome rule's result: `undetermined` (an event uncollected) is neither raised nor clear. The outcome
    # is a summary of the events above (frustration -> blocked), not an event of its own: as `bad` flags one
    # frustration phrase would count three times among a conversation's problems, so the outcome is descriptive
    # (each event raises one bad flag; the outcome stays readable, and the outcome metric is unchanged).
    FlagSpec(id="trajectory.struggled_or_blocked", component="trajectory", layer="conversation",
             label="session struggled or blocked", meaning="descriptive", source="result", item="outcome",
             raised=("struggled", "blocked"), clear=("smooth", "censored"),
             description="The outcome rule's label: any recovery event makes a session struggled, abandonment or "
                         "frustration blocked. Descriptive: the events themselves are the bad flags."),
    FlagSpec(id="trajectory.blocked", component="trajectory", layer="conversation", label="session blocked",
             meaning="descriptive", source="result", item="outcome", raised=("blocked",),
             clear=("smooth", "struggled", "censored"),
             description="The outcome rule's label: abandonment or frustration. Descriptive: those events are the "
                         "bad flags."),
)
"""Trajectory's flags: one bad flag per event in the design's order, then the outcome (descriptive)."""
