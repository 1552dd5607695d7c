"""Corrected rates (`evaluators/audit/corrected.py`): judge-only and prediction-powered, per item."""

from __future__ import annotations

import pytest

from agent_factory.evaluators.audit.corrected import MIN_LABELS, corrected_rates
from agent_factory.evaluators.audit.model import Rating
from agent_factory.evaluators.stats.ppi import judge_rate, ppi_rate

# 8 units over 4 users; the judge says yes on 5 of 7 applicable units, the people disagree on two of them.
JUDGE = [
    Rating(f"t{i}", f"u{i // 2}", "conduct.closing", "primary", v)
    for i, v in enumerate(["yes", "yes", "no", "yes", "not_applicable", "yes", "no", "yes"])
]
HUMANS = [
    Rating("t0", "u0", "conduct.closing", "human:ann", "yes"),
    Rating("t1", "u0", "conduct.closing", "human:ann", "no"),
    Rating("t1", "u0", "conduct.closing", "human:bob", "yes"),
    Rating("t3", "u1", "conduct.closing", "human:ann", "no"),
    Rating("t6", "u3", "conduct.closing", "human:ann", "no"),
    Rating("t7", "u3", "conduct.closing", "human:ann", "uncollected"),
    Rating("t9", "u4", "conduct.closing", "human:ann", "yes"),  # a unit the judge did not rate
]


def test_corrected_rate_feeds_the_judge_and_the_averaged_labels_to_ppi() -> None:
    [got] = corrected_rates(JUDGE, HUMANS, weights={"t0": 2.0, "t1": 2.0, "t3": 4.0, "t6": 4.0}, metric_names=None,
                            min_labels=1)
    yes = [1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    applicable = [1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    users = ["u0", "u0", "u1", "u1", "u2", "u2", "u3", "u3"]
    expected = ppi_rate(yes, applicable, users, [0, 1, 3, 6], [1.0, 0.5, 0.0, 0.0], [1.0] * 4, weights=[2, 2, 4, 4])
    judge = judge_rate(yes, applicable, users)
    assert (got.metric, got.item, got.reference, got.labels, got.units) == (
        "rate.conduct.closing", "conduct.closing", "human:ann,human:bob", 4, 8,
    )
    assert (got.corrected, got.low, got.high, got.lam) == (expected.value, expected.low, expected.high, expected.lam)
    assert (got.judge, got.judge_low, got.judge_high) == (pytest.approx(5 / 7), judge.low, judge.high)
    assert got.note is not None and "1 labelled unit(s) the judge did not rate" in got.note


def test_too_few_labels_correct_nothing_and_say_why() -> None:
    [got] = corrected_rates(JUDGE, HUMANS, weights={"t0": 2.0, "t1": 2.0, "t3": 4.0, "t6": 4.0})
    assert got.labels == 4 < MIN_LABELS and got.corrected is None and got.low is None and got.high is None
    assert got.judge == pytest.approx(5 / 7) and got.judge_low is not None  # the judge's rate is still reported
    assert got.note is not None and f"a correction needs at least {MIN_LABELS}" in got.note


def test_metric_names_and_items_without_labels() -> None:
    other = [Rating("t0", "u0", "tooluse.grounded", "primary", "yes")]
    got = corrected_rates(
        JUDGE + other, HUMANS, metric_names={"conduct.closing": ("closing_rate", "closing_share")}
    )
    assert [(c.metric, c.item) for c in got] == [
        ("closing_rate", "conduct.closing"), ("closing_share", "conduct.closing"),
    ]  # tooluse.grounded has no labels: no correction


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="no sampling weight"):
        corrected_rates(JUDGE, HUMANS, weights={"t0": 1.0})
    with pytest.raises(ValueError, match="more than once"):
        corrected_rates([*JUDGE, JUDGE[0]], HUMANS)
    with pytest.raises(ValueError, match="'sometimes'"):
        corrected_rates(JUDGE, [Rating("t0", "u0", "conduct.closing", "human:ann", "sometimes")])
