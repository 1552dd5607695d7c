"""Simulated raters with planted truth, for testing the audit's estimators against a known answer (issue 33,
"Done when", first point).

Population: users with several units each; every user has its own prevalence p_u ~ Beta with mean
`prevalence` and concentration `concentration` (smaller: users differ more, so units of one user are alike and
clustering matters). Each item's true value on a unit is `not_applicable` with probability `not_applicable`,
else `yes` with probability p_u, else `no`.

Raters with planted agreement: for an item with planted kappa K, each rater independently copies the true value
with probability r = sqrt(K) and otherwise draws a value from the population marginal pi (the truth's marginal
over all users: pi_yes = (1 - a) * prevalence, pi_no = (1 - a) * (1 - prevalence), pi_na = a). Derivation: every
rater's labels then have the marginal pi (a copy of the truth has it, and so does a draw from it). Two raters
agree for sure when both copy (probability r^2); otherwise at least one label is an independent draw from pi,
and a draw from pi matches any value distributed as pi with probability sum_k pi_k^2 = P_e. So P_o = r^2 +
(1 - r^2) P_e and kappa = (P_o - P_e) / (1 - P_e) = r^2: Cohen's kappa of any pair, Fleiss' kappa of any set,
and Krippendorff's alpha in large samples, whatever the clustering of the truth (the draws are independent of
the user). Each label is then missing with probability `missing`, independently (missing completely at random).

A judge with a planted bias: on every unit and item the judge (rater `primary`) says `not_applicable` exactly
where the truth does, `yes` where the truth is `yes`, and on a true `no` says `yes` with probability q_h, which is
`hard_lift` times larger on hard units (a share `hard` of units, the ones an audit oversamples) than on the
others; the q_h are set so that E[judge's yes rate among applicable units] = prevalence + `judge_bias`. Reference
labels (rater `human:gold`, the true values) cover a stratified sample: `sample` units, half from the hard
units and half from the rest (so hard units are oversampled), each with its weight w_h = N_h / n_h.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field, model_validator

from agent_factory.evaluators.audit.model import RATED_VALUES, Rating
from agent_factory.frozen import Frozen

VERSION = "1"

JUDGE = "primary"
"""The judge's rater label."""
REFERENCE = "human:gold"
"""The reference labels' rater label (the true values on the sampled units)."""


class RaterSimConfig(Frozen):
    """The knobs of the rater simulator."""

    users: int = Field(default=200, ge=2)
    """Users (clusters)."""
    min_units: int = Field(default=2, ge=1)
    """Fewest units per user."""
    max_units: int = Field(default=8, ge=1)
    """Most units per user (uniform between the two)."""
    prevalence: float = Field(default=0.3, gt=0.0, lt=1.0)
    """Mean over users of the share of applicable units that are `yes`: the planted rate."""
    concentration: float = Field(default=4.0, gt=0.0)
    """Beta concentration of the per-user prevalence (a + b): smaller, users differ more."""
    not_applicable: float = Field(default=0.1, ge=0.0, lt=1.0)
    """Share of units on which an item does not apply."""
    kappas: dict[str, float] = Field(default_factory=lambda: {"sim.high": 0.9, "sim.mid": 0.6, "sim.low": 0.3})
    """Planted pairwise kappa per item."""
    raters: tuple[str, ...] = ("audit:model-a", "audit:model-b", "human:ann")
    """The raters of planted agreement (two: Cohen; more: Fleiss)."""
    missing: float = Field(default=0.15, ge=0.0, lt=1.0)
    """Chance that one rater's label of one item on one unit is missing."""
    judge_bias: float = Field(default=0.10, ge=0.0, lt=1.0)
    """How much more often than the truth the judge says `yes` (among applicable units, in expectation)."""
    hard: float = Field(default=0.25, gt=0.0, lt=1.0)
    """Share of hard units (oversampled by the audit)."""
    hard_lift: float = Field(default=3.0, ge=1.0)
    """How many times likelier the judge's false `yes` is on a hard unit than on another."""
    sample: int = Field(default=300, ge=2)
    """Units given reference labels (half hard, half not)."""

    @model_validator(mode="after")
    def _consistent(self) -> RaterSimConfig:
        if self.max_units < self.min_units:
            raise ValueError(f"max_units ({self.max_units}) is below min_units ({self.min_units})")
        if len(self.raters) < 2 or len(set(self.raters)) != len(self.raters):
            raise ValueError(f"raters must be at least two distinct names, got {self.raters}")
        if JUDGE in self.raters or REFERENCE in self.raters:
            raise ValueError(f"raters may not use the judge's ({JUDGE}) or the reference's ({REFERENCE}) label")
        bad = {item: k for item, k in self.kappas.items() if not 0.0 <= k <= 1.0}
        if bad:
            raise ValueError(f"planted kappas must lie in [0, 1]: {bad}")
        if max(false_yes(self)) > 1.0:
            raise ValueError(
                f"judge_bias {self.judge_bias} with hard_lift {self.hard_lift} needs a false-yes chance above 1 "
                f"on hard units (prevalence {self.prevalence}, hard share {self.hard})"
            )
        return self


def false_yes(config: RaterSimConfig) -> tuple[float, float]:
    """(q on other units, q on hard units): the judge's chance of `yes` on a true `no`. The bias is
    (1 - prevalence) * E[q] = judge_bias, with E[q] = (1 - hard) q + hard * lift * q."""
    mean_q = config.judge_bias / (1.0 - config.prevalence)
    base = mean_q / (1.0 - config.hard + config.hard * config.hard_lift)
    return base, base * config.hard_lift


class RaterTruth(Frozen):
    """What was planted, and what the draw realised."""

    kappas: dict[str, float]
    """Planted pairwise kappa per item."""
    rate: float
    """Planted rate of `yes` among applicable units (the population's, over users)."""
    judge_rate: float
    """The judge's planted rate: `rate` + the bias."""
    realised: dict[str, float]
    """Per item, the true rate among applicable units over the simulated units."""
    judge_realised: dict[str, float]
    """Per item, the judge's rate over the simulated units."""
    units: int = Field(ge=0)
    """Units simulated."""
    users: int = Field(ge=0)
    """Users simulated."""


class SimulatedRatings(Frozen):
    """Ratings with planted truth."""

    ratings: tuple[Rating, ...]
    """The raters of planted agreement, every item, missing labels left out."""
    judge: tuple[Rating, ...]
    """The judge's ratings, every unit and item."""
    reference: tuple[Rating, ...]
    """The reference labels (true values) on the sampled units, every item."""
    weights: dict[str, float]
    """Sampling weight of each sampled unit (w_h = N_h / n_h)."""
    truth: RaterTruth
    """What was planted."""


def _rate(values: np.ndarray) -> float:
    applicable = values != 2
    return float(np.mean(values[applicable] == 0)) if applicable.any() else math.nan


def simulate_ratings(config: RaterSimConfig, seed: int) -> SimulatedRatings:
    """Draw one population, its raters, judge and reference sample (same config and seed, same result)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(config.min_units, config.max_units + 1, size=config.users)
    user_of = np.repeat(np.arange(config.users), sizes)
    n = int(user_of.size)
    user_ids = [f"user-{u:04d}" for u in user_of]
    unit_ids = [f"user-{u:04d}/unit-{i:05d}" for i, u in enumerate(user_of)]
    a = config.prevalence * config.concentration
    p_user = rng.beta(a, config.concentration - a, size=config.users)
    hard = rng.random(n) < config.hard
    q_other, q_hard = false_yes(config)
    na = config.not_applicable
    marginal = np.array([(1.0 - na) * config.prevalence, (1.0 - na) * (1.0 - config.prevalence), na])
    ratings: list[Rating] = []
    judge: list[Rating] = []
    truths: dict[str, np.ndarray] = {}
    for item in sorted(config.kappas):
        # values are indices into RATED_VALUES: 0 yes, 1 no, 2 not_applicable
        truth = np.where(rng.random(n) < na, 2, np.where(rng.random(n) < p_user[user_of], 0, 1))
        truths[item] = truth
        copy = math.sqrt(config.kappas[item])
        for rater in config.raters:
            label = np.where(rng.random(n) < copy, truth, rng.choice(3, size=n, p=marginal))
            kept = np.nonzero(rng.random(n) >= config.missing)[0]
            ratings += [Rating(unit_ids[i], user_ids[i], item, rater, RATED_VALUES[label[i]]) for i in kept]
        lie = (truth == 1) & (rng.random(n) < np.where(hard, q_hard, q_other))
        judged = np.where(lie, 0, truth)
        truths[f"{item}#judge"] = judged
        judge += [Rating(unit_ids[i], user_ids[i], item, JUDGE, RATED_VALUES[judged[i]]) for i in range(n)]
    hard_idx, other_idx = np.nonzero(hard)[0], np.nonzero(~hard)[0]
    want_hard = min(config.sample // 2, hard_idx.size)
    want_other = min(config.sample - want_hard, other_idx.size)
    weights: dict[str, float] = {}
    chosen: list[int] = []
    for pool, size in ((hard_idx, want_hard), (other_idx, want_other)):
        if size == 0:
            continue
        picked = np.sort(rng.choice(pool, size=size, replace=False))
        chosen += [int(i) for i in picked]
        weights.update({unit_ids[i]: pool.size / size for i in picked})
    reference = [
        Rating(unit_ids[i], user_ids[i], item, REFERENCE, RATED_VALUES[truths[item][i]])
        for item in sorted(config.kappas) for i in sorted(chosen)
    ]
    truth_info = RaterTruth(
        kappas=dict(config.kappas), rate=config.prevalence, judge_rate=config.prevalence + config.judge_bias,
        realised={item: _rate(truths[item]) for item in config.kappas},
        judge_realised={item: _rate(truths[f"{item}#judge"]) for item in config.kappas},
        units=n, users=config.users,
    )
    return SimulatedRatings(
        ratings=tuple(ratings), judge=tuple(judge), reference=tuple(reference), weights=weights, truth=truth_info,
    )
