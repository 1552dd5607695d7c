"""Score reliability across raters: ICC(1) single and k-rater against a one-way ANOVA written out here."""

from __future__ import annotations

import numpy as np
import pytest

from agent_factory.evaluators.audit.model import Rating
from agent_factory.evaluators.audit.reliability import MIN_UNITS, score_reliability


def _icc1(x: np.ndarray) -> tuple[float, float]:
    """ICC(1,1) and ICC(1,k) from the one-way ANOVA (Shrout & Fleiss 1979, case 1), computed independently."""
    n, k = x.shape
    grand = x.mean()
    bms = k * ((x.mean(axis=1) - grand) ** 2).sum() / (n - 1)
    wms = ((x - x.mean(axis=1, keepdims=True)) ** 2).sum() / (n * (k - 1))
    return (bms - wms) / (bms + (k - 1) * wms), (bms - wms) / bms


def _ratings(rng: np.random.Generator, *, units: int, items: int, flip: dict[str, float]) -> list[Rating]:
    out = []
    for u in range(units):
        truth = rng.random(items) < rng.uniform(0.2, 0.8)
        for i in range(items):
            for rater, p in flip.items():
                v = truth[i] ^ (rng.random() < p)
                out.append(Rating(f"t{u}", f"u{u // 3}", f"substance.i{i}", rater, "yes" if v else "no"))
    return out


def test_icc1_matches_a_one_way_anova_written_out() -> None:
    rng = np.random.default_rng(7)
    ratings = _ratings(rng, units=60, items=6, flip={"primary": 0.05, "audit:b": 0.15, "human:c": 0.25})
    [rel] = score_reliability(ratings)
    assert rel.raters == ("audit:b", "human:c", "primary") and rel.n_units == 60
    by_unit: dict[str, dict[str, list[bool]]] = {}
    for r in ratings:
        by_unit.setdefault(r.unit_id, {}).setdefault(r.rater, []).append(r.value == "yes")
    x = np.array([[np.mean(by_unit[u][rt]) for rt in rel.raters] for u in sorted(by_unit)])
    single, k = _icc1(x)
    assert rel.icc1_single == pytest.approx(single, abs=1e-12)
    assert rel.icc1_k == pytest.approx(k, abs=1e-12)
    assert rel.unit is not None and rel.rater is not None and rel.residual is not None
    assert rel.unit + rel.rater + rel.residual == pytest.approx(1.0)
    assert 0.3 < single < 0.95  # noisy raters of a real signal: reliable, not perfect


def test_a_score_with_too_few_shared_units_says_so_and_no_icc() -> None:
    rng = np.random.default_rng(1)
    ratings = _ratings(rng, units=MIN_UNITS - 1, items=3, flip={"primary": 0.1, "audit:b": 0.1})
    [rel] = score_reliability(ratings)
    assert rel.icc1_single is None and rel.note is not None and "needed" in rel.note


def test_one_rater_gives_no_reliability() -> None:
    rng = np.random.default_rng(2)
    assert score_reliability(_ratings(rng, units=20, items=3, flip={"primary": 0.1})) == []
