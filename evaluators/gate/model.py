"""What the gate (the outer loop, docs/method.md section 7) decides and how it checked itself, as data.

A gate run compares a baseline and a candidate agent version per component: every gated metric (a component's
`GateMeasure`) gets a user-clustered test against a threshold calibrated on the baseline alone (`Calibration`),
every confirmed invariant is checked with zero tolerance (`Incident`), and each failure becomes a proposed fix
bound to its acceptance metric (`Fix`). The measures are pure (`evaluators.gate`); `factory/loops/gate/` does the
I/O around them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from agent_factory.frozen import Frozen

VERSION = "1"
"""The gate's arithmetic version: a stored calibration made under another version is not reused."""

FAMILY_ALPHA = 0.05
"""The family false-alarm rate the thresholds are calibrated to (any metric of any component, per A/A split)."""

Verdict = Literal["pass", "fail", "incident"]
"""A component's verdict. `incident` (a confirmed invariant broken in the candidate) takes precedence over `fail`."""
MetricVerdictValue = Literal["pass", "fail"]
Unit = Literal["pp", "%", "abs"]
"""How a change reads: percentage points of a rate, a relative change of a geometric mean, or absolute units."""

EXIT_PASS, EXIT_FAIL, EXIT_INCIDENT = 0, 4, 5
"""`gate`'s exit codes: all pass, a component failed, an incident (takes precedence)."""


class MetricVerdict(Frozen):
    """One gated metric, baseline against candidate."""

    component: str
    metric: str
    """As emitted: `failure_rate`, `violation_rate.no_unprompted_disclosure`."""
    label: str
    """What it is, for people (the component's `Metric.label`)."""
    layer: str
    worse: Literal["higher", "lower"]
    unit: Unit
    baseline: float | None
    """The metric over the baseline's users (a share, a geometric mean, a mean); None when no row contributes."""
    candidate: float | None
    delta: float | None
    """candidate - baseline in `unit` (pp: percentage points; %: relative change of the geometric mean)."""
    statistic: float | None
    """The user-clustered z of the change, signed so that positive is worse."""
    per_turn_statistic: float | None
    """The same change tested as if rows were independent: for contrast only, never decides."""
    threshold: float | None
    """The worse-direction z above which the metric fails (calibrated, or the Bonferroni fallback)."""
    calibrated: bool
    """Whether `threshold` comes from a stored A/A calibration of this baseline and suite."""
    bound: float | None = None
    """Sequential mode: the always-valid lower bound of the worse-direction change, in `unit`, positive meaning
    worse (the metric fails when it is > 0)."""
    verdict: MetricVerdictValue | None
    """None: undecided (`reason` says why): no rows on a side, or too few users."""
    reason: str | None = None
    users_baseline: int = Field(ge=0)
    users_candidate: int = Field(ge=0)
    rows_baseline: int = Field(ge=0)
    rows_candidate: int = Field(ge=0)


class Incident(Frozen):
    """A confirmed invariant broken in the candidate: opened whatever the statistics say."""

    id: str
    """Stable over reruns: a digest of (baseline, candidate, clause, unit)."""
    component: str
    clause: str
    """The invariant clause's id."""
    metric: str
    unit_id: str
    """The unit that broke it (`agent-factory show UNIT` prints it with its evidence)."""
    evidence: str
    """The evidence pointers and facts the collector recorded for the violation."""
    candidate: str
    """The candidate it was found in (a store path or a selector)."""
    opened_at: str
    """ISO 8601, UTC."""


class ComponentVerdict(Frozen):
    """One component's verdict and the metrics behind it."""

    component: str
    verdict: Verdict | None
    """None: undecided (no gated metric could be tested), or not gated (the instruments)."""
    reason: str | None = None
    metrics: tuple[MetricVerdict, ...] = ()
    incidents: tuple[Incident, ...] = ()


class FixCheck(Frozen):
    """A proposed fix re-checked on a candidate."""

    at: str
    candidate: str
    value: float | None
    """The acceptance metric on that candidate."""
    status: Literal["met", "not_met", "undecided"]


class Fix(Frozen):
    """A finding turned into a proposed fix, bound to the metric that accepts it."""

    id: str
    """Stable: a digest of (component, metric or clause)."""
    component: str
    kind: Literal["metric", "incident"]
    metric: str
    """The acceptance metric (for an incident, the clause's violation rate, which must be 0)."""
    finding: str
    """What was found, in one line (`delivery failure 3.5% -> 8.1% (+4.6 pp), z 6.1 > 2.9`)."""
    acceptance: str
    """What accepts the fix, in one line (`failure_rate <= 3.5% (the baseline's), no significant increase`)."""
    target: float | None
    """The value the acceptance metric must not be worse than (the baseline's; 0 for an invariant)."""
    opened_at: str
    opened_by: str
    """The candidate whose gate run opened it."""
    status: Literal["open", "met"]
    checks: tuple[FixCheck, ...] = ()
    """Re-checks on later candidates, oldest first."""


class CalibrationRef(Frozen):
    """Which stored calibration a gate run used."""

    key: str
    """A digest of the baseline's statistics, the suite's measures and the gate's version."""
    at: str
    splits: int
    family_false_alarm_heldout: float


class GateReport(Frozen):
    """One gate run."""

    version: str = VERSION
    baseline: str
    candidate: str
    suite: str | None
    components: tuple[ComponentVerdict, ...]
    verdict: Verdict | None
    """The worst component verdict (incident > fail > pass); None when every component is undecided."""
    exit_code: int
    calibration: CalibrationRef | None
    """None: no calibration of this baseline and suite is stored; thresholds are the Bonferroni fallback."""
    sequential: bool = False
    looks: int | None = None
    """Sequential mode: how many looks at this (baseline, candidate) pair have been taken, this one included."""
    fixes: tuple[Fix, ...] = ()
    """Fixes opened or re-checked by this run."""
    users_baseline: int
    users_candidate: int
    seconds: float


class MetricAA(Frozen):
    """One metric's A/A check."""

    # A metric with no variance in any split has threshold +inf; JSON has no infinity, so it is written "Infinity"
    # (read back as inf) rather than null (which would not read back as a float).
    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="strings")

    threshold: float
    """Its calibrated worse-direction z threshold."""
    false_alarm_heldout: float
    """Share of held-out splits where it alone crossed its threshold."""
    per_turn_false_alarm: float
    """Share of all splits where the per-turn test (|z| >= 2) fired on it."""
    undefined_splits: int = 0
    """Splits where it could not be tested (no rows on a side); they count as no alarm."""


class AAReport(Frozen):
    """A/A: the gate's false alarms on the baseline split against itself."""

    splits: int
    level: float
    """The per-metric one-sided tail level the thresholds sit at (calibrated so the family rate is 5%)."""
    family_false_alarm_calibration: float
    family_false_alarm_heldout: float
    per_turn_family_false_alarm: float
    """The per-turn |z| >= 2 test's family false-alarm rate over every split, for contrast."""
    per_metric: dict[str, MetricAA]
    """Measure key (`component:metric`) -> its check."""


class PowerPoint(Frozen):
    """One strength of one seeded defect."""

    strength: float
    """The defect's strength: a share of units altered, or a latency factor."""
    effect: float
    """The mean realised change of the defect's target metric, in its unit."""
    power: float
    """Share of draws in which the target metric failed the gate."""
    family: float
    """Share of draws in which any metric failed the gate."""


class DefectPower(Frozen):
    """What the gate can detect of one seeded defect."""

    metric: str
    """The defect's target metric (the measure key it moves most)."""
    unit: Unit
    mde: float | None
    """The smallest change of the target caught in 80% of draws, in `unit`; None when the strongest tried missed."""
    per_metric_mde: dict[str, float | None] = Field(default_factory=dict)
    """Every metric the defect reached 80% detection on, with its MDE in its own unit."""
    cross_talk: dict[str, float]
    """Measure key -> share of draws in which it failed, at the smallest strength where the target is caught
    in 95% of draws (the strongest tried when none is): how often the defect moves other metrics."""
    curve: tuple[PowerPoint, ...]
    draws: int


class PowerReport(Frozen):
    """Seeded defects in half the users: the smallest effects the gate catches."""

    defects: dict[str, DefectPower]


class CalibrationReport(Frozen):
    """`gate calibrate`: the gate checked on the baseline alone, stored and reused until it changes."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="strings")  # +inf thresholds (MetricAA)

    version: str = VERSION
    key: str
    baseline: str
    suite: str | None
    users: int
    measures: tuple[str, ...]
    thresholds: dict[str, float]
    aa: AAReport
    power: PowerReport | None
    seconds: float
    at: str


__all__ = [
    "EXIT_FAIL", "EXIT_INCIDENT", "EXIT_PASS", "FAMILY_ALPHA", "VERSION", "AAReport", "CalibrationRef",
    "CalibrationReport", "ComponentVerdict", "DefectPower", "Fix", "FixCheck", "GateReport", "Incident",
    "MetricAA", "MetricVerdict", "MetricVerdictValue", "PowerPoint", "PowerReport", "Unit", "Verdict",
]
