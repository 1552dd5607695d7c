"""Vega-Lite charts of the report, built with altair: estimates with their 95% intervals, and counts.

Pure: rows in, a Vega-Lite spec (a dict with its data inline) out. vega-embed draws them in the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_factory.frozen import Frozen

WIDTH = 520
"""Plot width in CSS pixels (the page's column)."""
ROW_HEIGHT = 18
"""Height per category on the y axis."""


class Point(Frozen):
    """One estimate to plot."""

    label: str
    """The category on the y axis (a mode, an item, a clause)."""
    group: str = ""
    """A second grouping drawn as colour side by side (e.g. with / without a step); empty for none."""
    value: float
    """The estimate."""
    low: float | None = None
    """Lower end of its interval."""
    high: float | None = None
    """Upper end of its interval."""
    n: int | None = None
    """Its denominator (shown in the tooltip)."""


def _records(points: Sequence[Point]) -> list[dict[str, Any]]:
    return [{"label": p.label, "group": p.group, "value": p.value,
             "low": p.value if p.low is None else p.low, "high": p.value if p.high is None else p.high,
             "n": p.n} for p in points]


def interval_chart(points: Sequence[Point], *, x_title: str, share: bool = True, rule_at: float | None = None,
                   rule_label: str = "") -> dict[str, Any]:
    """Dots for the estimates with a line for each 95% interval, one row per label (groups side by side);
    `share` puts the axis on 0-1 as percentages; `rule_at` draws a reference line (a baseline, the 0.60 line)."""
    import altair as alt  # a second to import: only when a chart is drawn (the summary reads this package)

    labels = list(dict.fromkeys(p.label for p in points))
    grouped = any(p.group for p in points)
    data = _data(_records(points))
    scale = alt.Scale(domain=[0, 1]) if share else alt.Scale(zero=False)
    fmt = ".0%" if share else ",.3~g"
    y = alt.Y("label:N", sort=labels, title=None, axis=alt.Axis(labelLimit=260))
    colour = alt.Color("group:N", title=None, legend=alt.Legend(orient="bottom")) if grouped else alt.value("#3b6ea8")
    tooltip = [alt.Tooltip("label:N", title="what"), alt.Tooltip("value:Q", title="estimate", format=fmt),
               alt.Tooltip("low:Q", title="95% low", format=fmt), alt.Tooltip("high:Q", title="95% high", format=fmt),
               alt.Tooltip("n:Q", title="n", format=",")]
    if grouped:
        tooltip.insert(1, alt.Tooltip("group:N", title="group"))
    offset = {"yOffset": alt.YOffset("group:N")} if grouped else {}
    base = alt.Chart(data)
    bars = base.mark_rule(strokeWidth=2).encode(x=alt.X("low:Q", scale=scale, title=x_title, axis=alt.Axis(format=fmt)),
                                                x2="high:Q", y=y, color=colour, **offset)
    dots = base.mark_point(filled=True, size=60).encode(x="value:Q", y=y, color=colour, tooltip=tooltip, **offset)
    layers: list[Any] = [bars, dots]
    if rule_at is not None:
        ref = alt.Chart(_data([{"x": rule_at, "what": rule_label}])).mark_rule(
            color="#b03030", strokeDash=[4, 3]).encode(x="x:Q", tooltip=[alt.Tooltip("what:N", title="line")])
        layers.append(ref)
    per_row = max(1, len({p.group for p in points})) if grouped else 1
    chart = alt.layer(*layers).properties(width=WIDTH, height=max(60, ROW_HEIGHT * per_row * len(labels)))
    return _spec(chart)


def count_chart(labels_counts: Sequence[tuple[str, float]], *, x_title: str) -> dict[str, Any]:
    """Horizontal bars of counts, in the given order."""
    import altair as alt  # a second to import: only when a chart is drawn (the summary reads this package)

    labels = [label for label, _ in labels_counts]
    data = _data([{"label": label, "count": c} for label, c in labels_counts])
    chart = alt.Chart(data).mark_bar(color="#3b6ea8").encode(
        # Counts are whole: no tick at 0.5 of a run.
        x=alt.X("count:Q", title=x_title, axis=alt.Axis(tickMinStep=1)),
        y=alt.Y("label:N", sort=labels, title=None, axis=alt.Axis(labelLimit=260)),
        tooltip=[alt.Tooltip("label:N", title="what"), alt.Tooltip("count:Q", title="count", format=",")],
    ).properties(width=WIDTH, height=max(60, ROW_HEIGHT * len(labels)))
    return _spec(chart)


def _data(values: list[dict[str, Any]]) -> Any:
    import altair as alt

    return alt.Data(values=values)  # type: ignore[no-untyped-call]


def _spec(chart: Any) -> dict[str, Any]:
    spec: dict[str, Any] = chart.to_dict()
    spec.setdefault("config", {})["view"] = {"stroke": None}
    return spec
