"""The part of the report that reads a store (through `factory.store`'s reads and `factory.views.findings`, in
one open: `read_report`): results, traffic facts, the flags' layer table and associations, and (with
`--evidence`) redacted quotes.

What comes from a trace is redacted here, before any of it reaches the page: the quotes and the ids and fields
they name (a unit id may hold an email), and the strata, notes and text values of the results (a stratum may
be a value read from traffic). Everything else in `factory.views.report` is pure and works on the `ReportData` this
returns.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence

from agent_factory.evaluators.collect.redact import Redactor, redact_pieces, redact_text
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.factory.store import Store
from agent_factory.factory.store.audit import latest_audit, read_corrections
from agent_factory.factory.store.gate import latest_calibration, latest_gate, read_calibration
from agent_factory.factory.store.lookup import evidence, field_text
from agent_factory.factory.store.results import per_unit_counts, per_unit_findings
from agent_factory.factory.store.tasks import read_task_runs
from agent_factory.factory.views.findings import read_findings
from agent_factory.factory.views.report.flags import layer_cells
from agent_factory.factory.views.report.model import Quote, ReportData
from agent_factory.factory.views.results import QUOTE_CONTEXT, presented, read_facts, read_rows
from agent_factory.heap import bulk_objects

QUOTES_PER_FINDING = 3
"""Example units quoted per finding with `--evidence`."""
QUOTE_MAX = 360
"""Longest quote, in characters (a cited range longer than this is cut at its start)."""


def read_per_unit(store: Store) -> dict[str, int]:
    """Units carrying each per-unit result, keyed `component/metric`."""
    return per_unit_counts(store)


def _datum_item(component: str, metric: str) -> str | None:
    """The datum whose evidence a per-unit result stands on, as its component declares it (None: no quote)."""
    how = dict(presented()).get(component)
    return how.evidence_of(metric) if how is not None and how.evidence_of is not None else None


_field_text = field_text
"""The text a pointer's field holds (`factory.store.lookup.field_text`; the name the report's tests know)."""


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
    picked: dict[tuple[str, str], list[str]] = defaultdict(list)
    for component, metric, unit_id in per_unit_findings(store):
        if _datum_item(component, metric) is not None and len(picked[(component, metric)]) < per_finding:
            picked[(component, metric)].append(unit_id)
    out: list[Quote] = []
    for (component, metric), units in picked.items():
        item = _datum_item(component, metric)
        for unit_id in units:
            raw = evidence(store, unit_id, item) if item is not None else None
            pointers = json.loads(raw) if raw else []
            for p in pointers:
                text = field_text(store, p["unit_id"], p["field"])
                if text:
                    out.append(Quote(component=component, finding=metric, unit_id=redact_text(unit_id, redactor),
                                     field=redact_text(str(p["field"]), redactor),
                                     text=quote_window(text, int(p["start"]), int(p["end"]), redactor)))
                    break
    return tuple(out)


def read_report(store: Store, *, flags: Sequence[FlagSpec] = (), redactor: Redactor | None = None) -> ReportData:
    """What the report shows, read from the open `store`: with `flags`, the layer table and the outcome
    associations they give (through `factory.views.findings`); quotes only when a redactor is given; the latest
    audit, the corrections log, the latest gate run and its calibration, and the task runs when the store has them."""
    facts = read_facts(store)
    rows = read_rows(store, redactor)
    per_unit = read_per_unit(store)
    quotes = read_quotes(store, redactor) if redactor is not None else None
    cells = assoc = None
    if flags:
        found = read_findings(store, flags)
        with bulk_objects():
            cells = tuple(layer_cells(flags, found.units, found.rows))
        assoc = found.associations
    gate = latest_gate(store)
    used = read_calibration(store, gate.calibration.key) if gate is not None and gate.calibration else None
    return ReportData(facts=facts, rows=rows, per_unit=per_unit, quotes=quotes, layer_table=cells, associations=assoc,
                      audit=latest_audit(store), corrections_log=tuple(read_corrections(store)), gate=gate,
                      calibration=used or latest_calibration(store), task_runs=tuple(read_task_runs(store)))
