"""The `results` table: analyses' results, merged so that a row whose content a rerun reproduces stays as it was
(with the run id that first produced it), and the reads of them the views make."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple

import pyarrow as pa

from agent_factory.evaluators.core import Result
from agent_factory.factory.store.base import Store
from agent_factory.factory.store.rows import arrow_rows, dumps

_RESULT_CONTENT = ("component", "layer", "metric", "stratum", "unit_id", "value", "low", "high", "n", "note",
                   "analysis")
"""What makes two result rows the same; `run_id` and `analysis_version` (the analysis's content version) say
which run and which code first produced the row, so a rerun that reproduces it leaves it as it was."""


def result_row(r: Result, *, run_id: str, versions: Mapping[str, str]) -> dict[str, Any]:
    """The `results` row of a result; it names the code that made it, its analysis's content version."""
    return {
        "component": r.component, "layer": r.layer, "metric": r.metric, "stratum": r.stratum,
        "unit_id": r.unit_id, "value": dumps(r.value), "low": r.low, "high": r.high, "n": r.n, "note": r.note,
        "analysis": r.analysis, "analysis_version": versions.get(r.analysis, r.analysis_version),
        "run_id": run_id,
    }


def result_table(results: Sequence[Result], *, run_id: str, versions: Mapping[str, str]) -> pa.Table:
    """Results as `results` rows (`result_row`), in one Arrow table of the table's schema."""
    return arrow_rows("results", [result_row(r, run_id=run_id, versions=versions) for r in results])


def merge_results(store: Store, tables: Sequence[pa.Table], *, analyses: Collection[str],
                  keep_analyses: Collection[str]) -> dict[str, int]:
    """Replace the results of `analyses` by the rows of `tables` (`result_table`), leaving every row whose content
    is unchanged as it is (with the run id that first produced it), and drop results of analyses no longer in
    the suite (`keep_analyses`: every analysis of the suite). Counts: added, removed, and unchanged (every stored
    result this merge left as it was, whether its analysis reran or not)."""
    con = store.con
    fresh = pa.concat_tables(tables) if tables else arrow_rows("results", [])  # noqa: F841 - scanned by name below
    same = " AND ".join(f"r.{c} IS NOT DISTINCT FROM f.{c}" for c in _RESULT_CONTENT)
    names = sorted(analyses)
    with store.transaction():
        removed = con.execute(
            f"DELETE FROM results r WHERE r.analysis IN (SELECT unnest(?)) AND NOT EXISTS"
            f" (SELECT 1 FROM fresh f WHERE {same})", [names]).fetchone()
        added = con.execute(
            f"INSERT INTO results SELECT * FROM fresh f WHERE NOT EXISTS"
            f" (SELECT 1 FROM results r WHERE r.analysis IN (SELECT unnest(?)) AND {same})", [names]).fetchone()
        gone = con.execute("DELETE FROM results WHERE analysis NOT IN (SELECT unnest(?))",
                           [sorted(keep_analyses)]).fetchone()
    n_removed, n_added = (int(x[0]) if x else 0 for x in (removed, added))
    total = store.count_rows("results")
    return {"added": n_added, "removed": n_removed + (int(gone[0]) if gone else 0),
            "unchanged": total - n_added}


def population_metrics(store: Store, component: str) -> tuple[int, list[tuple[Any, ...]]]:
    """A component's number of stored results, and its population-level ones (no unit id) as (metric, layer,
    stratum, value JSON, low, high, n), in (analysis, metric, layer, stratum) order."""
    rows = store.con.execute(
        "SELECT metric, layer, stratum, value, low, high, n FROM results WHERE component = ?"
        " AND unit_id IS NULL ORDER BY analysis, metric, layer, stratum", [component]).fetchall()
    n = store.con.execute("SELECT count(*) FROM results WHERE component = ?", [component]).fetchone()
    return (int(n[0]) if n else 0), rows


class PopulationResult(NamedTuple):
    """A population-level result as stored (its value as JSON text)."""

    component: str
    layer: str
    metric: str
    stratum: str | None
    value: str | None
    low: float | None
    high: float | None
    n: int | None
    note: str | None


def population_results(store: Store) -> list[PopulationResult]:
    """Every population-level result (no unit id), in (component, analysis, metric, layer, stratum) order."""
    rows = store.con.execute(
        "SELECT component, layer, metric, stratum, value, low, high, n, note FROM results WHERE unit_id IS NULL"
        " ORDER BY component, analysis, metric, layer, stratum").fetchall()
    return [PopulationResult._make(r) for r in rows]


def per_unit_counts(store: Store) -> dict[str, int]:
    """Units carrying each per-unit result, keyed `component/metric`, in that order."""
    rows = store.con.execute(
        "SELECT component, metric, count(DISTINCT unit_id) FROM results WHERE unit_id IS NOT NULL"
        " GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
    return {f"{c}/{m}": int(n) for c, m, n in rows}


def per_unit_findings(store: Store) -> list[tuple[str, str, str]]:
    """(component, metric, unit id) of every per-unit result, in that order."""
    return [(c, m, u) for c, m, u in store.con.execute(
        "SELECT component, metric, unit_id FROM results WHERE unit_id IS NOT NULL ORDER BY component, metric, unit_id"
    ).fetchall()]
