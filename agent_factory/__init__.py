"""Agent Factory: closed-loop evaluation of LLM agents in production.

One import namespace over the repository's top-level folders (mapped in `setup.py`):

- `agent_factory.adapters`: trace formats in, the four-layer unit model out;
- `agent_factory.knowledge_packs`: lexicons, policies and clauses a suite is compiled against;
- `agent_factory.evaluators`: components, collectors, analyses, statistics;
- `agent_factory.factory`: the orchestrator (compilation, pipeline, store, CLI).

Layers import downward only: adapters <- knowledge_packs <- evaluators <- factory.
"""

import time
from importlib.metadata import PackageNotFoundError, version

IMPORTED_AT = time.perf_counter()
"""`time.perf_counter()` when this package was first imported: for the console script, about the process's start,
so the wall time a command reports includes its imports."""

try:
    __version__ = version("agent-factory")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["IMPORTED_AT", "__version__"]
