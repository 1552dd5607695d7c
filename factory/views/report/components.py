"""One section per component, as the component declares it (`evaluators.core.present.Section`): its blocks'
rows as tables, interval and count charts. Pure; no component or metric is named here."""

from __future__ import annotations

from collections.abc import Sequence

from agent_factory.evaluators.core import present
from agent_factory.evaluators.core.present import Presentation
from agent_factory.factory.views.report.blocks import (
    ChartIds,
    absent_reason,
    cell,
    kind_of,
    quotes_for,
    rate_block,
    result_table,
    rows_of,
)
from agent_factory.factory.views.report.charts import count_chart
from agent_factory.factory.views.report.model import Block, ReportData, Section, Table
from agent_factory.factory.views.results import ResultRow, presented


def _stratum(r: ResultRow) -> str:
    return r.stratum or "all"


def _rows(data: ReportData, component: str, metrics: Sequence[present.Metric], stratum: str) -> list[ResultRow]:
    rows = rows_of(data, component, metrics)
    if stratum == "all":
        return [r for r in rows if _stratum(r) == "all"]
    if stratum == "strata":
        return [r for r in rows if _stratum(r) != "all"]
    return rows


def _default_label(spec: present.Block) -> present.RowFn:
    def label(r: present.Row) -> str:
        m = next((m for m in spec.metrics if m.headline(r.metric)), None)
        if m is not None and m.params:
            return m.param(r.metric)
        return (r.stratum or "all") if len(spec.metrics) == 1 else r.metric

    return label


def _block(data: ReportData, ids: ChartIds, component: str, how: Presentation,
           spec: present.Block) -> Block | None:
    rows = _rows(data, component, spec.metrics, spec.stratum)
    if spec.order is not None:
        rows.sort(key=spec.order)
    label = spec.label or _default_label(spec)
    if spec.chart == "count":
        counted = [(label(r), float(r.value)) for r in rows
                   if isinstance(r.value, int | float) and not isinstance(r.value, bool) and r.value > 0]
        if not counted:
            return None
        return Block(title=spec.title, chart=ids.chart(spec.title, count_chart(counted, x_title=spec.x_title)),
                     quotes=quotes_for(data, component) if spec.evidence else ())
    if spec.chart == "none":
        if not rows:
            return None
        table, unrecorded = result_table(rows, kinds=how)
        note = spec.note + (" " if spec.note and unrecorded else "") + unrecorded
        return Block(title=spec.title, note=note, table=table,
                     quotes=quotes_for(data, component) if spec.evidence else ())
    return rate_block(ids, spec.title, rows, kinds=how, label=label, group=spec.group, x_title=spec.x_title,
                      note=spec.note, rule_at=spec.rule_at, rule_label=spec.rule_label,
                      table_label=spec.table_label)


def _pivot(data: ReportData, component: str, spec: present.Pivot) -> Block | None:
    by: dict[str, dict[str, ResultRow]] = {}
    for header, metric in spec.columns:
        for r in rows_of(data, component, (metric,)):
            if _stratum(r) == "all":
                by.setdefault(metric.param(r.metric, spec.by), {})[header] = r
    metric_header = {m.name: h for h, m in spec.columns}

    def worst(item: tuple[str, dict[str, ResultRow]]) -> tuple[tuple[float, ...], str]:
        keys = []
        for m in spec.order:
            r = item[1].get(metric_header[m.name])
            v = present.number(r)
            # Worst first in the metric's own direction; a row without a value goes after every valued one.
            keys += [1.0, 0.0] if v is None else [0.0, -v if m.worse == "higher" else v]
        return tuple(keys), item[0]

    body = []
    for key, cells in sorted(by.items(), key=worst):
        row = [key]
        for header, metric in spec.columns:
            got = cells.get(header)
            row.append("" if got is None else cell(got, metric.kind))
        body.append(tuple(row))
    if not body:
        return None
    return Block(title=spec.title, note=spec.note,
                 table=Table(columns=(spec.by, *(h for h, _ in spec.columns)), rows=tuple(body)))


def component_section(data: ReportData, component: str, how: Presentation) -> Section:
    """The section of one component: its declared blocks over its rows, or why it has none."""
    ids = ChartIds(component)
    decl = how.section
    blocks = [_pivot(data, component, b) if isinstance(b, present.Pivot) else _block(data, ids, component, how, b)
              for b in decl.blocks]
    kept = tuple(b for b in blocks if b is not None)
    mine = [r for r in data.rows if r.component == component]
    absent = absent_reason(data, component, rows_of(data, component, decl.decisive), uncollected=decl.uncollected)
    if absent is not None and decl.absent is not None:
        absent = decl.absent(present.Rows(mine)) or absent
    if decl.never is not None and not rows_of(data, component, how.metrics):
        absent = decl.never
    if absent is None and not kept:
        absent = "no results of this kind in the store"
    return Section(key=component, title=how.title, intro=decl.intro, blocks=() if absent else kept, absent=absent)


def component_sections(data: ReportData) -> list[Section]:
    """Every presenting component's section, in the registry's order."""
    return [component_section(data, name, how) for name, how in presented()]


__all__ = ["component_section", "component_sections", "kind_of"]
