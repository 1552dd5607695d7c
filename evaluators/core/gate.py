"""What a component offers the gate (the outer loop): its gated metrics as per-unit contributions.

The gate compares a baseline and a candidate agent version per component, and recomputes each metric thousands
of times over random halves of the users (A/A calibration, seeded defects). It cannot rerun an analysis for each
of those, so each component declares, beside its metrics, the metrics it puts before the gate as a *ratio over
units*: each unit row contributes a numerator `y` and a weight `x`, and the metric over any set of users is
`sum(y) / sum(x)` over their rows. A rate is `(1 if the event else 0, 1)` per eligible unit; a geometric mean is
`(log value, 1)` read back through `exp`. The contribution reuses the analysis' own helpers (Execution's
`failed(row)`), so the measure and the analysis cannot drift apart (a test checks the pooled measure against the
analysis' population result on real data). The direction that is worse is the `Metric`'s own (`worse`).

Pure: a contribution reads one `UnitRow`; the gate's arithmetic is in `evaluators.gate`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from agent_factory.evaluators.core.model import Layer
from agent_factory.evaluators.core.present import Metric
from agent_factory.evaluators.core.registry import UnitRow
from agent_factory.knowledge_packs import KnowledgePack

Scale = Literal["rate", "log", "mean"]
"""How a measure's value and its change read: `rate` a share (change in percentage points), `log` a mean of logs
read back as a geometric mean (change as a ratio, +46%), `mean` a plain mean (change in its own units)."""

Contribution = Callable[[UnitRow], tuple[float, float] | None]
"""One row's (y, x): numerator and weight; None when the row is outside the measure (not eligible, or its data
were not collected: an uncollected datum never counts as a pass)."""


@dataclass(frozen=True)
class GateMeasure:
    """One metric a component puts before the gate, as a ratio of per-unit contributions."""

    component: str
    metric: Metric
    """The declared metric: its label, kind and the direction that is worse (`worse` must not be None)."""
    name: str
    """The metric as emitted (`metric.of(...)`): `failure_rate`, `violation_rate.no_unprompted_disclosure`."""
    layer: Layer
    """The layer whose rows contribute."""
    items: tuple[str, ...]
    """The data items the contribution reads (the gate loads only these)."""
    contribution: Contribution
    scale: Scale = "rate"
    invariant: bool = False
    """A zero-tolerance measure (a confirmed invariant clause): any candidate row with y > 0 opens an incident."""

    def __post_init__(self) -> None:
        if self.metric.worse is None:
            raise ValueError(f"gate measure {self.name!r}: its metric {self.metric.name!r} declares no worse "
                             f"direction; only metrics with worse='higher' or 'lower' can be gated")
        if not self.metric.headline(self.name):
            raise ValueError(f"gate measure {self.name!r} is not an instance of metric {self.metric.name!r}")

    @property
    def key(self) -> str:
        """`<component>:<name>`: unique over a suite."""
        return f"{self.component}:{self.name}"

    @property
    def sign(self) -> float:
        """+1 when higher is worse, -1 when lower is: a worse-direction statistic is `sign * z`."""
        return 1.0 if self.metric.worse == "higher" else -1.0


GateFor = Callable[[KnowledgePack], tuple[GateMeasure, ...]]
"""A component's gated measures over a pack (Conduct's come from the clauses)."""

__all__ = ["Contribution", "GateFor", "GateMeasure", "Scale"]
