"""The one plugin registry: adapters, rules, components, packs, redactors, executors and renderers, by name.

Part of the kernel: it imports no layer. Each layer owns the meaning of its kind and wraps `lookup` in its own
typed function (`adapters.base.get_adapter`, `evaluators.core.registry.get_rule`, ...); this module only keeps
names, objects and their `RegistryInfo` (kind, name, version, metadata), inspect_ai style.

Objects get here two ways, the same for the project's built-ins and for third parties:

- `register(kind, name, obj)` or its decorator form `@registered(kind, name)`, run when a module is imported;
- the entry-point groups in `GROUPS`, read lazily (importlib.metadata) on the first `lookup`, `names` or
  `infos` of their kind. An entry point names either a module (`pkg.rules`), imported then, which registers
  what it defines; or one object (`pkg:SPEC`), registered under the entry point's name when that name is first
  looked up, so a broken third-party object never stops the others.

The built-ins are entry points of this project's own distribution (pyproject.toml), so no lookup depends on a
package `__init__` having been imported first (packs are data files: the loader registers its built-ins).
Registering a taken name with another object is a `UsageError`; two entry points giving one name, a plugin
that cannot be imported or gives the wrong object, is a one-line `PluginError` naming the entry point and its
group (a plugin module that failed to import is named when a lookup misses). An entry point never shadows a
name registered in code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from types import MappingProxyType, ModuleType
from typing import Any, Literal, TypeVar, get_args

from agent_factory.errors import PluginError, UnknownNameError, UsageError

Kind = Literal["adapter", "rule", "component", "pack", "redactor", "executor", "renderer"]
KINDS: tuple[Kind, ...] = get_args(Kind)

GROUPS: Mapping[Kind, tuple[str, ...]] = MappingProxyType({
    "adapter": ("agent_factory.adapters",),
    "rule": ("agent_factory.rules",),
    "component": ("agent_factory.components",),
    # `agent_factory.knowledge_packs` is the group documented since the first release; both are read.
    "pack": ("agent_factory.packs", "agent_factory.knowledge_packs"),
    "redactor": ("agent_factory.redactors",),
    "executor": ("agent_factory.executors",),
    "renderer": ("agent_factory.renderers",),
})
"""Entry-point groups read for each kind, in order."""

_BUILT_IN_KINDS: frozenset[str] = frozenset({"adapter", "rule", "component"})
"""Kinds whose built-ins are entry points of this project's distribution (pyproject.toml)."""

INFO_ATTR = "__registry_info__"
"""The attribute a registered object carries its `RegistryInfo` in (when it accepts attributes)."""

T = TypeVar("T")


@dataclass(frozen=True)
class RegistryInfo:
    """What the registry knows about one registered object."""

    kind: Kind
    """Which registry it is in."""
    name: str
    """Its name there, as users and suites write it."""
    version: str = "1"
    """The label of its meaning, bumped by hand; content digests (rules, analyses) are computed elsewhere."""
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """What the kind declares (a rule's layers and parameters, an adapter's sniffing priority, ...)."""


@dataclass(frozen=True)
class _Entry:
    info: RegistryInfo
    obj: object


EntryPointLoader = Callable[[EntryPoint], object]
"""Turns an entry point into the object to register (default: `EntryPoint.load`)."""

_ENTRIES: dict[Kind, dict[str, _Entry]] = {k: {} for k in KINDS}
_LOADED: set[Kind] = set()
_LOADERS: dict[Kind, EntryPointLoader] = {}
_OBJECTS_ONLY: set[Kind] = set()
_SOURCES: dict[Kind, Callable[[], Iterable[EntryPoint]]] = {}
_PENDING: dict[Kind, dict[str, EntryPoint]] = {k: {} for k in KINDS}
"""Entry points of one object each, by name, not loaded yet."""
_CONFLICTS: dict[Kind, dict[str, str]] = {k: {} for k in KINDS}
_BROKEN: dict[Kind, list[str]] = {k: [] for k in KINDS}
"""Why plugin modules of a kind failed to import (reported with an unknown name)."""
_ORIGINS: dict[Kind, dict[str, str]] = {k: {} for k in KINDS}
"""Name -> value of the entry point it was loaded from (module entry points: not tracked, modules stay imported)."""
_CHECKS: dict[Kind, tuple[Callable[[object], bool], str]] = {}


def _kind(kind: str) -> Kind:
    for k in KINDS:
        if k == kind:
            return k
    raise UnknownNameError("plugin kind", kind, KINDS)


def registry_info(obj: object) -> RegistryInfo | None:
    """The `RegistryInfo` an object was tagged with when registered; None if it was not (or takes no tags)."""
    info = getattr(obj, INFO_ATTR, None)
    return info if isinstance(info, RegistryInfo) else None


def register(kind: Kind, name: str, obj: T, *, version: str = "1", metadata: Mapping[str, Any] | None = None,
             replace: bool = False) -> T:
    """Register `obj` as `kind` `name` and return it. The same object (or an equal value) twice is a no-op;
    another object under a taken name is a `UsageError` unless `replace` (tests and experiments that swap a
    registration on purpose)."""
    kind = _kind(kind)
    check = _CHECKS.get(kind)
    if check is not None and not check[0](obj):
        raise UsageError(f"{kind} {name!r}: got {type(obj).__name__}, expected {check[1]}")
    info = RegistryInfo(kind=kind, name=name, version=version, metadata=MappingProxyType(dict(metadata or {})))
    taken = _ENTRIES[kind].get(name)
    if taken is not None and not replace and not _same(taken.obj, obj):
        raise UsageError(f"{kind} {name!r} registered twice: {_where(taken.obj)} and {_where(obj)}")
    try:
        setattr(obj, INFO_ATTR, info)
    except (AttributeError, TypeError):  # str, Path, slotted objects: the registry keeps the info alongside
        pass
    _ENTRIES[kind][name] = _Entry(info, obj)
    return obj


def registered(kind: Kind, name: str, *, version: str = "1",
               metadata: Mapping[str, Any] | None = None) -> Callable[[T], T]:
    """Decorator form of `register`."""

    def deco(obj: T) -> T:
        return register(kind, name, obj, version=version, metadata=metadata)

    return deco


def _same(a: object, b: object) -> bool:
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b) and not callable(a)
    except Exception:  # an object whose == raises is simply not the same
        return False


def _where(obj: object) -> str:
    module, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    return f"{module}.{qual}" if module and qual else repr(obj)


def expect(kind: Kind, check: Callable[[object], bool], what: str) -> None:
    """Declare what objects of `kind` must be (the layer owning the kind calls it); checked on registration."""
    _CHECKS[_kind(kind)] = (check, what)


def set_entry_point_loader(kind: Kind, loader: EntryPointLoader, *, objects_only: bool = False) -> None:
    """How entry points of `kind` become objects, for a kind whose entry points are not plain objects (an
    adapter class is instantiated, a pack may name a file). `objects_only`: every entry point of the kind gives
    one object under its name, never a module. The loader's exceptions become the one-line `PluginError`."""
    _LOADERS[_kind(kind)] = loader
    if objects_only:
        _OBJECTS_ONLY.add(_kind(kind))


def set_entry_point_source(kind: Kind, source: Callable[[], Iterable[EntryPoint]]) -> None:
    """Where the entry points of `kind` come from, when its layer keeps a replaceable source (default: the
    installed entry points of `GROUPS[kind]`)."""
    _SOURCES[_kind(kind)] = source


def group_entry_points(group: str) -> tuple[EntryPoint, ...]:
    """The installed entry points of `group`."""
    return tuple(entry_points(group=group))


def kind_entry_points(kind: Kind) -> tuple[EntryPoint, ...]:
    """The entry points of `kind`: its source's, or the installed ones of its groups, in `GROUPS` order."""
    source = _SOURCES.get(_kind(kind))
    if source is not None:
        return tuple(source())
    return tuple(ep for group in GROUPS[kind] for ep in group_entry_points(group))


def _by_name(kind: Kind, ep: EntryPoint) -> bool:
    """Whether an entry point provides one object under its own name (loaded when that name is looked up)
    rather than a module registering several (imported when its kind is first used)."""
    return kind in _OBJECTS_ONLY or ep.attr is not None


def _where_ep(ep: EntryPoint) -> str:
    return f"entry point {ep.name!r} = {ep.value!r} in group {ep.group!r}"


def _load_entry_points(kind: Kind) -> None:
    if kind in _LOADED:
        return
    _LOADED.add(kind)  # first, so a plugin module that looks its own kind up while importing does not recurse
    eps = kind_entry_points(kind)
    for ep in eps:
        if not _by_name(kind, ep):
            try:
                load_entry_point(kind, ep)
            except PluginError as e:  # one broken plugin module must not take the built-ins down with it
                _BROKEN[kind].append(str(e))
    # Objects by name come after the modules, and a name registered already (a built-in) is not shadowed: the
    # entry point is ignored. Two entry points giving one name different values make that name an error.
    for ep in eps:
        if not _by_name(kind, ep) or ep.name in _ENTRIES[kind]:
            continue
        other = _PENDING[kind].setdefault(ep.name, ep)
        if other.value != ep.value:
            _CONFLICTS[kind][ep.name] = (f"{kind} {ep.name!r} is provided twice: by {_where_ep(other)} "
                                         f"and {_where_ep(ep)}")


def load_entry_point(kind: Kind, ep: EntryPoint) -> None:
    """Register what one entry point provides; a one-line `PluginError` naming it and its group if it cannot."""
    where = _where_ep(ep)
    try:
        loader = _LOADERS.get(kind)
        obj = loader(ep) if loader is not None else ep.load()
    except Exception as e:  # third-party code: any failure becomes one line naming the plugin
        raise PluginError(f"{where} failed to load: {type(e).__name__}: {e}".replace("\n", " ")) from e
    if isinstance(obj, ModuleType):
        # A module registers what it defines when imported; it must define at least one object of this kind.
        if not any((i := registry_info(v)) is not None and i.kind == kind for v in vars(obj).values()):
            raise PluginError(f"{where}: module {obj.__name__} registers no {kind}")
        return
    tagged = registry_info(obj)
    if not (tagged is not None and tagged.kind == kind and tagged.name in _ENTRIES[kind]):
        try:  # not registered yet by its own decorator: under the entry point's name
            register(kind, ep.name, obj)
        except UsageError as e:
            raise PluginError(f"{where}: {e}") from None
    _ORIGINS[kind][tagged.name if tagged is not None and tagged.kind == kind else ep.name] = ep.value


def _resolve(kind: Kind, name: str) -> None:
    if name in _CONFLICTS[kind]:
        raise PluginError(_CONFLICTS[kind][name])
    ep = _PENDING[kind].get(name)
    if ep is not None:
        load_entry_point(kind, ep)  # a broken one stays pending: every lookup of it says so
        del _PENDING[kind][name]


def lookup(kind: Kind, name: str) -> object:
    """The object registered as `kind` `name` (its entry point loaded now if it is one); an `UnknownNameError`
    listing the valid names when there is none, a `PluginError` when its entry point cannot be loaded."""
    kind = _kind(kind)
    _load_entry_points(kind)
    _resolve(kind, name)
    try:
        return _ENTRIES[kind][name].obj
    except KeyError:
        pass
    if kind in _BUILT_IN_KINDS and not kind_entry_points(kind):  # e.g. a source tree never pip-installed
        raise PluginError(f"unknown {kind} {name!r}: no entry point of group {GROUPS[kind][0]!r} is installed, "
                          "not even this project's own; install agent-factory (pip install -e .)")
    if _BROKEN[kind]:  # the name may be one a broken plugin module would have registered: say so
        raise PluginError(f"unknown {kind} {name!r} (valid: {', '.join(names(kind))}); and "
                          + "; ".join(_BROKEN[kind]))
    raise UnknownNameError(kind, name, names(kind))


def info(kind: Kind, name: str) -> RegistryInfo:
    """The `RegistryInfo` of `kind` `name` (errors as `lookup`)."""
    lookup(kind, name)
    return _ENTRIES[kind][name].info


def origin(kind: Kind, name: str) -> str | None:
    """The value of the entry point `kind` `name` comes (or will come) from; None if registered in code."""
    kind = _kind(kind)
    _load_entry_points(kind)
    pending = _PENDING[kind].get(name)
    return pending.value if pending is not None else _ORIGINS[kind].get(name)


def names(kind: Kind) -> list[str]:
    """The names of `kind`, sorted: registered ones and those of entry points not loaded yet."""
    kind = _kind(kind)
    _load_entry_points(kind)
    return sorted(set(_ENTRIES[kind]) | set(_PENDING[kind]) | set(_CONFLICTS[kind]))


def items(kind: Kind) -> list[tuple[RegistryInfo, object]]:
    """(info, object) of every object of `kind`, by name; loads every entry point of the kind."""
    out = []
    for n in names(kind):
        obj = lookup(kind, n)
        out.append((_ENTRIES[kind][n].info, obj))
    return out


def infos(kind: Kind) -> list[RegistryInfo]:
    """The `RegistryInfo` of every object of `kind`, by name; loads every entry point of the kind."""
    return [i for i, _ in items(kind)]


def unregister(kind: Kind, name: str) -> None:
    """Drop a registration (tests that register a temporary plugin clean up with it)."""
    _ENTRIES[_kind(kind)].pop(name, None)
    _ORIGINS[_kind(kind)].pop(name, None)


def reload(kinds: Iterable[Kind] = KINDS) -> None:
    """Forget what the entry points of `kinds` gave and read them again on the next lookup (a plugin installed at
    run time, a test's temporary one). What code registered stays."""
    for k in map(_kind, kinds):
        _LOADED.discard(k)
        for name in _ORIGINS[k]:
            _ENTRIES[k].pop(name, None)
        _ORIGINS[k].clear()
        _PENDING[k].clear()
        _CONFLICTS[k].clear()
        _BROKEN[k].clear()
