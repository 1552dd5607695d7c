"""Rules against models (`evaluators/audit/rules.py`): precision, recall and the collect-by-model decision."""

from __future__ import annotations

import numpy as np
import pytest

from agent_factory.evaluators.audit.model import Rating
from agent_factory.evaluators.audit.rules import MIN_REFERENCE_DETECTIONS, MIN_RULE_RECALL, rule_check, rule_checks

ITEM = "execution.ran_query"


def _pairs(seed: int, *, users: int, recall: float, precision: float, prevalence: float = 0.3) -> list[Rating]:
    """A model that finds every true occurrence and a rule of planted recall and precision."""
    rng = np.random.default_rng(seed)
    out = []
    for u in range(users):
        for t in range(4):
            unit, user = f"u{u}/t{t}", f"u{u}"
            present = rng.random() < prevalence
            # false alarms so that precision = recall * p / (recall * p + fa * (1 - p))
            false_alarm = recall * prevalence * (1 / precision - 1) / (1 - prevalence)
            fires = rng.random() < (recall if present else false_alarm)
            out.append(Rating(unit, user, ITEM, "primary", "yes" if fires else "no"))
            out.append(Rating(unit, user, ITEM, "audit:model-a", "yes" if present else "no"))
    return out


def test_a_rule_that_misses_most_occurrences_is_collected_by_model() -> None:
    check = rule_check(_pairs(1, users=100, recall=0.33, precision=0.95), ITEM, "audit:model-a", seed=2)
    assert check.n == 400 and check.rater == "audit:model-a"
    assert check.recall is not None and check.recall_high is not None and check.recall_low is not None
    assert check.recall_low < check.recall < check.recall_high < MIN_RULE_RECALL
    assert check.precision is not None and check.precision > 0.8
    assert check.collect_by_model and check.note is not None and "interval lies below" in check.note


def test_a_rule_that_finds_most_occurrences_stays() -> None:
    check = rule_check(_pairs(3, users=100, recall=0.85, precision=0.9), ITEM, "audit:model-a", seed=2)
    assert check.recall is not None and check.recall > MIN_RULE_RECALL and not check.collect_by_model


def test_few_detections_decide_only_on_a_clear_interval() -> None:
    # 12 units, 3 model detections, the rule catches 1: recall 0.33 but its interval reaches the line.
    values = [("yes", "yes"), ("no", "yes"), ("no", "yes")] + [("no", "no")] * 9
    ratings = [
        Rating(f"t{i}", f"u{i % 6}", ITEM, rater, v)
        for i, pair in enumerate(values) for rater, v in zip(("primary", "audit:m"), pair, strict=True)
    ]
    check = rule_check(ratings, ITEM, "audit:m", n_boot=500)
    assert check.recall == pytest.approx(1 / 3) and not check.collect_by_model
    assert check.note is not None and f"< {MIN_REFERENCE_DETECTIONS}" in check.note


def test_point_recall_below_the_line_decides_with_enough_detections() -> None:
    # recall just under the line on many detections: the interval reaches 0.5, the point decides.
    check = rule_check(_pairs(4, users=60, recall=0.42, precision=0.9), ITEM, "audit:model-a", seed=1)
    assert check.recall is not None and check.recall < MIN_RULE_RECALL
    assert check.recall_high is not None and check.recall_high >= MIN_RULE_RECALL
    assert check.collect_by_model and check.note is not None and "model detections" in check.note


def test_rule_checks_pair_each_rule_item_with_each_model_and_skip_inapplicable_units() -> None:
    ratings = _pairs(5, users=30, recall=0.8, precision=0.9)
    ratings += [Rating("u0/t0", "u0", ITEM, "audit:model-b", "yes"), Rating("x", "ux", ITEM, "primary", "yes"),
                Rating("x", "ux", ITEM, "audit:model-a", "not_applicable"),
                Rating("u0/t0", "u0", "conduct.closing", "audit:model-a", "yes"),
                Rating("u0/t0", "u0", ITEM, "human:ann", "yes")]
    checks = rule_checks(ratings, [ITEM], seed=3, n_boot=200)
    assert [(c.item, c.rater, c.n) for c in checks] == [(ITEM, "audit:model-a", 120), (ITEM, "audit:model-b", 1)]
    humans = rule_checks(ratings, [ITEM], references=["human:ann"], n_boot=200)
    assert [(c.rater, c.n) for c in humans] == [("human:ann", 1)]
    with pytest.raises(ValueError, match="more than once"):
        rule_check([*ratings, ratings[0]], ITEM, "audit:model-a")
