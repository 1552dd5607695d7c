"""The project's one exception tree. Part of the kernel (`agent_factory.errors`, `.frozen`, `.digest`,
`.validation`, `.plugins`), which sits below every layer (adapters <- knowledge_packs <- evaluators <- factory)
and imports none of them.

    AgentFactoryError            root: anything this project raises on purpose
    ├── SpecError                the user's input is wrong: a spec, pack, config, option or file format
    │   ├── UnknownNameError     a name not in a registry; the message lists the valid names
    │   └── PluginError          an installed plugin (entry point) cannot be loaded; names it and its group
    ├── CollectionError          a collector could not obtain a datum (model, budget, transport)
    ├── StoreError               the store cannot be opened or written (held by another process, not a store)
    └── UsageError               the library is misused by code: a name registered twice, a wrong object
"""

from __future__ import annotations

from collections.abc import Iterable


class AgentFactoryError(Exception):
    """Root of every error this project raises on purpose."""


class SpecError(AgentFactoryError):
    """The user's input (spec, knowledge pack, config, CLI option, input file) is invalid."""


class UnknownNameError(SpecError):
    """A name that is not registered; the message names the valid ones."""

    def __init__(self, what: str, name: str, valid: Iterable[str]) -> None:
        self.what = what
        self.name = name
        self.valid = sorted(valid)
        super().__init__(f"unknown {what} {name!r}; valid: {', '.join(self.valid)}")


class CollectionError(AgentFactoryError):
    """A collector could not obtain a datum (model failure, budget exhausted, transport error)."""


class StoreError(AgentFactoryError):
    """The store cannot be opened or written: another process holds it, or the file is no DuckDB store."""


class UsageError(AgentFactoryError):
    """The library is misused by code (a plugin, an extension): a name registered twice, a wrong object."""


class PluginError(SpecError):
    """An installed plugin cannot be loaded (import error, wrong object, two giving one name): the message names
    the entry point and its group. A user-facing error: the user's environment holds the plugin."""
