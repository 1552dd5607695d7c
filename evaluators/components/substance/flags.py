"""Substance's flags: each checklist item a delivered answer fails (an item that does not apply is no flag)."""

from __future__ import annotations

from agent_factory.evaluators.components.substance.definitions import ITEMS
from agent_factory.evaluators.core.flags import FlagSpec

_LABELS = {
    "i1_answers_task": "does not answer the task",
    "i2_respects_constraints": "breaks a stated constraint",
    "i3_uses_context": "ignores the retrieved context",
    "c1_covers_parts": "misses a part of the request",
    "c2_closes_properly": "does not close properly",
    "s1_specific": "generic, not specific",
    "s2_actionable": "nothing to act on",
    "e1_no_contradiction": "contradicts itself",
}

FLAGS: tuple[FlagSpec, ...] = tuple(
    FlagSpec(id=f"{item}_failed", component="substance", layer="trace",
             label=f"{item.split('.', 1)[1].split('_', 1)[0].upper()} {_LABELS[item.split('.', 1)[1]]}",
             item=item, raised=("no",), clear=("yes", "not_applicable"))
    for item in ITEMS
)
"""One flag per checklist item, in the design's order."""
