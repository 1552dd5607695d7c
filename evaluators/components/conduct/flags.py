"""Conduct's flags, generated from the pack: each clause's violation on its layer.

A violation is a unit whose trigger fired and whose obligation did not hold; a unit the trigger did not fire
on is clear, and an uncollected trigger or obligation leaves the flag undecided (None), as in the analysis.
"""

from __future__ import annotations

from agent_factory.evaluators.components.conduct.definitions import obligation_id, trigger_id
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.knowledge_packs import KnowledgePack


def flags_for(pack: KnowledgePack) -> tuple[FlagSpec, ...]:
    """One flag per clause of the pack, in clause order."""
    return tuple(
        FlagSpec(id=f"conduct.{c.id}.violated", component="conduct", layer=c.layer, label=f"{c.id} violated",
                 description=c.text, item=obligation_id(c.id), raised=("no",), clear=("yes",), gate=trigger_id(c.id))
        for c in pack.clauses
    )
