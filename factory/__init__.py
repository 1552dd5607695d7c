"""The orchestrator: spec compilation, the pipeline, the store and the CLI (`agent_factory.factory`)."""
