"""Which evaluators a run uses: the knowledge pack and the components, from a suite directory or defaults.

A suite directory holds `suite.yaml` (`pack`: a built-in name or a path relative to the suite; `components`:
names, default all seven). There are two kinds:

- Built by `agent-factory build` (it has `manifest.json`): a person reviews it and approves it with
  `agent-factory approve DIR`, which copies its files into `DIR/approved/` with `approval.json`. Runs read
  that snapshot, never the working files, and say so (`Suite.notice`) when the working files differ from it.
  A built suite that was never approved is refused unless the caller passes `allow_unapproved=True`.
- Hand-written (only `suite.yaml`, no `manifest.json`): loaded as it is, without approval, as before approval
  existed: nothing in it was generated, so there is nothing a person has not already written. Approving one
  anyway makes runs use its snapshot like a built suite's.

`invariants.yaml` declares the suite's invariants: each entry names a clause and whether a person confirmed
it. The run treats as invariants the confirmed entries; the clauses the suite's own pack file adds are
invariants only when confirmed (the compiler marks every must-not clause, which is a proposal, not a
decision). Clauses of the base pack that `invariants.yaml` does not mention keep their flag: the base pack's,
which its author set by hand, or the one the suite's pack file gives a base clause it replaces (the build
replaces a base clause with the spec's sentence of the same check and keeps the base's flag). The flag changes
no datum's version, so confirming one recollects nothing.

A run takes the suite's pack: `--pack` beside `--suite` is refused unless it names that same pack (the suite's
evaluator files were built for it; another pack would silently replace its clauses).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, ValidationError

from agent_factory.errors import AgentFactoryError, SpecError
from agent_factory.evaluators.core import COMPONENTS, Component, ComponentSpec, get_component, load_yaml_model
from agent_factory.factory.store import Store
from agent_factory.factory.suite.evaluator_file import EVALUATORS_DIR, load_evaluator
from agent_factory.frozen import Frozen
from agent_factory.knowledge_packs import KnowledgePack, load_pack, resolve_pack
from agent_factory.knowledge_packs.loader import merge_pack_data, read_pack_yaml, validate_pack_data
from agent_factory.validation import describe_error

SUITE_FILE = "suite.yaml"
MANIFEST_FILE = "manifest.json"
INVARIANTS_FILE = "invariants.yaml"
APPROVED_DIR = "approved"
APPROVAL_FILE = "approval.json"
SUITE_PARTS = (SUITE_FILE, "pack.yaml", "evaluators", "templates", INVARIANTS_FILE, "uncompiled.yaml",
               MANIFEST_FILE)
"""What an approval copies besides the files the manifest lists (files, or directories taken whole)."""


class SuiteFile(Frozen):
    """The `suite.yaml` of a suite directory."""

    pack: str = "default"
    """Knowledge pack: built-in name, entry-point name, or a path relative to the suite directory."""
    components: tuple[Component, ...] = Field(default=COMPONENTS)
    """Components to run, in the design's order."""


class InvariantEntry(Frozen):
    """One entry of `invariants.yaml`."""

    clause: str = Field(min_length=1)
    """Id of a clause of the suite's pack."""
    confirmed: bool = False
    """Whether a person confirmed it; only confirmed entries are invariants in a run."""
    kind: str | None = None
    """The sentence form the compiler saw (`must_not`, `never`); for the reviewer."""
    source_line: int | None = None
    """1-based spec line of the clause; for the reviewer."""
    text: str = ""
    """The clause as it reads in the spec; for the reviewer."""


class InvariantsFile(Frozen):
    """`invariants.yaml`: the invariants proposed by the compiler, each confirmed or not by a person."""

    invariants: tuple[InvariantEntry, ...] = ()
    """Entries in file order; a clause may appear once."""


class Approval(Frozen):
    """`approved/approval.json`: who approved which bytes of a suite, when."""

    suite_digest: str
    """sha256 over the sorted (relative path, sha256) pairs of the approved files (`files_digest`)."""
    files: dict[str, str]
    """Relative path -> sha256 of each approved file."""
    by: str
    """Who approved."""
    at: str
    """When, UTC ISO 8601 (`2026-11-30T10:00:00Z`)."""
    note: str | None = None
    """What the approver wanted to record."""
    invariants: tuple[str, ...] = ()
    """Clause ids confirmed as invariants in the approved `invariants.yaml`."""
    unconfirmed: tuple[str, ...] = ()
    """Proposed invariants left unconfirmed (the run does not treat them as invariants)."""
    inherited: tuple[str, ...] = ()
    """Invariants of the base pack that `invariants.yaml` does not mention (they stay invariants)."""


@dataclass(frozen=True)
class Suite:
    """A resolved suite: the pack and the component specs."""

    pack: KnowledgePack
    components: tuple[ComponentSpec, ...]
    source: Path | None
    notice: str | None = None
    """Something the person running should know: unapproved changes, or an unapproved suite run as is."""
    files: Path | None = None
    """The directory the suite's files were read from: `source/approved` for an approved suite."""


# ---- the files of a suite ----------------------------------------------------------------------------


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest_files(directory: Path) -> list[str]:
    try:
        listed = json.loads((directory / MANIFEST_FILE).read_text(encoding="utf-8")).get("files", {})
    except (OSError, ValueError, AttributeError):
        return []  # a broken manifest is still copied (it is a suite part); it just lists nothing more
    return [rel for rel in listed if isinstance(rel, str)] if isinstance(listed, dict) else []


def read_suite_bytes(directory: Path) -> dict[str, bytes]:
    """Relative path -> bytes of the suite's files: those the manifest lists and those of `SUITE_PARTS` present.

    The bytes actually on disk count, not the manifest's hashes: a person may edit files after `build`.
    """
    root = directory.resolve()
    found: dict[str, bytes] = {}

    def add(path: Path) -> None:
        rel = path.resolve().relative_to(root).as_posix() if path.resolve().is_relative_to(root) else None
        if rel is None or rel == APPROVED_DIR or rel.startswith(f"{APPROVED_DIR}/"):
            return  # outside the suite, or the approved snapshot itself
        found[rel] = path.read_bytes()

    for rel in _manifest_files(directory):
        if (directory / rel).is_file():
            add(directory / rel)
    for part in SUITE_PARTS:
        path = directory / part
        if path.is_file():
            add(path)
        elif path.is_dir():
            for sub in sorted(path.rglob("*")):
                if sub.is_file():
                    add(sub)
    return dict(sorted(found.items()))


def files_digest(files: Mapping[str, str]) -> str:
    """sha256 over the sorted (relative path, sha256) pairs: the digest an approval records."""
    return _sha(json.dumps(sorted(files.items()), ensure_ascii=False).encode("utf-8"))


def suite_hashes(directory: Path) -> dict[str, str]:
    """Relative path -> sha256 of the suite's files (see `read_suite_bytes`)."""
    return {rel: _sha(data) for rel, data in read_suite_bytes(directory).items()}


def read_approval(directory: Path) -> Approval | None:
    """The approval of suite `directory`, or None when it has no `approved/` snapshot."""
    snapshot = directory / APPROVED_DIR
    if not snapshot.exists():
        return None
    path = snapshot / APPROVAL_FILE
    try:
        return Approval.model_validate_json(path.read_bytes())
    except OSError as e:
        raise SpecError(f"{path}: cannot read the approval ({e.strerror}); approve the suite again") from None
    except ValidationError as e:
        raise SpecError(f"{path}: {describe_error(e)}; approve the suite again") from None


def built(directory: Path) -> bool:
    """Whether `agent-factory build` wrote the suite (it has a manifest): then runs need an approval."""
    return (directory / MANIFEST_FILE).is_file()


# ---- invariants --------------------------------------------------------------------------------------


def read_invariants(path: Path) -> tuple[InvariantEntry, ...]:
    """The entries of an `invariants.yaml`; `SpecError` naming the file, entry and field when one is wrong."""
    entries: tuple[InvariantEntry, ...] = load_yaml_model(InvariantsFile, path).invariants
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        if entry.clause in seen:
            raise SpecError(f"{path}: invariants.{i}.clause: clause {entry.clause!r} is listed again "
                            f"(first at invariants.{seen[entry.clause]})")
        seen[entry.clause] = i
    return entries


def apply_invariants(
    pack: KnowledgePack, entries: tuple[InvariantEntry, ...], *, own: frozenset[str], source: Path,
) -> KnowledgePack:
    """`pack` with each clause's `invariant` flag set from the suite's declared invariants.

    A clause of the suite's own pack file (`own`) or listed in `entries` is an invariant exactly when a listed
    entry confirms it; other clauses keep their flag. An entry naming no clause of the pack is a `SpecError`.
    """
    ids = {c.id for c in pack.clauses}
    for i, entry in enumerate(entries):
        if entry.clause not in ids:
            raise SpecError(f"{source}: invariants.{i}.clause: no clause {entry.clause!r} in the suite's pack "
                            f"{pack.name!r}")
    listed = {e.clause: e.confirmed for e in entries}
    clauses = tuple(
        c.model_copy(update={"invariant": listed.get(c.id, False)}) if c.id in listed or c.id in own else c
        for c in pack.clauses
    )
    return pack.model_copy(update={"clauses": clauses})


# ---- loading -----------------------------------------------------------------------------------------


def _relative_path(name: str) -> bool:
    return ("/" in name or os.sep in name or name.endswith((".yaml", ".yml"))) and not Path(name).is_absolute()


def _load_pack_file(path: Path, *, base: Path) -> KnowledgePack:
    """Load a pack file whose relative `extends` was written for directory `base` (its place before a copy)."""
    raw = read_pack_yaml(path)
    parent = raw.get("extends")
    if base.resolve() == path.parent.resolve() or not isinstance(parent, str) or not _relative_path(parent):
        return load_pack(path)
    parent_data = load_pack(resolve_pack(parent, relative_to=base)).model_dump(mode="json", exclude_defaults=True)
    return validate_pack_data(merge_pack_data(parent_data, raw), source=path)


def _own_clauses(path: Path, *, base: Path) -> frozenset[str]:
    """Ids of the clauses the pack file adds to its parent (not those it replaces); `base` is the directory its
    relative `extends` was written for."""
    raw = read_pack_yaml(path)
    clauses = raw.get("clauses") or []
    ids = frozenset(c["id"] for c in clauses if isinstance(c, dict) and isinstance(c.get("id"), str))
    parent = raw.get("extends")
    if not isinstance(parent, str) or not ids:
        return ids
    inherited = load_pack(resolve_pack(parent, relative_to=base if _relative_path(parent) else None))
    return ids - {c.id for c in inherited.clauses}


def _same_pack(directory: Path, pack: str) -> bool:
    """Whether `pack` names the suite's own pack: as `suite.yaml` writes it, as its file, or by the name inside."""
    path = directory / SUITE_FILE
    if not path.is_file():
        return False
    own = load_yaml_model(SuiteFile, path).pack
    if pack == own:
        return True
    try:
        mine = resolve_pack(own, relative_to=directory if _relative_path(own) else None).resolve()
        if _relative_path(pack) or Path(pack).is_absolute():
            return Path(pack).resolve() == mine
        return read_pack_yaml(mine).get("name") == pack or resolve_pack(pack).resolve() == mine
    except AgentFactoryError:  # an unknown name or a missing file: not the suite's pack
        return False


def check_pack_option(directory: Path, pack: str) -> None:
    """`SpecError` unless `pack` (given beside a suite) names the suite's own pack."""
    if _same_pack(directory, pack):
        return
    try:
        own = load_yaml_model(SuiteFile, directory / SUITE_FILE).pack
        name = read_pack_yaml(resolve_pack(own, relative_to=directory if _relative_path(own) else None)).get("name")
        own = f"{own}, pack {name}" if name and name != own else own
    except AgentFactoryError:
        own = "unreadable"
    raise SpecError(f"--pack {pack} would replace the pack of suite {directory} ({own}) and run other clauses than "
                    "the suite's evaluator files; drop --pack (or AGENT_FACTORY_PACK) to run the suite's own pack")


def read_suite_files(
    files: Path, *, base: Path | None = None, pack: str | None = None, store: Store | None = None,
) -> Suite:
    """The suite held by exactly the files in `files` (no approval involved), invariants applied.

    `base` is the directory the files were written for (the suite directory when `files` is its `approved/`
    copy): relative paths the copy does not hold are taken from there. Pack precedence: `pack`, the suite's
    pack, the pack used at ingest, `default`; `invariants.yaml` applies only to the suite's own pack.
    """
    base = files if base is None else base
    path = files / SUITE_FILE
    if not path.exists():
        raise SpecError(f"{files}: no {SUITE_FILE} in the suite directory")
    spec: SuiteFile = load_yaml_model(SuiteFile, path)
    components = tuple(get_component(c) for c in spec.components)
    if pack is not None:
        return Suite(pack=load_pack(pack), components=components, source=base, files=files)
    name = spec.pack or (store.get_meta("pack") if store else None) or "default"
    copied = files / name
    # A path leading out of an approved copy names a file the copy does not hold: take it where it was written.
    inside = copied.resolve().is_relative_to(files.resolve()) and copied.is_file()
    pack_file = copied if inside else base / name if (base / name).is_file() else None
    if pack_file is None:
        kp = load_pack(name)
        own: frozenset[str] = frozenset()
    else:
        written_for = (base / name).parent if inside else pack_file.parent
        kp = _load_pack_file(pack_file, base=written_for)
        own = _own_clauses(pack_file, base=written_for)
    invariants = files / INVARIANTS_FILE
    if invariants.is_file():
        kp = apply_invariants(kp, read_invariants(invariants), own=own, source=invariants)
    # The evaluator files a person reviewed are what runs (a hand-written suite may have none).
    notices: list[str] = []
    specs = []
    for c in spec.components:
        path = files / EVALUATORS_DIR / f"{c}.yaml"
        if path.is_file():
            loaded, more = load_evaluator(path, component=c, pack=kp)
            specs.append(loaded)
            notices.extend(more)
        else:
            specs.append(get_component(c))
    return Suite(pack=kp, components=tuple(specs), source=base, files=files, notice="; ".join(notices) or None)


def snapshot_digest(directory: Path) -> str:
    """The digest of the files in `directory/approved/` (what `approval.json` must record)."""
    return files_digest(suite_hashes(directory / APPROVED_DIR))


def load_suite(
    directory: Path | None, *, pack: str | None, store: Store | None = None, allow_unapproved: bool = False,
) -> Suite:
    """The suite to run. Without a suite directory: the `pack` argument, the pack used at ingest, `default`.
    With one: the suite's pack (the pack used at ingest, `default`, when `suite.yaml` names none); a `pack`
    argument that names another pack is a `SpecError` (see the module docstring).

    An approved suite is read from its `approved/` snapshot, with a notice when the working files changed since.
    A built suite without approval is a `SpecError` unless `allow_unapproved` (then its working files are used,
    with a notice); a hand-written suite (no manifest) needs no approval (see the module docstring).
    """
    if directory is None:
        name = pack or (store.get_meta("pack") if store else None) or "default"
        return Suite(pack=load_pack(name), components=tuple(get_component(c) for c in COMPONENTS), source=None)
    if pack is not None:
        check_pack_option(directory, pack)
        pack = None  # the suite's own pack, read as the suite holds it (approved snapshot, invariants)
    approval = read_approval(directory)
    if approval is None:
        notice = None
        if built(directory):
            if not allow_unapproved:
                raise SpecError(f"{directory}: no approved version; review it, then `agent-factory approve "
                                f"{directory}` (or pass --unapproved to try it as is)")
            notice = (f"{directory} is not approved: running its working files as they are; review them, then "
                      f"`agent-factory approve {directory}`")
        suite = read_suite_files(directory, pack=pack, store=store)
        return Suite(pack=suite.pack, components=suite.components, source=directory,
                     notice=_join(notice, suite.notice), files=directory)
    snapshot = directory / APPROVED_DIR
    # The snapshot is what a person approved: a file changed inside it since is not approved either.
    if snapshot_digest(directory) != approval.suite_digest:
        raise SpecError(f"{snapshot}: its files differ from {APPROVAL_FILE} (edited after the approval); "
                        f"`agent-factory approve {directory}` approves the working suite again")
    notice = None
    if files_digest(suite_hashes(directory)) != approval.suite_digest:
        when = approval.at[:16] + "Z" if len(approval.at) >= 16 else approval.at
        notice = (f"{directory} has unapproved changes since the approval of {when} by {approval.by}; "
                  f"`agent-factory diff {snapshot} {directory}` shows them, `agent-factory approve {directory}` "
                  "approves them")
    suite = read_suite_files(snapshot, base=directory, pack=pack, store=store)
    return Suite(pack=suite.pack, components=suite.components, source=directory, notice=_join(notice, suite.notice),
                 files=snapshot)


def _join(*notices: str | None) -> str | None:
    return "; ".join(n for n in notices if n) or None


__all__ = [
    "APPROVAL_FILE", "APPROVED_DIR", "INVARIANTS_FILE", "MANIFEST_FILE", "SUITE_FILE", "SUITE_PARTS", "Approval",
    "InvariantEntry", "InvariantsFile", "Suite", "SuiteFile", "apply_invariants", "built", "check_pack_option",
    "files_digest",
    "load_suite", "read_approval", "read_invariants", "read_suite_bytes", "read_suite_files", "snapshot_digest",
    "suite_hashes",
]
