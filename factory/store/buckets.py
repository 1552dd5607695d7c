"""Stored turns read in one pass: buckets of whole users (or conversations), each bucket ordered; a large user
with no real traffic is cut into pieces of a bucket's size.

A read of a few users' turns by their ids scans the whole tables: DuckDB has no fast fetch by row, the ids are
scattered, and the provenance records are one compressed block (at 10x the default simulation, 0.35 s a read of
2,000 turns, 18 s a run; the reads of a run grew as the square of the store). So each table is scanned once:
every row goes to the file of its group's bucket (Arrow IPC, in a directory beside the store), and each bucket is
then read back alone and ordered with Arrow (`order_bucket`, pure). Buckets are ranges of groups in the read's
order, so the buckets in turn give the order one sorted query would.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agent_factory.factory.store.schema import CONVERSATION_ORDER, USER_KEY, USER_ORDER, text_length_sql

if TYPE_CHECKING:
    from agent_factory.factory.store.base import Store

POOL = pa.system_memory_pool()
"""Where the readers' Arrow buffers come from: Arrow's default pool (mimalloc) kept the buffers of past buckets
(at 10x the default simulation, reading every turn for the workers peaked at 642 MB with it, 518-564 MB with the
system's allocator)."""
TURN_TEXT_BYTES = 16_000
"""The text of a turn as a bucket counts it, at most (its spans, provenance record and attributes): a turn of
the default simulation holds 5.3 kB on average, of tau-bench 2.7 kB, of TRAIL 975 kB (up to 4.9 MB). A bucket of
`batch` turns holds at most about `batch` times this, however wide the records."""
MAX_BUCKETS = 256
"""Files a read spreads the turns over at most (each is open while the store is scanned); past that, buckets grow."""
Order = Literal["conversation", "user"]
_GROUP = {"user": USER_KEY, "conversation": "t.conversation_id"}
"""What keeps a bucket's turns together in each order: a user's (`USER_KEY`) or a conversation's."""
_SORT = {"user": ("_key", "start_time", "conversation_id", "idx", "id"),
         "conversation": ("_key", "idx", "start_time", "id")}
"""The columns of each order (`schema.USER_ORDER`, `schema.CONVERSATION_ORDER`), `_key` the group."""
_WITHIN = {"user": USER_ORDER.removeprefix(f"{USER_KEY}, "),
           "conversation": CONVERSATION_ORDER.removeprefix("t.conversation_id, ")}
"""The order of a group's own turns, in SQL."""
_SCANS = {
    "turns": "SELECT {bucket} t.* FROM turns t JOIN groups g ON g.key = {group} {pieces} {where}",
    "records": "SELECT {bucket} x.turn_id, x.record FROM provenance x JOIN turns t ON t.id = x.turn_id"
               " JOIN groups g ON g.key = {group} {pieces} {where}",
    "spans": "SELECT {bucket} x.* FROM spans x JOIN turns t ON t.id = x.turn_id JOIN groups g ON g.key = {group}"
             " {pieces} {where}",
}
"""The three scans of a read, each joined only to small tables (the groups; the turns' ids and keys): a join of
the turns with their provenance would build a hash table of every record."""


def turn_buckets(
    store: Store, *, users: Collection[str] | None = None, segment: str | None = None, order: Order = "user",
    batch: int = 2000,
) -> Iterator[tuple[pa.Table, pa.Table, np.ndarray]]:
    """The stored turns (of the user keys `users`, of the traffic `segment`; None: all) in `order`, in buckets of
    whole groups of about `batch` turns: each bucket's turns (`turns` rows with `provenance_record`, null without
    one), their spans in that turn order, then `seq`, and each span's turn position in the bucket
    (`order_bucket`)."""
    conds: list[str] = []
    params: list[Any] = []
    if segment is not None:
        conds.append("t.segment = ?")
        params.append(segment)
    if users is not None:
        conds.append(f"{USER_KEY} IN (SELECT unnest(?))")
        params.append(sorted(users))
    where = f"WHERE {' AND '.join(conds)}" if conds else ""
    for bucket in _buckets(store, group=_GROUP[order], within=_WITHIN[order], where=where, params=params,
                           batch=batch):
        yield order_bucket(*bucket, order=order)


def _buckets(store: Store, *, group: str, within: str, where: str, params: list[Any], batch: int,
             ) -> Iterator[tuple[pa.Table, pa.Table, pa.Table]]:
    """The turns (`where`), provenance records (`turn_id`, `record`) and spans of whole groups (`group`), about
    `batch` turns at a time, in group order from one bucket to the next (unordered within one). A group larger
    than a bucket with no turn of real traffic (an internal test account: it grows with the traffic, and its
    turns are units alone) is cut into pieces of a bucket's size, in its own order (`within`), one a bucket."""
    cur = store.con.cursor()  # its own: the caller writes on the main connection meanwhile
    try:
        counts = cur.sql(
            f"SELECT {group} AS key, count(*) AS n, bool_or(t.segment = 'real') AS real,"
            " sum(strlen(coalesce(t.attributes, '')) + coalesce(x.b, 0) + coalesce(s.b, 0)) AS text FROM turns t"
            f" LEFT JOIN (SELECT turn_id, sum({text_length_sql('provenance')}) AS b FROM provenance GROUP BY 1) x"
            f" ON x.turn_id = t.id LEFT JOIN (SELECT turn_id, sum({text_length_sql('spans')}) AS b FROM spans"
            f" GROUP BY 1) s ON s.turn_id = t.id {where} GROUP BY 1 ORDER BY 1",
            params=params).to_arrow_table()
        if not len(counts):
            return
        # A group counts as its turns, or as its text in turns of TURN_TEXT_BYTES when that is more: a bucket of
        # long prompts holds as much text as one of the usual turns, not `batch` times 200 kB.
        n = np.maximum(counts["n"].to_numpy(), -(-counts["text"].to_numpy() // TURN_TEXT_BYTES)).astype(np.int64)
        size = max(batch, -(-int(n.sum()) // MAX_BUCKETS))
        # A group goes to the bucket its first turn falls in, counting turns in group order: none is split, but a
        # large one with no real traffic, whose pieces take the buckets after its first (they come before the
        # next group's: that starts `n` turns later).
        bucket = (np.cumsum(n) - n) // size
        large = (n > size) & ~counts["real"].fill_null(False).to_numpy(zero_copy_only=False)
        last = int(max(bucket[-1], (bucket[large] + (n[large] - 1) // size).max(initial=0)))
        cur.register("groups", pa.table({"key": counts["key"], "bucket": pa.array(bucket, pa.int64())}))
        pieces = ""
        if large.any():
            cur.register("large", pa.table({"key": counts["key"].filter(pa.array(large))}))
            cur.register("pieces", cur.sql(
                f"SELECT t.id, (row_number() OVER (PARTITION BY {group} ORDER BY {within}) - 1) // {size} AS piece"
                f" FROM turns t JOIN large l ON l.key = {group} {where}", params=params).to_arrow_table())
            pieces = "LEFT JOIN pieces p ON p.id = t.id"
        into = "g.bucket + coalesce(p.piece, 0)," if pieces else "g.bucket,"
        scans = {stem: sql.format(group=group, where=where, pieces=pieces, bucket="{bucket}")
                 for stem, sql in _SCANS.items()}
        if last == 0:  # one bucket: read it straight from the store
            turns, records, spans = (cur.sql(scans[stem].format(bucket=""), params=params).to_arrow_table()
                                     for stem in ("turns", "records", "spans"))
            yield turns, records, spans
            return
        with _spill_dir(store) as files:
            with store.memory_capped():  # the scans stream: what DuckDB caches of them is never read again
                for stem, sql in scans.items():
                    _spread(cur.sql(sql.format(bucket=into), params=params), files / stem)
            for k in range(last + 1):
                if (files / f"turns.{k}.arrow").exists():  # else no user starts here: the one before is large
                    yield _read(files / "turns", k), _read(files / "records", k), _read(files / "spans", k)
    finally:
        cur.close()


def spill_prefix(store_path: Path) -> str:
    """The name every bucket directory of the store at `store_path` starts with."""
    return f".{store_path.name}.turns-"


@contextmanager
def _spill_dir(store: Store) -> Iterator[Path]:
    """A directory for a read's buckets, removed after it: beside the store, like DuckDB's own spill files (a
    system temporary directory may be held in memory), else the system's when the store's is not writable."""
    try:
        tmp = tempfile.TemporaryDirectory(prefix=spill_prefix(store.path), dir=store.path.parent)
    except OSError:
        tmp = tempfile.TemporaryDirectory(prefix="agent-factory-turns-")
    with tmp as path:
        yield Path(path)


def remove_stale_spills(store_path: Path) -> None:
    """Remove the bucket directories a killed process left beside the store (call while holding its write
    lock: no other process is reading it then)."""
    for d in store_path.parent.glob(f"{spill_prefix(store_path)}*"):
        shutil.rmtree(d, ignore_errors=True)


def order_bucket(turns: pa.Table, records: pa.Table, spans: pa.Table, *, order: Order = "user",
                 ) -> tuple[pa.Table, pa.Table, np.ndarray]:
    """A bucket's turns in `order` (`_SORT`), each with its `provenance_record` (null without one), and their
    spans in that turn order, then `seq`, with each span's turn position (pure: Arrow's sort, whose order of
    strings, times and nulls, last, is DuckDB's)."""
    key = (pc.coalesce(turns["user_id"], turns["conversation_id"], memory_pool=POOL) if order == "user"
           else turns["conversation_id"])
    keys: Any = [(c, "ascending", "at_end") for c in _SORT[order]]  # Arrow's (name, order, nulls): stubs lag
    by = pc.sort_indices(turns.append_column("_key", key), sort_keys=keys, memory_pool=POOL)
    turns = pc.take(turns, by, memory_pool=POOL)
    if pc.count_distinct(turns["id"]).as_py() != turns.num_rows or (
            pc.count_distinct(records["turn_id"]).as_py() != records.num_rows):
        raise RuntimeError("a turn id is stored twice (in turns or in provenance)")
    record_at = pc.index_in(turns["id"], value_set=records["turn_id"], memory_pool=POOL)
    turns = turns.append_column("provenance_record", pc.take(records["record"], record_at, memory_pool=POOL))
    at = pc.index_in(spans["turn_id"], value_set=turns["id"], memory_pool=POOL)
    span_order = pc.sort_indices(spans.append_column("_at", at), sort_keys=[("_at", "ascending"),
                                                                            ("seq", "ascending")], memory_pool=POOL)
    return turns, pc.take(spans, span_order, memory_pool=POOL), at.take(span_order).to_numpy()


def bucket_slice(turns: pa.Table, spans: pa.Table, at: np.ndarray, start: int, end: int,
                 ) -> tuple[pa.Table, pa.Table]:
    """Turns `start` to `end` of an ordered bucket (`order_bucket`) with their spans (pure)."""
    lo, hi = np.searchsorted(at, [start, end])
    return turns.slice(start, end - start), spans.slice(int(lo), int(hi - lo))


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
            batch = pc.take(batch, pc.sort_indices(batch.column(0), memory_pool=POOL), memory_pool=POOL)
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
        return pa.ipc.open_file(source, memory_pool=POOL).read_all()


__all__ = ["MAX_BUCKETS", "POOL", "Order", "bucket_slice", "order_bucket", "remove_stale_spills", "spill_prefix",
           "turn_buckets"]
