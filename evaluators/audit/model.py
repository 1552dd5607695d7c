"""What the audit (the inner loop, docs/method.md section 6) reads and what it finds, as data.

The audit's currency is the `Rating`: one rater's value of one data item on one unit. Raters are the suite's own
cascade (`primary`), a second collector (`audit:<model-id>`) and people (`human:<name>`, imported labels). Every
measure below reads ratings, flags or results and is pure; `factory/loops/audit/` does the I/O around them.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import Field

from agent_factory.frozen import Frozen

VERSION = "1"

RATED_VALUES = ("yes", "no", "not_applicable")
"""The values a rating may take. `uncollected` is no rating: it is a missing label (left out, never a pass)."""

HUMAN_PREFIX = "human:"
"""The rater label of a person's labels: `human:<name>` (imported with `labels import` or `review import`)."""


class Rating(NamedTuple):
    """One rater's value of one item on one unit. A NamedTuple: the audit reads tens of thousands of them."""

    unit_id: str
    """The unit the item is about."""
    user: str
    """The user (cluster) the unit belongs to: intervals resample users, never units."""
    item: str
    """The data item (`DataDefinition.id`, or an imported label's item, e.g. `mast.1_1`)."""
    rater: str
    """`primary`, `audit:<model-id>` or `human:<name>`."""
    value: str
    """One of `RATED_VALUES`."""


class ItemAgreement(Frozen):
    """Agreement among the raters of one data item, and whether the item is admitted by it."""

    item: str
    """The data item."""
    component: str
    """The component it belongs to (the id's first part)."""
    raters: tuple[str, ...]
    """The raters compared, sorted."""
    n: int = Field(ge=0)
    """Units rated by at least two of the raters."""
    labels: int = Field(ge=0)
    """Ratings read (every rater's, on those units)."""
    kappa: float | None
    """Cohen's kappa (two raters) or Fleiss' kappa (more, on units every rater rated), unrounded; None when
    undefined (`reason` says why)."""
    kappa_low: float | None = None
    """Lower end of kappa's 95% interval (bootstrap over users)."""
    kappa_high: float | None = None
    """Upper end of that interval."""
    kappa_method: Literal["cohen", "fleiss"] | None = None
    """Which kappa `kappa` is."""
    alpha: float | None = None
    """Krippendorff's alpha (nominal; missing labels allowed)."""
    alpha_low: float | None = None
    """Lower end of alpha's 95% interval (bootstrap over users)."""
    alpha_high: float | None = None
    """Upper end of that interval."""
    admitted: bool | None = None
    """kappa at two decimals >= 0.60 (`stats.admit`); None when kappa is undefined (not decided, not a pass)."""
    near_line: bool = False
    """Kappa's interval contains the admission line: the decision could go either way with more labels."""
    reason: str | None = None
    """Why kappa is undefined, or a caveat."""


class OverallAgreement(Frozen):
    """Agreement over every item at once (`agreement --json`'s `overall`)."""

    krippendorff_alpha: float | None
    """Krippendorff's alpha (nominal) over every (unit, item) pair as one unit of analysis."""
    fleiss_kappa: float | None
    """Fleiss' kappa over the (unit, item) pairs every rater rated; None when no pair has them all."""
    units: int = Field(ge=0)
    """(unit, item) pairs with at least two ratings."""
    labels: int = Field(ge=0)
    """Ratings read."""
    raters: int = Field(ge=0)
    """Distinct raters."""


class AgreementReport(Frozen):
    """Agreement among any raters, humans and models (`agreement --json`)."""

    overall: OverallAgreement
    """Over every item."""
    items: tuple[ItemAgreement, ...] = ()
    """Per item."""


class RuleCheck(Frozen):
    """A rule-collected item against a model rater on the same units: the rule's precision and recall."""

    item: str
    """The data item."""
    rater: str
    """The model rater taken as reference."""
    positive: str = "yes"
    """The value counted as a detection."""
    n: int = Field(ge=0)
    """Units both rated (applicable to both)."""
    precision: float | None
    """Of the rule's detections, the share the model agrees with; None with no detection."""
    precision_low: float | None = None
    """Lower end of the 95% interval (bootstrap over users)."""
    precision_high: float | None = None
    """Upper end."""
    recall: float | None
    """Of the model's detections, the share the rule also made; None when the model made none."""
    recall_low: float | None = None
    """Lower end of the 95% interval."""
    recall_high: float | None = None
    """Upper end."""
    collect_by_model: bool = False
    """The rule's recall is too low: the item should be collected by a model."""
    note: str | None = None
    """Why a value is missing, or how to read it."""


class Criterion(Frozen):
    """Criterion validity: one per-unit flag (or result) against one outcome, at one level."""

    flag: str
    """The flag id."""
    component: str
    """The component raising it."""
    meaning: str
    """`bad`, `descriptive` or `instrument` (FlagSpec.meaning)."""
    outcome: str
    """The outcome (`task_reward`, a feedback kind, `task_success`, or a next-layer result)."""
    level: str
    """The units compared (`conversation`, `trace`, ...)."""
    n: int = Field(ge=0)
    """Units with both the flag decided and the outcome."""
    auc: float | None
    """Rank AUC of the flag for a bad outcome (0.5: no information; above: the flag goes with bad outcomes)."""
    low: float | None = None
    """Lower end of the AUC's 95% interval (users resampled)."""
    high: float | None = None
    """Upper end."""
    difference: float | None = None
    """Mean outcome with the flag minus without."""
    difference_low: float | None = None
    """Lower end of the difference's 95% user-clustered interval."""
    difference_high: float | None = None
    """Upper end."""
    fails: bool = False
    """A flag meant as bad that goes with good outcomes (the interval of the difference above 0, or the AUC's
    below 0.5): it points the wrong way."""
    note: str | None = None
    """Why a value is missing, or why the flag fails."""


class JaccardPair(Frozen):
    """Two flags (or items) that mostly fire on the same units."""

    a: str
    """One flag or item."""
    b: str
    """The other."""
    jaccard: float = Field(ge=0.0, le=1.0)
    """|A and B| / |A or B| of the units each fires on."""
    n: int = Field(ge=0)
    """|A or B|."""


class Discriminant(Frozen):
    """Discriminant validity: do the components measure different things?"""

    component_jaccard: tuple[JaccardPair, ...] = ()
    """Per pair of components, the Jaccard of the sessions each flags (any of its bad flags)."""
    unique: dict[str, int] = Field(default_factory=dict)
    """Per component, sessions it alone flags."""
    near_duplicates: tuple[JaccardPair, ...] = ()
    """Item or flag pairs whose raised sets nearly coincide (Jaccard >= 0.9): one may be redundant."""


class GoodhartSignal(Frozen):
    """A metric that improved while the layer above it got worse, between two points of the store's history."""

    metric: str
    """The metric that improved."""
    next_layer: str
    """The next layer's metric that worsened."""
    before: str
    """When (or which run) the earlier point is."""
    after: str
    """The later point."""
    metric_change: float
    """How much the metric improved (in its better direction)."""
    next_change: float
    """How much the next layer worsened (in its worse direction)."""


class ScoreReliability(Frozen):
    """Reliability of one score across raters: variance shares and ICC(1)."""

    score: str
    """The score (S(x), a rate)."""
    n_units: int = Field(ge=0)
    """Units scored by every rater."""
    raters: tuple[str, ...]
    """The raters."""
    unit: float | None = None
    """Share of variance between units."""
    rater: float | None = None
    """Share from systematic rater differences."""
    residual: float | None = None
    """Share left over."""
    icc1_single: float | None = None
    """ICC(1,1): one rater's reliability."""
    icc1_k: float | None = None
    """ICC(1,k): the mean of k raters' reliability."""
    note: str | None = None
    """Why a value is missing."""


class Corrected(Frozen):
    """A rate measured by the judge (the primary collector) on every unit, and corrected with a labelled sample
    (prediction-powered inference, PPI++), its interval resampling users."""

    metric: str
    """The rate (`rate.<item>`: the share of applicable units judged `yes`)."""
    item: str
    """The item it reads."""
    reference: str
    """The raters the labels come from (`human:*` or an `audit:<model>`)."""
    judge: float | None
    """The judge-only estimate over every unit."""
    judge_low: float | None = None
    """Its 95% interval (users resampled)."""
    judge_high: float | None = None
    """Upper end."""
    corrected: float | None
    """The prediction-powered estimate."""
    low: float | None = None
    """Its 95% interval."""
    high: float | None = None
    """Upper end."""
    labels: int = Field(ge=0)
    """Labelled units the correction used."""
    units: int = Field(ge=0)
    """Units the judge rated."""
    lam: float | None = None
    """The power-tuning weight (0: labels alone; 1: classic PPI)."""
    method: str = "ppi++ (user-clustered)"
    """The estimator."""
    note: str | None = None
    """Why a value is missing."""


Action = Literal["retired", "rewrite_proposed", "rewrite_approved", "reinstated", "collect_by_model"]


class Correction(Frozen):
    """One change the audit made or proposed, with why and the figures before and after."""

    at: str
    """When (ISO 8601, UTC)."""
    audit_id: str
    """The audit that made it."""
    item: str
    """The data item."""
    item_version: str
    """The item's version it applies to."""
    action: Action
    """What was done."""
    why: str
    """One line: the figure that failed and the line it failed."""
    before: dict[str, float | str | None] = Field(default_factory=dict)
    """Figures before (kappa, precision, ...)."""
    after: dict[str, float | str | None] = Field(default_factory=dict)
    """Figures after, when known (a re-audit fills them)."""


class Stratum(Frozen):
    """One stratum of the audit sample: its population and what was drawn from it."""

    component: str
    """The component."""
    layer: str
    """The unit layer."""
    stratum: str
    """The traffic stratum (segment, or `hard` for the oversampled hard units)."""
    population: int = Field(ge=0)
    """N_h: units in the stratum."""
    sampled: int = Field(ge=0)
    """n_h: units drawn."""
    weight: float | None
    """w_h = N_h / n_h; None when nothing was drawn."""


class SampleSummary(Frozen):
    """The audit's stratified sample."""

    seed: int
    """The seed it was drawn with (the same seed and store give the same sample)."""
    size: int = Field(ge=0)
    """Units drawn in all."""
    strata: tuple[Stratum, ...] = ()
    """Per stratum."""


class AuditReport(Frozen):
    """Everything one audit found (`audit --json`), stored with the audit."""

    audit_id: str
    """The audit's id."""
    started_at: str
    """When it started (ISO 8601, UTC)."""
    seconds: float = Field(ge=0.0)
    """Wall time."""
    raters: tuple[str, ...] = ()
    """The audit raters used (`audit:<model>`), and the human raters found."""
    model_calls: int = Field(ge=0)
    """Model calls the audit made (cached answers are not calls)."""
    sample: SampleSummary | None = None
    """The sample re-collected; None when no rater was configured (nothing re-collected)."""
    items: tuple[ItemAgreement, ...] = ()
    """Agreement per data item."""
    retired: tuple[str, ...] = ()
    """Items retired (this audit and still retired from before)."""
    corrections: tuple[Correction, ...] = ()
    """The corrections this audit made or proposed."""
    rules: tuple[RuleCheck, ...] = ()
    """Rule-collected items against a model."""
    criterion: tuple[Criterion, ...] = ()
    """Every per-unit flag against the outcomes the traces carry."""
    discriminant: Discriminant = Field(default_factory=Discriminant)
    """Do components measure different things."""
    goodhart: tuple[GoodhartSignal, ...] = ()
    """Metrics that improved while the next layer worsened."""
    reliability: tuple[ScoreReliability, ...] = ()
    """Score reliability across raters."""
    corrected: tuple[Corrected, ...] = ()
    """Judge-only and corrected rates side by side."""
    snapshot: dict[str, float | None] = Field(default_factory=dict)
    """The population metrics at this audit (`component/metric` -> value), the history Goodhart reads."""
    notes: tuple[str, ...] = ()
    """What the audit could not do, and why (no rater configured, no outcome in the traces, ...)."""
