"""Find, read, merge and validate knowledge packs.

A pack is named by a path, a built-in name (`default`, `business_analysis`, `airline`) or a name a third-party
package registers under the entry-point group `agent_factory.packs` or `agent_factory.knowledge_packs` (the
entry point's object is a callable returning a path, or a path). Names live in the plugin registry
(`agent_factory.plugins`, kind `pack`, the object a path); an entry point is loaded when its name is used.
`extends` merges a parent under the child: mappings merge key by key, lists of
items with an `id` or `name` merge item by item (a child item replaces the parent's item of the same key in
place, new items are appended), anything else the child states replaces the parent's value.

Every problem becomes a one-line `SpecError` naming the file and the dotted field.
"""

from __future__ import annotations

import os
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, cast

import yaml
from pydantic import ValidationError

from agent_factory import plugins, yamlio
from agent_factory.errors import SpecError, UnknownNameError
from agent_factory.knowledge_packs.model import KnowledgePack
from agent_factory.validation import describe_error

GROUP = "agent_factory.knowledge_packs"
"""The first entry-point group under which third-party packages register packs (`agent_factory.packs`, the
registry's group for the kind, is read too)."""
_HERE = Path(__file__).resolve().parent
BUILTINS: dict[str, str] = {
    "default": "default.yaml", "business_analysis": "business_analysis.yaml", "airline": "airline/pack.yaml",
    "retail": "retail/pack.yaml",
}
"""Built-in pack name -> file in this package, in every registry from the start (`PACK_KIND.builtins`: data
files, not plugins): an entry point of the same name is ignored, so built-ins cannot be shadowed."""


def default_pack_path() -> Path:
    """Path of the built-in `default` pack (the target of this project's own entry point)."""
    return _HERE / BUILTINS["default"]


def pack_entry_points() -> tuple[EntryPoint, ...]:
    """The installed entry points of the pack groups, `agent_factory.packs` then `agent_factory.knowledge_packs`
    (`plugins.GROUPS["pack"]`; tests replace this function)."""
    return tuple(ep for group in plugins.GROUPS["pack"] for ep in plugins.group_entry_points(group))


def list_packs() -> dict[str, str]:
    """Pack name -> where it comes from: the file of a built-in, the entry point's value otherwise (not loaded)."""
    return {name: plugins.origin("pack", name) or str(plugins.lookup("pack", name)) for name in plugins.names("pack")}


def _looks_like_path(s: str) -> bool:
    return "/" in s or os.sep in s or s.endswith((".yaml", ".yml"))


def _existing(p: Path) -> Path:
    if not p.is_file():
        raise SpecError(f"{p}: knowledge pack file not found")
    return p


def _entry_point_path(ep: EntryPoint) -> object:
    """What a pack entry point gives: a path as its value, or the object it names (called when callable)."""
    if ":" not in ep.value and _looks_like_path(ep.value):
        return Path(ep.value)
    obj: Any = ep.load()
    return obj() if callable(obj) else obj


def _builtin_packs() -> tuple[plugins.BuiltIn, ...]:
    return tuple((name, _HERE / file, {"builtin": True}) for name, file in BUILTINS.items())


PACK_KIND = plugins.KindSpec(
    check=lambda o: isinstance(o, str | os.PathLike), what="a path to a pack YAML file", loader=_entry_point_path,
    objects_only=True,
    source=lambda: pack_entry_points(),  # late-bound: tests replace the function
    builtins=_builtin_packs,
)
"""The `pack` kind (`plugins.KIND_SPECS` names it): the built-in files, then entry points of paths."""


def resolve_pack(name_or_path: str | Path, *, relative_to: Path | None = None) -> Path:
    """The YAML file of a pack given as a path, a built-in name or an entry-point name.

    A relative path is taken from `relative_to` when given (so `extends: ../base.yaml` is relative to the
    extending file), else from the working directory. A bare unknown name raises `UnknownNameError`.
    """
    if isinstance(name_or_path, Path):
        p = name_or_path
    else:
        if name_or_path in plugins.names("pack"):
            return _existing(Path(cast(str | os.PathLike[str], plugins.lookup("pack", name_or_path))))
        if not _looks_like_path(name_or_path):
            raise UnknownNameError("knowledge pack", name_or_path, plugins.names("pack"))
        p = Path(name_or_path)
    if not p.is_absolute() and relative_to is not None:
        p = relative_to / p
    return _existing(p)


# ---- reading ------------------------------------------------------------------------------------------


def _check_duplicate_keys(node: yaml.Node, path: str, source: Path) -> None:
    # PyYAML silently keeps the last of two equal keys; in a pack that hides a mistake, so refuse it.
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            here = f"{path}.{key}" if path else key
            if key in seen:
                raise SpecError(f"{source}: {here}: duplicate key (line {key_node.start_mark.line + 1})")
            seen.add(key)
            _check_duplicate_keys(value_node, here, source)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_duplicate_keys(item, f"{path}.{i}" if path else str(i), source)


def read_pack_yaml(path: Path) -> dict[str, Any]:
    """The raw mapping of one pack file (no merge, no validation); `SpecError` on unreadable YAML."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"{path}: cannot read knowledge pack: {e}") from e
    try:
        node = yamlio.compose(text)
        if node is not None:
            _check_duplicate_keys(node, "", path)
        data = yamlio.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark is not None else "(yaml)"
        problem = getattr(e, "problem", None) or str(e)
        raise SpecError(f"{path}: {where}: invalid YAML: {problem}".replace("\n", " ")) from e
    if data is None:
        raise SpecError(f"{path}: (top level): the file is empty; a pack needs at least name and version")
    if not isinstance(data, dict):
        raise SpecError(f"{path}: (top level): expected a mapping of pack fields, got {type(data).__name__}")
    for key in ("name", "version"):
        if key not in data:
            raise SpecError(f"{path}: {key}: field required (every pack states its own, also when it extends)")
    return data


# ---- merging ------------------------------------------------------------------------------------------


def _list_key(parent: list[Any], child: list[Any]) -> str | None:
    items = parent + child
    for key in ("id", "name"):
        if items and all(isinstance(x, dict) and key in x for x in items):
            return key
    return None


def _merge(parent: Any, child: Any) -> Any:
    if isinstance(parent, dict) and isinstance(child, dict):
        out = dict(parent)
        for k, v in child.items():
            out[k] = _merge(out[k], v) if k in out else v
        return out
    if isinstance(parent, list) and isinstance(child, list):
        key = _list_key(parent, child)
        if key is not None:
            merged = list(parent)
            index = {item[key]: i for i, item in enumerate(merged)}
            for item in child:
                if item[key] in index:
                    merged[index[item[key]]] = item
                else:
                    index[item[key]] = len(merged)
                    merged.append(item)
            return merged
    return child


def merge_pack_data(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """The raw mapping of `child` merged onto `parent` (child wins; see the module docstring)."""
    merged: dict[str, Any] = _merge(parent, child)
    return merged


# ---- validation ---------------------------------------------------------------------------------------


def validate_pack_data(data: dict[str, Any], *, source: Path | str) -> KnowledgePack:
    """Validate a raw (merged) mapping; `SpecError` naming `source` and the dotted field otherwise."""
    try:
        return KnowledgePack.model_validate(data)
    except ValidationError as e:
        raise SpecError(f"{source}: {describe_error(e, data)}") from None


def _load_merged(path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    resolved = path.resolve()
    if resolved in chain:
        cycle = " -> ".join(str(p) for p in (*chain, resolved))
        raise SpecError(f"{path}: extends: cycle {cycle}")
    raw = read_pack_yaml(path)
    parent = raw.get("extends")
    if parent is None:
        return raw
    if not isinstance(parent, str) or not parent.strip():
        raise SpecError(f"{path}: extends: expected a pack name or path, got {parent!r}")
    try:
        parent_path = resolve_pack(parent, relative_to=path.parent)
    except UnknownNameError as e:
        raise SpecError(f"{path}: extends: {e}") from e
    parent_data = _load_merged(parent_path, (*chain, resolved))
    validate_pack_data(parent_data, source=parent_path)  # the parent's own errors name the parent's file
    return merge_pack_data(parent_data, raw)


def load_pack(name_or_path: str | Path) -> KnowledgePack:
    """Load, merge (`extends`) and validate a pack given by path, built-in name or entry-point name."""
    path = resolve_pack(name_or_path)
    return validate_pack_data(_load_merged(path, ()), source=path)
