"""The orchestrator's pipeline (docs/method.md section 8): the graph of what depends on what (`graph`, pure) and
what the store keeps between runs to recompute only the descendants of a change (`state`). The runner in
`engine` executes it; `watch` triggers it on new trace files."""

from agent_factory.factory.pipeline.graph import STEPS, Dirty, TracesState, build_graph, dirty, fingerprints

__all__ = ["STEPS", "Dirty", "TracesState", "build_graph", "dirty", "fingerprints"]
