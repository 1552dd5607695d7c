"""The tool-use rules, registered through the `agent_factory.rules` entry point `conduct_tooluse`: the registry
collects the rules this module holds (each module's `__all__`)."""

from __future__ import annotations

from agent_factory.evaluators.components.conduct.tooluse.followthrough import *  # noqa: F403
from agent_factory.evaluators.components.conduct.tooluse.grounding import *  # noqa: F403
from agent_factory.evaluators.components.conduct.tooluse.preconditions import *  # noqa: F403
