"""Execution's flags: the per-turn (and per-span) values it raises as problems, and the hand-off it counts."""

from __future__ import annotations

from agent_factory.evaluators.components.execution.definitions import CHAIN_COMPLETE, DELIVERED, FAST_ANSWER, SPAN_ERROR
from agent_factory.evaluators.core.flags import FlagSpec

FLAGS: tuple[FlagSpec, ...] = (
    FlagSpec(id="execution.delivery_failed", component="execution", layer="trace", label="delivery failed",
             item=DELIVERED, raised=("no",), clear=("yes", "not_applicable"),
             description="The answer did not reach the user: empty, an error, or cut off."),
    FlagSpec(id="execution.handed_off", component="execution", layer="trace", label="handed off to a person",
             meaning="descriptive", item=DELIVERED, raised=("not_applicable",), fact="handed_off",
             clear=("yes", "no"), description="A hand-off is its own state: neither a delivery nor a failure."),
    FlagSpec(id="execution.chain_incomplete", component="execution", layer="trace",
             label="chain missing a step its mode needs", item=CHAIN_COMPLETE, raised=("no",),
             clear=("yes", "not_applicable"),
             description="A step the turn's mode needs (thinking, retrieval, a tool or model step) did not run."),
    FlagSpec(id="execution.fast_answer", component="execution", layer="trace",
             label="answer inside the fast-failure band", meaning="descriptive", item=FAST_ANSWER, raised=("yes",),
             clear=("no",), description="Faster than the pack's fast-failure band: a risk sign, not a failure."),
    FlagSpec(id="execution.span_error", component="execution", layer="span", label="span ended in an error",
             item=SPAN_ERROR, raised=("yes",), clear=("no",)),
)
"""Execution's flags, trace layer first."""
