"""Substance: whether a delivered answer is any good, item by item (docs/method.md section 4).

Importing this package registers the rules (`rules`: applicability, and C2 on truncation markers) and the
component: the eight checklist definitions (`definitions`, trace layer, model tiers) and the analysis
(`analysis.ANALYSES`: S(x) = D(x) * mean of admitted applicable items, stratified population S with 95%
intervals, S by mode, per-item pass rates, and counts of what could not be scored).
"""

from agent_factory.evaluators.components.substance import rules
from agent_factory.evaluators.components.substance.analysis import ANALYSES, VERSION, TurnScore, score, turn_score
from agent_factory.evaluators.components.substance.definitions import ITEMS, build
from agent_factory.evaluators.components.substance.flags import FLAGS
from agent_factory.evaluators.components.substance.gate import measures as gate_measures
from agent_factory.evaluators.components.substance.present import PRESENTATION
from agent_factory.evaluators.core.registry import ComponentSpec

DEFINITIONS = build(rules.RULES_DIGEST)
"""The eight checklist definitions, versioned with the applicability rules."""

SPEC = ComponentSpec(
    name="substance",
    present=PRESENTATION,
    definitions=DEFINITIONS,
    flags=FLAGS,
    gate=gate_measures,
    analyses=ANALYSES,
    description="Eight checklist items per delivered turn (I1 I2 I3 C1 C2 S1 S2 E1); S(x) with stratum weights "
                "and 95% CIs, S by mode, per-item pass rates.",
)

__all__ = ["ANALYSES", "FLAGS", "DEFINITIONS", "ITEMS", "SPEC", "VERSION", "TurnScore", "score", "turn_score"]
