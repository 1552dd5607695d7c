"""Ingest: files -> adapter stream -> provenance -> store, one atomic transaction per file.

Spans that arrive on their own (OTel formats) are staged and grouped into turns per trace after the file is
read (`factory.ingest.writer`), so memory is bounded by the largest trace, not by the file; spans whose parent is in
no file read so far stay staged until it arrives.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from pydantic import Field

from agent_factory.adapters.base import Adapter, Quarantine, detect, get_adapter
from agent_factory.adapters.jsonio import FieldCut, FieldLimits, reading
from agent_factory.adapters.model import Conversation, OutcomeEvent, Span, Turn
from agent_factory.adapters.source import decoded, problem, shown
from agent_factory.errors import SpecError
from agent_factory.factory.executors.process import default_workers
from agent_factory.factory.ingest.lines import line_reader, read_lines_in_processes
from agent_factory.factory.ingest.writer import MAX_REPORTED_ERRORS, FileWriter
from agent_factory.factory.store import Store, dumps
from agent_factory.factory.store.claims import drop_sources, earlier_versions
from agent_factory.factory.store.schema import INGEST_MEMORY
from agent_factory.frozen import Frozen
from agent_factory.heap import bulk_objects
from agent_factory.knowledge_packs import KnowledgePack


class FileReport(Frozen):
    """What ingest did with one file."""

    path: str
    """The input file."""
    format: str | None
    """Adapter used, or None if no adapter could read the file."""
    status: str
    """`ingested`, `already-ingested` (same content seen before: nothing changed) or `rejected`."""
    read: int = 0
    """Records read from the file."""
    accepted: int = 0
    """Records stored."""
    quarantined: int = 0
    """Records rejected with a reason (read = accepted + quarantined)."""
    truncated: int = 0
    """Fields cut to the field limit (their records were accepted; see `IngestReport.truncated`)."""
    pending: int = 0
    """Accepted spans whose parent span is in no file read so far: kept, and joined to their trace when a
    later file brings the parent."""
    already_stored: int = 0
    """Accepted records the store held already, identical (a file that grew, read again; a copy under another
    name): counted in `accepted`, written once. A record under a stored id with other content is quarantined."""
    replaced: list[str] = Field(default_factory=list)
    """Earlier versions of this file (same path, other content) whose rows `--replace` removed before it was read."""


class IngestReport(Frozen):
    """Totals over all files of one `ingest` call (the `--json` output)."""

    read: int
    """Records read."""
    accepted: int
    """Records stored."""
    quarantined: int
    """Records rejected with a reason."""
    files: list[FileReport]
    """Per-file outcome."""
    errors: list[Quarantine]
    """The quarantined records (at most `MAX_REPORTED_ERRORS`; all are in the store)."""
    errors_not_shown: int = Field(default=0, ge=0)
    """How many errors were left out of `errors`."""
    truncated: list[FieldCut] = Field(default_factory=list)
    """Fields cut to the field limit, head and tail kept (at most `MAX_REPORTED_ERRORS`)."""
    truncated_not_shown: int = Field(default=0, ge=0)
    """How many cut fields were left out of `truncated`."""
    pending_spans: int = Field(default=0, ge=0)
    """Spans in the store still waiting for their parent span after this ingest (of any file so far)."""
    pending_traces: int = Field(default=0, ge=0)
    """The traces those spans belong to."""
    already_stored: int = Field(default=0, ge=0)
    """Accepted records the store held already, identical (see `FileReport.already_stored`)."""


def file_digest(path: Path) -> str:
    """sha256 of the file's bytes: the source id, which makes re-ingesting the same file a no-op."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


IGNORE_FILE = ".agent-factory-ignore"
"""In a directory given to ingest: glob patterns (one per line, `#` comments), relative to that directory, of
files that are not traces (the simulator lists its ground truth and settings there)."""

TRACE_SUFFIXES = frozenset({".json", ".jsonl", ".ndjson", ".json.gz", ".jsonl.gz", ".ndjson.gz"})
"""What a directory's trace files end with (a gzip file is decompressed as it is read: `adapters.source`)."""


def _ignored(directory: Path) -> Callable[[Path], bool]:
    patterns: dict[Path, list[str]] = {}

    def rules(d: Path) -> list[str]:
        if d not in patterns:
            f = d / IGNORE_FILE
            lines = f.read_text(encoding="utf-8").splitlines() if f.is_file() else []
            patterns[d] = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
        return patterns[d]

    def ignored(f: Path) -> bool:
        # Each directory's ignore file speaks for the files below it.
        d = f.parent
        while True:
            rel = f.relative_to(d).as_posix()
            if any(fnmatch.fnmatchcase(rel, pat) for pat in rules(d)):
                return True
            if d == directory:
                return False
            d = d.parent

    return ignored


def expand_paths(paths: Iterable[Path]) -> list[Path]:
    """Files as given, directories expanded to their trace files (`TRACE_SUFFIXES`: `.json`, `.jsonl`, `.ndjson`,
    gzipped or not; sorted; hidden files and those an `IGNORE_FILE` lists skipped)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            ignored = _ignored(p)
            out.extend(
                f for f in sorted(p.rglob("*"))
                if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts)
                and (f.suffix in TRACE_SUFFIXES or "".join(f.suffixes[-2:]) in TRACE_SUFFIXES) and not ignored(f)
            )
        elif p.exists():
            out.append(p)
        else:
            raise SpecError(f"{p}: no such file or directory")
    return out


def ingest_file(
    store: Store, path: Path, *, fmt: str | None, pack: KnowledgePack,
    on_record: Callable[[int], None] | None = None, limits: FieldLimits | None = None, workers: int = 1,
    replace: bool = False,
) -> tuple[FileReport, list[Quarantine], list[FieldCut]]:
    """Ingest one file atomically. Returns its report, its quarantined records and the fields cut. `workers`
    processes parse a large JSON-lines file (`ingest_lines`) and settle a large file's staged traces
    (`FileWriter.assemble_staged`). `replace`: an earlier version of the file (same path, other content) is
    removed first; otherwise its records stay, and this version's records under its ids are quarantined."""
    source = str(path)
    try:
        adapter: Adapter = get_adapter(fmt) if fmt else detect(path)
    except SpecError as e:
        q = Quarantine(source=source, location="file", field="format", message=str(e).removeprefix(f"{path}: "))
        return FileReport(path=source, format=fmt, status="rejected", read=1, quarantined=1), [q], []
    source_id = file_digest(path)
    earlier, replaced = _earlier_versions(store, path, source_id=source_id, replace=replace)
    if store.has_source(source_id):
        return FileReport(path=source, format=adapter.name, status="already-ingested"), [], []
    read = 0
    # Rows are committed batch by batch (one transaction per file would hold the whole file in DuckDB's
    # transaction-local state, so memory would grow with the file); the `sources` row written last is the
    # commit marker, and `Store` deletes rows of any source without one when it opens (see Store.recover).
    with store.file_writes(source_id), reading(limits or FieldLimits()) as cuts:
        w = FileWriter(store, source_id=source_id, path=source, pack=pack, workers=workers,
                       earlier=earlier)

        reported = 0

        def take(item: object) -> None:
            nonlocal read, reported
            read += item.num_rows if isinstance(item, pa.Table) else 1
            if isinstance(item, pa.Table):  # spans' staged rows, made by a worker (`ingest_lines`)
                w.stage_table(item)
            elif isinstance(item, Quarantine):
                w.reject(item)
            elif isinstance(item, Conversation):
                w.conversation(item)
            elif isinstance(item, Turn):
                w.standalone_turn(item)
            elif isinstance(item, Span):
                w.stage(item)
            elif isinstance(item, OutcomeEvent):
                w.event(item)
            if on_record is not None and read // 1000 > reported // 1000:
                on_record(read)
            reported = read

        with decoded(path) as text:  # decompressed, UTF-8 without a byte-order mark (`adapters.source`)
            _read(adapter, text, workers=workers, source_id=source_id, take=take, cuts=cuts)
        w.assemble_staged()
        w.flush()
        if read == 0:
            w.reject(Quarantine(source=source, location="file", message="no records found (empty file?)"))
            w.flush()
            read = 1
        with store.transaction():
            w.finish()
            store.set_meta("pack", pack.name)
            store.record_source(
                source_id=source_id, path=source, fmt=adapter.name, read=read, accepted=w.accepted,
                quarantined=w.quarantined, when=datetime.now(UTC),
            )
    if on_record is not None:
        on_record(read)
    report = FileReport(path=source, format=adapter.name, status="ingested", read=read, accepted=w.accepted,
                        quarantined=w.quarantined, truncated=len(cuts), pending=w.pending, already_stored=w.already,
                        replaced=replaced)
    return report, w.errors, cuts


def _earlier_versions(store: Store, path: Path, *, source_id: str, replace: bool) -> tuple[set[str], list[str]]:
    """The stored paths of earlier versions of `path` (same path, other content) that stay, and those `replace`
    removed."""
    earlier = earlier_versions(store, path, source_id=source_id)
    if not (replace and earlier):
        return {p for _, p in earlier}, []
    # This version may be stored too (read before without --replace, its records under the earlier ones' ids
    # quarantined): it is read again once they are gone.
    with store.transaction():
        drop_sources(store, [sid for sid, _ in earlier] + [source_id])
    return set(), sorted({p for _, p in earlier})


def _read(adapter: Adapter, text: Path, *, workers: int, source_id: str, take: Callable[[object], None],
          cuts: list[FieldCut]) -> None:
    """Read a file (decoded: `text`) into `take`: its lines by worker processes when that pays (`ingest_lines`),
    else with the adapter's `read`; a decoded copy cut short (`adapters.source.problem`) adds one quarantine."""
    per_line = line_reader(adapter, text, workers=workers)
    if per_line is not None:
        read_lines_in_processes(text, per_line, workers=workers, source_id=source_id, take=take, cuts=cuts)
    else:
        for item in _items(adapter, text):
            take(item)
    if (cut_short := problem(text)) is not None:
        take(Quarantine(source=shown(text), location="file", message=cut_short))


def _items(adapter: Adapter, path: Path) -> Iterator[object]:
    try:
        yield from adapter.read(path)
    except (OSError, UnicodeDecodeError) as e:
        # An adapter must turn bad data into Quarantine items; this is the backstop for I/O failures.
        yield Quarantine(source=shown(path), location="file", message=f"could not read file: {e}")


def ingest_paths(
    store: Store, paths: Iterable[Path], *, fmt: str | None = None, pack: KnowledgePack,
    on_file: Callable[[Path], None] | None = None, on_record: Callable[[int], None] | None = None,
    limits: FieldLimits | None = None, workers: int | None = None, replace: bool = False,
) -> IngestReport:
    """Ingest every file (directories expanded); the totals, the quarantined records and the fields cut.
    `workers`: processes that settle a large file's traces (None: one per core, up to 4; 1: this process)."""
    # DuckDB only appends what ingest writes and reads its staged spans once: the pages it would cache add to
    # the peak and save nothing (`INGEST_MEMORY`). Records become many small objects at once: fewer GC passes.
    with bulk_objects(), store.memory_capped(INGEST_MEMORY):
        return _ingest_paths(store, paths, fmt=fmt, pack=pack, on_file=on_file, on_record=on_record, limits=limits,
                             workers=workers if workers is not None else default_workers(), replace=replace)


def _ingest_paths(
    store: Store, paths: Iterable[Path], *, fmt: str | None, pack: KnowledgePack,
    on_file: Callable[[Path], None] | None, on_record: Callable[[int], None] | None, limits: FieldLimits | None,
    workers: int, replace: bool,
) -> IngestReport:
    files: list[FileReport] = []
    errors: list[Quarantine] = []
    truncated: list[FieldCut] = []
    hidden = 0
    for path in expand_paths(paths):
        if on_file is not None:
            on_file(path)
        report, quarantined, cuts = ingest_file(store, path, fmt=fmt, pack=pack, on_record=on_record,
                                                limits=limits, workers=workers, replace=replace)
        files.append(report)
        truncated.extend(cuts[:max(MAX_REPORTED_ERRORS - len(truncated), 0)])
        for q in quarantined:
            if len(errors) < MAX_REPORTED_ERRORS:
                errors.append(q)
            else:
                hidden += 1
        hidden += max(report.quarantined - len(quarantined), 0)
    pending = store.pending_spans()
    return IngestReport(
        read=sum(f.read for f in files), accepted=sum(f.accepted for f in files),
        quarantined=sum(f.quarantined for f in files), files=files, errors=errors, errors_not_shown=hidden,
        truncated=truncated, truncated_not_shown=sum(f.truncated for f in files) - len(truncated),
        pending_spans=pending[0], pending_traces=pending[1], already_stored=sum(f.already_stored for f in files),
    )


__all__ = ["IGNORE_FILE", "FileReport", "IngestReport", "dumps", "expand_paths", "file_digest", "ingest_file",
           "ingest_paths"]
