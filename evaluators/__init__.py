"""Evaluators: components, collectors, analyses and statistics (`agent_factory.evaluators`)."""
