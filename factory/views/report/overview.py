"""The sections around the components: the layer table, the spine, outcome associations and the optional
composite view (the corrections log is the audit's: `audit`; the gate's verdicts are `gate`'s). Pure."""

from __future__ import annotations

from agent_factory.evaluators.core import present
from agent_factory.evaluators.core.present import fmt
from agent_factory.factory.views.report.blocks import ChartIds, cell, rows_of, unrecorded
from agent_factory.factory.views.report.charts import Point, interval_chart
from agent_factory.factory.views.report.model import LAYER_NAMES, LAYERS, Block, ReportData, Section, Table
from agent_factory.factory.views.results import ResultRow, audit_rows, presented


def _own(data: ReportData, component: str) -> present.Rows:
    how = dict(presented()).get(component)
    # The latest audit's rows beside the stored results: the spine box of Adjudication says what it found.
    extra = audit_rows(how, data.audit) if how is not None else []
    return present.Rows([*(r for r in data.rows if r.component == component), *extra])


def layer_table(data: ReportData) -> Section:
    """The components side by side at the four layers: units each touched (flagged) per layer."""
    cells: dict[tuple[str, str], str] = {}
    source = "per-unit flags"
    shown = presented()
    if data.layer_table is not None:
        for c in data.layer_table:
            if c.units:  # no unit checked at that layer reads as "—", not "0 of 0"
                cells[(c.component, c.layer)] = f"{c.flagged:,} of {c.units:,} ({fmt(c.flagged / c.units, 'rate')})"
    else:
        source = "the stored rollups (per-unit flags are not available for this store)"
        for component, how in shown:
            if how.rollup is None:
                continue
            for r in rows_of(data, component, (how.rollup,)):
                if r.layer is not None:
                    cells[(component, r.layer)] = f"{fmt(r.value, 'rate')} of {r.n or 0:,}"
    rows = tuple((c, *(cells.get((c, layer), "—") for layer in LAYERS)) for c, _ in shown)
    # The store keeps no engagement units: a user is counted from the traffic.
    counts = {**data.facts.units, "engagement": data.facts.users}
    units = ", ".join(f"{counts.get(layer, 0):,} {LAYER_NAMES[layer]}" for layer in LAYERS)
    table = Table(columns=("component", *(f"{LAYER_NAMES[layer]} touched" for layer in LAYERS)), rows=rows)
    note = (f"Units touched by at least one of the component's problems, from {source}. The last run collected "
            f"{units}. Small rates at one layer compound upward: each layer sees its own problems. "
            "— : the component raises nothing at that layer, or its data were not collected.")
    return Section(key="layers", title="Components at the four layers", blocks=(Block(title="Layer table",
                   note=note, table=table),), intro="The components side by side, reported at every layer.")


def _box(data: ReportData, component: str, how: present.Presentation) -> list[str]:
    own = _own(data, component)
    if how.box is not None:
        return how.box(own)
    out = []
    for label, metric in how.headline:
        r: ResultRow | None = next((x for x in rows_of(data, component, (metric,)) if (x.stratum or "all") == "all"),
                                   None)
        if r is None:
            out.append(f"{label}: no result")
        elif unrecorded(r):
            out.append(f"{label}: no unit to measure")
        else:
            out.append(f"{label}: {cell(r, metric.kind)}")
    return out


def spine(data: ReportData) -> Section:
    """The spine's components in value order, those across it, and those apart (the instruments)."""
    shown = presented()
    places = {p: [c for c, how in shown if how.place == p] for p in ("spine", "across", "apart")}
    boxes = {c: _box(data, c, how) for c, how in shown}
    titles = {c: how.title for c, how in shown}
    order = " -> ".join(titles[c] for c in places["spine"])
    return Section(key="spine", title="The spine", extra={**places, "boxes": boxes, "titles": titles},
                   intro=f"Value order: {order}; "
                         f"{' and '.join(titles[c] for c in places['across'])} constrains every stage; "
                         f"{' and '.join(titles[c] for c in places['apart'])} prove the evidence and the evaluators, "
                         "so they do not sit on the spine. Each box holds the component's headline result; nothing "
                         "is summed across them.")


def associations(data: ReportData) -> Section:
    """Each flag's outcome rate with and without it, with the difference's interval."""
    key, title = "outcomes", "Outcome associations"
    intro = ("For each flag: the outcome with and without it, and the difference with its 95% CI (for a rate, "
             "Newcombe's score interval joined with the user-clustered one; none with fewer than 4 units on a side).")
    if not data.facts.outcome_kinds:
        return Section(key=key, title=title, intro=intro, absent="no outcome events in the traces (task reward, "
                       "feedback, task success): nothing to associate the flags with")
    if not data.associations:
        kinds = ", ".join(data.facts.outcome_kinds)
        return Section(key=key, title=title, intro=intro, absent=f"outcomes stored ({kinds}) but no flag was "
                       "raised and cleared on enough sessions with an outcome to compare them")
    ids = ChartIds(key)
    ordered = sorted(data.associations, key=lambda a: (a.diff is None, a.diff if a.diff is not None else 0.0))
    body = tuple((a.label, a.component, a.meaning, a.outcome, fmt(a.mean_with, 'score'), f"{a.n_with:,}",
                  fmt(a.mean_without, 'score'), f"{a.n_without:,}", fmt(a.diff, 'score'),
                  f"{fmt(a.low, 'score')} – {fmt(a.high, 'score')}" if a.low is not None and a.high is not None
                  else (a.note or "")) for a in ordered)
    table = Table(columns=("flag", "component", "meaning", "outcome", "with the flag", "n with", "without",
                           "n without", "difference", "95% CI"), rows=body)
    pts = [Point(label=a.label, group=a.outcome, value=a.diff, low=a.low, high=a.high, n=a.n_with)
           for a in ordered if a.diff is not None]
    chart = ids.chart("Outcome with the flag minus without", interval_chart(
        pts, x_title="outcome with the flag minus without", share=False, rule_at=0.0, rule_label="no difference"))
    note = (f"Sessions compared ({data.associations[0].level} level); a flag is listed when at least a few sessions "
            "with an outcome have it and as many do not. Lowest difference first.")
    return Section(key=key, title=title, intro=intro, blocks=(Block(title="Flags against outcomes", table=table,
                                                                    chart=chart if pts else None, note=note),))


def composite(data: ReportData) -> Section:
    """The optional weighted composite: a view, labelled as one, placed last."""
    parts: list[tuple[str, float, float]] = []
    for component, how in presented():
        if how.goodness is not None and how.weight > 0 and (v := how.goodness(_own(data, component))) is not None:
            parts.append((component, v, how.weight))
    key, title = "composite", "Composite (a view, not a finding)"
    intro = ("A weighted mean of the components' headline goodness in 0-1 (each component says what its goodness "
             "is: one minus its failure, its score). The weights are a choice; a composite hides trade-offs between "
             "components and is never the headline: read the sections above.")
    if not parts:
        return Section(key=key, title=title, intro=intro, absent="no component headline to weigh")
    total_w = sum(w for _, _, w in parts)
    value = sum(w * v for _, v, w in parts) / total_w
    rows = tuple((c, f"{v:.3f}", f"{w / total_w:.2f}") for c, v, w in parts)
    rows += (("composite (view)", f"{value:.3f}", "1.00"),)
    return Section(key=key, title=title, intro=intro, blocks=(Block(
        title="Weighted view", table=Table(columns=("component", "headline goodness", "weight"), rows=rows),
        note="Components without a defined headline are left out and the weights renormalised."),))
