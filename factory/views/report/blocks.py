"""Helpers the sections share: picking result rows, formatting numbers, and turning rows into table + chart
blocks. Pure."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence

from agent_factory.factory.views.report.charts import Point, interval_chart
from agent_factory.factory.views.report.model import Block, Chart, Quote, ReportData, ResultRow, Table

_COUNTER = re.compile(r"[^a-z0-9]+")


def rows_of(data: ReportData, component: str, match: Callable[[str], bool]) -> list[ResultRow]:
    """The component's rows whose metric satisfies `match`, without the duplicate-method variants
    (`.wilson`, `.clustered`: the table shows the analysis's headline interval)."""
    return [r for r in data.rows if r.component == component and match(r.metric)
            and not r.metric.endswith((".wilson", ".clustered"))]


def prefixed(prefix: str) -> Callable[[str], bool]:
    """A metric matcher: the metric is `prefix` or starts with `prefix.`."""
    return lambda m: m == prefix or m.startswith(prefix + ".")


def number(v: float | str | None, *, share: bool = False) -> str:
    """A value as the tables show it: a share as a percentage, a count with separators, else 3 significant
    digits; a label as it is; None as `undefined`."""
    if v is None:
        return "undefined"
    if isinstance(v, str):
        return v
    if math.isnan(v):
        return "undefined"
    if share:
        return f"{v:.1%}"
    if float(v).is_integer() and abs(v) >= 1:
        return f"{int(v):,}"
    return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def interval(r: ResultRow, *, share: bool) -> str:
    """`low-high` of a row, or an empty cell."""
    if r.low is None or r.high is None:
        return ""
    return f"{number(r.low, share=share)} – {number(r.high, share=share)}"


def is_share(r: ResultRow) -> bool:
    """Whether a row is a rate in 0-1 (an interval inside it, or a metric named as a rate or share)."""
    if not isinstance(r.value, float | int) or isinstance(r.value, bool):
        return False
    named = any(w in r.metric for w in ("rate", "share", "coverage", "pass_rate", "A(r)", "C(r)", "excluded"))
    return named and 0.0 <= float(r.value) <= 1.0


def result_table(rows: Sequence[ResultRow], *, label: Callable[[ResultRow], str] | None = None) -> Table:
    """A table of rows: what, stratum, estimate, 95% interval, n, and the analysis's note."""
    name = label or (lambda r: r.metric)
    body = tuple((name(r), r.stratum or "", number(r.value, share=is_share(r)), interval(r, share=is_share(r)),
                  number(float(r.n)) if r.n is not None else "", r.note or "") for r in rows)
    return Table(columns=("what", "stratum", "estimate", "95% interval", "n", "note"), rows=body)


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


def rate_block(ids: ChartIds, title: str, rows: Sequence[ResultRow], *, label: Callable[[ResultRow], str],
               group: Callable[[ResultRow], str] = lambda r: "", x_title: str, note: str = "",
               share: bool = True, rule_at: float | None = None, rule_label: str = "",
               table_label: Callable[[ResultRow], str] | None = None) -> Block | None:
    """A block of rows as a table, with an interval chart of those that have a value; None without rows."""
    if not rows:
        return None
    pts = points(rows, label=label, group=group)
    chart = ids.chart(title, interval_chart(pts, x_title=x_title, share=share, rule_at=rule_at,
                                            rule_label=rule_label)) if pts else None
    if not pts:
        note = (note + " " if note else "") + "No estimate is defined (every denominator is empty): nothing to plot."
    return Block(title=title, note=note, table=result_table(rows, label=table_label), chart=chart)


def quotes_for(data: ReadQuotes, component: str, finding: str | None = None) -> tuple[Quote, ...]:
    """The evidence quotes of a component (and finding), when the report was made with `--evidence`."""
    if data.quotes is None:
        return ()
    return tuple(q for q in data.quotes if q.component == component and (finding is None or q.finding == finding))


ReadQuotes = ReportData
"""Alias kept for readability of `quotes_for`'s signature."""


def uncollected_total(data: ReportData, component: str) -> int:
    """Data of a component left uncollected (summed over its `uncollected` results)."""
    total = 0
    for r in data.rows:
        if r.component == component and (r.metric == "uncollected" or r.metric.startswith("uncollected.")):
            if isinstance(r.value, int | float):
                total += int(r.value)
    return total


def absent_reason(data: ReportData, component: str, rows: Sequence[ResultRow]) -> str | None:
    """Why a component's section has nothing to show, or None when it has something."""
    if not any(r.component == component for r in data.rows):
        if data.facts.last_run is None:
            return "no results: the store was never run (`agent-factory run`)"
        return "no results: the suite the store was run with has no analysis of this component"
    if rows and all(r.value is None for r in rows):
        missing = uncollected_total(data, component)
        if missing:
            return f"needs a model: uncollected ({missing:,} data left uncollected; configure a small model and rerun)"
        return "every estimate is undefined: no unit the analyses apply to"
    return None
