"""What `export` reads of a store, as long Arrow tables (pivoted by `factory.views.export`, never a Python object
per cell), and its JSON-lines writer (DuckDB's, over an Arrow table, with no store involved)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import duckdb
import pyarrow as pa

from agent_factory.evaluators.core.model import Layer
from agent_factory.factory.store.base import Store


class LayerTables(NamedTuple):
    """A layer's per-unit data and results, and its units' `analysed` mark, as Arrow tables."""

    data: pa.Table
    """The primary rater's data: unit_id, item, value, fact (JSON text)."""
    results: pa.Table
    """The per-unit results: unit_id, name (`<component>.<metric>`), value (JSON text)."""
    analysed: pa.Table
    """unit_id, analysed (false: a segment the run leaves out, e.g. synthetic or test traffic)."""


def layer_tables(store: Store, layer: Layer, *, by_user: bool = False) -> LayerTables:
    """The data and per-unit results of `layer`'s units, and which units were analysed; with `by_user`, the
    `analysed` table is per user instead (a user is analysed when any of their units is)."""
    data = store.con.sql(
        "SELECT unit_id, item, value, fact FROM atomic_data WHERE rater = 'primary' AND layer = ?",
        params=[layer]).to_arrow_table()
    results = store.con.sql(
        "SELECT unit_id, component || '.' || metric AS name, value FROM results"
        " WHERE unit_id IS NOT NULL AND layer = ?"
        # One value per unit and result; were a result ever kept per stratum, the first stratum is exported.
        " QUALIFY row_number() OVER (PARTITION BY unit_id, component, metric ORDER BY stratum) = 1",
        params=[layer]).to_arrow_table()
    if by_user:
        analysed = store.con.sql("SELECT user_id AS unit_id, bool_or(analysed) AS analysed FROM units"
                                 " WHERE user_id IS NOT NULL GROUP BY user_id").to_arrow_table()
    else:
        analysed = store.con.sql("SELECT unit_id, analysed FROM units WHERE layer = ?",
                                 params=[layer]).to_arrow_table()
    return LayerTables(data, results, analysed)


def write_json_lines(table: pa.Table, out: Path) -> None:
    """Write `table` to `out` as JSON lines, one object per row."""
    # pyarrow reads JSON lines but writes none; DuckDB writes them from the Arrow table without a copy per row.
    con = duckdb.connect()
    try:
        con.register("export_table", table)
        target = str(out).replace("'", "''")
        con.execute(f"COPY export_table TO '{target}' (FORMAT JSON)")
    finally:
        con.close()
