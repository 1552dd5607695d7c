"""The embedded store: one DuckDB file holding units of all four layers, provenance and quarantined records.

Writes go through `Store.file_transaction`, one transaction per input file, so a crash mid-file leaves
nothing of that file behind (DuckDB does not replay an uncommitted transaction from its WAL). Rows are
appended in Arrow batches: row-at-a-time inserts would dominate ingest time.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import duckdb
import pyarrow as pa

from agent_factory.adapters.model import Conversation, OutcomeEvent, Span, TokenUsage, Turn
from agent_factory.errors import StoreError

SCHEMA_VERSION = 3
DEFAULT_MEMORY = "512MB"
"""DuckDB's memory limit unless AGENT_FACTORY_DUCKDB_MEMORY says otherwise."""
READ_MEMORY = "128MB"
"""DuckDB's memory limit while analyses read their rows (`Store.memory_capped`)."""
DEFAULT_STORE = Path(".agent-factory") / "store.duckdb"

_TS = pa.timestamp("us", tz="UTC")

# Column name -> (DuckDB type, Arrow type). One table definition drives DDL, Arrow batches and reads.
SPAN_COLUMNS: dict[str, tuple[str, pa.DataType]] = {
    "trace_id": ("VARCHAR NOT NULL", pa.string()),
    "id": ("VARCHAR NOT NULL", pa.string()),
    "parent_id": ("VARCHAR", pa.string()),
    "seq": ("INTEGER", pa.int32()),
    "kind": ("VARCHAR", pa.string()),
    "name": ("VARCHAR", pa.string()),
    "input": ("VARCHAR", pa.string()),
    "output": ("VARCHAR", pa.string()),
    "status": ("VARCHAR", pa.string()),
    "error": ("VARCHAR", pa.string()),
    "start_time": ("TIMESTAMPTZ", _TS),
    "end_time": ("TIMESTAMPTZ", _TS),
    "duration_ms": ("DOUBLE", pa.float64()),
    "model": ("VARCHAR", pa.string()),
    "tokens_in": ("BIGINT", pa.int64()),
    "tokens_out": ("BIGINT", pa.int64()),
    "tokens_total": ("BIGINT", pa.int64()),
    "attributes": ("VARCHAR", pa.string()),
    "source_id": ("VARCHAR", pa.string()),
    # The turn the span belongs to: its trace's turn, or a turn of several client-only call traces.
    "turn_id": ("VARCHAR", pa.string()),
}
TURN_COLUMNS: dict[str, tuple[str, pa.DataType]] = {
    "id": ("VARCHAR NOT NULL", pa.string()),
    "conversation_id": ("VARCHAR NOT NULL", pa.string()),
    "user_id": ("VARCHAR", pa.string()),
    "idx": ("INTEGER", pa.int32()),
    "request": ("VARCHAR", pa.string()),
    "answer": ("VARCHAR", pa.string()),
    "mode": ("VARCHAR", pa.string()),
    "delivery": ("VARCHAR", pa.string()),
    "start_time": ("TIMESTAMPTZ", _TS),
    "end_time": ("TIMESTAMPTZ", _TS),
    "latency_ms": ("DOUBLE", pa.float64()),
    "n_spans": ("INTEGER", pa.int32()),
    "attributes": ("VARCHAR", pa.string()),
    "segment": ("VARCHAR", pa.string()),
    "source_id": ("VARCHAR", pa.string()),
}
CONVERSATION_COLUMNS: dict[str, tuple[str, pa.DataType]] = {
    "id": ("VARCHAR NOT NULL", pa.string()),
    "user_id": ("VARCHAR", pa.string()),
    "attributes": ("VARCHAR", pa.string()),
    "source_id": ("VARCHAR", pa.string()),
}
EVENT_COLUMNS: dict[str, tuple[str, pa.DataType]] = {
    "id": ("VARCHAR NOT NULL", pa.string()),
    "kind": ("VARCHAR", pa.string()),
    "user_id": ("VARCHAR", pa.string()),
    "conversation_id": ("VARCHAR", pa.string()),
    "time": ("TIMESTAMPTZ", _TS),
    "value": ("VARCHAR", pa.string()),
    "attributes": ("VARCHAR", pa.string()),
    "source_id": ("VARCHAR", pa.string()),
}
PROVENANCE_COLUMNS: dict[str, tuple[str, pa.DataType]] = {
    "turn_id": ("VARCHAR NOT NULL", pa.string()),
    "segment": ("VARCHAR", pa.string()),
    "record": ("VARCHAR", pa.string()),
    "complete": ("BOOLEAN", pa.bool_()),
    "injections": ("INTEGER", pa.int32()),
    "source_id": ("VARCHAR", pa.string()),
}
QUARANTINE_COLUMNS: dict[str, tuple[str, pa.DataType]] = {
    "source_id": ("VARCHAR", pa.string()),
    "path": ("VARCHAR", pa.string()),
    "location": ("VARCHAR", pa.string()),
    "field": ("VARCHAR", pa.string()),
    "message": ("VARCHAR", pa.string()),
}
DATUM_COLUMNS: dict[str, tuple[str, pa.DataType]] = {
    "unit_id": ("VARCHAR NOT NULL", pa.string()),
    "item": ("VARCHAR NOT NULL", pa.string()),
    "layer": ("VARCHAR", pa.string()),
    "item_version": ("VARCHAR", pa.string()),
    "value": ("VARCHAR", pa.string()),
    "fact": ("VARCHAR", pa.string()),
    "reason": ("VARCHAR", pa.string()),
    "evidence": ("VARCHAR", pa.string()),
    "tier": ("VARCHAR", pa.string()),
    "collector": ("VARCHAR", pa.string()),
    "family": ("VARCHAR", pa.string()),
    "collector_version": ("VARCHAR", pa.string()),
    "tokens": ("BIGINT", pa.int64()),
    "cost_usd": ("DOUBLE", pa.float64()),
    "coverage": ("DOUBLE", pa.float64()),
    "key": ("VARCHAR", pa.string()),
    "run_id": ("VARCHAR", pa.string()),
}
RESULT_COLUMNS: dict[str, tuple[str, pa.DataType]] = {
    "component": ("VARCHAR NOT NULL", pa.string()),
    "layer": ("VARCHAR", pa.string()),
    "metric": ("VARCHAR NOT NULL", pa.string()),
    "stratum": ("VARCHAR", pa.string()),
    "unit_id": ("VARCHAR", pa.string()),
    "value": ("VARCHAR", pa.string()),
    "low": ("DOUBLE", pa.float64()),
    "high": ("DOUBLE", pa.float64()),
    "n": ("BIGINT", pa.int64()),
    "note": ("VARCHAR", pa.string()),
    "analysis": ("VARCHAR", pa.string()),
    "analysis_version": ("VARCHAR", pa.string()),
    "run_id": ("VARCHAR", pa.string()),
}
UNIT_COLUMNS: dict[str, tuple[str, pa.DataType]] = {
    "unit_id": ("VARCHAR NOT NULL", pa.string()),
    "layer": ("VARCHAR NOT NULL", pa.string()),
    "user_key": ("VARCHAR", pa.string()),
    "user_id": ("VARCHAR", pa.string()),
    "conversation_id": ("VARCHAR", pa.string()),
    "idx": ("INTEGER", pa.int32()),
    "start_epoch": ("DOUBLE", pa.float64()),
    "end_epoch": ("DOUBLE", pa.float64()),
    "mode": ("VARCHAR", pa.string()),
    "analysed": ("BOOLEAN", pa.bool_()),
    "run_id": ("VARCHAR", pa.string()),
}
# Table -> (columns, key columns). Keys are enforced by the writes below, not by PRIMARY KEY constraints:
# DuckDB keeps constraint indexes (ART) in memory, so they would make ingest memory grow with the records.
TABLES: dict[str, tuple[dict[str, tuple[str, pa.DataType]], tuple[str, ...]]] = {
    "spans": (SPAN_COLUMNS, ("trace_id", "id")),
    "turns": (TURN_COLUMNS, ("id",)),
    "conversations": (CONVERSATION_COLUMNS, ("id",)),
    "events": (EVENT_COLUMNS, ("id",)),
    "provenance": (PROVENANCE_COLUMNS, ("turn_id",)),
    "quarantine": (QUARANTINE_COLUMNS, ()),
    "atomic_data": (DATUM_COLUMNS, ("unit_id", "item")),
    "results": (RESULT_COLUMNS, ()),
    # The units a run collected (what analyses read besides the data, and which user owns each unit).
    "units": (UNIT_COLUMNS, ("unit_id", "layer")),
}
# Tables holding rows of an input file (column source_id), and the staging table of spans awaiting assembly.
_SOURCE_TABLES = ("spans", "turns", "conversations", "events", "provenance", "quarantine", "staged_spans")
# Tables whose rows are replaced by a newer write of the same key (a rerun's data supersede the old); in the
# others the first write of a key wins and later ones are skipped.
_REPLACE_ON_CONFLICT = {"atomic_data", "units"}


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


def conversation_row(conv: Conversation, *, source_id: str) -> dict[str, Any]:
    """The `conversations` row of a conversation."""
    return {"id": conv.id, "user_id": conv.user_id, "attributes": dumps(conv.attributes), "source_id": source_id}


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
        tokens=tokens, attributes=json.loads(row["attributes"]),
    )


def arrow_rows(table: str, rows: list[dict[str, Any]]) -> pa.Table:
    """`rows` of a store table as an Arrow table of its declared schema (what appends scan by name)."""
    columns = TABLES[table][0] if table in TABLES else SPAN_COLUMNS
    return pa.Table.from_pylist(rows, schema=pa.schema([(name, typ) for name, (_, typ) in columns.items()]))


class Batch:
    """Rows waiting to be appended to one table, flushed as one Arrow table."""

    def __init__(self, con: duckdb.DuckDBPyConnection, table: str, *, size: int = 20_000) -> None:
        self.con, self.table, self.size = con, table, size
        self.rows: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any]) -> None:
        """Queue a row; flush once the batch is full."""
        self.rows.append(row)
        if len(self.rows) >= self.size:
            self.flush()

    def flush(self) -> None:
        """Append the queued rows and empty the batch (on a key conflict: keep or replace, as the table says)."""
        if not self.rows:
            return
        keys = TABLES[self.table][1] if self.table in TABLES else ()
        rows = self.rows
        if keys:
            # One row per key within the batch: the last (replace) or the first (keep) written.
            unique: dict[tuple[Any, ...], dict[str, Any]] = {}
            replace = self.table in _REPLACE_ON_CONFLICT
            for r in rows:
                k = tuple(r[c] for c in keys)
                if replace or k not in unique:
                    unique[k] = r
            rows = list(unique.values())
        arrow = arrow_rows(self.table, rows)  # noqa: F841 - scanned by name below
        self.rows = []
        if not keys:
            self.con.execute(f"INSERT INTO {self.table} SELECT * FROM arrow")
            return
        match = " AND ".join(f"t.{k} = b.{k}" for k in keys)
        if self.table in _REPLACE_ON_CONFLICT:
            self.con.execute(f"DELETE FROM {self.table} t WHERE EXISTS (SELECT 1 FROM arrow b WHERE {match})")
            self.con.execute(f"INSERT INTO {self.table} SELECT * FROM arrow")
        else:
            self.con.execute(
                f"INSERT INTO {self.table} SELECT * FROM arrow b"
                f" WHERE NOT EXISTS (SELECT 1 FROM {self.table} t WHERE {match})"
            )


_LOCK_PID = re.compile(r"\(PID (\d+)\)")


def _connect(path: Path, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """Open the DuckDB file; a `StoreError` in one line when another process holds it or it is no store."""
    try:
        return duckdb.connect(str(path), read_only=read_only)
    except duckdb.IOException as e:
        text = str(e)
        if "lock" not in text.lower():
            raise StoreError(f"{path}: cannot open the store: {text.splitlines()[0]}") from None
        pid = _LOCK_PID.search(text)
        who = f"process {pid.group(1)}" if pid else "another process"
        raise StoreError(f"{path}: the store is in use by {who} (DuckDB allows one writer at a time); wait for it "
                         "to finish, or pass another --store") from None
    except duckdb.Error as e:
        raise StoreError(f"{path}: cannot open the store: {str(e).splitlines()[0]}") from None


class Store:
    """A DuckDB store file. Use as a context manager; one writer process at a time (DuckDB's rule)."""

    def __init__(self, path: Path | str = DEFAULT_STORE, *, read_only: bool = False) -> None:
        self.path = Path(path)
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.con = _connect(self.path, read_only=read_only)
        # Timestamps come back as UTC whatever the machine's zone, so reads are reproducible.
        self.con.execute("SET TimeZone = 'UTC'")
        # A bounded buffer pool that spills beside the store: ingest memory stays flat as files grow.
        self.memory_limit = os.environ.get("AGENT_FACTORY_DUCKDB_MEMORY", DEFAULT_MEMORY)
        self.con.execute(f"SET memory_limit = '{self.memory_limit}'")
        if not read_only:
            self.con.execute(f"SET temp_directory = '{self.path.parent / 'duckdb.tmp'}'")
            self.con.execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
            self.con.execute("INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT DO NOTHING",
                             [str(SCHEMA_VERSION)])
        self._check_schema()
        if not read_only:
            self._create()

    def _check_schema(self) -> None:
        """Refuse a store written with another schema: one line naming both versions and what to do."""
        try:
            found = self.get_meta("schema_version")
        except duckdb.Error:
            found = None  # no meta table: an empty file opened read-only, or not a store
        if found != str(SCHEMA_VERSION):
            self.con.close()
            what = f"was written with schema v{found}" if found is not None else "has no schema version (not a store?)"
            raise StoreError(f"{self.path}: the store {what}, this version reads and writes v{SCHEMA_VERSION}; "
                             "remove it (or pass another --store) and ingest again")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection."""
        self.con.close()

    def _create(self) -> None:
        c = self.con
        c.execute(
            "CREATE TABLE IF NOT EXISTS runs (run_id VARCHAR PRIMARY KEY, started_at TIMESTAMPTZ,"
            " finished_at TIMESTAMPTZ, report VARCHAR)"
        )
        c.execute(
            "CREATE TABLE IF NOT EXISTS sources (source_id VARCHAR PRIMARY KEY, path VARCHAR, format VARCHAR,"
            " ingested_at TIMESTAMPTZ, read INTEGER, accepted INTEGER, quarantined INTEGER)"
        )
        for table, (cols, _keys) in TABLES.items():
            body = ", ".join(f"{name} {typ}" for name, (typ, _) in cols.items())
            c.execute(f"CREATE TABLE IF NOT EXISTS {table} ({body})")
        # The last complete run's pipeline fingerprints and the files it saw (factory.pipeline.state).
        c.execute("CREATE TABLE IF NOT EXISTS pipeline_nodes (node VARCHAR, fp VARCHAR, run_id VARCHAR)")
        c.execute("CREATE TABLE IF NOT EXISTS pipeline_sources (source_id VARCHAR)")
        staged = ", ".join(f"{name} {typ.replace(' NOT NULL', '')}" for name, (typ, _) in SPAN_COLUMNS.items())
        c.execute(f"CREATE TABLE IF NOT EXISTS staged_spans ({staged})")
        self.recover()

    # -- writing -------------------------------------------------------------------------------

    @contextmanager
    def memory_capped(self, limit: str = READ_MEMORY) -> Iterator[None]:
        """DuckDB's memory limit lowered for a read whose rows Python holds anyway (the pages it would cache
        there add to the peak for nothing), restored afterwards."""
        self.con.execute(f"SET memory_limit = '{limit}'")
        try:
            yield
        finally:
            self.con.execute(f"SET memory_limit = '{self.memory_limit}'")

    def set_meta(self, key: str, value: str) -> None:
        """Set a store-wide value."""
        self.con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [key, value])

    def get_meta(self, key: str) -> str | None:
        """A store-wide value, or None."""
        row = self.con.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return row[0] if row else None

    def has_source(self, source_id: str) -> bool:
        """Whether the file `source_id` is ingested."""
        return self.con.execute("SELECT 1 FROM sources WHERE source_id = ?", [source_id]).fetchone() is not None

    @contextmanager
    def file_writes(self, source_id: str) -> Iterator[duckdb.DuckDBPyConnection]:
        """The writes of one input file. They count only once `record_source` has written the file's row: on an
        error they are removed here, and after a crash `recover` removes them when the store next opens."""
        self._drop_source_rows(source_id)
        try:
            yield self.con
        except BaseException:
            with suppress(duckdb.Error):  # the file's last step runs in a transaction; none may be open
                self.con.rollback()
            self._drop_source_rows(source_id)
            raise

    def _drop_source_rows(self, source_id: str) -> None:
        if self.has_source(source_id):
            return
        for table in _SOURCE_TABLES:
            self.con.execute(f"DELETE FROM {table} WHERE source_id = ?", [source_id])

    def recover(self) -> int:
        """Delete rows of files whose ingest never finished (no `sources` row); the number of rows removed."""
        removed = 0
        for table in _SOURCE_TABLES:
            n = self.con.execute(
                f"DELETE FROM {table} WHERE source_id IS NOT NULL AND source_id NOT IN (SELECT source_id FROM sources)"
            ).fetchone()
            removed += int(n[0]) if n else 0
        return removed

    def pending_spans(self) -> tuple[int, int]:
        """Spans kept waiting for their parent span (orphans so far), and the traces they belong to."""
        row = self.con.execute("SELECT count(*), count(DISTINCT trace_id) FROM staged_spans").fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def record_source(
        self, *, source_id: str, path: str, fmt: str, read: int, accepted: int, quarantined: int,
        when: datetime,
    ) -> None:
        """Record an ingested file: its rows count from now on."""
        self.con.execute(
            "INSERT INTO sources VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [source_id, path, fmt, when, read, accepted, quarantined],
        )

    # -- reading -------------------------------------------------------------------------------

    def counts(self) -> dict[str, Any]:
        """Headline counts over real traffic, plus turns per segment and store-wide totals."""
        c = self.con
        real = c.execute(
            "SELECT count(*), count(DISTINCT conversation_id), count(DISTINCT user_id), coalesce(sum(n_spans), 0)"
            " FROM turns WHERE segment = 'real'"
        ).fetchone()
        assert real is not None
        # Steps: spans below a turn's root(s); the root span stands for the turn itself.
        steps = c.execute(
            "SELECT count(*) FROM spans s JOIN turns t ON s.turn_id = t.id"
            " WHERE t.segment = 'real' AND s.parent_id IS NOT NULL"
        ).fetchone()
        assert steps is not None
        segments = dict(c.execute("SELECT segment, count(*) FROM turns GROUP BY segment ORDER BY segment").fetchall())
        totals = c.execute(
            "SELECT (SELECT count(*) FROM turns), (SELECT count(*) FROM spans), (SELECT count(*) FROM events),"
            " (SELECT count(*) FROM quarantine), (SELECT count(*) FROM sources),"
            " (SELECT count(*) FROM provenance WHERE NOT complete),"
            " (SELECT count(*) FROM provenance WHERE injections > 0)"
        ).fetchone()
        assert totals is not None
        modes = dict(
            c.execute(
                "SELECT coalesce(mode, 'unknown'), count(*) FROM turns WHERE segment = 'real' GROUP BY 1 ORDER BY 1"
            ).fetchall()
        )
        delivery = dict(
            c.execute("SELECT delivery, count(*) FROM turns WHERE segment = 'real' GROUP BY 1 ORDER BY 1").fetchall()
        )
        return {
            "turns": real[0], "sessions": real[1], "users": real[2], "spans": int(real[3]), "steps": steps[0],
            "segments": segments,
            "modes": modes,
            "delivery": delivery,
            "all": {
                "turns": totals[0], "spans": totals[1], "events": totals[2], "quarantined": totals[3],
                "sources": totals[4], "incomplete_evidence_turns": totals[5], "turns_with_injection_flags": totals[6],
            },
        }

    def iter_turns(
        self, *, segment: str | None = "real", order: Literal["conversation", "user"] = "conversation",
        batch: int = 2000, users: Collection[str] | None = None,
    ) -> Iterator[Turn]:
        """Turns with their spans; memory bounded by `batch` turns.

        `order="conversation"`: by conversation, then turn index. `order="user"`: by user (the conversation id
        stands in for a missing user), then time, so one user's turns arrive together. `users` keeps the turns
        of those user keys only.
        """
        for turn, _segment in self.iter_segmented_turns(segment=segment, order=order, batch=batch, users=users):
            yield turn

    def iter_segmented_turns(
        self, *, segment: str | None = "real", order: Literal["conversation", "user"] = "conversation",
        batch: int = 2000, users: Collection[str] | None = None,
    ) -> Iterator[tuple[Turn, str]]:
        """Like `iter_turns`, each turn with its traffic segment (read in the same query)."""
        conds: list[str] = []
        params: list[Any] = []
        if segment is not None:
            conds.append("t.segment = ?")
            params.append(segment)
        if users is not None:
            conds.append("coalesce(t.user_id, t.conversation_id) IN (SELECT unnest(?))")
            params.append(sorted(users))
        where = f"WHERE {' AND '.join(conds)}" if conds else ""
        order_by = (
            "t.conversation_id, t.idx, t.start_time, t.id" if order == "conversation"
            else "coalesce(t.user_id, t.conversation_id), t.start_time, t.conversation_id, t.idx, t.id"
        )
        # A cursor of its own: the caller may write on the main connection while this one is read.
        cur = self.con.cursor()
        cur.execute(f"SELECT t.* FROM turns t {where} ORDER BY {order_by}", params)
        names = [d[0] for d in cur.description]
        while rows := cur.fetchmany(batch):
            turn_rows = [dict(zip(names, r, strict=True)) for r in rows]
            ids = [r["id"] for r in turn_rows]
            spans: dict[str, list[Span]] = {i: [] for i in ids}
            sc = self.con.cursor()
            sc.execute("SELECT * FROM spans WHERE turn_id IN (SELECT unnest(?)) ORDER BY turn_id, seq", [ids])
            snames = [d[0] for d in sc.description]
            for srow in sc.fetchall():
                row = dict(zip(snames, srow, strict=True))
                spans[row["turn_id"]].append(span_from_row(row))
            for r in turn_rows:
                yield Turn(
                    id=r["id"], conversation_id=r["conversation_id"], user_id=r["user_id"], index=r["idx"],
                    request=r["request"], answer=r["answer"], mode=r["mode"], delivery=r["delivery"],
                    start=r["start_time"], end=r["end_time"], latency_ms=r["latency_ms"],
                    spans=tuple(spans[r["id"]]), attributes=json.loads(r["attributes"]),
                ), r["segment"]

    def horizon(self) -> datetime | None:
        """The end of observation: the latest time any turn ended (or started) in the store."""
        row = self.con.execute("SELECT max(coalesce(end_time, start_time)) FROM turns").fetchone()
        return row[0] if row else None

    def events(self) -> list[OutcomeEvent]:
        """All outcome events (they are few: one per reward or feedback)."""
        cur = self.con.cursor()
        cur.execute("SELECT * FROM events ORDER BY time, id")
        names = [d[0] for d in cur.description]
        out = []
        for r in cur.fetchall():
            row = dict(zip(names, r, strict=True))
            out.append(OutcomeEvent(
                id=row["id"], kind=row["kind"], user_id=row["user_id"], conversation_id=row["conversation_id"],
                time=row["time"], value=json.loads(row["value"]), attributes=json.loads(row["attributes"]),
            ))
        return out

    def conversation_attributes(self) -> dict[str, dict[str, Any]]:
        """Attributes of adapter-provided conversations (task id, trial, termination, ...)."""
        rows = self.con.execute("SELECT id, attributes FROM conversations").fetchall()
        return {cid: json.loads(a) for cid, a in rows}
