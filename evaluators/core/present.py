"""How a component presents itself: the metrics its analyses emit, its headline, its summary lines and its
report section, declared beside its analyses (`evaluators/components/<name>/present.py`).

The views (`factory/views/`: summary, report, show) iterate over the registered components and interpret these
declarations; they hold no component list and no metric name of their own. A metric is declared once, as a
`Metric` (an exact name, or a pattern with `{param}` placeholders) in the component's `metrics` module: its
analyses emit it through that object (`.name`, `.of(...)`) and its summary lines and report blocks refer to it
by the same object; a test checks every declared metric against what the analyses emit. The presentation
(`present`) stays out of the analyses' imports, so rewording a summary line reruns no analysis. `Kind` fixes
how a value is written (one format per kind: `fmt`), `worse` says which direction is worse (the gate reads
it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import KW_ONLY, dataclass
from functools import cached_property
from typing import Any, Literal, Protocol

from pydantic import Field

from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.frozen import Frozen

Kind = Literal["rate", "count", "score", "seconds", "label"]
"""How a value reads: a share in 0-1 (written as a percentage), a count (thousands separators), a score or ratio
(three significant digits), a duration in seconds, or a label (`admitted`, `held`)."""
Worse = Literal["higher", "lower"]
"""Which direction of the value is worse for the agent."""
Place = Literal["spine", "across", "apart"]
"""Where the component stands: on the spine (in registry order), across it (Conduct), or apart (the
instruments: Provenance and Adjudication)."""

_PARAM = re.compile(r"\{([a-z_]+)\}")

UNIT_NAMES: dict[str, tuple[str, str]] = {
    "span": ("span", "spans"), "trace": ("turn", "turns"), "conversation": ("conversation", "conversations"),
    "engagement": ("user", "users"),
}
"""What one unit of each layer is called, singular and plural: a count names its unit from the layer its rows
were judged on (a clause judged per conversation counts conversations), never a view's guess."""


def units_of(layer: str | None, n: int | None = None) -> str:
    """The name of `layer`'s units (`turns`; `turn` when `n` is 1); `units` for a layer no row declared."""
    one, many = UNIT_NAMES.get(layer or "", ("unit", "units"))
    return one if n == 1 else many


class Row(Protocol):
    """A population result as the views hold it (`factory.views.report.model.ResultRow` is one)."""

    @property
    def component(self) -> str:
        """The component that produced it."""

    @property
    def layer(self) -> str | None:
        """The layer of its units."""

    @property
    def metric(self) -> str:
        """The metric name as emitted."""

    @property
    def stratum(self) -> str | None:
        """`all`, `mode=deep`, ...; None when the analysis gave none."""

    @property
    def value(self) -> float | str | None:
        """The estimate, a label, or None when undefined."""

    @property
    def low(self) -> float | None:
        """Lower end of its 95% interval."""

    @property
    def high(self) -> float | None:
        """Upper end of its 95% interval."""

    @property
    def n(self) -> int | None:
        """Its denominator."""

    @property
    def note(self) -> str | None:
        """What the analysis says about it."""



class Metric(Frozen):
    """One metric (or a family of them) a component's analyses emit."""

    name: str = Field(min_length=1)
    """The name as emitted, `{param}` standing for a part that varies (`C(r).{clause}`)."""
    kind: Kind
    """How its value reads."""
    worse: Worse | None
    """Which direction is worse; None for a descriptive metric (a segment's share, a count of sessions)."""
    label: str = Field(min_length=1)
    """What it is, for people."""
    choices: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """Values a parameter takes, when fixed (`step`: thinking, retrieval, chain_complete); others match any."""
    variants: tuple[str, ...] = ()
    """Suffixes of the same estimate by another method (`.wilson`, `.clustered`), also emitted; views show the
    headline interval only."""
    per_unit: bool = False
    """Emitted per unit (with a unit id), not as a population result."""

    @cached_property
    def _rx(self) -> re.Pattern[str]:
        parts, at = [], 0
        for m in _PARAM.finditer(self.name):
            parts.append(re.escape(self.name[at:m.start()]))
            options = self.choices.get(m.group(1))
            parts.append(f"(?P<{m.group(1)}>{'|'.join(map(re.escape, options)) if options else '.+'})")
            at = m.end()
        parts.append(re.escape(self.name[at:]))
        return re.compile("".join(parts))

    @property
    def params(self) -> tuple[str, ...]:
        """The placeholders of its name, in order."""
        return tuple(_PARAM.findall(self.name))

    def of(self, **params: str) -> str:
        """The concrete metric name for these parameter values (a value outside its `choices` is an error)."""
        for k, v in params.items():
            if k in self.choices and v not in self.choices[k]:
                raise ValueError(f"{self.name}: {k}={v!r} is not one of {', '.join(self.choices[k])}")
        return self.name.format(**params)

    def parse(self, metric: str) -> tuple[dict[str, str], str] | None:
        """(parameters, variant suffix) when `metric` is this metric or one of its variants; None otherwise."""
        for v in self.variants:
            if metric.endswith(v) and (m := self._rx.fullmatch(metric[: -len(v)])):
                return m.groupdict(), v
        m = self._rx.fullmatch(metric)
        return (m.groupdict(), "") if m else None

    def variant(self, suffix: str, **params: str) -> str:
        """The concrete name of one of its declared variants (`failure_rate.wilson`)."""
        if suffix not in self.variants:
            raise ValueError(f"{self.name}: no variant {suffix!r}; declared: {', '.join(self.variants) or 'none'}")
        return self.of(**params) + suffix

    def headline(self, metric: str) -> bool:
        """Whether `metric` is this metric itself (not a variant)."""
        got = self.parse(metric)
        return got is not None and got[1] == ""

    def param(self, metric: str, name: str | None = None) -> str:
        """The value of parameter `name` (default: the first) in `metric`, or `metric` when it does not match."""
        got = self.parse(metric)
        if got is None or not got[0]:
            return metric
        return got[0][name or self.params[0]]


UNCOLLECTED = Metric(name="uncollected", kind="count", worse="higher", label="data left uncollected")
"""The count of units whose datum was left uncollected, per item (stratum `item=<id>`): the rate helpers of
several components emit it (`components.execution.rollup.uncollected_results`)."""


# --- one number format per kind ------------------------------------------------------------------------------


def percent(x: float) -> str:
    """A share as a percentage number without the sign: one decimal, two below 1% (so a small interval does
    not read [0.0-0.0])."""
    return f"{100 * x:.2f}" if 0 < abs(x) < 0.01 else f"{100 * x:.1f}"


def seconds(s: float) -> str:
    """A duration: seconds under a minute, minutes under an hour, hours above."""
    if abs(s) < 60:
        return f"{s:.3g} s"
    return f"{s / 3600:.1f} h" if abs(s) >= 3600 else f"{s / 60:.1f} min"


def fmt(value: float | str | None, kind: Kind) -> str:
    """A value written as its kind reads: rate `49.2%`, count `1,892`, score `0.623`, seconds `13.1 min`, a
    label as it is; `undefined` when there is none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "undefined"
    if isinstance(value, str) or kind == "label":
        return str(value)
    if kind == "rate":
        return f"{percent(value)}%"
    if kind == "count":
        return f"{round(value):,}" if float(value).is_integer() else f"{value:,.1f}"
    if kind == "seconds":
        return seconds(value)
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def interval(row: Row, kind: Kind) -> str:
    """`low–high` written as the kind reads (rates as bare percentages: `[2.5-4.5]`); empty without one."""
    if row.low is None or row.high is None:
        return ""
    if kind == "rate":
        return f"{percent(row.low)}-{percent(row.high)}"
    return f"{fmt(row.low, kind)} – {fmt(row.high, kind)}"


def number(row: Row | None) -> float | None:
    """A row's value when it is a number."""
    if row is None or isinstance(row.value, bool) or not isinstance(row.value, int | float):
        return None
    return float(row.value)


def decided(row: Row | None) -> bool:
    """Whether a row has a numeric value over a non-empty denominator."""
    return row is not None and number(row) is not None and (row.n or 0) > 0


def estimate(row: Row | None, kind: Kind, *, with_n: bool = True) -> str:
    """`3.5% [2.5-4.5] n=8,256`: the value, its interval and its n (left out when the line gives it once)."""
    if row is None:
        return "undefined"
    ci = interval(row, kind)
    n = f" n={row.n:,}" if with_n and row.n is not None else ""
    return f"{fmt(row.value, kind)}{f' [{ci}]' if ci else ''}{n}"


class Rows:
    """A component's population rows indexed by declared metric (headline estimates only: no variants)."""

    def __init__(self, rows: Iterable[Row]) -> None:
        self.rows = list(rows)
        self._by: dict[tuple[str, str], Row] = {}
        for r in self.rows:
            self._by.setdefault((r.metric, r.stratum or "all"), r)

    def get(self, metric: Metric, stratum: str = "all", **params: str) -> Row | None:
        """The row of `metric` (with these parameters) in `stratum`."""
        return self._by.get((metric.of(**params), stratum))

    def of(self, metric: Metric, *, stratum: str | None = "all") -> list[Row]:
        """Rows of `metric` (any parameters, no variant) in `stratum` (None: every stratum)."""
        return [r for r in self.rows if metric.headline(r.metric) and (stratum is None or (r.stratum or "all")
                                                                       == stratum)]


@dataclass(frozen=True)
class Line:
    """One summary line a component gives: its text, and the row whose estimate it reports."""

    text: str
    row: Row | None = None
    value: float | None = None
    """The estimate when no row carries it (a count the line derives)."""
    quote: str | None = None
    """Words the view appends in «», shortened to fit the line (a clause's policy sentence)."""


SummaryFn = Callable[[Rows, Sequence[FlagSpec]], list[Line]]
"""A component's summary lines from its rows (and the suite's flags: a clause's text), worst first."""
RowFn = Callable[[Row], str]
"""A label, group or stratum name of a row in a report block."""


@dataclass(frozen=True)
class Block:
    """A report block: the rows of `metrics` as a table, and (`chart`) an interval or count chart."""

    title: str
    metrics: tuple[Metric, ...]
    _: KW_ONLY
    chart: Literal["interval", "count", "none"] = "interval"
    stratum: Literal["all", "every", "strata"] = "every"
    """Rows of the whole population only, of every stratum, or of the strata other than `all` only."""
    label: RowFn | None = None
    """The chart's category (default: the metric's parameter, else the stratum)."""
    group: RowFn | None = None
    """A second grouping drawn side by side (with / without a step)."""
    table_label: RowFn | None = None
    """The table's `what` cell (default: the metric name)."""
    order: Callable[[Row], tuple[float, str]] | None = None
    """The rows' natural order (latency bands by their lower edge); default: as emitted."""
    x_title: str = ""
    """The chart's value axis, in words."""
    note: str = ""
    """What the reader should know to read it (denominators, what is left out)."""
    rule_at: float | None = None
    """A reference line on the chart (a baseline, the admission line)."""
    rule_label: str = ""
    """What the reference line is."""
    evidence: bool = False
    """Quote the component's evidence under it (with `report --evidence`)."""


@dataclass(frozen=True)
class Pivot:
    """A report table with one row per value of `by` (a clause) and one column per metric, worst first:
    ordered by `order`'s metrics in their `worse` direction."""

    title: str
    _: KW_ONLY
    by: str
    """The parameter the rows are keyed on (a clause)."""
    columns: tuple[tuple[str, Metric], ...]
    """(header, metric) per column; a count or label cell is its value alone, never cut."""
    order: tuple[Metric, ...]
    """The metrics ranking the rows, each in its `worse` direction, rows without a value last."""
    note: str = ""


@dataclass(frozen=True, kw_only=True)
class Section:
    """A component's report section."""

    intro: str
    blocks: tuple[Block | Pivot, ...]
    decisive: tuple[Metric, ...]
    """The metrics without which the section has nothing to say: all undefined reads as data not collected."""
    absent: Callable[[Rows], str | None] | None = None
    """A reason the component knows for having nothing (every session unobservable), or None."""
    never: str | None = None
    """What to say when none of the section's metrics was emitted (Adjudication: no second rater yet)."""
    uncollected: tuple[Metric, ...] = ()
    """Its counts of data left uncollected (an all-undefined section then reads: needs a model)."""


@dataclass(frozen=True, kw_only=True)
class Presentation:
    """Everything the views need of one component."""

    title: str
    place: Place
    metrics: tuple[Metric, ...]
    """Every metric its analyses emit."""
    headline: tuple[tuple[str, Metric], ...]
    """The results that stand for it (the spine's box), each with a short label."""
    box: Callable[[Rows], list[str]] | None = None
    """The spine box's lines when its headline is a count over a family (clauses violated); None: the
    headline metrics' estimates."""
    summary: SummaryFn
    summary_rank: int
    """Its place in the terminal summary (what the agent broke first, then the spine, then the instruments)."""
    section: Section
    absent: str = "no results"
    """What the summary says when it has no line."""
    names_unmeasured: bool = False
    """Its summary lines already say which of its estimates had no unit (Conduct's never-applied clauses), so
    the summary adds no line of its own for them."""
    rollup: Metric | None = None
    """The stored layer rollup standing in for its layer-table cells when per-unit flags are unavailable."""
    goodness: Callable[[Rows], float | None] | None = None
    """Its headline goodness in 0-1 for the optional composite view (None: not weighed)."""
    weight: float = 0.0
    """Its weight in the composite view (a choice, shown beside it)."""
    evidence_of: Callable[[str], str | None] | None = None
    """The datum whose evidence a per-unit result of this metric stands on (what the report quotes), or None."""
    flag_param: tuple[str, Callable[[str], str | None]] | None = None
    """A parameter its flags carry (Conduct's `clause`, for `show --clause`): its name, and the function giving
    its value from a flag id (None for a flag without one)."""
    from_audit: Callable[[Any], Sequence[Row]] | None = None
    """Its rows from the latest stored audit (an `evaluators.audit.model.AuditReport`; not imported here, so the
    analyses' content versions do not follow the audit's model): Adjudication's agreement per item, which the
    views add to its stored results. None: the audit gives it none."""

    def metric_of(self, name: str) -> Metric | None:
        """The declared metric `name` is (or is a variant of); None when undeclared."""
        return next((m for m in self.metrics if m.parse(name) is not None), None)

    def order_of(self, metric: Metric) -> Callable[[Row], tuple[float, str]] | None:
        """The natural order of `metric`'s rows, when a block of its section declares one (latency bands)."""
        return next((b.order for b in self.section.blocks if isinstance(b, Block) and b.order is not None
                     and metric in b.metrics), None)

    def kind_of(self, name: str) -> Kind | None:
        """The kind of metric `name`; None when undeclared."""
        m = self.metric_of(name)
        return None if m is None else m.kind
