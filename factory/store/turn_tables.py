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

from collections.abc import Collection, Iterator

import numpy as np
import pyarrow as pa

from agent_factory.factory.pipeline.executors.process import whole_groups
from agent_factory.factory.store.base import USER_KEY, USER_ORDER, Store
from agent_factory.factory.store.rows import TurnRows

TurnChunk = tuple[pa.Buffer, pa.Buffer]
"""Whole users' turns as IPC streams: their `turns` rows (with `provenance_record`) in user order, then their
spans' rows in that turn order, then `seq`."""

def iter_turn_chunks(store: Store, *, users: Collection[str] | None = None, batch: int = 2000,
                     turns: int = 400) -> Iterator[tuple[TurnChunk, int]]:
    """Every stored turn (of the user keys `users`; None: all) in user order, as chunks of whole users of at least
    `turns` turns (the last of each read may hold fewer), each with its number of users. The store is read about
    `batch` turns at a time, a batch never ending inside a user."""
    where, params = "", []
    if users is not None:
        where, params = f"WHERE {USER_KEY} IN (SELECT unnest(?))", [sorted(users)]
    order = store.con.cursor()  # its own: the caller writes on the main connection meanwhile
    order.execute(f"SELECT t.id, {USER_KEY} FROM turns t {where} ORDER BY {USER_ORDER}", params)
    pending: list[tuple[str, str]] = []
    while True:
        fetched = order.fetchmany(batch)
        pending.extend(fetched)
        if fetched:
            # The last user's turns wait for the next read: they may go on in it.
            cut = len(pending)
            while cut > 0 and pending[cut - 1][1] == pending[-1][1]:
                cut -= 1
            if cut == 0:
                continue  # one user fills the read: read on
            taken, pending = pending[:cut], pending[cut:]
        else:
            taken, pending = pending, []
        if taken:
            yield from _chunks(store, taken, turns=turns)
        if not fetched:
            order.close()
            return


def _chunks(store: Store, taken: list[tuple[str, str]], *, turns: int) -> Iterator[tuple[TurnChunk, int]]:
    ids_in_order = pa.table({"k": pa.array(range(len(taken)), pa.int64()), "id": [i for i, _ in taken]})
    cur = store.con.cursor()
    try:
        cur.register("batch_ids", ids_in_order)
        # The provenance record ingest stored travels with its turn (`attach_record`): no run recomputes it.
        turn_t = cur.sql("SELECT t.*, p.record AS provenance_record FROM batch_ids o JOIN turns t ON t.id = o.id"
                         " LEFT JOIN provenance p ON p.turn_id = t.id ORDER BY o.k").to_arrow_table()
        span_t = cur.sql("SELECT o.k AS batch_k, s.* FROM batch_ids o JOIN spans s ON s.turn_id = o.id"
                         " ORDER BY o.k, s.seq").to_arrow_table()
    finally:
        cur.close()
    if turn_t.num_rows != len(taken):
        raise RuntimeError(f"turns read {turn_t.num_rows} rows for {len(taken)} ids (a turn id stored twice?)")
    at = span_t["batch_k"].to_numpy()
    span_t = span_t.drop_columns(["batch_k"])
    # Positions in the read, cut into whole users as a one-process run would cut rows (`whole_groups`).
    for users in whole_groups([list(range(len(taken)))], key=lambda k: taken[k][1], size=turns):
        start, end = users[0][0], users[-1][-1] + 1
        lo, hi = np.searchsorted(at, [start, end])
        yield (_ipc(turn_t.slice(start, end - start)), _ipc(span_t.slice(int(lo), int(hi - lo)))), len(users)


def _ipc(table: pa.Table) -> pa.Buffer:
    sink = pa.BufferOutputStream()
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
