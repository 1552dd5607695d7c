"""The part of the report that reads a store: results, traffic facts and (with `--evidence`) redacted quotes.

What comes from a trace is redacted here, before any of it reaches the page: the quotes and the ids and fields
they name (a unit id may hold an email), and the strata, notes and text values of the results (a stratum may
be a value read from traffic). Everything else in `factory.views.report` is pure and works on the `ReportData` this
returns.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_factory.errors import AgentFactoryError
from agent_factory.evaluators.collect.redact import DefaultRedactor, Redactor, redact_pieces, redact_text
from agent_factory.evaluators.components.conduct import obligation_id
from agent_factory.evaluators.components.provenance import EVIDENCE_COMPLETE, INJECTION_FLAGGED
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.provenance.segments import lookup
from agent_factory.factory.store import Store
from agent_factory.factory.views.report.flags import layer_cells
from agent_factory.factory.views.report.model import Quote, ReportData, ResultRow, StoreFacts

QUOTES_PER_FINDING = 3
"""Example units quoted per finding with `--evidence`."""
QUOTE_CONTEXT = 80
"""Characters shown either side of a cited range."""
QUOTE_MAX = 360
"""Longest quote, in characters (a cited range longer than this is cut at its start)."""
_ITEM_OF: dict[tuple[str, str], str] = {
    ("provenance", "incomplete_evidence"): EVIDENCE_COMPLETE,
    ("provenance", "injection_flagged"): INJECTION_FLAGGED,
}
"""The datum whose evidence a per-unit result stands on, where the metric alone does not name it."""
_SPAN_FIELDS = ("input", "output", "error")
_TURN_FIELDS = ("request", "answer")


def _value(raw: str | None) -> float | str | None:
    if raw is None:
        return None
    v = json.loads(raw)
    if isinstance(v, bool):
        return float(v)
    return v if isinstance(v, int | float | str) or v is None else json.dumps(v, ensure_ascii=False)


def read_facts(store: Store) -> StoreFacts:
    """The store's traffic counts, the units of its last run and the outcome kinds it holds."""
    counts = store.counts()
    con = store.con
    units = dict(con.execute("SELECT layer, count(*) FROM units GROUP BY layer ORDER BY layer").fetchall())
    last = con.execute("SELECT max(finished_at) FROM runs").fetchone()
    kinds = tuple(k for (k,) in con.execute("SELECT DISTINCT kind FROM events WHERE kind IS NOT NULL ORDER BY kind")
                  .fetchall())
    return StoreFacts(
        path=str(store.path), turns=counts["turns"], sessions=counts["sessions"], users=counts["users"],
        spans=counts["spans"], segments={str(k): int(v) for k, v in counts["segments"].items()},
        quarantined=counts["all"]["quarantined"], units={str(k): int(v) for k, v in units.items()},
        last_run=last[0].isoformat() if last and last[0] is not None else None, outcome_kinds=kinds,
    )


def read_rows(store: Store, redactor: Redactor | None = None) -> tuple[ResultRow, ...]:
    """Every population-level result, in (component, analysis, metric, layer, stratum) order; strata, notes and
    text values redacted (by the default redactor when none is given)."""
    red = redactor if redactor is not None else DefaultRedactor()

    def text(v: str | None) -> str | None:
        return None if v is None else redact_text(v, red)

    cur = store.con.execute(
        "SELECT component, layer, metric, stratum, value, low, high, n, note FROM results WHERE unit_id IS NULL"
        " ORDER BY component, analysis, metric, layer, stratum")
    rows = []
    for c, layer, m, s, v, lo, hi, n, note in cur.fetchall():
        value = _value(v)
        rows.append(ResultRow(component=c, layer=layer, metric=m, stratum=text(s),
                              value=text(value) if isinstance(value, str) else value, low=lo, high=hi,
                              n=None if n is None else int(n), note=text(note)))
    return tuple(rows)


def read_per_unit(store: Store) -> dict[str, int]:
    """Units carrying each per-unit result, keyed `component/metric`."""
    rows = store.con.execute(
        "SELECT component, metric, count(DISTINCT unit_id) FROM results WHERE unit_id IS NOT NULL"
        " GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
    return {f"{c}/{m}": int(n) for c, m, n in rows}


def _datum_item(component: str, metric: str) -> str | None:
    if component == "conduct" and metric.startswith("violation."):
        return obligation_id(metric.removeprefix("violation."))
    return _ITEM_OF.get((component, metric))


def _field_text(store: Store, unit_id: str, field: str) -> str | None:
    if field in _TURN_FIELDS:
        row = store.con.execute(f"SELECT {field} FROM turns WHERE id = ?", [unit_id]).fetchone()
        if row is not None:
            return row[0] if isinstance(row[0], str) else None
    if field in _SPAN_FIELDS:
        row = store.con.execute(f"SELECT {field} FROM spans WHERE id = ? LIMIT 1", [unit_id]).fetchone()
        return row[0] if row is not None and isinstance(row[0], str) else None
    if field.startswith("attributes."):
        for table in ("turns", "spans", "conversations"):
            row = store.con.execute(f"SELECT attributes FROM {table} WHERE id = ? LIMIT 1", [unit_id]).fetchone()
            if row is not None and row[0]:
                # Stored flat (`{"gen_ai.prompt": ..}`, as OTel exporters write them), nested or mixed.
                value: Any = lookup(json.loads(row[0]), field.removeprefix("attributes."))
                return value if isinstance(value, str) else None
    return None


def quote_window(text: str, start: int, end: int, redactor: Redactor) -> str:
    """The cited range of `text` with some context either side, redacted over the whole text (so a secret
    cut by the window's edge is still hidden), at most `QUOTE_MAX` characters, with ellipses where cut."""
    start, end = max(0, min(start, len(text))), max(0, min(end, len(text)))
    a = max(0, start - QUOTE_CONTEXT)
    b = min(len(text), max(end, start) + QUOTE_CONTEXT, a + QUOTE_MAX)
    piece = redact_pieces(text, [(a, b)], redactor.find(text))[0]
    return ("…" if a > 0 else "") + piece + ("…" if b < len(text) else "")


def read_quotes(store: Store, redactor: Redactor, *, per_finding: int = QUOTES_PER_FINDING) -> tuple[Quote, ...]:
    """Redacted examples of the evidence behind each per-unit finding: the first evidence pointer of the datum
    the finding stands on, for up to `per_finding` units (in unit id order)."""
    findings = store.con.execute(
        "SELECT component, metric, unit_id FROM results WHERE unit_id IS NOT NULL ORDER BY component, metric, unit_id"
    ).fetchall()
    picked: dict[tuple[str, str], list[str]] = defaultdict(list)
    for component, metric, unit_id in findings:
        if _datum_item(component, metric) is not None and len(picked[(component, metric)]) < per_finding:
            picked[(component, metric)].append(unit_id)
    out: list[Quote] = []
    for (component, metric), units in picked.items():
        item = _datum_item(component, metric)
        for unit_id in units:
            row = store.con.execute(
                "SELECT evidence FROM atomic_data WHERE unit_id = ? AND item = ? AND rater = 'primary'",
                [unit_id, item]).fetchone()
            pointers = json.loads(row[0]) if row and row[0] else []
            for p in pointers:
                text = _field_text(store, p["unit_id"], p["field"])
                if text:
                    out.append(Quote(component=component, finding=metric, unit_id=redact_text(unit_id, redactor),
                                     field=redact_text(str(p["field"]), redactor),
                                     text=quote_window(text, int(p["start"]), int(p["end"]), redactor)))
                    break
    return tuple(out)


def read_report_data(path: Path, *, redactor: Redactor | None = None,
                     flags: Sequence[FlagSpec] | None = None) -> ReportData:
    """Read what the report shows from the store at `path`: with `flags`, the layer table and the outcome
    associations they give; quotes only when a redactor is given."""
    if not path.exists():
        raise AgentFactoryError(f"{path}: no store here yet; run `agent-factory ingest PATH` and `run` first")
    with Store(path, read_only=True) as store:
        facts = read_facts(store)
        rows = read_rows(store, redactor)
        per_unit = read_per_unit(store)
        quotes = read_quotes(store, redactor) if redactor is not None else None
        cells = assoc = None
        if flags:
            from agent_factory.factory.views.findings import read_findings
            from agent_factory.heap import bulk_objects

            found = read_findings(store, flags)
            with bulk_objects():
                cells = tuple(layer_cells(flags, found.units, found.rows))
            assoc = found.associations
    return ReportData(facts=facts, rows=rows, per_unit=per_unit, quotes=quotes, layer_table=cells, associations=assoc)
