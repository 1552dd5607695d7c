"""Stored turns read for worker processes: whole users' rows as Arrow, made Python rows in the worker.

A rules-only run's collection (`factory.pipeline.parallel`) ships every stored turn, with its provenance record
and its spans, to the worker that builds its units. Read as Python rows here (`Store.iter_turn_rows`), the
conversion and the pickling took this process, which also writes what the workers send back, a fifth of its time
at 10x the default simulation, while the workers waited. So the rows are read as Arrow (DuckDB's columnar
result, no Python object per value), cut into chunks of whole users, and shipped as Arrow IPC streams (the
bytes of the chunk only: a pickled slice would carry its whole batch); the worker makes them the rows
`iter_turn_rows` gives (`chunk_rows`), in the same order, with the same values.
"""

from __future__ import annotations

import tempfile
from collections.abc import Collection, Iterator
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agent_factory.factory.pipeline.executors.process import whole_groups
from agent_factory.factory.store.base import USER_KEY, Store
from agent_factory.factory.store.rows import TurnRows

TurnChunk = tuple[pa.Buffer, pa.Buffer]
"""Whole users' turns as IPC streams: their `turns` rows (with `provenance_record`) in user order, then their
spans' rows in that turn order, then `seq`."""

_POOL = pa.system_memory_pool()
"""Where this module's Arrow buffers come from: Arrow's default pool (mimalloc) kept the buffers of past buckets,
and the run's peak at 10x the default simulation was 765 MB with it against 674 MB with the system's allocator."""
MAX_BUCKETS = 256
"""Files a read spreads the turns over at most (each is open while the store is scanned); past that, buckets grow."""


_SCANS = {
    "turns": f"SELECT {{bucket}} t.* FROM turns t JOIN user_buckets b ON b.key = {USER_KEY}",
    "records": f"SELECT {{bucket}} x.turn_id, x.record FROM provenance x JOIN turns t ON t.id = x.turn_id"
               f" JOIN user_buckets b ON b.key = {USER_KEY}",
    "spans": f"SELECT {{bucket}} x.* FROM spans x JOIN turns t ON t.id = x.turn_id"
             f" JOIN user_buckets b ON b.key = {USER_KEY}",
}
"""The three scans of a read, each joined only to small tables (the buckets; the turns' ids and users): a join of
the turns with their provenance would build a hash table of every record."""


def iter_turn_chunks(store: Store, *, users: Collection[str] | None = None, batch: int = 2000,
                     turns: int = 400) -> Iterator[tuple[TurnChunk, int]]:
    """Every stored turn (of the user keys `users`; None: all) in user order, as chunks of whole users of at least
    `turns` turns (the last of each bucket may hold fewer), each with its number of users. The turns are read in
    buckets of whole users of about `batch` turns (`_buckets`)."""
    for bucket in _buckets(store, users=users, batch=batch):
        turn_t, span_t, at = _ordered(*bucket)
        keys = pc.coalesce(turn_t["user_id"], turn_t["conversation_id"]).to_pylist()
        # Positions in the bucket, cut into whole users as a one-process run would cut rows (`whole_groups`).
        for group in whole_groups([list(range(len(keys)))], key=keys.__getitem__, size=turns):
            start, end = group[0][0], group[-1][-1] + 1
            lo, hi = np.searchsorted(at, [start, end])
            yield (_ipc(turn_t.slice(start, end - start)), _ipc(span_t.slice(int(lo), int(hi - lo)))), len(group)


def _buckets(store: Store, *, users: Collection[str] | None, batch: int,
             ) -> Iterator[tuple[pa.Table, pa.Table, pa.Table]]:
    """The turns, provenance records (`turn_id`, `record`) and spans of whole users, about `batch` turns at a
    time, in user order from one bucket to the next (unordered within one).

    A read of a few users' turns by their ids scans the whole tables: DuckDB has no fast fetch by row, the ids
    are scattered, and the provenance records are one compressed block (at 10x the default simulation, 0.35 s a
    read, 18 s a run; a run's reads grew as the square of the store). So the tables are scanned once: each row
    goes to the file of its user's bucket (Arrow IPC, in a directory beside the store), and each bucket is then
    read back alone. Buckets are ranges of users in user order."""
    cur = store.con.cursor()  # its own: the caller writes on the main connection meanwhile
    try:
        where, params = "", []
        if users is not None:
            where, params = f"WHERE {USER_KEY} IN (SELECT unnest(?))", [sorted(users)]
        counts = cur.sql(f"SELECT {USER_KEY} AS key, count(*) AS n FROM turns t {where} GROUP BY 1 ORDER BY 1",
                         params=params).to_arrow_table()
        if not len(counts):
            return
        n = counts["n"].to_numpy()
        size = max(batch, -(-int(n.sum()) // MAX_BUCKETS))
        # A user goes to the bucket its first turn falls in, counting turns in user order: no user is split.
        bucket = (np.cumsum(n) - n) // size
        cur.register("user_buckets", pa.table({"key": counts["key"], "bucket": pa.array(bucket, pa.int64())}))
        if bucket[-1] == 0:  # one bucket: read it straight from the store
            yield tuple(cur.sql(_SCANS[stem].format(bucket="")).to_arrow_table()  # type: ignore[misc]
                        for stem in ("turns", "records", "spans"))
            return
        # Beside the store, like DuckDB's own spill files: a system temporary directory may be held in memory.
        with tempfile.TemporaryDirectory(prefix=".agent-factory-turns-", dir=store.path.parent) as tmp:
            files = Path(tmp)
            with store.memory_capped():  # the scans stream: what DuckDB caches of them is never read again
                for stem, sql in _SCANS.items():
                    _spread(cur.sql(sql.format(bucket="b.bucket,")), files / stem)
            for k in range(int(bucket[-1]) + 1):
                if (files / f"turns.{k}.arrow").exists():  # else no user starts here: the one before is large
                    yield _read(files / "turns", k), _read(files / "records", k), _read(files / "spans", k)
    finally:
        cur.close()


def _ordered(turns: pa.Table, records: pa.Table, spans: pa.Table) -> tuple[pa.Table, pa.Table, np.ndarray]:
    """A bucket's turns in user order (`store.base.USER_ORDER`, whose columns these are), each with its
    `provenance_record` (null without one), and their spans in that turn order, then `seq`, with each span's turn
    position (pure: Arrow's sort, whose order of strings, times and nulls, last, is DuckDB's)."""
    key = pc.coalesce(turns["user_id"], turns["conversation_id"], memory_pool=_POOL)
    order = pc.sort_indices(turns.append_column("_key", key), sort_keys=[
        (c, "ascending", "at_end") for c in ("_key", "start_time", "conversation_id", "idx", "id")], memory_pool=_POOL)
    turns = pc.take(turns, order, memory_pool=_POOL)
    if pc.count_distinct(turns["id"]).as_py() != turns.num_rows or (
            pc.count_distinct(records["turn_id"]).as_py() != records.num_rows):
        raise RuntimeError("a turn id is stored twice (in turns or in provenance)")
    record_at = pc.index_in(turns["id"], value_set=records["turn_id"], memory_pool=_POOL)
    turns = turns.append_column("provenance_record", pc.take(records["record"], record_at, memory_pool=_POOL))
    at = pc.index_in(spans["turn_id"], value_set=turns["id"], memory_pool=_POOL)
    span_order = pc.sort_indices(spans.append_column("_at", at), sort_keys=[("_at", "ascending"),
                                                                            ("seq", "ascending")], memory_pool=_POOL)
    return turns, pc.take(spans, span_order, memory_pool=_POOL), at.take(span_order).to_numpy()


def _spread(rel: duckdb.DuckDBPyRelation, stem: Path) -> None:
    """Write the rows of `rel` (its first column the bucket) to one IPC file per bucket, `<stem>.<bucket>.arrow`,
    without the bucket column; the schema alone goes to `<stem>.schema`."""
    reader = rel.to_arrow_reader(_SPREAD_ROWS)
    schema = reader.schema.remove(0)
    with open(f"{stem}.schema", "wb") as f:
        f.write(schema.serialize())
    writers: dict[int, pa.ipc.RecordBatchFileWriter] = {}
    try:
        for batch in reader:
            batch = pc.take(batch, pc.sort_indices(batch.column(0), memory_pool=_POOL), memory_pool=_POOL)
            buckets = batch.column(0).to_numpy()
            cuts = np.flatnonzero(np.diff(buckets)) + 1
            for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(buckets)], strict=True):
                k = int(buckets[lo])
                w = writers.get(k)
                if w is None:
                    w = writers[k] = pa.ipc.new_file(f"{stem}.{k}.arrow", schema, options=_COMPRESSED)
                w.write_batch(batch.slice(int(lo), int(hi - lo)).drop_columns([batch.schema.names[0]]))
    finally:
        for w in writers.values():
            w.close()


_COMPRESSED = pa.ipc.IpcWriteOptions(compression="lz4")
_SPREAD_ROWS = 8192
"""Rows per batch while spreading (a turn with its provenance record is about 3 kB)."""


def _read(stem: Path, k: int) -> pa.Table:
    """Bucket `k`'s rows of `_spread(..., stem)` as one table (empty, of the schema, when it has none)."""
    path = Path(f"{stem}.{k}.arrow")
    if not path.exists():
        return pa.ipc.read_schema(pa.py_buffer(Path(f"{stem}.schema").read_bytes())).empty_table()
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source, memory_pool=_POOL).read_all()


def _ipc(table: pa.Table) -> pa.Buffer:
    sink = pa.BufferOutputStream(memory_pool=_POOL)
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def chunk_rows(chunk: TurnChunk) -> list[TurnRows]:
    """A chunk's turns as `Store.iter_turn_rows` gives them: each `turns` row with its spans' rows (pure; the
    worker makes them)."""
    turn_buf, span_buf = chunk
    spans: dict[str, list[dict[str, object]]] = {}
    for row in pa.ipc.open_stream(span_buf).read_all().to_pylist():
        spans.setdefault(str(row["turn_id"]), []).append(row)
    return [(row, spans.get(str(row["id"]), [])) for row in pa.ipc.open_stream(turn_buf).read_all().to_pylist()]
