"""The sections around the components: the layer table, the spine, outcome associations, the gate's and the
corrections' room, and the optional composite view. Pure."""

from __future__ import annotations

from agent_factory.factory.views.report.blocks import ChartIds, number, rows_of
from agent_factory.factory.views.report.charts import Point, interval_chart
from agent_factory.factory.views.report.model import (
    COMPONENTS,
    LAYER_NAMES,
    LAYERS,
    Block,
    ReportData,
    ResultRow,
    Section,
    Table,
)

SPINE = ("execution", "substance", "trajectory", "results")
"""The spine in value order; Conduct runs across it, Provenance and Adjudication stand apart."""
ROLLUPS = {"execution": "delivery_failure_share", "results": "redo_share"}
"""Stored rollup results standing in for a component's layer cells when per-unit flags are not available."""
COMPOSITE_WEIGHTS = {"execution": 0.25, "substance": 0.25, "trajectory": 0.2, "results": 0.15, "conduct": 0.15}
"""The composite view's weights (a choice, not a finding; shown beside it)."""


def _one(data: ReportData, component: str, metric: str, stratum: str | None = "all") -> ResultRow | None:
    return next((r for r in data.rows if r.component == component and r.metric == metric
                 and (stratum is None or (r.stratum or "all") == stratum)), None)


def _num(r: ResultRow | None) -> float | None:
    return float(r.value) if r is not None and isinstance(r.value, int | float) else None


def layer_table(data: ReportData) -> Section:
    """The seven components side by side at the four layers: units each touched (flagged) per layer."""
    cells: dict[tuple[str, str], str] = {}
    source = "per-unit flags"
    if data.layer_table is not None:
        for c in data.layer_table:
            share = f" ({c.flagged / c.units:.1%})" if c.units else ""
            cells[(c.component, c.layer)] = f"{c.flagged:,} of {c.units:,}{share}"
    else:
        source = "the stored rollups (per-unit flags are not available for this store)"
        for component, metric in ROLLUPS.items():
            for r in data.rows:
                if r.component == component and r.metric == metric and r.layer is not None:
                    cells[(component, r.layer)] = f"{number(r.value, share=True)} of {r.n or 0:,}"
    rows = tuple((c, *(cells.get((c, layer), "—") for layer in LAYERS)) for c in COMPONENTS)
    # The store keeps no engagement units: a user is counted from the traffic.
    counts = {**data.facts.units, "engagement": data.facts.users}
    units = ", ".join(f"{counts.get(layer, 0):,} {LAYER_NAMES[layer]}" for layer in LAYERS)
    table = Table(columns=("component", *(f"{LAYER_NAMES[layer]} touched" for layer in LAYERS)), rows=rows)
    note = (f"Units touched by at least one of the component's problems, from {source}. The last run collected "
            f"{units}. Small rates at one layer compound upward: each layer sees its own problems. "
            "— : the component raises nothing at that layer, or its data were not collected.")
    return Section(key="layers", title="Components at the four layers", blocks=(Block(title="Layer table",
                   note=note, table=table),), intro="The seven components side by side, reported at every layer.")


def _boxes(data: ReportData) -> dict[str, list[str]]:
    def line(label: str, r: ResultRow | None, share: bool = True) -> str:
        if r is None:
            return f"{label}: no result"
        ci = f" ({number(r.low, share=share)} – {number(r.high, share=share)})" if r.low is not None else ""
        return f"{label}: {number(r.value, share=share)}{ci}, n {r.n or 0:,}"

    clauses = rows_of(data, "conduct", lambda m: m.startswith("violations."))
    violated = [r for r in clauses if isinstance(r.value, int | float) and r.value > 0]
    admitted = [r for r in rows_of(data, "adjudication", lambda m: m.startswith("admission."))
                if r.value == "admitted"]
    kappas = rows_of(data, "adjudication", lambda m: m.startswith("kappa."))
    return {
        "execution": [line("delivery failure", _one(data, "execution", "failure_rate"))],
        "substance": [line("S", _one(data, "substance", "S"))],
        "trajectory": [line("blocked", _one(data, "trajectory", "outcome_share.blocked")),
                       line("struggled", _one(data, "trajectory", "outcome_share.struggled"))],
        "results": [line("redo", _one(data, "results", "redo_rate"))],
        "conduct": [f"{len(violated)} of {len(clauses)} clauses violated at least once"] if clauses
        else ["no clause results"],
        "provenance": [line("excluded from analysis", _one(data, "provenance", "excluded_share"))],
        "adjudication": [f"{len(admitted)} of {len(kappas)} audited items admitted"] if kappas
        else ["no audit yet: no kappa"],
    }


def spine(data: ReportData) -> Section:
    """Execution -> Substance -> Trajectory -> Results, Conduct across, Provenance and Adjudication apart."""
    return Section(key="spine", title="The spine", extra={"spine": list(SPINE), "boxes": _boxes(data)},
                   intro="Value order: Execution -> Substance -> Trajectory -> Results; Conduct constrains every "
                         "stage; Provenance proves the evidence and Adjudication the evaluators, so neither sits on "
                         "the spine. Each box holds the component's headline result; nothing is summed across them.")


def associations(data: ReportData) -> Section:
    """Each flag's outcome rate with and without it, with the difference's user-clustered interval."""
    key, title = "outcomes", "Outcome associations"
    intro = "For each flag: the outcome with and without it, and the difference with a user-clustered 95% CI."
    if not data.facts.outcome_kinds:
        return Section(key=key, title=title, intro=intro, absent="no outcome events in the traces (task reward, "
                       "feedback, task success): nothing to associate the flags with")
    if not data.associations:
        kinds = ", ".join(data.facts.outcome_kinds)
        return Section(key=key, title=title, intro=intro, absent=f"outcomes stored ({kinds}) but no flag was "
                       "raised and cleared on enough sessions with an outcome to compare them")
    ids = ChartIds(key)
    ordered = sorted(data.associations, key=lambda a: (a.diff is None, a.diff if a.diff is not None else 0.0))
    body = tuple((a.label, a.component, a.meaning, a.outcome, number(a.mean_with), f"{a.n_with:,}",
                  number(a.mean_without), f"{a.n_without:,}", number(a.diff),
                  f"{number(a.low)} – {number(a.high)}" if a.low is not None and a.high is not None else (a.note or ""))
                 for a in ordered)
    table = Table(columns=("flag", "component", "meaning", "outcome", "with the flag", "n with", "without",
                           "n without", "difference", "95% CI (user-clustered)"), rows=body)
    pts = [Point(label=a.label, group=a.outcome, value=a.diff, low=a.low, high=a.high, n=a.n_with)
           for a in ordered if a.diff is not None]
    chart = ids.chart("Outcome with the flag minus without", interval_chart(
        pts, x_title="outcome with the flag minus without", share=False, rule_at=0.0, rule_label="no difference"))
    note = (f"Sessions compared ({data.associations[0].level} level); a flag is listed when at least a few sessions "
            "with an outcome have it and as many do not. Lowest difference first.")
    return Section(key=key, title=title, intro=intro, blocks=(Block(title="Flags against outcomes", table=table,
                                                                    chart=chart if pts else None, note=note),))


def gate() -> Section:
    """Room for the gate's verdicts (a later issue fills it)."""
    return Section(key="gate", title="Gate verdicts", intro="Per component pass / fail / incident of a candidate "
                   "version against a baseline, with calibrated false-alarm rates.",
                   absent="not built yet: the gate (outer loop) is a later milestone; its verdicts will go here")


def corrections() -> Section:
    """Room for the corrections log (a later issue fills it)."""
    return Section(key="corrections", title="Corrections log", intro="Every change the audit made to a data "
                   "definition, rule, evidence scope or metric, with its version bump.",
                   absent="not built yet: the audit loop (inner loop) is a later milestone; its corrections will go "
                          "here")


def composite(data: ReportData) -> Section:
    """The optional weighted composite: a view, labelled as one, placed last."""
    parts: list[tuple[str, float]] = []
    fail = _num(_one(data, "execution", "failure_rate"))
    if fail is not None:
        parts.append(("execution", 1 - fail))
    if (s := _num(_one(data, "substance", "S"))) is not None:
        parts.append(("substance", s))
    blocked, struggled = (_num(_one(data, "trajectory", f"outcome_share.{k}")) for k in ("blocked", "struggled"))
    if blocked is not None and struggled is not None:
        parts.append(("trajectory", 1 - blocked - struggled))
    if (redo := _num(_one(data, "results", "redo_rate"))) is not None:
        parts.append(("results", 1 - redo))
    c_values = [float(r.value) for r in rows_of(data, "conduct", lambda m: m.startswith("C(r)."))
                if isinstance(r.value, int | float)]
    if c_values:
        parts.append(("conduct", sum(c_values) / len(c_values)))
    key, title = "composite", "Composite (a view, not a finding)"
    intro = ("A weighted mean of the components' headline goodness (1 - failure, S, 1 - blocked - struggled, "
             "1 - redo, mean C(r)). The weights are a choice; a composite hides trade-offs between components and "
             "is never the headline: read the sections above.")
    if not parts:
        return Section(key=key, title=title, intro=intro, absent="no component headline to weigh")
    total_w = sum(COMPOSITE_WEIGHTS[c] for c, _ in parts)
    value = sum(COMPOSITE_WEIGHTS[c] * v for c, v in parts) / total_w
    rows = tuple((c, f"{v:.3f}", f"{COMPOSITE_WEIGHTS[c] / total_w:.2f}") for c, v in parts)
    rows += (("composite (view)", f"{value:.3f}", "1.00"),)
    return Section(key=key, title=title, intro=intro, blocks=(Block(
        title="Weighted view", table=Table(columns=("component", "headline goodness", "weight"), rows=rows),
        note="Components without a defined headline are left out and the weights renormalised."),))
