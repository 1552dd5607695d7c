"""The `Registry` object and what it is made of (kinds, `RegistryInfo`, `KindSpec`): one set of plugins by kind
and name, built from entry points when a kind is first used. `agent_factory.plugins` is the public face (the
registry in use, `tag`, the lookups); this module holds the machinery.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
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

KIND_SPECS: Mapping[Kind, str] = MappingProxyType({
    "adapter": "agent_factory.adapters.base:ADAPTER_KIND",
    "rule": "agent_factory.evaluators.core.registry:RULE_KIND",
    "component": "agent_factory.evaluators.core.registry:COMPONENT_KIND",
    "pack": "agent_factory.knowledge_packs.loader:PACK_KIND",
    "redactor": "agent_factory.evaluators.collect.redact:REDACTOR_KIND",
})
"""Where the layer owning a kind declares it (`module:attr` of a `KindSpec`), imported when the kind is first
used: named, not imported, so the kernel imports no layer. A kind not listed takes any object."""

_BUILT_IN_KINDS: frozenset[str] = frozenset({"adapter", "rule", "component"})
"""Kinds whose built-ins are entry points of this project's distribution (pyproject.toml)."""

INFO_ATTR = "__registry_info__"
"""The attribute a tagged object carries its `RegistryInfo` in (when it accepts attributes)."""

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


EntryPointLoader = Callable[[EntryPoint], object]
"""Turns an entry point into the object to register (default: `EntryPoint.load`)."""

BuiltIn = tuple[str, object, Mapping[str, Any]]
"""A built-in of a kind: (name, object, metadata)."""


@dataclass(frozen=True)
class KindSpec:
    """What the layer owning a kind declares about it: a module constant (`KIND_SPECS` names it), so declaring
    a kind changes no state."""

    check: Callable[[object], bool] | None = None
    """Whether an object may be registered as this kind (None: any object)."""
    what: str = "an object of this kind"
    """What `check` wants, for the error message."""
    loader: EntryPointLoader | None = None
    """How an entry point becomes the object (an adapter class is instantiated, a pack may name a file);
    None: `EntryPoint.load`. Its exceptions become the one-line `PluginError`."""
    objects_only: bool = False
    """Every entry point of the kind gives one object under its name, never a module."""
    source: Callable[[], Iterable[EntryPoint]] | None = None
    """Where the kind's entry points come from (None: the installed ones of `GROUPS[kind]`)."""
    builtins: Callable[[], Iterable[BuiltIn]] | None = None
    """What every registry holds of this kind before any entry point (a name an entry point cannot shadow)."""


@dataclass(frozen=True)
class _Entry:
    info: RegistryInfo
    obj: object


@dataclass
class _KindState:
    """One kind's names in one registry."""

    spec: KindSpec
    entries: dict[str, _Entry] = field(default_factory=dict)
    loaded: bool = False
    pending: dict[str, EntryPoint] = field(default_factory=dict)
    """Entry points of one object each, by name, not loaded yet."""
    conflicts: dict[str, str] = field(default_factory=dict)
    broken: list[str] = field(default_factory=list)
    """Why plugin modules of the kind failed to import (reported with an unknown name)."""
    origins: dict[str, str] = field(default_factory=dict)
    """Name -> value of the entry point it was loaded from."""


def check_kind(kind: str) -> Kind:
    """`kind` as a `Kind`; an `UnknownNameError` listing the kinds if it is none."""
    for k in KINDS:
        if k == kind:
            return k
    raise UnknownNameError("plugin kind", kind, KINDS)


def kind_spec(kind: Kind) -> KindSpec:
    """The `KindSpec` the layer owning `kind` declares (its module imported now); a plain one for other kinds."""
    where = KIND_SPECS.get(check_kind(kind))
    if where is None:
        return KindSpec()
    try:
        spec = EntryPoint(name=kind, value=where, group="agent_factory.plugins").load()
    except Exception as e:  # a broken checkout: say which declaration
        raise PluginError(f"the {kind} kind's declaration {where!r} failed to load: {type(e).__name__}: {e}") from e
    if not isinstance(spec, KindSpec):
        raise PluginError(f"the {kind} kind's declaration {where!r} is a {type(spec).__name__}, not a KindSpec")
    return spec


def registry_info(obj: object) -> RegistryInfo | None:
    """The `RegistryInfo` an object was tagged with (by `tag` or when registered); None if none (or it takes
    no attributes)."""
    info = getattr(obj, INFO_ATTR, None)
    return info if isinstance(info, RegistryInfo) else None


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


def _where_ep(ep: EntryPoint) -> str:
    return f"entry point {ep.name!r} = {ep.value!r} in group {ep.group!r}"


GroupEntryPoints = Callable[[str], Iterable[EntryPoint]]
"""The installed entry points of one group (default: `importlib.metadata.entry_points(group=...)`)."""


def _installed(group: str) -> tuple[EntryPoint, ...]:
    return tuple(entry_points(group=group))


class Registry:
    """One set of plugins: names of every kind and their objects, read from the entry points when a kind is
    first used. `specs` replaces kinds' `KindSpec`s (default: the ones `KIND_SPECS` names); `group_entry_points`
    where the installed entry points of a group are read (default: importlib.metadata)."""

    def __init__(self, *, specs: Mapping[Kind, KindSpec] | None = None,
                 group_entry_points: GroupEntryPoints | None = None) -> None:
        self._specs: dict[Kind, KindSpec] = dict(specs or {})
        self._group_entry_points = group_entry_points or _installed
        self._kinds: dict[Kind, _KindState] = {}

    def _state(self, kind: str) -> _KindState:
        k = check_kind(kind)
        state = self._kinds.get(k)
        if state is None:
            spec = self._specs.get(k) or kind_spec(k)
            state = self._kinds[k] = _KindState(spec)
            for name, obj, metadata in spec.builtins() if spec.builtins is not None else ():
                self._add(state, k, name, obj, metadata=metadata)
        return state

    def spec(self, kind: Kind) -> KindSpec:
        """The `KindSpec` of `kind` in this registry."""
        return self._state(kind).spec

    def configure(self, kind: Kind, **changes: Any) -> None:
        """Change fields of `kind`'s `KindSpec` in this registry (`check`, `loader`, `source`, ...)."""
        state = self._state(kind)
        state.spec = replace(state.spec, **changes)

    def register(self, kind: Kind, name: str, obj: T, *, version: str = "1",
                 metadata: Mapping[str, Any] | None = None, replace: bool = False) -> T:
        """Register `obj` as `kind` `name` and return it, after the kind's entry points (so a clash with one is
        seen now). The same object (or an equal value) twice is a no-op; another object under a taken name is a
        `UsageError` unless `replace` (tests and experiments that swap a registration on purpose)."""
        state = self._load_entry_points(kind)
        self._add(state, check_kind(kind), name, obj, version=version, metadata=metadata, replace=replace)
        # A name registered in code is never shadowed: an entry point of that name is not loaded.
        state.pending.pop(name, None)
        state.conflicts.pop(name, None)
        return obj

    def _add(self, state: _KindState, kind: Kind, name: str, obj: T, *, version: str = "1",
             metadata: Mapping[str, Any] | None = None, replace: bool = False) -> T:
        spec = state.spec
        if spec.check is not None and not spec.check(obj):
            raise UsageError(f"{kind} {name!r}: got {type(obj).__name__}, expected {spec.what}")
        info = RegistryInfo(kind=check_kind(kind), name=name, version=version,
                            metadata=MappingProxyType(dict(metadata or {})))
        taken = state.entries.get(name)
        if taken is not None and not replace and not _same(taken.obj, obj):
            raise UsageError(f"{kind} {name!r} registered twice: {_where(taken.obj)} and {_where(obj)}")
        if registry_info(obj) != info:
            try:
                setattr(obj, INFO_ATTR, info)
            except (AttributeError, TypeError):  # str, Path, slotted objects: the registry keeps the info alongside
                pass
        state.entries[name] = _Entry(info, obj)
        return obj

    def kind_entry_points(self, kind: Kind) -> tuple[EntryPoint, ...]:
        """The entry points of `kind`: its spec's source, or the installed ones of its groups, in `GROUPS` order."""
        source = self._state(kind).spec.source
        if source is not None:
            return tuple(source())
        return tuple(ep for group in GROUPS[check_kind(kind)] for ep in self._group_entry_points(group))

    def _by_name(self, state: _KindState, ep: EntryPoint) -> bool:
        """Whether an entry point provides one object under its own name (loaded when that name is looked up)
        rather than a module of several (imported when its kind is first used)."""
        return state.spec.objects_only or ep.attr is not None

    def _load_entry_points(self, kind: Kind) -> _KindState:
        state = self._state(kind)
        if state.loaded:
            return state
        state.loaded = True  # first, so a plugin module that looks its own kind up while importing does not recurse
        eps = self.kind_entry_points(kind)
        for ep in eps:
            if not self._by_name(state, ep):
                try:
                    self.load_entry_point(kind, ep)
                except PluginError as e:  # one broken plugin module must not take the built-ins down with it
                    state.broken.append(str(e))
        # Objects by name come after the modules, and a name registered already (a built-in) is not shadowed: the
        # entry point is ignored. Two entry points giving one name different values make that name an error.
        for ep in eps:
            if not self._by_name(state, ep) or ep.name in state.entries:
                continue
            other = state.pending.setdefault(ep.name, ep)
            if other.value != ep.value:
                state.conflicts[ep.name] = (f"{kind} {ep.name!r} is provided twice: by {_where_ep(other)} "
                                            f"and {_where_ep(ep)}")
        return state

    def load_entry_point(self, kind: Kind, ep: EntryPoint) -> None:
        """Register what one entry point provides; a one-line `PluginError` naming it and its group if it
        cannot. A module gives every object in it tagged with `kind` (`plugins.tag`, `@rule`)."""
        state, where = self._state(kind), _where_ep(ep)
        try:
            loader = state.spec.loader
            obj = loader(ep) if loader is not None else ep.load()
        except Exception as e:  # third-party code: any failure becomes one line naming the plugin
            raise PluginError(f"{where} failed to load: {type(e).__name__}: {e}".replace("\n", " ")) from e
        try:
            if isinstance(obj, ModuleType):
                tagged = [(i, v) for v in vars(obj).values() if (i := registry_info(v)) is not None and i.kind == kind]
                if not tagged:
                    raise PluginError(f"{where}: module {obj.__name__} registers no {kind}")
                for i, v in tagged:
                    self._add(state, kind, i.name, v, version=i.version, metadata=i.metadata)
                    state.origins[i.name] = ep.value
                return
            tag = registry_info(obj)
            if tag is not None and tag.kind == kind:  # declared by its own decorator: under its declared name
                self._add(state, kind, tag.name, obj, version=tag.version, metadata=tag.metadata)
                state.origins[tag.name] = ep.value
            else:
                self._add(state, kind, ep.name, obj)
                state.origins[ep.name] = ep.value
        except UsageError as e:
            raise PluginError(f"{where}: {e}") from None

    def _resolve(self, kind: Kind, name: str) -> _KindState:
        state = self._load_entry_points(kind)
        if name in state.conflicts:
            raise PluginError(state.conflicts[name])
        ep = state.pending.get(name)
        if ep is not None:
            self.load_entry_point(kind, ep)  # a broken one stays pending: every lookup of it says so
            del state.pending[name]
        return state

    def lookup(self, kind: Kind, name: str) -> object:
        """The object registered as `kind` `name` (its entry point loaded now if it is one); an
        `UnknownNameError` listing the valid names when there is none, a `PluginError` when its entry point
        cannot be loaded."""
        state = self._kinds.get(kind)
        if state is not None and state.loaded and (entry := state.entries.get(name)) is not None:
            return entry.obj  # the common case, asked per batch of units: a registered name of a loaded kind
        state = self._resolve(check_kind(kind), name)
        entry = state.entries.get(name)
        if entry is not None:
            return entry.obj
        if kind in _BUILT_IN_KINDS and not self.kind_entry_points(kind):  # e.g. a source tree never pip-installed
            raise PluginError(f"unknown {kind} {name!r}: no entry point of group {GROUPS[kind][0]!r} is installed, "
                              "not even this project's own; install agent-factory (pip install -e .)")
        if state.broken:  # the name may be one a broken plugin module would have registered: say so
            raise PluginError(f"unknown {kind} {name!r} (valid: {', '.join(self.names(kind))}); and "
                              + "; ".join(state.broken))
        raise UnknownNameError(kind, name, self.names(kind))

    def info(self, kind: Kind, name: str) -> RegistryInfo:
        """The `RegistryInfo` of `kind` `name` (errors as `lookup`)."""
        self.lookup(kind, name)
        return self._kinds[kind].entries[name].info

    def origin(self, kind: Kind, name: str) -> str | None:
        """The value of the entry point `kind` `name` comes (or will come) from; None if registered in code."""
        state = self._load_entry_points(kind)
        pending = state.pending.get(name)
        return pending.value if pending is not None else state.origins.get(name)

    def names(self, kind: Kind) -> list[str]:
        """The names of `kind`, sorted: registered ones and those of entry points not loaded yet."""
        state = self._load_entry_points(kind)
        return sorted(set(state.entries) | set(state.pending) | set(state.conflicts))

    def items(self, kind: Kind) -> list[tuple[RegistryInfo, object]]:
        """(info, object) of every object of `kind`, by name; loads every entry point of the kind."""
        out = []
        for n in self.names(kind):
            obj = self.lookup(kind, n)
            out.append((self._state(kind).entries[n].info, obj))
        return out

    def unregister(self, kind: Kind, name: str) -> None:
        """Drop a registration (tests that register a temporary plugin clean up with it)."""
        state = self._state(kind)
        state.entries.pop(name, None)
        state.origins.pop(name, None)

    def reload(self, kinds: Iterable[Kind] = KINDS) -> None:
        """Forget what the entry points of `kinds` gave and read them again on the next lookup (a plugin installed
        at run time, a test's temporary one). What code registered and the built-ins stay."""
        for k in map(check_kind, kinds):
            state = self._kinds.get(k)
            if state is None:
                continue
            state.loaded = False
            for name in state.origins:
                state.entries.pop(name, None)
            state.origins.clear()
            state.pending.clear()
            state.conflicts.clear()
            state.broken.clear()

    def kinds_used(self) -> tuple[Kind, ...]:
        """The kinds this registry has read so far (what a test of import side effects checks is empty)."""
        return tuple(self._kinds)
