"""Ingest: sources -> adapter stream -> provenance -> store, one atomic transaction per source.

A source (`adapters.source`: a file, bytes, a request body; a directory expands into its files' sources) is
first opened (`open_source`: its digest, its adapter, what the store holds of it), then its items are read into
the store (`ingest_items`). Spans that arrive on their own (OTel formats) are staged and grouped into turns per
trace after the source is read (`factory.ingest.writer`), so memory is bounded by the largest trace, not by the
source; spans whose parent is in no source read so far stay staged until it arrives.

Every quarantine the report counts is in the store: a source no adapter reads is stored as its one quarantined
record (`location` `file`, `field` `format`) under a `sources` row that names no format.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import pyarrow as pa
from pydantic import Field

from agent_factory.adapters.base import READS_SOURCES, Adapter, Quarantine, detect, get_adapter
from agent_factory.adapters.jsonio import FieldCut, FieldLimits, reading
from agent_factory.adapters.model import Conversation, OutcomeEvent, Span, Turn
from agent_factory.adapters.source import FileSource, Source, noting_problems, problem
from agent_factory.errors import SpecError
from agent_factory.factory.executors.process import default_workers
from agent_factory.factory.ingest.lines import line_reader, read_lines_in_processes
from agent_factory.factory.ingest.sources import IGNORE_FILE, TRACE_SUFFIXES, Given, expand_paths, expand_sources
from agent_factory.factory.ingest.writer import MAX_REPORTED_ERRORS, FileWriter
from agent_factory.factory.store import Store, dumps
from agent_factory.factory.store.claims import drop_sources, earlier_versions, refused_source
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
    return FileSource(path=path).digest()


@dataclass(frozen=True)
class Opened:
    """A source open for ingest (`open_source`): the adapter that reads it, and what the store knows of it."""

    source: Source
    adapter: Adapter
    source_id: str
    """The digest of its bytes, the key of every row it writes."""
    earlier: set[str]
    """Stored ids (paths) of earlier versions of it that stay (`_earlier_versions`)."""
    replaced: list[str]
    """Stored ids of earlier versions `replace` removed."""


Outcome = tuple[FileReport, list[Quarantine], list[FieldCut]]
"""What ingest did with one source: its report, its quarantined records (redacted, as stored), the fields cut."""


def open_source(store: Store, source: Source, *, fmt: str | None, pack: KnowledgePack,
                replace: bool = False) -> Opened | Outcome:
    """Open `source` for ingest: its digest, its adapter (the source's format, else `fmt`, else sniffed), the
    earlier versions the store holds. The outcome instead when there is nothing to read: the same bytes are
    stored already, or no adapter reads them (then the refusal is stored as the source's one quarantined record,
    so the counts printed are the counts stored, and the same bytes are not refused twice)."""
    source_id = source.digest()
    name = source.format or fmt
    try:
        adapter: Adapter = get_adapter(name) if name else detect(source)
    except SpecError as e:
        if store.has_source(source_id):  # read or refused before: the same bytes tell nothing new
            return FileReport(path=source.id, format=None, status="already-ingested"), [], []
        q = Quarantine(source=source.id, location="file", field="format",
                       message=str(e).removeprefix(f"{source.id}: "))
        return _refuse(store, source, source_id=source_id, why=q, pack=pack)
    earlier, replaced = _earlier_versions(store, Path(source.id), source_id=source_id, replace=replace)
    if store.has_source(source_id):
        if not refused_source(store, source_id):
            return FileReport(path=source.id, format=adapter.name, status="already-ingested"), [], []
        with store.transaction():  # refused before, readable now (a format given, an adapter installed)
            drop_sources(store, [source_id])
    return Opened(source=source, adapter=adapter, source_id=source_id, earlier=earlier, replaced=replaced)


def _refuse(store: Store, source: Source, *, source_id: str, why: Quarantine, pack: KnowledgePack) -> Outcome:
    """Store a source no adapter reads as one quarantined record (redacted as any), under a `sources` row that
    names no format."""
    with store.file_writes(source_id):
        w = FileWriter(store, source_id=source_id, path=source.id, pack=pack)
        w.reject(why)
        w.flush()
        with store.transaction():
            w.finish()
            store.record_source(source_id=source_id, path=source.id, fmt=None, read=1, accepted=0, quarantined=1,
                                when=datetime.now(UTC))
    report = FileReport(path=source.id, format=None, status="rejected", read=1, quarantined=1)
    return report, w.errors, []


def ingest_items(
    store: Store, opened: Opened, *, pack: KnowledgePack, on_record: Callable[[int], None] | None = None,
    limits: FieldLimits | None = None, workers: int = 1,
) -> Outcome:
    """Read an opened source's items into the store, atomically. `workers` processes parse a large JSON-lines
    source (`ingest.lines`) and settle a large source's staged traces (`FileWriter.assemble_staged`)."""
    source, adapter, source_id = opened.source, opened.adapter, opened.source_id
    read = 0
    # Rows are committed batch by batch (one transaction per file would hold the whole file in DuckDB's
    # transaction-local state, so memory would grow with the file); the `sources` row written last is the
    # commit marker, and `Store` deletes rows of any source without one when it opens (see Store.recover).
    with store.file_writes(source_id), reading(limits or FieldLimits()) as cuts:
        w = FileWriter(store, source_id=source_id, path=source.id, pack=pack, workers=workers,
                       earlier=opened.earlier)

        reported = 0

        def take(item: object) -> None:
            nonlocal read, reported
            read += item.num_rows if isinstance(item, pa.Table) else 1
            if isinstance(item, pa.Table):  # spans' staged rows, made by a worker (`ingest.lines`)
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

        _read(adapter, source, workers=workers, source_id=source_id, take=take, cuts=cuts)
        w.assemble_staged()
        w.flush()
        if read == 0:
            w.reject(Quarantine(source=source.id, location="file", message="no records found (empty file?)"))
            w.flush()
            read = 1
        with store.transaction():
            w.finish()
            store.set_meta("pack", pack.name)
            store.record_source(
                source_id=source_id, path=source.id, fmt=adapter.name, read=read, accepted=w.accepted,
                quarantined=w.quarantined, when=datetime.now(UTC),
            )
    if on_record is not None:
        on_record(read)
    report = FileReport(path=source.id, format=adapter.name, status="ingested", read=read, accepted=w.accepted,
                        quarantined=w.quarantined, truncated=len(cuts), pending=w.pending, already_stored=w.already,
                        replaced=opened.replaced)
    return report, w.errors, cuts


def ingest_source(
    store: Store, source: Source, *, fmt: str | None = None, pack: KnowledgePack,
    on_record: Callable[[int], None] | None = None, limits: FieldLimits | None = None, workers: int = 1,
    replace: bool = False,
) -> Outcome:
    """Ingest one source atomically (`open_source`, then `ingest_items`). `replace`: an earlier version of it
    (same id, other content) is removed first; otherwise its records stay, and this version's records under
    their ids are quarantined."""
    opened = open_source(store, source, fmt=fmt, pack=pack, replace=replace)
    if not isinstance(opened, Opened):
        return opened
    return ingest_items(store, opened, pack=pack, on_record=on_record, limits=limits, workers=workers)


def ingest_file(
    store: Store, path: Path, *, fmt: str | None, pack: KnowledgePack,
    on_record: Callable[[int], None] | None = None, limits: FieldLimits | None = None, workers: int = 1,
    replace: bool = False,
) -> Outcome:
    """Ingest one file atomically (`ingest_source` of its `FileSource`)."""
    return ingest_source(store, FileSource(path=path), fmt=fmt, pack=pack, on_record=on_record, limits=limits,
                         workers=workers, replace=replace)


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


def _read(adapter: Adapter, source: Source, *, workers: int, source_id: str, take: Callable[[object], None],
          cuts: list[FieldCut]) -> None:
    """Read a source into `take`, decoded (`adapters.decoding`): its lines by worker processes when that pays
    (`ingest.lines`), else with the adapter's `read`; content whose decoding stopped early (a gzip stream cut
    short) adds one quarantine saying so, after its records. An adapter written for `read(path)` (no
    `READS_SOURCES`) reads a decoded file, as every adapter did before sources."""
    if getattr(adapter, READS_SOURCES, False):
        with noting_problems() as problems:
            _read_decoded(adapter, source, workers=workers, source_id=source_id, take=take, cuts=cuts)
        cut_short = problems[0] if problems else None
    else:
        with source.decoded() as text:
            _read_decoded(adapter, FileSource(path=text), workers=workers, source_id=source_id, take=take,
                          cuts=cuts, path=text)
            cut_short = problem(text)
    if cut_short is not None:
        take(Quarantine(source=source.id, location="file", message=cut_short))


def _read_decoded(adapter: Adapter, source: Source, *, workers: int, source_id: str,
                  take: Callable[[object], None], cuts: list[FieldCut], path: Path | None = None) -> None:
    """`_read` but the note of a decoding problem. `path`: the decoded file an adapter written for paths reads."""
    per_line = line_reader(adapter, source, workers=workers) if path is None else None
    if per_line is not None:
        read_lines_in_processes(source, per_line, workers=workers, source_id=source_id, take=take, cuts=cuts)
    else:
        for item in _items(adapter, source, path=path):
            take(item)


def _items(adapter: Adapter, source: Source, *, path: Path | None) -> Iterator[object]:
    try:
        # An adapter written for `read(path)` is given the decoded file it was written for.
        yield from adapter.read(cast(Source, path) if path is not None else source)
    except (OSError, UnicodeDecodeError) as e:
        # An adapter must turn bad data into Quarantine items; this is the backstop for I/O failures.
        yield Quarantine(source=source.id, location="file", message=f"could not read file: {e}")


def ingest_paths(
    store: Store, paths: Iterable[Path], *, fmt: str | None = None, pack: KnowledgePack,
    on_file: Callable[[Path], None] | None = None, on_record: Callable[[int], None] | None = None,
    limits: FieldLimits | None = None, workers: int | None = None, replace: bool = False,
) -> IngestReport:
    """Ingest every file (directories expanded: `expand_paths`): `ingest_sources` of their file sources."""
    files = [FileSource(path=p) for p in expand_paths(paths)]
    on_source = None if on_file is None else _on_file(on_file)
    return ingest_sources(store, files, fmt=fmt, pack=pack, on_source=on_source, on_record=on_record,
                          limits=limits, workers=workers, replace=replace)


def _on_file(on_file: Callable[[Path], None]) -> Callable[[Source], None]:
    return lambda s: on_file(s.path if isinstance(s, FileSource) else Path(s.id))


def ingest_sources(
    store: Store, sources: Iterable[Given], *, fmt: str | None = None, pack: KnowledgePack,
    on_source: Callable[[Source], None] | None = None, on_record: Callable[[int], None] | None = None,
    limits: FieldLimits | None = None, workers: int | None = None, replace: bool = False,
) -> IngestReport:
    """Ingest every source (directories and paths expanded first: `expand_sources`), each atomically; the
    totals, the quarantined records and the fields cut. `fmt`: the adapter of sources that name none (None:
    sniffed). `workers`: processes that settle a large source's traces (None: one per core, up to 4; 1: this
    process)."""
    expanded = expand_sources(sources)  # a missing path fails here, before anything is written
    # DuckDB only appends what ingest writes and reads its staged spans once: the pages it would cache add to
    # the peak and save nothing (`INGEST_MEMORY`). Records become many small objects at once: fewer GC passes.
    with bulk_objects(), store.memory_capped(INGEST_MEMORY):
        return _ingest_sources(store, expanded, fmt=fmt, pack=pack, on_source=on_source, on_record=on_record,
                               limits=limits, workers=workers if workers is not None else default_workers(),
                               replace=replace)


def _ingest_sources(
    store: Store, sources: list[Source], *, fmt: str | None, pack: KnowledgePack,
    on_source: Callable[[Source], None] | None, on_record: Callable[[int], None] | None,
    limits: FieldLimits | None, workers: int, replace: bool,
) -> IngestReport:
    files: list[FileReport] = []
    errors: list[Quarantine] = []
    truncated: list[FieldCut] = []
    hidden = 0
    for source in sources:
        if on_source is not None:
            on_source(source)
        report, quarantined, cuts = ingest_source(store, source, fmt=fmt, pack=pack, on_record=on_record,
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


__all__ = ["IGNORE_FILE", "TRACE_SUFFIXES", "FileReport", "IngestReport", "Opened", "Outcome", "dumps",
           "expand_paths", "file_digest", "ingest_file", "ingest_items", "ingest_paths", "ingest_source",
           "ingest_sources", "open_source"]
