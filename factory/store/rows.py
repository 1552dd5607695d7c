"""Rows of the store's tables: the row of each record, the record of a row, and `Batch`, the Arrow appender
every bulk write goes through (row-at-a-time inserts would dominate ingest time)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, cast

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agent_factory.adapters.jsonio import loads
from agent_factory.adapters.model import Conversation, OutcomeEvent, Span, TokenUsage, Turn
from agent_factory.evaluators.provenance.record import attach_record
from agent_factory.factory.store.schema import REPLACE_ON_CONFLICT, SPAN_COLUMNS, TABLES, TEXT_COLUMNS, VECTOR_ROWS

if TYPE_CHECKING:
    from agent_factory.factory.store.base import Store


def dumps(value: Any) -> str:
    """Canonical JSON for stored attribute maps (sorted keys, so equal content is equal bytes)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def span_row(span: Span, *, seq: int, source_id: str, turn_id: str | None = None) -> dict[str, Any]:
    """The `spans` row of a span."""
    t = span.tokens
    return {
        "trace_id": span.trace_id, "id": span.id, "parent_id": span.parent_id, "seq": seq, "kind": span.kind,
        "name": span.name, "input": span.input, "output": span.output, "status": span.status,
        "error": span.error, "start_time": span.start, "end_time": span.end, "duration_ms": span.duration_ms,
        "model": span.model, "tokens_in": t.input if t else None, "tokens_out": t.output if t else None,
        "tokens_total": t.total if t else None, "attributes": dumps(span.attributes), "source_id": source_id,
        "turn_id": turn_id,
    }


def turn_row(turn: Turn, *, segment: str, source_id: str) -> dict[str, Any]:
    """The `turns` row of a turn."""
    return {
        "id": turn.id, "conversation_id": turn.conversation_id, "user_id": turn.user_id, "idx": turn.index,
        "request": turn.request, "answer": turn.answer, "mode": turn.mode, "delivery": turn.delivery,
        "start_time": turn.start, "end_time": turn.end, "latency_ms": turn.latency_ms,
        "n_spans": len(turn.spans), "attributes": dumps(turn.attributes), "segment": segment,
        "source_id": source_id,
    }


def conversation_row(conv: Conversation, *, source_id: str, digest: str | None = None) -> dict[str, Any]:
    """The `conversations` row of a conversation (`digest`: the record's, `factory.identity`)."""
    return {"id": conv.id, "user_id": conv.user_id, "attributes": dumps(conv.attributes), "source_id": source_id,
            "digest": digest}


def event_row(ev: OutcomeEvent, *, source_id: str) -> dict[str, Any]:
    """The `events` row of an outcome event."""
    return {
        "id": ev.id, "kind": ev.kind, "user_id": ev.user_id, "conversation_id": ev.conversation_id,
        "time": ev.time, "value": dumps(ev.value), "attributes": dumps(ev.attributes), "source_id": source_id,
    }


def span_from_row(row: dict[str, Any]) -> Span:
    """The span a `spans` row holds."""
    tokens = None
    if any(row[k] is not None for k in ("tokens_in", "tokens_out", "tokens_total")):
        tokens = TokenUsage(input=row["tokens_in"], output=row["tokens_out"], total=row["tokens_total"])
    return Span(
        id=row["id"], trace_id=row["trace_id"], parent_id=row["parent_id"], kind=row["kind"], name=row["name"],
        input=row["input"], output=row["output"], status=row["status"], error=row["error"],
        start=row["start_time"], end=row["end_time"], duration_ms=row["duration_ms"], model=row["model"],
        tokens=tokens, attributes=loads(row["attributes"]),
    )


def turn_from_row(r: dict[str, Any], spans: tuple[Span, ...]) -> Turn:
    """The turn a `turns` row holds, with its spans."""
    return Turn(
        id=r["id"], conversation_id=r["conversation_id"], user_id=r["user_id"], index=r["idx"],
        request=r["request"], answer=r["answer"], mode=r["mode"], delivery=r["delivery"],
        start=r["start_time"], end=r["end_time"], latency_ms=r["latency_ms"],
        spans=spans, attributes=loads(r["attributes"]),
    )


TurnRows = tuple[dict[str, Any], list[dict[str, Any]]]
"""A stored turn as `Store.iter_turn_rows` reads it: its `turns` row (with `segment` and the provenance
`record` ingest stored for it as `provenance_record`) and its `spans` rows in order."""


def bucket_rows(turns: pa.Table, spans: pa.Table) -> list[TurnRows]:
    """Turns read as Arrow (`store.buckets`) as the rows `Store.iter_turn_rows` gives: each `turns` row with its
    `spans` rows (`spans` in turn then `seq` order; pure)."""
    by_turn: dict[str, list[dict[str, Any]]] = {}
    for row in arrow_dicts(spans):
        by_turn.setdefault(str(row["turn_id"]), []).append(row)
    return [(row, by_turn.get(str(row["id"]), [])) for row in arrow_dicts(turns)]


def turns_from_rows(rows: Iterable[TurnRows]) -> Iterator[tuple[Turn, str]]:
    """Each stored turn built from its rows, with its traffic segment (pure: a worker process builds them)."""
    for r, spans in rows:
        turn = turn_from_row(r, tuple(span_from_row(s) for s in spans))
        if r["provenance_record"] is not None:
            attach_record(turn, r["provenance_record"])
        yield turn, r["segment"]


def event_from_row(row: dict[str, Any]) -> OutcomeEvent:
    """The outcome event an `events` row holds."""
    return OutcomeEvent(
        id=row["id"], kind=row["kind"], user_id=row["user_id"], conversation_id=row["conversation_id"],
        time=row["time"], value=json.loads(row["value"]), attributes=loads(row["attributes"]),
    )


_UTC_ZONES = frozenset({"UTC", "Etc/UTC", "+00:00", "Z"})
"""Time zones of a timestamp column whose values `_times` builds by adding to the epoch: fixed at offset 0, so
the sum is the instant (a zone with daylight saving would add wall-clock time). The store's session is UTC."""
_MIN_US = int((datetime.min - datetime(1970, 1, 1)) / timedelta(microseconds=1))
_MAX_US = int((datetime.max - datetime(1970, 1, 1)) / timedelta(microseconds=1))


def _times(col: pa.ChunkedArray[Any] | pa.Array[Any]) -> list[Any]:
    """A column's values as `to_pylist` gives them; a timestamp column of microseconds in UTC (what DuckDB
    gives) built as the epoch plus a timedelta: pyarrow builds each value through its zone, 6.6 us a value, a
    fifth of reading the default simulation's stored turns back. The epoch is pyarrow's own (its zone object),
    so the values are those `to_pylist` makes, tzinfo included."""
    t = col.type
    if not (pa.types.is_timestamp(t) and t.unit == "us" and (t.tz is None or t.tz in _UTC_ZONES)):
        return col.to_pylist()
    us = pc.cast(col, pa.int64())
    lo, hi = pc.min_max(us).values()
    if lo.is_valid and (lo.as_py() < _MIN_US or hi.as_py() > _MAX_US):
        return col.to_pylist()  # out of datetime's range: to_pylist says what it says of them
    epoch = cast(datetime, pa.scalar(0, type=t).as_py())  # the stubs type it an int
    one = timedelta(microseconds=1)
    return [None if v is None else epoch + v * one for v in us.to_pylist()]


def arrow_dicts(table: pa.Table | pa.RecordBatch) -> list[dict[str, Any]]:
    """An Arrow table's rows as dicts by column name, equal to `table.to_pylist()` (column by column, and the
    timestamps by `_times`: together about a sixth of its time)."""
    names = table.column_names
    cols = [_times(table.column(i)) for i in range(table.num_columns)]
    return [dict(zip(names, r, strict=True)) for r in zip(*cols, strict=True)]


def fetch_dicts(cur: duckdb.DuckDBPyConnection, *, batch: int | None = None) -> list[dict[str, Any]]:
    """The rows of an executed cursor as dicts by column name (all of them, or the next `batch`)."""
    names = [d[0] for d in cur.description]
    rows = cur.fetchall() if batch is None else cur.fetchmany(batch)
    return [dict(zip(names, r, strict=True)) for r in rows]


def arrow_rows(table: str, rows: list[dict[str, Any]]) -> pa.Table:
    """`rows` of a store table as an Arrow table of its declared schema (what appends scan by name)."""
    columns = TABLES[table][0] if table in TABLES else SPAN_COLUMNS
    return pa.Table.from_pylist(rows, schema=pa.schema([(name, typ) for name, (_, typ) in columns.items()]))


def one_per_key(table: pa.Table, keys: tuple[str, ...], *, last: bool = True) -> pa.Table:
    """`table` with one row per key (the columns `keys`): the last of each (or, `last=False`, the first), in
    table order (pure)."""
    join: Any = pc.binary_join_element_wise  # its stubs take no separator after the arrays
    key = (table[keys[0]] if len(keys) == 1
           else join(*(pc.cast(table[c], pa.string()) for c in keys), "\x1f"))
    if pc.count_distinct(key).as_py() == table.num_rows:
        return table
    how: Literal["max", "min"] = "max" if last else "min"
    kept = pa.table({"k": key, "i": pa.array(np.arange(table.num_rows))}).group_by("k").aggregate([("i", how)])
    rows = kept[f"i_{how}"]
    return table.take(rows.take(pc.sort_indices(rows)))


BATCH_BYTES = 16 << 20
"""Text a `Batch` holds before it flushes, whatever its count of rows: DuckDB keeps an append's strings in its
memory until they are written, and 4,000 spans of 60 kB prompts (260 MB) ran ingest out of its 128 MB."""


def table_text(table: pa.Table | pa.RecordBatch, columns: tuple[str, ...]) -> np.ndarray:
    """`text_bytes` of every row of an Arrow table (int64 numpy; pure)."""
    total = np.zeros(table.num_rows, dtype=np.int64)
    length: Any = pc.utf8_length  # its stubs take string arrays only; a column of the table's schema is one
    for c in columns:
        if c in table.column_names:
            total += np.asarray(pc.fill_null(length(table.column(c)), 0), dtype=np.int64)
    return total


def text_bytes(row: dict[str, Any], columns: tuple[str, ...]) -> int:
    """The characters of a row's text columns (`TEXT_COLUMNS`): the part of its size that the input decides."""
    return sum(len(v) for c in columns if isinstance(v := row.get(c), str))


class Batch:
    """Rows waiting to be appended to one table (or tables of them made elsewhere: a worker's), flushed as one
    Arrow table once it holds `size` rows or `max_bytes` of text."""

    def __init__(self, store: Store, table: str, *, size: int = 20_000, max_bytes: int = BATCH_BYTES) -> None:
        self.store, self.con, self.table, self.size, self.max_bytes = store, store.con, table, size, max_bytes
        self.rows: list[dict[str, Any]] = []
        self.tables: list[pa.Table] = []
        self.table_rows = 0
        self.bytes = 0
        self._text = TEXT_COLUMNS.get(table, ())
        # The text of each run of VECTOR_ROWS rows, in the order they are written (DuckDB's vectors of them):
        # the widest goes to `Store.fit_vector` before the rows are appended.
        self._vector = self._vector_rows = self._widest = 0
        self._repeats = False  # whether a table queued may hold a key twice
        self.fresh = False
        """Whether no stored row can share a key with the rows queued from now on (`append_arrow`'s `fresh`)."""

    def add(self, row: dict[str, Any]) -> None:
        """Queue a row; flush once the batch is full."""
        self.rows.append(row)
        b = text_bytes(row, self._text)
        self.bytes += b
        self._vector += b
        self._vector_rows += 1
        if self._vector_rows == VECTOR_ROWS:
            self._widest = max(self._widest, self._vector)
            self._vector = self._vector_rows = 0
        if len(self.rows) + self.table_rows >= self.size or self.bytes >= self.max_bytes:
            self.flush()

    def add_table(self, table: pa.Table, *, unique: bool = False) -> None:
        """Queue rows already made a table of this table's schema (`arrow_rows`: a worker's); flush once the
        batch is full. Its text is counted as `add` counts rows' (`table_text`), vector by vector. `unique`: the
        caller made it one row per key (`one_per_key`), so a batch of it alone is not searched for repeats."""
        # Cut where `add` would flush: the same appends whichever way rows come (appends of other sizes left the
        # store a quarter larger in blocks no checkpoint freed: 1x ingest by workers, 26.7 MiB against 20.7).
        while 0 < (room := self.size - len(self.rows) - self.table_rows) < table.num_rows:
            self._queue_table(table.slice(0, room), unique=unique)
            table = table.slice(room)
        self._queue_table(table, unique=unique)

    def _queue_table(self, table: pa.Table, *, unique: bool) -> None:
        if not table.num_rows:
            return
        if self.rows:  # the rows queued before it come before it
            queued = self._rows_table()
            self.tables.append(queued)
            self.table_rows += queued.num_rows
        self._repeats = self._repeats or not unique
        self.tables.append(table)
        self.table_rows += table.num_rows
        lengths = table_text(table, self._text)
        self.bytes += int(lengths.sum())
        self._count_vectors(lengths)
        if self.table_rows >= self.size or self.bytes >= self.max_bytes:
            self.flush()

    def _count_vectors(self, lengths: np.ndarray) -> None:
        """Count rows' text into DuckDB's vectors of VECTOR_ROWS rows, in the order they are written: as `add`
        counts them one at a time."""
        take = min(VECTOR_ROWS - self._vector_rows, len(lengths))
        self._vector += int(lengths[:take].sum())
        self._vector_rows += take
        if self._vector_rows == VECTOR_ROWS:
            self._widest = max(self._widest, self._vector)
            self._vector = self._vector_rows = 0
        rest = lengths[take:]
        full = len(rest) // VECTOR_ROWS
        if full:
            self._widest = max(self._widest, int(rest[:full * VECTOR_ROWS].reshape(full, VECTOR_ROWS).sum(1).max()))
        tail = rest[full * VECTOR_ROWS:]
        self._vector += int(tail.sum())
        self._vector_rows += len(tail)

    def _rows_table(self) -> pa.Table:
        keys = TABLES[self.table][1] if self.table in TABLES else ()
        rows = self.rows
        if keys:
            # One row per key within the batch: the last (replace) or the first (keep) written.
            unique: dict[tuple[Any, ...], dict[str, Any]] = {}
            replace = self.table in REPLACE_ON_CONFLICT
            for r in rows:
                k = tuple(r[c] for c in keys)
                if replace or k not in unique:
                    unique[k] = r
            rows = list(unique.values())
        self.rows = []
        return arrow_rows(self.table, rows)

    def flush(self) -> None:
        """Append the queued rows and empty the batch (on a key conflict: keep or replace, as the table says)."""
        tables, self.tables, self.bytes = self.tables, [], 0
        self.store.fit_vector(max(self._widest, self._vector))
        self._widest = 0
        if self.rows:
            tables.append(self._rows_table())
        if not tables:
            return
        keys = TABLES[self.table][1] if self.table in TABLES else ()
        # One table made here (`_rows_table`) or said unique holds one row per key already.
        repeats, self._repeats, self.table_rows = len(tables) > 1 or self._repeats, False, 0
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        if keys and repeats:
            table = one_per_key(table, keys, last=self.table in REPLACE_ON_CONFLICT)
        append_arrow(self.con, self.table, table, fresh=self.fresh)


def append_arrow(con: duckdb.DuckDBPyConnection, table: str, arrow: pa.Table, *, fresh: bool = False) -> None:
    """Append an Arrow table of `table`'s schema whose keys are unique (on a key conflict with stored rows: keep
    or replace, as the table says). `fresh`: the caller knows no stored row shares a key with these (a run that
    emptied the data of every unit it writes), so the stored rows are not searched for conflicts: that search
    scans the whole table at each append (a fifth of the writing process's time in a first run at 10x the
    default simulation)."""
    keys = TABLES[table][1] if table in TABLES else ()
    if not keys or fresh:
        con.execute(f"INSERT INTO {table} SELECT * FROM arrow")
        return
    match = " AND ".join(f"t.{k} = b.{k}" for k in keys)
    if table in REPLACE_ON_CONFLICT:
        con.execute(f"DELETE FROM {table} t WHERE EXISTS (SELECT 1 FROM arrow b WHERE {match})")
        con.execute(f"INSERT INTO {table} SELECT * FROM arrow")
    else:
        # The rows whose keys are stored are found first, and the others appended as they are: inserted through
        # the search of the stored rows (a hash join, built on the smaller side once the table outgrows the
        # batch), they came in its hash table's order.
        ordered = arrow.append_column("__order", pa.array(np.arange(arrow.num_rows)))  # noqa: F841 - read by SQL
        stored = con.execute(f"SELECT b.__order FROM ordered b WHERE EXISTS (SELECT 1 FROM {table} t WHERE {match})"
                             ).fetchnumpy()["__order"]
        if len(stored):
            keep = np.ones(arrow.num_rows, dtype=bool)
            keep[np.asarray(stored, dtype=np.int64)] = False
            arrow = arrow.filter(pa.array(keep))
        con.execute(f"INSERT INTO {table} SELECT * FROM arrow")
