"""The one plugin registry: adapters, rules, components, packs, redactors, executors and renderers, by name.

Part of the kernel: it imports no layer. Each layer owns the meaning of its kind and wraps `lookup` in its own
typed function (`adapters.base.get_adapter`, `evaluators.core.registry.get_rule`, ...); this module only keeps
names, objects and their `RegistryInfo` (kind, name, version, metadata), inspect_ai style.

A `Registry` is an explicit object, built from the entry points on first use; nothing registers when a module
is imported, so the order of imports cannot change what a name means and two registries (two suites in one
process, a worker) never see each other's plugins. `registry()` is the one in use: the one `using(...)` set in
this context, else the process's own, made on the first lookup (importing the package makes none).

Objects get into a registry three ways, the same for the project's built-ins and for third parties:

- the entry-point groups in `GROUPS`, read lazily (importlib.metadata) on the first `lookup`, `names` or
  `infos` of their kind. An entry point names either a module (`pkg.rules`), whose objects tagged with this
  kind (`tag`, or a layer's decorator such as `@rule`) are registered then; or one object (`pkg:SPEC`),
  registered under the entry point's name when that name is first looked up, so a broken third-party object
  never stops the others;
- what the kind's `KindSpec` lists as built-in (packs are data files, the default redactor a class);
- `register(kind, name, obj)`, called at run time (tests and experiments that add a plugin on purpose).

What a kind is (the check its objects pass, how an entry point becomes one, its built-ins) is a `KindSpec` the
owning layer declares as a module constant, named in `KIND_SPECS` and read when the kind is first used.
Registering a taken name with another object is a `UsageError`; two entry points giving one name, a plugin
that cannot be imported or gives the wrong object, is a one-line `PluginError` naming the entry point and its
group (a plugin module that failed to import is named when a lookup misses). An entry point never shadows a
built-in or a name registered in code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from importlib.metadata import EntryPoint, entry_points
from types import MappingProxyType
from typing import Any, TypeVar

from agent_factory.plugin_registry import (
    GROUPS,
    INFO_ATTR,
    KIND_SPECS,
    KINDS,
    BuiltIn,
    EntryPointLoader,
    Kind,
    KindSpec,
    Registry,
    RegistryInfo,
    check_kind,
    kind_spec,
    registry_info,
)

__all__ = [
    "GROUPS", "INFO_ATTR", "KINDS", "KIND_SPECS", "BuiltIn", "EntryPointLoader", "Kind", "KindSpec", "Registry",
    "RegistryInfo", "check_kind", "expect", "group_entry_points", "info", "infos", "items", "kind_entry_points",
    "kind_spec", "load_entry_point", "lookup", "names", "origin", "process_registry_made", "register", "registered",
    "registry", "registry_info", "reload", "set_entry_point_loader", "set_entry_point_source", "tag", "unregister",
    "using",
]

T = TypeVar("T")


def tag(kind: Kind, name: str, obj: T, *, version: str = "1", metadata: Mapping[str, Any] | None = None) -> T:
    """Mark `obj` as `kind` `name` and return it: a registry registers it when it loads the entry-point module
    that defines it. Changes nothing but the object (a layer's decorator, e.g. `@rule`, calls this)."""
    info = RegistryInfo(kind=check_kind(kind), name=name, version=version,
                        metadata=MappingProxyType(dict(metadata or {})))
    try:
        setattr(obj, INFO_ATTR, info)
    except (AttributeError, TypeError):  # str, Path, slotted objects: only `register` can keep their info
        pass
    return obj


def registered(kind: Kind, name: str, *, version: str = "1",
               metadata: Mapping[str, Any] | None = None) -> Callable[[T], T]:
    """Decorator form of `tag`: the object is registered when a registry loads its module's entry point."""

    def deco(obj: T) -> T:
        return tag(kind, name, obj, version=version, metadata=metadata)

    return deco


def group_entry_points(group: str) -> tuple[EntryPoint, ...]:
    """The installed entry points of `group` (the process registry reads them through this function)."""
    return tuple(entry_points(group=group))


# ---- the registry in use --------------------------------------------------------------------------------

_CURRENT: ContextVar[Registry | None] = ContextVar("agent_factory.plugins.registry", default=None)
"""The registry `using(...)` set in this context (None: the process's own)."""


class _Process:
    """The process's own registry, made on the first lookup outside `using` (importing makes none)."""

    registry: Registry | None = None


def registry() -> Registry:
    """The registry in use: the one `using(...)` set in this context, else the process's own (made now if this
    is the first lookup; it reads the installed entry points late, through `group_entry_points`)."""
    current = _CURRENT.get()
    if current is not None:
        return current
    if _Process.registry is None:
        _Process.registry = Registry(group_entry_points=lambda group: group_entry_points(group))
    return _Process.registry


def process_registry_made() -> bool:
    """Whether the process's own registry exists yet (importing any module of the package makes none)."""
    return _Process.registry is not None


@contextmanager
def using(reg: Registry) -> Iterator[Registry]:
    """Look every name up in `reg` inside the block (this context and the tasks it starts), e.g. a run, a test
    or a worker with plugins of its own."""
    token = _CURRENT.set(reg)
    try:
        yield reg
    finally:
        _CURRENT.reset(token)


# ---- the registry in use, by function (each layer wraps these in its own typed ones) --------------------


def register(kind: Kind, name: str, obj: T, *, version: str = "1", metadata: Mapping[str, Any] | None = None,
             replace: bool = False) -> T:
    """`Registry.register` on the registry in use: at run time (a module declares its plugins with `tag`)."""
    return registry().register(kind, name, obj, version=version, metadata=metadata, replace=replace)


def expect(kind: Kind, check: Callable[[object], bool], what: str) -> None:
    """Change what objects of `kind` must be, in the registry in use (a kind's layer declares it in its
    `KindSpec`; this is for a test or an experiment)."""
    registry().configure(kind, check=check, what=what)


def set_entry_point_loader(kind: Kind, loader: EntryPointLoader, *, objects_only: bool = False) -> None:
    """Change how entry points of `kind` become objects, in the registry in use (see `KindSpec.loader`)."""
    registry().configure(kind, loader=loader, objects_only=objects_only)


def set_entry_point_source(kind: Kind, source: Callable[[], Iterable[EntryPoint]]) -> None:
    """Change where the entry points of `kind` come from, in the registry in use (see `KindSpec.source`)."""
    registry().configure(kind, source=source)


def kind_entry_points(kind: Kind) -> tuple[EntryPoint, ...]:
    """The entry points of `kind`: its spec's source, or the installed ones of its groups, in `GROUPS` order."""
    return registry().kind_entry_points(kind)


def load_entry_point(kind: Kind, ep: EntryPoint) -> None:
    """Register what one entry point provides; a one-line `PluginError` naming it and its group if it cannot."""
    registry().load_entry_point(kind, ep)


def lookup(kind: Kind, name: str) -> object:
    """The object registered as `kind` `name`; an `UnknownNameError` listing the valid names when there is none,
    a `PluginError` when its entry point cannot be loaded."""
    return registry().lookup(kind, name)


def info(kind: Kind, name: str) -> RegistryInfo:
    """The `RegistryInfo` of `kind` `name` (errors as `lookup`)."""
    return registry().info(kind, name)


def origin(kind: Kind, name: str) -> str | None:
    """The value of the entry point `kind` `name` comes (or will come) from; None if registered in code."""
    return registry().origin(check_kind(kind), name)


def names(kind: Kind) -> list[str]:
    """The names of `kind`, sorted: registered ones and those of entry points not loaded yet."""
    return registry().names(check_kind(kind))


def items(kind: Kind) -> list[tuple[RegistryInfo, object]]:
    """(info, object) of every object of `kind`, by name; loads every entry point of the kind."""
    return registry().items(check_kind(kind))


def infos(kind: Kind) -> list[RegistryInfo]:
    """The `RegistryInfo` of every object of `kind`, by name; loads every entry point of the kind."""
    return [i for i, _ in items(kind)]


def unregister(kind: Kind, name: str) -> None:
    """Drop a registration (tests that register a temporary plugin clean up with it)."""
    registry().unregister(check_kind(kind), name)


def reload(kinds: Iterable[Kind] = KINDS) -> None:
    """Forget what the entry points of `kinds` gave and read them again on the next lookup (a plugin installed at
    run time, a test's temporary one). What code registered stays."""
    registry().reload(kinds)
