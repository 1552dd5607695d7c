"""Agent Factory: closed-loop evaluation of LLM agents in production.

One import namespace over the repository's top-level folders (symlinked into `agent_factory/`):

- `agent_factory.adapters`: trace formats in, the four-layer unit model out;
- `agent_factory.knowledge_packs`: lexicons, policies and clauses a suite is compiled against;
- `agent_factory.evaluators`: components, collectors, analyses, statistics;
- `agent_factory.factory`: the orchestrator (compilation, pipeline, store, CLI).

Layers import downward only: adapters <- knowledge_packs <- evaluators <- factory.

The public face is `open_project(store=..., suite=..., pack=..., config=...)`, which returns a `Project` (the
one composition root: its methods are the jobs, see docs/python-api.md). Both load on first use, so importing
the package stays cheap, and importing it changes nothing in the process (no environment variable, no
registration).
"""

from __future__ import annotations

import time
from importlib.metadata import PackageNotFoundError, version
from typing import Any

IMPORTED_AT = time.perf_counter()
"""`time.perf_counter()` when this package was first imported: for the console script, about the process's start,
so the wall time a command reports includes its imports."""

try:
    __version__ = version("agent-factory")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

# No `if TYPE_CHECKING:` import of them here: an analysis's content version digests the project modules its
# module imports, this package among them, and follows the imports of `if` blocks; a type-only import of the
# orchestrator would tie every analysis to whether the orchestrator happened to be loaded.
_LAZY = {"Project": "agent_factory.factory.project", "open_project": "agent_factory.factory.project"}
"""Names this package offers from the orchestrator, imported when first read (`__getattr__`)."""


def __getattr__(name: str) -> Any:
    """`Project` and `open_project`, imported on first use (the orchestrator is the heaviest layer)."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # read once: later lookups find it without this function
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["IMPORTED_AT", "Project", "__version__", "open_project"]
