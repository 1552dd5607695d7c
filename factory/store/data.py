"""The `atomic_data` table: one row per (unit, item, rater); `primary` is the suite's own cascade, a second
rater (`audit:<model-id>`) sits beside it instead of replacing it."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from functools import lru_cache
from typing import Any

import pyarrow as pa

from agent_factory.adapters.model import EvidencePointer
from agent_factory.evaluators.core import AtomicDatum
from agent_factory.evaluators.core.columns import FIELDS, DataColumns
from agent_factory.evaluators.core.model import PRIMARY_RATER
from agent_factory.factory.store.base import Store
from agent_factory.factory.store.rows import Batch, dumps, one_per_key
from agent_factory.factory.store.schema import DATUM_COLUMNS


def datum_row(d: AtomicDatum, *, run_id: str) -> dict[str, Any]:
    """The `atomic_data` row of a datum a run collected (or found in the cache)."""
    return {
        "unit_id": d.unit_id, "item": d.item, "layer": d.layer, "item_version": d.item_version,
        "value": d.value, "fact": fact_json(d.fact), "reason": d.reason,
        "evidence": evidence_json(d.evidence), "tier": d.collector.tier,
        "collector": d.collector.name, "family": d.collector.family,
        "collector_version": d.collector.version, "tokens": d.tokens, "cost_usd": d.cost_usd,
        "coverage": d.coverage, "key": d.key, "run_id": run_id, "rater": d.rater,
    }


@lru_cache(maxsize=65536)
def _text(s: str) -> str:
    # Memoized: a datum's evidence cites the same unit ids and field names over and over.
    return json.dumps(s, ensure_ascii=False)


def evidence_json(evidence: Sequence[EvidencePointer]) -> str:
    """The stored JSON of a datum's evidence: `dumps` of the pointers' dicts, written without building them."""
    if not evidence:
        return "[]"
    return "[" + ", ".join(f'{{"end": {p.end}, "field": {_text(p.field)}, "start": {p.start}, '
                           f'"unit_id": {_text(p.unit_id)}}}' for p in evidence) + "]"


def fact_json(fact: float | str | None) -> str:
    """The stored JSON of a datum's fact (`dumps`)."""
    return "null" if fact is None else dumps(fact)


_DATUM_SCHEMA = pa.schema([(name, typ) for name, (_, typ) in DATUM_COLUMNS.items()])


def data_table(cols: DataColumns, *, run_id: str) -> pa.Table:
    """The `atomic_data` rows of `cols` as one Arrow table (the last datum of a key wins, as a rewrite would)."""
    c = cols.columns()
    n = len(c["unit_id"])
    arrays: dict[str, list[Any]] = {f: c[f] for f in FIELDS}
    arrays["fact"] = [fact_json(f) for f in c["fact"]]
    arrays["evidence"] = [evidence_json(e) for e in c["evidence"]]
    arrays["run_id"] = [run_id] * n
    return last_per_key(pa.Table.from_pydict({name: arrays[name] for name in _DATUM_SCHEMA.names},
                                             schema=_DATUM_SCHEMA))


def last_per_key(table: pa.Table) -> pa.Table:
    """An `atomic_data` table with one row per key (unit, item, rater), the last of each, in table order."""
    return one_per_key(table, ("unit_id", "item", "rater"))


class DataBatch:
    """Atomic data waiting to be appended, as columns (or tables made elsewhere: a worker's), flushed as one
    Arrow table through a `Batch` (a datum queued later replaces one of the same key)."""

    def __init__(self, store: Store, *, run_id: str, size: int = 50_000) -> None:
        self.run_id, self.size = run_id, size
        self.cols = DataColumns()
        self.batch = Batch(store, "atomic_data", size=size)

    @property
    def fresh(self) -> bool:
        """Whether no stored datum can share a key with the data queued from now on (`append_arrow`'s `fresh`)."""
        return self.batch.fresh

    @fresh.setter
    def fresh(self, value: bool) -> None:
        self.batch.fresh = value

    def add(self, cols: DataColumns) -> None:
        """Queue data; flush once the batch is full."""
        self.cols.extend(cols)
        if len(self.cols) + self.batch.table_rows >= self.size:
            self.flush()

    def add_table(self, table: pa.Table) -> None:
        """Queue data already made an `atomic_data` table of this run (`data_table`: a worker's chunk)."""
        self._queue_columns()
        self.batch.add_table(table, unique=True)

    def flush(self) -> None:
        """Append the queued data (a stored datum of the same key is replaced) and empty the batch."""
        self._queue_columns()
        self.batch.flush()

    def _queue_columns(self) -> None:
        if len(self.cols):
            self.batch.add_table(data_table(self.cols, run_id=self.run_id), unique=True)
            self.cols = DataColumns()


def drop_items(store: Store, *, keep: Collection[str]) -> int:
    """Delete stored data (of every rater) of items no current definition produces; the number of rows removed."""
    n = store.con.execute("DELETE FROM atomic_data WHERE item NOT IN (SELECT unnest(?))", [sorted(keep)]).fetchone()
    return int(n[0]) if n else 0


def data_counts(store: Store, *, rater: str = PRIMARY_RATER) -> dict[str, dict[str, int]]:
    """`rater`'s stored data per component by value."""
    out: dict[str, dict[str, int]] = {}
    for comp, value, n in store.con.execute(
        "SELECT split_part(item, '.', 1), value, count(*) FROM atomic_data WHERE rater = ? GROUP BY 1, 2"
        " ORDER BY 1, 2", [rater]
    ).fetchall():
        out.setdefault(comp, {})[value] = int(n)
    return out


def count_not_written_by(store: Store, run_id: str) -> int:
    """Stored primary data rows run `run_id` did not write (kept from earlier runs; an audit's rows are another
    rater's, not the run's)."""
    row = store.con.execute("SELECT count(*) FROM atomic_data WHERE run_id IS DISTINCT FROM ? AND rater = ?",
                            [run_id, PRIMARY_RATER]).fetchone()
    return int(row[0]) if row else 0
