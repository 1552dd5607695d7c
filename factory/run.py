"""The evaluation run (`agent-factory run`): `Runner` and `RunReport`, kept importable here; the steps live in
`factory.pipeline.engine` (plan, execute, persist, analyse, merge, report), the pure collection and analysis in
`evaluators.kernel`, the SQL in `factory.store`.
"""

from __future__ import annotations

from agent_factory.factory.pipeline.engine import Collector, Runner, definitions_by_layer, injection_pointers
from agent_factory.factory.pipeline.report import RunReport

__all__ = ["Collector", "RunReport", "Runner", "definitions_by_layer", "injection_pointers"]
