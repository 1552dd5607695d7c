"""The spec compiler: a role spec (system prompt) -> clauses (`factory.suite.write.build_suite` writes the
reviewable evaluator suite on disk from them).

Example:
    spec = compile_spec(Path("specs/airline_en.md").read_text(), source="airline_en.md")
"""

from agent_factory.factory.compile.compiler import compile_spec
from agent_factory.factory.compile.model import (
    COMPILER_VERSION,
    BuildReport,
    ClauseSummary,
    CompiledClause,
    CompiledSpec,
    Uncompiled,
)

__all__ = [
    "COMPILER_VERSION", "BuildReport", "ClauseSummary", "CompiledClause", "CompiledSpec", "Uncompiled",
    "compile_spec",
]
