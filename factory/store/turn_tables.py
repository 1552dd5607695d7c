"""Stored turns read for worker processes: whole users' rows as Arrow, made Python rows in the worker.

A rules-only run's collection (`factory.pipeline.parallel`) ships every stored turn, with its provenance record
and its spans, to the worker that builds its units. Read as Python rows here (`Store.iter_turn_rows`), the
conversion and the pickling took this process, which also writes what the workers send back, a fifth of its time
at 10x the default simulation, while the workers waited. So the rows are read as Arrow (`store.buckets`: one pass
over the tables), cut into chunks of whole users (a user with no real traffic may be cut), and shipped as Arrow
IPC streams (the bytes of the chunk only: a pickled slice would carry its whole batch); the worker makes them the
rows `iter_turn_rows` gives (`chunk_rows`), in the same order, with the same values.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from agent_factory.factory.executors.process import whole_groups
from agent_factory.factory.store.base import Store
from agent_factory.factory.store.buckets import POOL, bucket_slice, turn_buckets
from agent_factory.factory.store.rows import TurnRows, bucket_rows

TurnChunk = tuple[pa.Buffer, pa.Buffer]
"""Whole users' turns as IPC streams: their `turns` rows (with `provenance_record`) in user order, then their
spans' rows in that turn order, then `seq`."""


def iter_turn_chunks(store: Store, *, users: Collection[str] | None = None, batch: int = 2000,
                     turns: int = 400) -> Iterator[tuple[TurnChunk, int]]:
    """Every stored turn (of the user keys `users`; None: all) in user order, as chunks of at least `turns` turns
    (the last of each bucket may hold fewer), each with the number of users whose first turn it holds. A chunk
    holds whole users, except a user with no turn of real traffic, whose turns may be cut into pieces of `turns`:
    their units are turns alone (no conversation, no engagement), and such a user (an internal test account)
    grows with the traffic (6,691 turns at 10x the default simulation, where a user averages 9), which would make
    one chunk, and the worker collecting it, as large as the user. The turns are read in buckets of about `batch`
    turns (`buckets.turn_buckets`)."""
    before: str | None = None  # the last user of the bucket before
    for turn_t, span_t, at in turn_buckets(store, users=users, batch=batch):
        keys = pc.coalesce(turn_t["user_id"], turn_t["conversation_id"]).to_pylist()
        pieces = _pieces(keys, turn_t["segment"].to_pylist(), turns=turns)
        # Positions in the bucket, cut into whole users as a one-process run would cut rows (`whole_groups`).
        for group in whole_groups([list(range(len(keys)))], key=pieces.__getitem__, size=turns):
            turns_of, spans_of = bucket_slice(turn_t, span_t, at, group[0][0], group[-1][-1] + 1)
            starts = sum(1 for g in group if keys[g[0]] != (keys[g[0] - 1] if g[0] else before))
            yield (ipc_stream(turns_of), ipc_stream(spans_of)), starts
        before = keys[-1] if keys else before


def _pieces(keys: list[Any], segments: list[Any], *, turns: int) -> list[tuple[Any, int]]:
    """Each position's group for `whole_groups`: its user, and, for a user with no turn of real traffic, the
    piece of `turns` turns it falls in (pure; `keys` come grouped by user)."""
    out: list[tuple[str, int]] = []
    start = 0
    for k in range(1, len(keys) + 1):
        if k == len(keys) or keys[k] != keys[start]:
            real = any(s == "real" for s in segments[start:k])
            out.extend((keys[start], 0 if real else j // turns) for j in range(k - start))
            start = k
    return out


def ipc_stream(table: pa.Table) -> pa.Buffer:
    """`table` as the bytes of an Arrow IPC stream: what a chunk travels to a worker as (a pickled slice would
    carry its whole batch); `read_ipc` reads it back."""
    sink = pa.BufferOutputStream(memory_pool=POOL)
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def chunk_rows(chunk: TurnChunk) -> list[TurnRows]:
    """A chunk's turns as `Store.iter_turn_rows` gives them: each `turns` row with its spans' rows (pure; the
    worker makes them)."""
    turn_buf, span_buf = chunk
    return bucket_rows(read_ipc(turn_buf), read_ipc(span_buf))


def read_ipc(buf: pa.Buffer) -> pa.Table:
    """The table an `ipc_stream` holds."""
    return pa.ipc.open_stream(buf).read_all()
