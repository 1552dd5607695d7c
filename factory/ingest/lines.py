"""A large JSON-lines file read by worker processes: its lines parsed in parallel, its items taken in here in order.

Reading an OTLP export is mostly parsing: one JSON line, its spans built and checked, each span's staged row
made. Lines do not depend on each other for an adapter that reads them one at a time (`LineAdapter`), so this
process cuts the file into chunks of raw lines (`CHUNK_BYTES`), forked workers read each chunk as the adapter's
`read` would (`jsonio.json_line`, then `line_items`), spans come back as an Arrow table of their `staged_spans`
rows (this process appends it; it handles no span), and `take` gets every other item here in file order, then
the chunk's spans, with the fields cut on the way. Spans are staged apart from the other items, so what is
staged, quarantined and reported is what reading the file in this process gives, each kind in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from agent_factory.adapters.base import Adapter, AdapterItem, LineAdapter, LineItems, Quarantine
from agent_factory.adapters.jsonio import FieldCut, Hinted, current_limits, iter_lines, json_line, reading
from agent_factory.adapters.model import Span
from agent_factory.adapters.source import Source
from agent_factory.factory.executors.process import ProcessExecutor, can_fork
from agent_factory.factory.store import span_row
from agent_factory.factory.store.rows import arrow_rows

MIN_BYTES_FOR_WORKERS = 8 << 20
"""Files from this size are parsed by worker processes (when there are workers): below it, forking costs more
than it saves."""
CHUNK_BYTES = 1 << 20
"""Raw bytes of whole lines per chunk a worker reads."""

StagedRow = dict[str, Any]
"""A span as its `staged_spans` row, `seq` still to be set (by arrival order, here)."""
_Lines = list[tuple[int, bytes]]
_Read = tuple[list[AdapterItem], pa.Table, list[FieldCut]]
"""A chunk read: its items but spans, in file order; its spans' `staged_spans` rows (`seq` still to be set); the
fields cut."""


def line_reader(adapter: Adapter, source: Source, *, workers: int) -> LineItems | None:
    """How workers would read `source`'s lines, if they should: a line-by-line adapter, a source large enough
    (decoded), more than one worker, and a system that forks; None otherwise (the adapter's `read` here)."""
    if workers < 2 or not isinstance(adapter, LineAdapter) or not can_fork():
        return None
    try:
        if source.size_hint() < MIN_BYTES_FOR_WORKERS:
            return None
    except OSError:
        return None  # `read` reports it as the one-process path does
    return adapter.line_items(source)


def read_lines_in_processes(src: Source, per_line: LineItems, *, workers: int, source_id: str,
                            take: Callable[[AdapterItem | pa.Table], None], cuts: list[FieldCut]) -> None:
    """Read `src` (decoded) with `per_line` in `workers` processes; `take` gets each item but spans in order, and
    each chunk's spans as a table of their `staged_spans` rows (made by the worker) after its other items; `cuts`
    the fields cut. A source that cannot be read to its end ends with one `Quarantine`, as `read`."""
    source = src.id
    limits = current_limits()
    failed: list[OSError] = []
    hinted = Hinted(src)

    def work(lines: _Lines) -> _Read:
        out: list[AdapterItem] = []
        staged: list[StagedRow] = []
        with reading(limits) as cut:
            for lineno, raw in lines:
                parsed = json_line(raw, lineno=lineno, source=source)
                if parsed is None:
                    continue
                if isinstance(parsed, Quarantine):
                    out.append(hinted(parsed))
                    continue
                for item in per_line(*parsed):
                    if isinstance(item, Span):
                        staged.append(span_row(item, seq=0, source_id=source_id))
                    else:
                        out.append(item)
        return out, arrow_rows("staged_spans", staged), list(cut)

    def sink(done: _Read) -> None:
        items, staged, cut = done
        cuts.extend(cut)
        # Spans and the other items are written to tables of their own, each kind in file order.
        for item in items:
            take(item)
        take(staged)

    executor: ProcessExecutor[_Lines, _Read] = ProcessExecutor(workers=workers)
    executor.run(_chunks(src, failed), work=work, sink=sink)
    if failed:
        take(Quarantine(source=source, location="file", message=f"could not read file: {failed[0]}"))


def _chunks(src: Source, failed: list[OSError]) -> Iterator[tuple[_Lines, int]]:
    """Whole lines with their numbers (as `iter_lines` ends and numbers them), about `CHUNK_BYTES` at a time; an
    I/O error ends them (kept in `failed`)."""
    chunk: _Lines = []
    size = 0
    try:
        with src.open_text() as f:
            for lineno, raw in iter_lines(f):
                chunk.append((lineno, raw))
                size += len(raw)
                if size >= CHUNK_BYTES:
                    yield chunk, len(chunk)
                    chunk, size = [], 0
    except OSError as e:
        failed.append(e)
    if chunk:
        yield chunk, len(chunk)
