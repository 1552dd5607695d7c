"""Results: what followed a session - a return within T, its interval, a redo, feedback (docs/method.md section 4).

Data are collected per session (conversation layer) with the user's window in `RuleContext.engagement`;
censored sessions are a labelled fact, never a return or a non-return (see `definitions`). Importing this
package registers the rules and the component.
"""

from agent_factory.evaluators.components.results.analysis import ANALYSES, VERSION
from agent_factory.evaluators.components.results.definitions import DEFINITIONS
from agent_factory.evaluators.components.results.flags import FLAGS
from agent_factory.evaluators.components.results.gate import measures as gate_measures
from agent_factory.evaluators.components.results.present import PRESENTATION
from agent_factory.evaluators.core.registry import ComponentSpec

SPEC = ComponentSpec(
    name="results",
    present=PRESENTATION,
    definitions=DEFINITIONS,
    flags=FLAGS,
    gate=gate_measures,
    analyses=ANALYSES,
    description="Return within T (censoring kept apart), return interval, redo after failed vs delivered session "
                "ends, single-turn sessions, explicit feedback.",
)

__all__ = ["ANALYSES", "FLAGS", "DEFINITIONS", "SPEC", "VERSION"]
