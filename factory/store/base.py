"""The store's connection: one DuckDB file holding units of all four layers, provenance and quarantined records,
the run's units, atomic data and results, and the pipeline's state.

Writes of an input file go through `Store.file_writes`, so a crash mid-file leaves nothing of that file behind
(DuckDB does not replay an uncommitted transaction from its WAL). The typed reads and writes of each concern
live beside this module (`ingest`, `units`, `data`, `results`, `runs`, `pipeline`); all SQL is in this package.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import duckdb

from agent_factory.adapters.model import OutcomeEvent, Turn
from agent_factory.errors import StoreError
from agent_factory.factory.store.buckets import bucket_slice, remove_stale_spills, turn_buckets
from agent_factory.factory.store.rows import TurnRows, bucket_rows, event_from_row, fetch_dicts, turns_from_rows
from agent_factory.factory.store.schema import (
    DEFAULT_MEMORY,
    DEFAULT_STORE,
    READ_MEMORY,
    ROOM_FACTOR,
    SOURCE_TABLES,
    check_store,
    create_meta,
    create_tables,
)

_LOCK_PID = re.compile(r"\(PID (\d+)\)")


def _connect(path: Path, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """Open the DuckDB file; a `StoreError` in one line when another process holds it or it is no store."""
    try:
        con = duckdb.connect(str(path), read_only=read_only)
        # DuckDB draws its own progress bar on a terminal for queries over 2 s; the commands draw theirs.
        con.execute("SET enable_progress_bar = false")
        return con
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


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 2**10, "mib": 2**20,
          "gib": 2**30, "tib": 2**40}


def limit_bytes(limit: str) -> float | None:
    """The bytes of a DuckDB memory limit such as `256MB` or `1.5GiB` (its units: KB is 1000 bytes, KiB 1024);
    None for what this does not read (then no cap replaces it)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", limit)
    unit = _UNITS.get(m.group(2).lower()) if m else None
    return float(m.group(1)) * unit if m and unit is not None else None


class Store:
    """A DuckDB store file. Use as a context manager; one writer process at a time (DuckDB's rule)."""

    def __init__(self, path: Path | str = DEFAULT_STORE, *, read_only: bool = False) -> None:
        self.path = Path(path)
        existing = self.path.exists() and (self.path.is_dir() or self.path.stat().st_size > 0)
        if read_only and not self.path.exists():
            raise StoreError(f"{self.path}: no store here yet; run `agent-factory ingest PATH --store {self.path}` "
                             "first")
        if self.path.is_dir():
            raise StoreError(f"{self.path}: is a directory, not a store file; pass a file path as --store")
        if existing and not read_only:
            # What is there is checked through a read-only connection first: nothing is written into a file that
            # is no store of this version (a read-write open may already write to it).
            probe = _connect(self.path, read_only=True)
            try:
                check_store(probe, self.path)
            finally:
                probe.close()
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.con = _connect(self.path, read_only=read_only)
        # Timestamps come back as UTC whatever the machine's zone, so reads are reproducible.
        self.con.execute("SET TimeZone = 'UTC'")
        # A bounded buffer pool that spills beside the store: ingest memory stays flat as files grow.
        self.memory_limit = os.environ.get("AGENT_FACTORY_DUCKDB_MEMORY", DEFAULT_MEMORY)
        self._limit_now = self.memory_limit
        if not read_only and not existing:
            create_meta(self.con)
        check_store(self.con, self.path)
        self._room = ROOM_FACTOR * float(self.get_meta("vector_text_bytes") or 0)
        """Bytes of DuckDB memory the widest rows written so far need (`fit_vector`); no limit goes below it."""
        self._apply_limit()
        if not read_only:
            self.con.execute(f"SET temp_directory = '{self.path.parent / 'duckdb.tmp'}'")
            create_tables(self.con)
            remove_stale_spills(self.path)
            self.recover()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection."""
        self.con.close()

    # -- writing -------------------------------------------------------------------------------

    @contextmanager
    def memory_capped(self, limit: str = READ_MEMORY) -> Iterator[None]:
        """DuckDB's memory limit lowered to `limit` for work whose rows Python holds anyway, or that DuckDB only
        appends (the pages it would cache add to the peak for nothing), restored afterwards. A lower limit in
        force (AGENT_FACTORY_DUCKDB_MEMORY, an enclosing cap) stays; caps nest."""
        before = self._limit_now
        new, old = limit_bytes(limit), limit_bytes(before)
        now = limit if new is not None and old is not None and new < old else before
        self._limit_now = now
        self._apply_limit()
        try:
            yield
        finally:
            self._limit_now = before
            self._apply_limit()

    def fit_vector(self, text_bytes: float) -> None:
        """Leave DuckDB room for a vector of rows holding `text_bytes` of text (up to `VECTOR_ROWS` consecutive
        rows about to be written): every limit, capped or not, stays at least `ROOM_FACTOR` times the widest
        vector written to the store. Spans of 60 kB prompts put 120 MB in one vector of a column, which no
        fixed cap of 128 MB can insert, scan or sort. Kept in `meta`, so the runs that read the rows later
        leave the same room."""
        need = ROOM_FACTOR * text_bytes
        if need <= self._room:
            return
        self._room = need
        self.set_meta("vector_text_bytes", str(int(text_bytes)))
        self._apply_limit()

    def _apply_limit(self) -> None:
        """DuckDB's limit: the one in force (`_limit_now`), raised to the room the widest rows need."""
        nominal = limit_bytes(self._limit_now)
        if nominal is not None and nominal < self._room:
            self.con.execute(f"SET memory_limit = '{math.ceil(self._room / 2**20)}MiB'")
        else:
            self.con.execute(f"SET memory_limit = '{self._limit_now}'")

    def set_meta(self, key: str, value: str) -> None:
        """Set a store-wide value."""
        self.con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [key, value])

    def get_meta(self, key: str) -> str | None:
        """A store-wide value, or None."""
        row = self.con.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return row[0] if row else None

    def has_table(self, table: str) -> bool:
        """Whether `table` exists: the additive tables (the audit's, the gate's, the tasks') are created on a store's
        first write under this version, so a read-only open of an older store reads them as absent."""
        row = self.con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?",
                               [table]).fetchone()
        return bool(row and row[0])

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
        for table in SOURCE_TABLES:
            self.con.execute(f"DELETE FROM {table} WHERE source_id = ?", [source_id])

    def recover(self) -> int:
        """Delete rows of files whose ingest never finished (no `sources` row); the number of rows removed."""
        removed = 0
        for table in SOURCE_TABLES:
            n = self.con.execute(
                f"DELETE FROM {table} WHERE source_id IS NOT NULL AND source_id NOT IN (SELECT source_id FROM sources)"
            ).fetchone()
            removed += int(n[0]) if n else 0
        return removed

    def needs_recovery(self) -> bool:
        """Whether an interrupted ingest left rows of a file without its commit marker (`recover` removes them)."""
        return any(self.con.execute(
            f"SELECT 1 FROM {table} WHERE source_id IS NOT NULL AND source_id NOT IN (SELECT source_id FROM sources)"
            " LIMIT 1").fetchone() is not None for table in SOURCE_TABLES)

    def pending_spans(self) -> tuple[int, int]:
        """Spans kept waiting for their parent span (orphans so far), and the traces they belong to."""
        row = self.con.execute("SELECT count(*), count(DISTINCT trace_id) FROM staged_spans").fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def record_source(
        self, *, source_id: str, path: str, fmt: str | None, read: int, accepted: int, quarantined: int,
        when: datetime,
    ) -> None:
        """Record an ingested file: its rows count from now on (`fmt` None: no adapter read it, its one
        quarantined record says why)."""
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
        pending = self.pending_spans()
        return {
            "turns": real[0], "sessions": real[1], "users": real[2], "spans": int(real[3]), "steps": steps[0],
            "pending": {"spans": pending[0], "traces": pending[1]},
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
        for rows in self.iter_turn_rows(segment=segment, order=order, batch=batch, users=users):
            yield from turns_from_rows(rows)

    def iter_turn_rows(
        self, *, segment: str | None = "real", order: Literal["conversation", "user"] = "conversation",
        batch: int = 2000, users: Collection[str] | None = None,
    ) -> Iterator[list[TurnRows]]:
        """`iter_segmented_turns` as the stored rows, `batch` turns at a time, before any turn is built
        (`turns_from_rows` builds them): plain values, cheap to ship to another process. The tables are read in
        one pass (`buckets.turn_buckets`)."""
        for turns, spans, at in turn_buckets(self, users=users, segment=segment, order=order, batch=batch):
            for start in range(0, turns.num_rows, batch):
                yield bucket_rows(*bucket_slice(turns, spans, at, start, min(start + batch, turns.num_rows)))

    def horizon(self) -> datetime | None:
        """The end of observation: the latest time any turn ended (or started) in the store."""
        row = self.con.execute("SELECT max(coalesce(end_time, start_time)) FROM turns").fetchone()
        return row[0] if row else None

    def events(self) -> list[OutcomeEvent]:
        """All outcome events (they are few: one per reward or feedback)."""
        cur = self.con.cursor()
        cur.execute("SELECT * FROM events ORDER BY time, id")
        return [event_from_row(row) for row in fetch_dicts(cur)]

    def outcome_kinds(self) -> tuple[str, ...]:
        """The kinds of outcome event the store holds (a task's reward, feedback, ...), in name order."""
        return tuple(k for (k,) in self.con.execute(
            "SELECT DISTINCT kind FROM events WHERE kind IS NOT NULL ORDER BY kind").fetchall())

    def conversation_attributes(self) -> dict[str, dict[str, Any]]:
        """Attributes of adapter-provided conversations (task id, trial, termination, ...)."""
        rows = self.con.execute("SELECT id, attributes FROM conversations").fetchall()
        return {cid: json.loads(a) for cid, a in rows}

    def injection_records(self) -> list[tuple[str, str]]:
        """(turn id, provenance record JSON) of the turns in which ingest flagged text addressed to an evaluator."""
        return [(tid, rec) for tid, rec in self.con.execute(
            "SELECT turn_id, record FROM provenance WHERE injections > 0").fetchall()]

    def count_rows(self, table: str) -> int:
        """Number of rows in `table`."""
        row = self.con.execute(f"SELECT count(*) FROM {table}").fetchone()
        return int(row[0]) if row else 0

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction: committed when the block ends, rolled back when it raises."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")
