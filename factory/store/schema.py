"""The store's tables: one definition per table drives the DDL, the Arrow batches and the reads; the schema
version written into every store and checked each time one is opened.

A store written by another schema version is refused at open with one line naming both versions and what to do
(there is no migration yet: the store is rebuilt from the trace files, which stay the source of truth).

- v3: units, atomic data, results, pipeline state.
- v4: `atomic_data.rater` (`primary` | `audit:<model-id>`), part of the datum's key.
- v5: the store's marker in `meta` (`MARKER_KEY`), checked before anything is written, so a DuckDB file that is
  no store is refused unchanged; `conversations.digest`, the content of a whole-conversation record, so a record
  seen again is told apart from another record under the same id.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from agent_factory.errors import StoreError

SCHEMA_VERSION = 5
MARKER_KEY, MARKER_VALUE = "store", "agent-factory"
"""The `meta` row every store holds from its creation: a DuckDB file without it is not written to."""
DEFAULT_MEMORY = "256MB"
"""DuckDB's memory limit unless AGENT_FACTORY_DUCKDB_MEMORY says otherwise."""
READ_MEMORY = "128MB"
"""DuckDB's memory limit while a run collects and while analyses read their rows (`Store.memory_capped`)."""
INGEST_MEMORY = "64MB"
"""DuckDB's memory limit while files are ingested: ingest only appends, and what it sorts and inserts at once is
cut by text (`Batch`, the staged ranges), so a smaller cache costs it nothing measurable (10x the default
simulation: 310-318 MB in 57.8-58.7 s, against 359-365 MB in 54.2-58.4 s at 128 MB; two runs each)."""
VECTOR_ROWS = 2048
"""Values of a column DuckDB holds at once (its vector): the unit its scans, sorts and inserts allocate."""
ROOM_FACTOR = 3
"""Vectors of the widest rows DuckDB's memory limit leaves room for (`Store.fit_vector`): the scanned one, its
copy into a sort or an insert, and the pages around them. The limit DuckDB needs grows with the width of the
records, never with their number."""
DEFAULT_STORE = Path(".agent-factory") / "store.duckdb"
USER_KEY = "coalesce(t.user_id, t.conversation_id)"
"""A stored turn's user key in SQL (`factory.pipeline.units.user_key`): the user id, else the conversation id."""
USER_ORDER = f"{USER_KEY}, t.start_time, t.conversation_id, t.idx, t.id"
"""The order of `iter_turn_rows(order="user")`: one user's turns together, in time order (`buckets` sorts by
these columns; a test holds it to this SQL)."""
CONVERSATION_ORDER = "t.conversation_id, t.idx, t.start_time, t.id"
"""The order of `iter_turn_rows(order="conversation")`: by conversation, then turn index."""

_TS = pa.timestamp("us", tz="UTC")
# Long JSON text, written once and read whole. DuckDB's own choice (dictionary + FSST) gives up on such a
# column once a row group holds many distinct long values and stores it uncompressed: the provenance records
# of 100k turns took 448 MB that way and take 18 MB with zstd. Only the physical layout differs, so stores
# written before read the same.
_LONG_TEXT = "VARCHAR USING COMPRESSION zstd"

# Column name -> (DuckDB type, Arrow type). One table definition drives DDL, Arrow batches and reads.
SPAN_COLUMNS: dict[str, tuple[str, pa.DataType]] = {
    "trace_id": ("VARCHAR NOT NULL", pa.string()),
    "id": ("VARCHAR NOT NULL", pa.string()),
    "parent_id": ("VARCHAR", pa.string()),
    "seq": ("INTEGER", pa.int32()),
    "kind": ("VARCHAR", pa.string()),
    "name": ("VARCHAR", pa.string()),
    "input": ("VARCHAR", pa.string()),
    "output": (_LONG_TEXT, pa.string()),
    "status": ("VARCHAR", pa.string()),
    "error": ("VARCHAR", pa.string()),
    "start_time": ("TIMESTAMPTZ", _TS),
    "end_time": ("TIMESTAMPTZ", _TS),
    "duration_ms": ("DOUBLE", pa.float64()),
    "model": ("VARCHAR", pa.string()),
    "tokens_in": ("BIGINT", pa.int64()),
    "tokens_out": ("BIGINT", pa.int64()),
    "tokens_total": ("BIGINT", pa.int64()),
    "attributes": (_LONG_TEXT, pa.string()),
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
    "attributes": (_LONG_TEXT, pa.string()),
    "segment": ("VARCHAR", pa.string()),
    "source_id": ("VARCHAR", pa.string()),
}
CONVERSATION_COLUMNS: dict[str, tuple[str, pa.DataType]] = {
    "id": ("VARCHAR NOT NULL", pa.string()),
    "user_id": ("VARCHAR", pa.string()),
    "attributes": ("VARCHAR", pa.string()),
    "source_id": ("VARCHAR", pa.string()),
    # sha256 of the record as read (`factory.identity.conversation_digest`): the same id with another digest from
    # another source is another record, refused rather than silently dropped.
    "digest": ("VARCHAR", pa.string()),
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
    "record": (_LONG_TEXT, pa.string()),
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
    # `primary` (the suite's cascade) or `audit:<model-id>`: part of the key, so a second rater's datum of a
    # (unit, item) sits beside the first instead of replacing it. Last, so positional readers of v3 rows still
    # find every other column where it was.
    "rater": ("VARCHAR NOT NULL", pa.string()),
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
    "atomic_data": (DATUM_COLUMNS, ("unit_id", "item", "rater")),
    "results": (RESULT_COLUMNS, ()),
    # The units a run collected (what analyses read besides the data, and which user owns each unit).
    "units": (UNIT_COLUMNS, ("unit_id", "layer")),
}
# The columns whose size the input decides (free text, JSON), by table: `Batch` and the ingest's chunks bound
# the bytes they hold by these, since a count of rows says nothing of a span whose prompt is 60 kB.
_TEXT_NAMES = {"input", "output", "error", "attributes", "request", "answer", "record", "value", "message"}
TEXT_COLUMNS: dict[str, tuple[str, ...]] = {
    table: tuple(c for c in cols if c in _TEXT_NAMES) for table, (cols, _keys) in TABLES.items()
} | {"staged_spans": tuple(c for c in SPAN_COLUMNS if c in _TEXT_NAMES)}


def text_length_sql(table: str, *, alias: str = "") -> str:
    """A row's characters of text (`TEXT_COLUMNS[table]`) as a SQL expression; `alias` qualifies the columns."""
    prefix = f"{alias}." if alias else ""
    return " + ".join(f"strlen(coalesce({prefix}{c}, ''))" for c in TEXT_COLUMNS[table])


# Tables holding rows of an input file (column source_id), and the staging table of spans awaiting assembly.
SOURCE_TABLES = ("spans", "turns", "conversations", "events", "provenance", "quarantine", "staged_spans")
# Tables whose rows are replaced by a newer write of the same key (a rerun's data supersede the old); in the
# others the first write of a key wins and later ones are skipped.
REPLACE_ON_CONFLICT = {"atomic_data", "units"}


def create_meta(con: duckdb.DuckDBPyConnection) -> None:
    """The `meta` table of a new store, stamped with this schema version and the store's marker at once."""
    con.execute("BEGIN TRANSACTION")
    con.execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT DO NOTHING", [str(SCHEMA_VERSION)])
    con.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT DO NOTHING", [MARKER_KEY, MARKER_VALUE])
    con.execute("COMMIT")


def _meta(con: duckdb.DuckDBPyConnection) -> dict[str, str] | None:
    """The `meta` table's version and marker rows; None when the database has no `meta` table."""
    tables = {r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()}
    if "meta" not in tables:
        return None
    rows = con.execute("SELECT key, value FROM meta WHERE key IN ('schema_version', ?)", [MARKER_KEY]).fetchall()
    return {str(k): str(v) for k, v in rows}


def stored_version(con: duckdb.DuckDBPyConnection) -> str | None:
    """The schema version a store says it was written with; None when it has no `meta` table."""
    try:
        meta = _meta(con)
    except duckdb.Error:
        return None
    return None if meta is None else meta.get("schema_version")


def check_store(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Refuse a database that is no store of this schema version, before anything is written to it: one line
    naming what was found and what to do. The connection is closed when the store is refused."""
    try:
        meta = _meta(con)
    except duckdb.Error as e:
        con.close()
        raise StoreError(f"{path}: cannot read the store: {str(e).splitlines()[0]}; it may be damaged: restore it "
                         "from a copy, or ingest the traces again into a new --store") from None
    problem = store_problem(meta)
    if problem is not None:
        con.close()
        raise StoreError(f"{path}: {problem}")


def store_problem(meta: dict[str, str] | None) -> str | None:
    """What keeps a database whose `meta` rows are `meta` from being opened as a store of this version, or None.
    Stores of v4 and before carry no marker: their version alone says they are stores, of an older schema."""
    found = None if meta is None else meta.get("schema_version")
    marked = meta is not None and meta.get(MARKER_KEY) == MARKER_VALUE
    if found is None or (not marked and found not in {"1", "2", "3", "4"}):
        return ("a DuckDB database that is no agent-factory store (it has no store marker); it was left "
                "unchanged: pass another --store")
    try:
        number = int(found)
    except ValueError:
        return f"the store's schema version {found!r} is unreadable; pass another --store and ingest again"
    if number > SCHEMA_VERSION:
        return (f"the store was written by a newer agent-factory (schema v{number}; this version reads and writes "
                f"v{SCHEMA_VERSION}): upgrade agent-factory (pip install -U agent-factory) to open it")
    if number < SCHEMA_VERSION:
        return (f"the store was written with schema v{number} by an older agent-factory; this version reads and "
                f"writes v{SCHEMA_VERSION} and has no migration: remove it (or pass another --store) and ingest the "
                "traces again")
    return None


AUDIT_TABLES: dict[str, str] = {
    "labels": "unit_id VARCHAR, item VARCHAR, rater VARCHAR, value VARCHAR, user_id VARCHAR, source VARCHAR,"
              " imported_at TIMESTAMPTZ",
    "audit_sample": "audit_id VARCHAR, unit_id VARCHAR, user_id VARCHAR, layer VARCHAR, component VARCHAR,"
                    " stratum VARCHAR, weight DOUBLE",
    "audits": "audit_id VARCHAR PRIMARY KEY, started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ, report VARCHAR",
    "retired": "item VARCHAR, item_version VARCHAR, audit_id VARCHAR, why VARCHAR, retired_at TIMESTAMPTZ",
    "corrections": "logged_at TIMESTAMPTZ, audit_id VARCHAR, item VARCHAR, item_version VARCHAR, action VARCHAR,"
                   " record VARCHAR",
}
"""The audit's tables (`store.audit`): table -> column DDL. Additive: a store of this version written before
they existed gains them on its next write open, and its reads take them as empty until then."""

# `at` is a DuckDB keyword: quoted in the DDL and in every query naming it (store.gate).
GATE_TABLES: dict[str, str] = {
    "gate_calibrations": "key VARCHAR PRIMARY KEY, \"at\" TIMESTAMPTZ, report VARCHAR",
    "gate_runs": "id VARCHAR PRIMARY KEY, \"at\" TIMESTAMPTZ, baseline VARCHAR, candidate VARCHAR, verdict VARCHAR,"
                 " report VARCHAR",
    "gate_looks": "pair VARCHAR, look INTEGER, \"at\" TIMESTAMPTZ, users_candidate INTEGER",
    "incidents": "id VARCHAR PRIMARY KEY, opened_at TIMESTAMPTZ, component VARCHAR, clause VARCHAR, metric VARCHAR,"
                 " unit_id VARCHAR, evidence VARCHAR, candidate VARCHAR",
    "fixes": "id VARCHAR PRIMARY KEY, record VARCHAR",
}
"""The gate's tables (`store.gate`), recorded in the baseline's store: additive, as `AUDIT_TABLES`."""

TASK_TABLES: dict[str, str] = {
    "task_runs": "source_digest VARCHAR, suite VARCHAR, task_id VARCHAR, trial VARCHAR, run VARCHAR,"
                 " PRIMARY KEY (source_digest, suite, task_id, trial)",
}
"""The task runs (`store.tasks`): additive, as `AUDIT_TABLES`; a run is stored whole as its JSON."""


def create_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Every table of this schema version, where missing."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS runs (run_id VARCHAR PRIMARY KEY, started_at TIMESTAMPTZ,"
        " finished_at TIMESTAMPTZ, report VARCHAR)"
    )
    con.execute(
        "CREATE TABLE IF NOT EXISTS sources (source_id VARCHAR PRIMARY KEY, path VARCHAR, format VARCHAR,"
        " ingested_at TIMESTAMPTZ, read INTEGER, accepted INTEGER, quarantined INTEGER)"
    )
    for table, (cols, _keys) in TABLES.items():
        body = ", ".join(f"{name} {typ}" for name, (typ, _) in cols.items())
        con.execute(f"CREATE TABLE IF NOT EXISTS {table} ({body})")
    # The last complete run's pipeline fingerprints and the files it saw (store.pipeline).
    con.execute("CREATE TABLE IF NOT EXISTS pipeline_nodes (node VARCHAR, fp VARCHAR, run_id VARCHAR)")
    con.execute("CREATE TABLE IF NOT EXISTS pipeline_sources (source_id VARCHAR)")
    staged = ", ".join(f"{name} {typ.replace(' NOT NULL', '')}" for name, (typ, _) in SPAN_COLUMNS.items())
    con.execute(f"CREATE TABLE IF NOT EXISTS staged_spans ({staged})")
    for table, body in (AUDIT_TABLES | GATE_TABLES | TASK_TABLES).items():
        con.execute(f"CREATE TABLE IF NOT EXISTS {table} ({body})")
