"""Execution: did the turn's chain run, did its answer reach the user, how fast (docs/method.md section 4).

Importing this package registers the rules (`rules`), and the component: its data definitions
(`definitions.DEFINITIONS`) and analyses (`analysis.ANALYSES`). `rollup.failure_rollup` rolls any trace-layer
failure item up to the session and user layers, for any component.
"""

from agent_factory.evaluators.components.execution.analysis import ANALYSES, VERSION
from agent_factory.evaluators.components.execution.definitions import CHAIN_REQUIREMENTS, DEFINITIONS
from agent_factory.evaluators.components.execution.flags import FLAGS
from agent_factory.evaluators.components.execution.gate import measures as gate_measures
from agent_factory.evaluators.components.execution.present import PRESENTATION
from agent_factory.evaluators.components.execution.rollup import FailureItem, Meta, failure_rollup, rate_result
from agent_factory.evaluators.core.registry import ComponentSpec

SPEC = ComponentSpec(
    name="execution",
    present=PRESENTATION,
    definitions=DEFINITIONS,
    flags=FLAGS,
    gate=gate_measures,
    analyses=ANALYSES,
    description="Chain completeness by mode, delivery failure, latency against per-mode baselines, the "
                "fast-failure band, progress at stop, and failure rolled up to sessions and users.",
)

__all__ = ["ANALYSES", "FLAGS", "CHAIN_REQUIREMENTS", "DEFINITIONS", "SPEC", "VERSION", "FailureItem", "Meta",
           "failure_rollup", "rate_result"]
