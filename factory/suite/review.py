"""Two of the decisions people keep (docs/method.md section 8): approving spec changes and defining invariants.

`suite_diff(old, new)` says what a spec change does to a suite: clauses, data definitions (and so what a rerun
recollects), evaluator versions, invariants and uncompiled sentences. `approve_suite(dir)` snapshots the
suite's files into `dir/approved/` with `approval.json`; runs read that snapshot (`factory.suite.read.load_suite`).
`approval_status(dir)` compares the snapshot with the working files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from agent_factory import yamlio
from agent_factory.digest import digest
from agent_factory.errors import SpecError
from agent_factory.evaluators.core import COMPONENTS, components
from agent_factory.factory.suite.evaluator_file import refresh
from agent_factory.factory.suite.read import (
    APPROVAL_FILE,
    APPROVED_DIR,
    INVARIANTS_FILE,
    MANIFEST_FILE,
    SUITE_FILE,
    Approval,
    InvariantEntry,
    built,
    files_digest,
    read_approval,
    read_invariants,
    read_suite_bytes,
    read_suite_files,
    snapshot_digest,
    suite_hashes,
)
from agent_factory.frozen import Frozen
from agent_factory.knowledge_packs.model import Clause

SPEC_SUFFIXES = (".md", ".txt")
_HASH_SUFFIX = re.compile(r"_[0-9a-f]{6}(?:_\d+)?$")
_LINE_COMMENT = re.compile(r"^  # line (\d+):[^\n]*\n  - id: ([a-z][a-z0-9_]*)\s*$", re.MULTILINE)


class FieldChange(Frozen):
    """One field that differs between two versions of a clause."""

    field: str
    """Dotted field (`obligation.params.max_passengers`)."""
    old: Any
    """Its old value (None when absent)."""
    new: Any
    """Its new value (None when absent)."""


class ClauseRef(Frozen):
    """A clause added or removed."""

    id: str
    """Clause id."""
    text: str
    """The clause's sentence."""
    source_line: int | None
    """Spec line, from the review comment of `pack.yaml` (None for clauses of the base pack)."""


class ClauseChange(Frozen):
    """A clause present on both sides (matched by id, or by spec line or slug when its words changed)."""

    id: str
    """Its new id."""
    old_id: str
    """Its old id (differs when the words changed)."""
    source_line: int | None
    """Its new spec line."""
    fields: tuple[FieldChange, ...]
    """What changed, old -> new (`invariant` is reported with the invariants)."""


class DefinitionRef(Frozen):
    """A data definition added or removed."""

    component: str
    """Its component."""
    id: str
    """Data id."""
    version: str
    """Its version."""


class DefinitionChange(Frozen):
    """A data definition whose content changed: its cached data are recollected."""

    component: str
    """Its component."""
    id: str
    """New data id."""
    old_id: str
    """Old data id (differs when its clause was renamed)."""
    old_version: str
    """Version before."""
    new_version: str
    """Version after."""
    fields: tuple[str, ...]
    """Top-level fields that differ."""


class EvaluatorChange(Frozen):
    """A component whose evaluator version v changed."""

    component: str
    """Component name."""
    old: str | None
    """Old version (None: no evaluator file)."""
    new: str | None
    """New version (None: no evaluator file)."""


class InvariantChange(Frozen):
    """An invariant entry whose confirmation changed."""

    clause: str
    """Clause id (new)."""
    old: bool
    """Confirmed before."""
    new: bool
    """Confirmed after."""


class UncompiledRef(Frozen):
    """A sentence the compiler could not compile."""

    line: int | None
    """Spec line."""
    sentence: str
    """The sentence."""
    reason: str
    """Why it was not compiled."""


class SuiteDiff(Frozen):
    """What changes from suite `old` to suite `new` (`agent-factory diff --json`)."""

    old: str
    """The old suite directory or spec file."""
    new: str
    """The new one."""
    clauses_added: tuple[ClauseRef, ...]
    """Clauses only in new."""
    clauses_removed: tuple[ClauseRef, ...]
    """Clauses only in old."""
    clauses_changed: tuple[ClauseChange, ...]
    """Clauses in both whose content differs."""
    definitions_added: tuple[DefinitionRef, ...]
    """Data definitions only in new: collected on the next run."""
    definitions_removed: tuple[DefinitionRef, ...]
    """Data definitions only in old: no longer collected."""
    definitions_changed: tuple[DefinitionChange, ...]
    """Data definitions whose content changed: recollected."""
    evaluators_changed: tuple[EvaluatorChange, ...]
    """Components whose evaluator version changed."""
    invariants_added: tuple[str, ...]
    """Clause ids newly listed in invariants.yaml."""
    invariants_removed: tuple[str, ...]
    """Clause ids no longer listed."""
    invariants_confirmation: tuple[InvariantChange, ...]
    """Entries whose `confirmed` changed."""
    uncompiled_added: tuple[UncompiledRef, ...]
    """Sentences newly left uncompiled."""
    uncompiled_removed: tuple[UncompiledRef, ...]
    """Sentences no longer left uncompiled."""
    recollect: int
    """Data definitions a rerun collects anew (added + changed)."""
    reused: int
    """Data definitions of new whose cached data stay valid."""
    knowledge_changed: bool
    """The pack's knowledge (everything but its clauses: lexicons, thresholds, baselines, segments) changed:
    every rule-collected definition is recollected on every unit (rules only, no model calls)."""
    summary: str
    """One line saying the above."""


class ApprovalStatus(Frozen):
    """Whether a suite is approved and whether its working files changed since."""

    directory: str
    """The suite directory."""
    required: bool
    """Whether runs need an approval (built suites); hand-written suites run as they are."""
    approved: bool
    """Whether `approved/approval.json` exists."""
    approved_digest: str | None
    """The approved files' digest."""
    current_digest: str
    """The working files' digest."""
    newer_unapproved: bool
    """The working files differ from the approved ones."""
    by: str | None
    """Who approved."""
    at: str | None
    """When."""


# ---- reading a side ----------------------------------------------------------------------------------


def _suite_dir(path: Path) -> Path:
    if not path.exists():
        raise SpecError(f"{path}: no such file or directory")
    if path.is_dir():
        if not (path / SUITE_FILE).is_file():
            raise SpecError(f"{path}: not a suite directory (no {SUITE_FILE})")
        return path
    raise SpecError(f"{path}: neither a suite directory nor a spec file ({', '.join(SPEC_SUFFIXES)})")


def _side(path: Path, *, pack: str, scratch: Path) -> Path:
    """A suite directory for `path`: itself, or the suite a spec file compiles to (under `scratch`)."""
    if path.is_file() and path.suffix.lower() in SPEC_SUFFIXES:
        # The compiler is imported only when a spec file needs compiling.
        from agent_factory.factory.suite.write import build_suite

        out = scratch / str(len(list(scratch.iterdir()))) / path.stem
        build_suite(path, pack=pack, out=out)
        return out
    return _suite_dir(path)


class _Side:
    """What the diff compares of one suite directory."""

    def __init__(self, directory: Path) -> None:
        # An approved snapshot's relative paths were written for the suite directory above it.
        base = directory.parent if directory.name == APPROVED_DIR and (directory / APPROVAL_FILE).is_file() \
            else directory
        suite = read_suite_files(directory, base=base)
        self.knowledge_digest = suite.pack.knowledge_digest()
        self.clauses: dict[str, Clause] = {c.id: c for c in suite.pack.clauses}
        pack_text = (directory / "pack.yaml").read_text(encoding="utf-8") if (directory / "pack.yaml").is_file() \
            else ""
        self.lines = {cid: int(n) for n, cid in _LINE_COMMENT.findall(pack_text)}
        self.definitions: dict[str, dict[str, dict[str, Any]]] = {}
        # Clause -> the data items generated from it, in order (generated components, over this side's pack):
        # a renamed clause's items pair by position, whatever the component's id scheme.
        self.clause_items: dict[str, list[str]] = {}
        for spec in components():
            if spec.generated:
                for d in spec.definitions_for(suite.pack):
                    if d.clause is not None:
                        self.clause_items.setdefault(d.clause, []).append(d.id)
        self.item_clause = {item: cid for cid, items in self.clause_items.items() for item in items}
        self.versions: dict[str, str | None] = {}
        manifest = _json(directory / MANIFEST_FILE).get("evaluators", {})
        for component in COMPONENTS:
            data = _yaml(directory / "evaluators" / f"{component}.yaml")
            defs = data.get("definitions") or []
            self.definitions[component] = {d["id"]: d for d in defs if isinstance(d, dict) and "id" in d}
            version = data.get("version") or (manifest.get(component) if isinstance(manifest, dict) else None)
            self.versions[component] = str(version) if version is not None else None
        inv = directory / INVARIANTS_FILE
        self.invariants: dict[str, InvariantEntry] = (
            {e.clause: e for e in read_invariants(inv)} if inv.is_file() else {})
        raw = _yaml(directory / "uncompiled.yaml").get("uncompiled") or []
        self.uncompiled = [UncompiledRef(line=u.get("line"), sentence=str(u.get("sentence", "")),
                                         reason=str(u.get("reason", ""))) for u in raw if isinstance(u, dict)]


def _yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = yamlio.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise SpecError(f"{path}: cannot read YAML: {str(e).splitlines()[0]}") from None
    return data if isinstance(data, dict) else {}


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# ---- comparing ---------------------------------------------------------------------------------------


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def _field_changes(old: Clause, new: Clause) -> tuple[FieldChange, ...]:
    # The id is reported by the caller; `invariant` with the invariants, where a person decides it.
    a = _flat(old.model_dump(mode="json", exclude={"id", "invariant"}))
    b = _flat(new.model_dump(mode="json", exclude={"id", "invariant"}))
    return tuple(FieldChange(field=k, old=a.get(k), new=b.get(k)) for k in sorted(set(a) | set(b))
                 if a.get(k) != b.get(k))


def _pair(removed: list[str], added: list[str], old: _Side, new: _Side) -> dict[str, str]:
    """Old id -> new id for clauses whose words changed: same slug first, then same spec line."""
    pairs: dict[str, str] = {}
    for key in (lambda s, cid: _HASH_SUFFIX.sub("", cid), lambda s, cid: s.lines.get(cid)):
        for o in removed:
            if o in pairs or key(old, o) is None:
                continue
            match = next((a for a in added if a not in pairs.values() and key(new, a) == key(old, o)), None)
            if match is not None:
                pairs[o] = match
    return pairs


def _renamed_item(item: str, renames: dict[str, str], old: _Side, new: _Side) -> str:
    """The id `item` has on the new side: the same position among the items of its renamed clause."""
    cid = old.item_clause.get(item)
    if cid is None or cid not in renames:
        return item
    position = old.clause_items[cid].index(item)
    now = new.clause_items.get(renames[cid], [])
    return now[position] if position < len(now) else item


def _compare(old_label: str, new_label: str, old: _Side, new: _Side) -> SuiteDiff:
    removed = [c for c in old.clauses if c not in new.clauses]
    added = [c for c in new.clauses if c not in old.clauses]
    renames = _pair(removed, added, old, new)
    same = {c: c for c in old.clauses if c in new.clauses} | renames
    changed = []
    for o, n in same.items():
        fields = _field_changes(old.clauses[o], new.clauses[n])
        if o != n:
            fields = (FieldChange(field="id", old=o, new=n), *fields)
        if old.lines.get(o) != new.lines.get(n) and (o != n or fields):
            fields = (*fields, FieldChange(field="source_line", old=old.lines.get(o), new=new.lines.get(n)))
        if fields and any(f.field != "source_line" for f in fields):
            changed.append(ClauseChange(id=n, old_id=o, source_line=new.lines.get(n), fields=fields))

    def ref(side: _Side, cid: str) -> ClauseRef:
        return ClauseRef(id=cid, text=side.clauses[cid].text, source_line=side.lines.get(cid))

    defs_added: list[DefinitionRef] = []
    defs_removed: list[DefinitionRef] = []
    defs_changed: list[DefinitionChange] = []
    reused = 0
    for component in COMPONENTS:
        a, b = old.definitions[component], new.definitions[component]
        moved = {_renamed_item(i, renames, old, new): i for i in a}
        for item, d in b.items():
            if item not in moved:
                defs_added.append(DefinitionRef(component=component, id=item, version=str(d.get("version", ""))))
                continue
            before = a[moved[item]]
            # `id` and `clause` differ by a rename itself; what the diff reports is what else changed.
            keys = tuple(k for k in sorted(set(before) | set(d))
                         if k not in ("id", "clause") and before.get(k) != d.get(k))
            if keys:
                defs_changed.append(DefinitionChange(
                    component=component, id=item, old_id=moved[item], old_version=str(before.get("version", "")),
                    new_version=str(d.get("version", "")), fields=keys))
            else:
                reused += 1
        defs_removed.extend(DefinitionRef(component=component, id=i, version=str(d.get("version", "")))
                            for i, d in a.items() if _renamed_item(i, renames, old, new) not in b)
    evaluators = [EvaluatorChange(component=c, old=old.versions[c], new=new.versions[c])
                  for c in COMPONENTS if old.versions[c] != new.versions[c]]

    old_inv = {renames.get(k, k): e for k, e in old.invariants.items()}
    confirmation = [InvariantChange(clause=k, old=old_inv[k].confirmed, new=e.confirmed)
                    for k, e in new.invariants.items() if k in old_inv and old_inv[k].confirmed != e.confirmed]
    old_unc = {u.sentence for u in old.uncompiled}
    new_unc = {u.sentence for u in new.uncompiled}
    recollect = len(defs_added) + len(defs_changed)
    knowledge_changed = old.knowledge_digest != new.knowledge_digest
    summary = (f"{len(changed)} clause(s) changed, {len(added) - len(renames)} added, "
               f"{len(removed) - len(renames)} removed; a rerun recollects {recollect} data definition(s) "
               f"({len(defs_added)} new, {len(defs_changed)} changed) and reuses {reused}"
               + ("; the pack's knowledge changed, so every rule-collected definition is recollected (no model "
                  "calls)" if knowledge_changed else ""))
    return SuiteDiff(
        old=old_label, new=new_label,
        clauses_added=tuple(ref(new, c) for c in added if c not in renames.values()),
        clauses_removed=tuple(ref(old, c) for c in removed if c not in renames),
        clauses_changed=tuple(changed),
        definitions_added=tuple(defs_added), definitions_removed=tuple(defs_removed),
        definitions_changed=tuple(defs_changed), evaluators_changed=tuple(evaluators),
        invariants_added=tuple(k for k in new.invariants if k not in old_inv),
        invariants_removed=tuple(k for k in old_inv if k not in new.invariants),
        invariants_confirmation=tuple(confirmation),
        uncompiled_added=tuple(u for u in new.uncompiled if u.sentence not in old_unc),
        uncompiled_removed=tuple(u for u in old.uncompiled if u.sentence not in new_unc),
        recollect=recollect, reused=reused, knowledge_changed=knowledge_changed, summary=summary,
    )


def suite_diff(old: Path, new: Path, *, pack: str = "default") -> SuiteDiff:
    """What changes from `old` to `new`, each a suite directory or a spec file (.md, .txt) compiled with `pack`.

    Clauses match by id; a removed and an added clause with the same slug (the id without its hash) or from
    the same spec line are one changed clause, and their data definitions are matched through it.
    """
    for path in (old, new):
        if not path.exists():
            raise SpecError(f"{path}: no such file or directory")
    with tempfile.TemporaryDirectory(prefix="agent-factory-diff-") as tmp:
        scratch = Path(tmp)
        a, b = _side(old, pack=pack, scratch=scratch), _side(new, pack=pack, scratch=scratch)
        return _compare(str(old), str(new), _Side(a), _Side(b))


# ---- approval ----------------------------------------------------------------------------------------


def approval_status(directory: Path) -> ApprovalStatus:
    """Whether `directory` is approved, and whether its working files changed since."""
    _suite_dir(directory)
    approval = read_approval(directory)
    current = files_digest(suite_hashes(directory))
    return ApprovalStatus(
        directory=str(directory), required=built(directory), approved=approval is not None,
        approved_digest=approval.suite_digest if approval else None, current_digest=current,
        newer_unapproved=approval is not None and approval.suite_digest != current,
        by=approval.by if approval else None, at=approval.at if approval else None,
    )


def _replace_dir(tmp: Path, target: Path) -> None:
    # rename(2) replaces only an empty directory: move the old snapshot aside first, put it back on failure.
    old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}") if target.exists() else None
    if old is not None:
        target.rename(old)
    try:
        tmp.rename(target)
    except OSError:
        if old is not None:
            old.rename(target)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def approve_suite(directory: Path, *, by: str | None = None, note: str | None = None) -> Approval:
    """Snapshot the suite's current files into `directory/approved/` with `approval.json`, atomically.

    The suite must load (pack, components, invariants); an approval of identical files is left as it is
    (`approval_status` tells the two apart beforehand). `by` defaults to `$USER`, else `unknown`.
    """
    _suite_dir(directory)
    suite = read_suite_files(directory)  # never approve what a run could not load
    if refresh(directory, suite.pack):  # a hand edit of pack.yaml: generated evaluator files follow it
        suite = read_suite_files(directory)
    files = read_suite_bytes(directory)
    hashes = {rel: digest(data) for rel, data in files.items()}
    suite_digest = files_digest(hashes)
    try:
        existing = read_approval(directory)
    except SpecError:
        existing = None  # a damaged approval is what approving again repairs
    if existing is not None and existing.suite_digest == suite_digest == snapshot_digest(directory):
        return existing
    inv = directory / INVARIANTS_FILE
    entries = read_invariants(inv) if inv.is_file() else ()
    listed = {e.clause for e in entries}
    approval = Approval(
        suite_digest=suite_digest, files=hashes, by=by or os.environ.get("USER") or "unknown",
        at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"), note=note,
        invariants=tuple(e.clause for e in entries if e.confirmed),
        unconfirmed=tuple(e.clause for e in entries if not e.confirmed),
        inherited=tuple(c.id for c in suite.pack.clauses if c.invariant and c.id not in listed),
    )
    tmp = Path(tempfile.mkdtemp(prefix=f".{APPROVED_DIR}.", dir=directory))
    try:
        tmp.chmod(directory.stat().st_mode & 0o777)  # mkdtemp's 0700 would hide the snapshot from the team
        for rel, data in files.items():
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)  # the bytes hashed above, not a second read
        (tmp / APPROVAL_FILE).write_text(approval.model_dump_json(indent=2) + "\n", encoding="utf-8")
        _replace_dir(tmp, directory / APPROVED_DIR)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return approval


__all__ = [
    "Approval", "ApprovalStatus", "ClauseChange", "ClauseRef", "DefinitionChange", "DefinitionRef",
    "EvaluatorChange", "FieldChange", "InvariantChange", "SuiteDiff", "UncompiledRef", "approval_status",
    "approve_suite", "suite_diff",
]
