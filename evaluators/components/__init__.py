"""The seven components; importing this package registers their definitions, rules and analyses."""

from agent_factory.evaluators.components import (  # noqa: F401  (imported for registration)
    adjudication,
    conduct,
    execution,
    provenance,
    results,
    substance,
    trajectory,
)
