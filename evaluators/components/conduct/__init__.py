"""Conduct: policy clauses of the role spec, checked on every stage (docs/method.md section 4).

The data come from the pack's clauses, so the runner asks `definitions_for(pack)` (also
`get_component("conduct").generate`); the registered spec carries no pack-independent data.
The analysis reads the pack's clauses and the rows of each clause's layer.
"""

from __future__ import annotations

from agent_factory.evaluators.components.conduct.analysis import NAME, VERSION, clause_results, conduct_analysis
from agent_factory.evaluators.components.conduct.definitions import (
    GENERIC_DEFINITIONS,
    clause_definitions,
    definitions_for,
    obligation_id,
    trigger_id,
)
from agent_factory.evaluators.components.conduct.flags import flags_for
from agent_factory.evaluators.components.conduct.gate import measures as gate_measures
from agent_factory.evaluators.components.conduct.present import PRESENTATION
from agent_factory.evaluators.components.conduct.rules import match_condition, message_index
from agent_factory.evaluators.core.registry import Analysis, ComponentSpec

SPEC = ComponentSpec(
    name="conduct",
    present=PRESENTATION,
    definitions=GENERIC_DEFINITIONS,
    analyses=(Analysis(name=NAME, version=VERSION, fn=conduct_analysis, reads_clauses=True),),
    description="Policy clauses: applicability A(r), conditional compliance C(r), violations with evidence.",
    generate=definitions_for,
    generate_flags=flags_for,
    gate=gate_measures,
)

__all__ = [
    "SPEC",
    "clause_definitions",
    "clause_results",
    "conduct_analysis",
    "definitions_for",
    "flags_for",
    "match_condition",
    "message_index",
    "obligation_id",
    "trigger_id",
]
