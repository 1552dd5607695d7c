"""Helpers the sections share: picking result rows, formatting numbers, and turning rows into table + chart
blocks. Pure."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence

from agent_factory.evaluators.core.present import Kind, Metric, Presentation, fmt
from agent_factory.factory.views.report.charts import Point, interval_chart
from agent_factory.factory.views.report.model import Block, Chart, Quote, ReportData, Table
from agent_factory.factory.views.results import ResultRow

_COUNTER = re.compile(r"[^a-z0-9]+")


def rows_of(data: ReportData, component: str, metrics: Sequence[Metric]) -> list[ResultRow]:
    """The component's rows of the declared `metrics`, in the order stored, without their variants (`.wilson`,
    `.clustered`: the table shows the analysis's headline interval)."""
    return [r for r in data.rows if r.component == component and any(m.headline(r.metric) for m in metrics)]


def kind_of(how: Presentation | None, metric: str) -> Kind:
    """How a metric's value reads, as its component declares it (a score when undeclared)."""
    kind = None if how is None else how.kind_of(metric)
    return kind or "score"


def _span(r: ResultRow, kind: Kind) -> str:
    if r.low is None or r.high is None:
        return ""
    return f"{fmt(r.low, kind)} – {fmt(r.high, kind)}"


def cell(r: ResultRow, kind: Kind) -> str:
    """One cell for a row: a count or a label alone (never cut), an estimate with its interval and n."""
    if kind in ("count", "label"):
        return fmt(r.value, kind)
    ci = _span(r, kind)
    n = f", n {r.n:,}" if r.n is not None else ""
    return f"{fmt(r.value, kind)}{f' ({ci})' if ci else ''}{n}"


def unrecorded(r: ResultRow) -> bool:
    """Whether a row is an estimate over no unit at all (the source does not record what it needs)."""
    return r.value is None and not r.n


def _said_once(labels: Sequence[str]) -> str:
    if not labels:
        return ""
    return ("No unit to measure (not recorded by this format, or none occurred): "
            f"{', '.join(dict.fromkeys(labels))}.")


def result_table(rows: Sequence[ResultRow], *, kinds: Presentation | None,
                 label: Callable[[ResultRow], str] | None = None) -> tuple[Table, str]:
    """A table of rows (what, stratum, estimate, 95% interval, n, the analysis's note), each value written as
    its declared kind reads; rows over no unit are left out and named once in the note returned beside it."""
    name = label or (lambda r: r.metric)
    kept = [r for r in rows if not unrecorded(r)]
    body = tuple((name(r), r.stratum or "", fmt(r.value, k := kind_of(kinds, r.metric)), _span(r, k),
                  f"{r.n:,}" if r.n is not None else "", r.note or "") for r in kept)
    table = Table(columns=("what", "stratum", "estimate", "95% interval", "n", "note"), rows=body)
    return table, _said_once([name(r) for r in rows if unrecorded(r)])


def points(rows: Iterable[ResultRow], *, label: Callable[[ResultRow], str],
           group: Callable[[ResultRow], str] = lambda r: "") -> list[Point]:
    """The rows with a numeric value, as chart points (undefined estimates are in the table, not the plot)."""
    out = []
    for r in rows:
        if isinstance(r.value, int | float) and not isinstance(r.value, bool) and not math.isnan(r.value):
            out.append(Point(label=label(r), group=group(r), value=float(r.value), low=r.low, high=r.high, n=r.n))
    return out


class ChartIds:
    """Stable chart ids within one section (`chart-<section>-<n>`)."""

    def __init__(self, section: str) -> None:
        self.section = _COUNTER.sub("-", section.lower()).strip("-")
        self.n = 0

    def chart(self, title: str, spec: dict[str, object]) -> Chart:
        """A chart with the next id of this section."""
        self.n += 1
        return Chart(key=f"chart-{self.section}-{self.n}", title=title, spec=dict(spec))


def rate_block(ids: ChartIds, title: str, rows: Sequence[ResultRow], *, kinds: Presentation | None,
               label: Callable[[ResultRow], str], group: Callable[[ResultRow], str] | None = None,
               x_title: str, note: str = "", rule_at: float | None = None, rule_label: str = "",
               table_label: Callable[[ResultRow], str] | None = None) -> Block | None:
    """A block of rows as a table, with an interval chart of those that have a value (on 0-1 when they are
    rates); rows over no unit are said once in the note; None without rows."""
    if not rows:
        return None
    grouped = group or (lambda r: "")
    share = all(kind_of(kinds, r.metric) == "rate" for r in rows)
    missing = _said_once([label(r) + (f" ({grouped(r)})" if grouped(r) else "") for r in rows if unrecorded(r)])
    note = " ".join(p for p in (note, missing) if p)
    kept = [r for r in rows if not unrecorded(r)]
    if not kept:
        return Block(title=title, note=note)
    pts = points(kept, label=label, group=grouped)
    chart = ids.chart(title, interval_chart(pts, x_title=x_title, share=share, rule_at=rule_at,
                                            rule_label=rule_label)) if pts else None
    if not pts:
        note = (note + " " if note else "") + "No estimate is defined: nothing to plot."
    table, _ = result_table(kept, kinds=kinds, label=table_label)
    return Block(title=title, note=note, table=table, chart=chart)


def quotes_for(data: ReadQuotes, component: str, finding: str | None = None) -> tuple[Quote, ...]:
    """The evidence quotes of a component (and finding), when the report was made with `--evidence`."""
    if data.quotes is None:
        return ()
    return tuple(q for q in data.quotes if q.component == component and (finding is None or q.finding == finding))


ReadQuotes = ReportData
"""Alias kept for readability of `quotes_for`'s signature."""


def uncollected_total(data: ReportData, component: str, counts: Sequence[Metric]) -> int:
    """Data of a component left uncollected (summed over the metrics it declares as those `counts`)."""
    return sum(int(r.value) for r in rows_of(data, component, counts)
               if isinstance(r.value, int | float) and not isinstance(r.value, bool))


def absent_reason(data: ReportData, component: str, rows: Sequence[ResultRow], *,
                  uncollected: Sequence[Metric] = ()) -> str | None:
    """Why a component's section has nothing to show, or None when it has something."""
    if not any(r.component == component for r in data.rows):
        if data.facts.last_run is None:
            return "no results: the store was never run (`agent-factory run`)"
        return "no results: the suite the store was run with has no analysis of this component"
    if rows and all(r.value is None for r in rows):
        missing = uncollected_total(data, component, uncollected)
        if missing:
            return f"needs a model: uncollected ({missing:,} data left uncollected; configure a small model and rerun)"
        return "every estimate is undefined: no unit the analyses apply to"
    return None
