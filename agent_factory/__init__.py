"""Agent Factory: closed-loop evaluation of LLM agents in production.

One import namespace over the repository's top-level folders (mapped in `setup.py`):

- `agent_factory.adapters`: trace formats in, the four-layer unit model out;
- `agent_factory.knowledge_packs`: lexicons, policies and clauses a suite is compiled against;
- `agent_factory.evaluators`: components, collectors, analyses, statistics;
- `agent_factory.factory`: the orchestrator (compilation, pipeline, store, CLI).

Layers import downward only: adapters <- knowledge_packs <- evaluators <- factory.
"""

import os
import time
from importlib.metadata import PackageNotFoundError, version

# Arrow allocates through the C library's malloc unless the user chose a pool. pyarrow's default, mimalloc, keeps
# what it freed resident: a rules-only run of the default simulation peaked at 424-441 MB with it and at 364-371
# MB with malloc, in the same time (three runs each). The variable is read once, when Arrow first allocates, so it
# is set before anything imports pyarrow (`pyarrow.set_memory_pool` later would leave Arrow's own allocations in
# mimalloc: 397-405 MB).
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

IMPORTED_AT = time.perf_counter()
"""`time.perf_counter()` when this package was first imported: for the console script, about the process's start,
so the wall time a command reports includes its imports."""

try:
    __version__ = version("agent-factory")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["IMPORTED_AT", "__version__"]
