"""The reads and deletes of an input file's closing steps (`factory.ingest.writer`): staged spans grouped into traces,
traces shared with earlier files, client-only call groups, and the rows a rebuilt turn replaces."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from typing import Any

import pyarrow as pa

from agent_factory.adapters.model import Span
from agent_factory.factory.store.base import Store
from agent_factory.factory.store.rows import arrow_dicts, fetch_dicts, span_from_row
from agent_factory.factory.store.schema import text_length_sql

# Span text per range of staged traces that DuckDB sorts at once (`iter_staged_rows`): an eighth of the 64 MB
# that ingest lets DuckDB use, so the sort, the pages of the rows written meanwhile and the insert buffers fit.
STAGED_PART_BYTES = 8 << 20


def shared_traces(store: Store, source_id: str) -> set[str]:
    """Traces this file's staged spans share with earlier files: pending spans of another file, or a stored turn."""
    sid = [source_id]
    return {r[0] for r in store.con.execute(
        "SELECT DISTINCT s.trace_id FROM staged_spans s WHERE s.source_id = ? AND ("
        " EXISTS (SELECT 1 FROM staged_spans o WHERE o.trace_id = s.trace_id AND o.source_id <> ?)"
        " OR EXISTS (SELECT 1 FROM spans t WHERE t.trace_id = s.trace_id))", sid + sid).fetchall()}


def iter_staged_spans(store: Store, source_id: str, *, batch: int = 5000, traces: int = 20_000,
                      part_bytes: int = STAGED_PART_BYTES) -> Iterator[Span]:
    """The file's staged spans in trace order, then arrival order (`iter_staged_rows`, each span built)."""
    for rows in iter_staged_rows(store, source_id, batch=batch, traces=traces, part_bytes=part_bytes):
        for r in rows:
            yield span_from_row(r)


def iter_staged_rows(store: Store, source_id: str, *, batch: int = 5000, traces: int = 20_000,
                     part_bytes: int = STAGED_PART_BYTES) -> Iterator[list[dict[str, Any]]]:
    """The file's staged `spans` rows in trace order, then arrival order, `batch` rows at a time
    (`iter_staged_batches`, made rows here)."""
    for part in iter_staged_batches(store, source_id, batch=batch, traces=traces, part_bytes=part_bytes):
        yield arrow_dicts(part)


def iter_staged_batches(store: Store, source_id: str, *, batch: int = 5000, traces: int = 20_000,
                        part_bytes: int = STAGED_PART_BYTES) -> Iterator[pa.RecordBatch]:
    """The file's staged `spans` rows in trace order, then arrival order, as Arrow batches of at most `batch`.

    Staged rows are committed, so a cursor of its own (another connection) streams them while the store's
    connection writes the turns; Python holds one page. The spans are read a range of trace ids at a time, and
    a range holds at most `traces` traces and about `part_bytes` of span text (a trace is never cut): DuckDB
    sorts each range in memory, so ranges bounded by count alone ran out of its memory on long texts (a file of
    the default simulation under a 32 MB limit; the same count of real traces, whose prompts are far longer,
    would need gigabytes)."""
    cur = store.con.cursor()
    try:
        # Each trace's part: how far its first byte and its rank are into the file, in budgets; the sum only
        # grows along the trace order, so every part is one range of ids.
        cur.execute(
            "SELECT min(trace_id), max(trace_id) FROM ("
            " SELECT trace_id, floor((sum(b) OVER w - b) / ? + (row_number() OVER w - 1) / ?) AS part FROM ("
            f"  SELECT trace_id, sum(200 + {text_length_sql('staged_spans')}) AS b"
            "  FROM staged_spans WHERE source_id = ? GROUP BY trace_id)"
            " WINDOW w AS (ORDER BY trace_id ROWS UNBOUNDED PRECEDING))"
            " GROUP BY part ORDER BY 1", [part_bytes, traces, source_id])
        for lo, hi in cur.fetchall():
            # The range whole, as Arrow (it is bounded by text), handed on `batch` rows at a time; rows are made by
            # `arrow_dicts` (DuckDB builds each timestamp through its zone). Not a streaming reader: one left open
            # kept its transaction while the turns were written, and the store grew by a quarter in blocks no
            # checkpoint could free.
            rows = cur.sql("SELECT * FROM staged_spans WHERE source_id = ? AND trace_id BETWEEN ? AND ?"
                           " ORDER BY trace_id, seq", params=[source_id, lo, hi]).to_arrow_table()
            for part in rows.to_batches(max_chunksize=batch):
                if part.num_rows:
                    yield part
    finally:
        cur.close()


def trace_elsewhere(store: Store, trace_id: str, *, source_id: str) -> tuple[list[Span], list[tuple[str | None, Span]]]:
    """The trace's spans held outside this file: other files' pending (staged) spans, and the spans of stored
    turns with the id of the turn each belongs to."""
    cur = store.con.cursor()
    cur.execute("SELECT * FROM staged_spans WHERE trace_id = ? AND source_id <> ? ORDER BY seq", [trace_id, source_id])
    pending = [span_from_row(r) for r in fetch_dicts(cur)]
    cur.execute("SELECT * FROM spans WHERE trace_id = ? ORDER BY seq", [trace_id])
    stored = [(r["turn_id"], span_from_row(r)) for r in fetch_dicts(cur)]
    cur.close()
    return pending, stored


def turn_attributes(store: Store, turn_id: str) -> dict[str, Any] | None:
    """A stored turn's attributes; None when there is no such turn."""
    row = store.con.execute("SELECT attributes FROM turns WHERE id = ?", [turn_id]).fetchone()
    return json.loads(row[0]) if row else None


def call_group_spans(store: Store, keys: Collection[str]) -> tuple[list[str], list[Span]]:
    """The stored turns of the client-only call groups `keys`, and their spans (by turn, then seq)."""
    cur = store.con.cursor()
    cur.execute("SELECT id FROM turns WHERE json_extract_string(attributes, '$.call_group') IN (SELECT unnest(?))",
                [sorted(keys)])
    turn_ids = [r[0] for r in cur.fetchall()]
    cur.execute("SELECT * FROM spans WHERE turn_id IN (SELECT unnest(?)) ORDER BY turn_id, seq", [turn_ids])
    spans = [span_from_row(r) for r in fetch_dicts(cur)]
    cur.close()
    return turn_ids, spans


def delete_turns(store: Store, turn_ids: Collection[str]) -> None:
    """Delete stored turns with their provenance and spans (a file rebuilds them)."""
    ids = sorted(turn_ids)
    for table, col in (("turns", "id"), ("provenance", "turn_id"), ("spans", "turn_id")):
        store.con.execute(f"DELETE FROM {table} WHERE {col} IN (SELECT unnest(?))", [ids])


def consume_staged(store: Store, *, source_id: str, joined: Collection[str], keep: Collection[tuple[str, str]]) -> None:
    """Remove the staging rows a file consumed: its own and those of the traces `joined` from other files,
    except the (trace id, span id) pairs in `keep` (orphans, still pending)."""
    keep_t = pa.table({"trace_id": [k[0] for k in keep], "id": [k[1] for k in keep]},  # noqa: F841 - scanned below
                      schema=pa.schema([("trace_id", pa.string()), ("id", pa.string())]))
    store.con.execute("DELETE FROM staged_spans s WHERE (s.source_id = ? OR s.trace_id IN (SELECT unnest(?)))"
                      " AND NOT EXISTS (SELECT 1 FROM keep_t k WHERE k.trace_id = s.trace_id AND k.id = s.id)",
                      [source_id, sorted(joined)])
