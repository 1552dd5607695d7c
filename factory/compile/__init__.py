"""The spec compiler: a role spec (system prompt) -> clauses -> a reviewable evaluator suite on disk.

Example:
    spec = compile_spec(Path("specs/airline_en.md").read_text(), source="airline_en.md")
    report = build_suite(Path("specs/airline_en.md"), pack="default", out=Path("suite"))
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
from agent_factory.factory.suite.write import build_suite

__all__ = [
    "COMPILER_VERSION", "BuildReport", "ClauseSummary", "CompiledClause", "CompiledSpec", "Uncompiled",
    "build_suite", "compile_spec",
]
