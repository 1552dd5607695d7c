"""Agreement per data item (`evaluators/audit/agreement.py`) against independent computations: Krippendorff's
alpha against the `krippendorff` package, Fleiss' kappa against statsmodels, Cohen's against scikit-learn, and the
vectorised user bootstrap against replicates recomputed from the drawn units."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from agent_factory.evaluators.audit.agreement import agreement_report, item_agreements, overall_agreement
from agent_factory.evaluators.audit.model import RATED_VALUES, Rating
from agent_factory.evaluators.stats import cohen_kappa
from agent_factory.evaluators.stats.agreement_ci import bootstrap_weights, cohen_from_tables, fleiss_from_sums
from agent_factory.evaluators.stats.alpha import MISSING, krippendorff_alpha

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the 4 observers x 12 units example with
# missing values; nominal alpha = 0.743 (his worked figure).
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def _simulated(seed: int, raters: tuple[str, ...], *, missing: float, users: int = 60) -> list[Rating]:
    """Ratings of two items by several raters: a shared truth per unit, each rater copying it with
    probability 0.75, some labels missing."""
    rng = np.random.default_rng(seed)
    out = []
    for u in range(users):
        prevalence = rng.uniform(0.1, 0.7)
        for t in range(int(rng.integers(1, 6))):
            for item in ("conduct.closing", "tooluse.grounded"):
                truth = rng.choice(RATED_VALUES, p=[prevalence, (1 - prevalence) * 0.8, (1 - prevalence) * 0.2])
                for rater in raters:
                    if rng.random() < missing:
                        continue
                    value = truth if rng.random() < 0.75 else rng.choice(RATED_VALUES)
                    out.append(Rating(f"u{u}/t{t}", f"u{u}", item, rater, str(value)))
    return out


def _matrix(ratings: list[Rating], item: str, raters: tuple[str, ...]) -> np.ndarray:
    """raters x units with NaN for missing, in the `krippendorff` package's layout."""
    units = sorted({r.unit_id for r in ratings if r.item == item})
    data = np.full((len(raters), len(units)), np.nan)
    for r in ratings:
        if r.item == item:
            data[raters.index(r.rater), units.index(r.unit_id)] = RATED_VALUES.index(r.value)
    return data


def test_alpha_reproduces_krippendorffs_worked_example() -> None:
    values = np.array([[MISSING if v is None else v - 1 for v in row] for row in KRIPPENDORFF_2011]).T
    result = krippendorff_alpha(values, 5)
    assert result.value == pytest.approx(0.743, abs=5e-4)
    assert (result.units, result.labels) == (11, 40)  # unit 12 has a single label: not pairable
    expected = krippendorff.alpha(
        reliability_data=[[np.nan if v is None else v for v in row] for row in KRIPPENDORFF_2011],
        level_of_measurement="nominal",
    )
    assert result.value == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_alpha_matches_the_krippendorff_package_with_missing_labels(seed: int) -> None:
    raters = ("audit:m1", "human:ann", "primary")
    ratings = _simulated(seed, raters, missing=0.25)
    for result in item_agreements(ratings, n_boot=50):
        expected = krippendorff.alpha(
            reliability_data=_matrix(ratings, result.item, raters), level_of_measurement="nominal"
        )
        assert result.alpha == pytest.approx(expected, abs=1e-12)
        assert result.kappa_method == "fleiss"


@pytest.mark.parametrize("seed", [4, 5])
def test_fleiss_matches_statsmodels_on_units_every_rater_rated(seed: int) -> None:
    raters = ("audit:m1", "audit:m2", "human:ann", "primary")
    ratings = _simulated(seed, raters, missing=0.1)
    for result in item_agreements(ratings, n_boot=50):
        data = _matrix(ratings, result.item, raters)
        complete = data[:, ~np.isnan(data).any(axis=0)].T.astype(int)
        table = np.stack([np.bincount(row, minlength=3) for row in complete])
        assert result.kappa == pytest.approx(sm_fleiss_kappa(table, method="fleiss"), abs=1e-12)


@pytest.mark.parametrize("seed", [6, 7])
def test_cohen_matches_scikit_learn_on_units_both_rated(seed: int) -> None:
    raters = ("audit:m1", "primary")
    ratings = _simulated(seed, raters, missing=0.2)
    for result in item_agreements(ratings, n_boot=50):
        data = _matrix(ratings, result.item, raters)
        both = data[:, ~np.isnan(data).any(axis=0)]
        assert result.kappa_method == "cohen"
        assert result.kappa == pytest.approx(cohen_kappa_score(both[0], both[1]), abs=1e-12)


def test_vectorised_replicates_equal_kappa_of_the_drawn_units() -> None:
    # One replicate = the units of the drawn users, each user as often as drawn; recompute naively and compare.
    rng = np.random.default_rng(11)
    users = 25
    per_user = [rng.integers(0, 3, size=(int(rng.integers(1, 5)), 3)) for _ in range(users)]
    weights = next(bootstrap_weights(users, 5, np.random.default_rng(3)))
    assert weights.shape == (5, users) and np.all(weights.sum(axis=1) == users)
    tables = np.stack([np.bincount(u[:, 0] * 3 + u[:, 1], minlength=9) for u in per_user]).astype(float)
    counts = [np.stack([np.bincount(row, minlength=3) for row in u]) for u in per_user]
    fleiss_cols = np.stack([np.r_[(c * c).sum(), len(c), c.sum(axis=0)] for c in counts]).astype(float)
    for w in weights:
        drawn = np.concatenate([np.repeat(per_user[g], w[g], axis=0) for g in range(users) if w[g]])
        naive = cohen_kappa(list(drawn[:, 0]), list(drawn[:, 1]), labels=[0, 1, 2]).value
        assert float(cohen_from_tables((w @ tables).reshape(3, 3))) == pytest.approx(naive, abs=1e-12)
        drawn_counts = np.stack([np.bincount(row, minlength=3) for row in drawn])
        summed = w @ fleiss_cols
        vectorised = float(fleiss_from_sums(summed[0], summed[1], summed[2:], 3))
        assert vectorised == pytest.approx(sm_fleiss_kappa(drawn_counts, method="fleiss"), abs=1e-12)


def test_interval_resamples_users_and_is_reproducible() -> None:
    ratings = _simulated(8, ("audit:m1", "primary"), missing=0.0, users=80)
    first = item_agreements(ratings, seed=5, n_boot=400)
    assert first == item_agreements(list(reversed(ratings)), seed=5, n_boot=400)
    for result in first:
        assert result.kappa_low is not None and result.kappa_high is not None and result.kappa is not None
        assert result.kappa_low < result.kappa < result.kappa_high
        assert result.alpha_low is not None and result.alpha_high is not None
        assert result.admitted is (round(result.kappa + 1e-12, 2) >= 0.60)
        assert result.near_line is (result.kappa_low <= 0.60 <= result.kappa_high)
        assert result.labels == 2 * result.n


def test_undefined_kappa_is_not_admitted_and_says_why() -> None:
    same = [Rating(f"t{i}", f"u{i % 4}", "conduct.closing", rater, "no") for i in range(12) for rater in ("a", "b")]
    lonely = [Rating("t1", "u1", "conduct.scope", "primary", "yes")]
    result = {r.item: r for r in item_agreements(same + lonely, n_boot=50)}
    closing, scope = result["conduct.closing"], result["conduct.scope"]
    assert (closing.kappa, closing.admitted, closing.kappa_low, closing.n) == (None, None, None, 12)
    assert closing.reason is not None and "P_e = 1" in closing.reason
    assert (scope.kappa, scope.admitted, scope.raters, scope.n) == (None, None, ("primary",), 0)
    assert scope.reason is not None and "needs two" in scope.reason


def test_missing_labels_are_left_out_and_bad_values_named() -> None:
    base = _simulated(9, ("a", "b"), missing=0.0, users=20)
    extra = [Rating("x1", "ux", "conduct.closing", "a", "uncollected"), Rating("x1", "ux", "conduct.closing", "b", "no")]
    assert item_agreements(base + extra, n_boot=50) == item_agreements(base, n_boot=50)
    with pytest.raises(ValueError, match="'maybe'"):
        item_agreements([*base, Rating("x1", "ux", "conduct.closing", "a", "maybe")])
    with pytest.raises(ValueError, match="more than once"):
        item_agreements([*base, base[0]])


def test_raters_restrict_the_comparison_and_overall_pools_items() -> None:
    raters = ("audit:m1", "human:ann", "primary")
    ratings = _simulated(10, raters, missing=0.2)
    pair = item_agreements(ratings, raters=["primary", "audit:m1"], n_boot=50)
    assert all(r.raters == ("audit:m1", "primary") and r.kappa_method == "cohen" for r in pair)
    overall = overall_agreement(ratings)
    pooled = np.concatenate([_matrix(ratings, item, raters) for item in ("conduct.closing", "tooluse.grounded")], axis=1)
    assert overall.krippendorff_alpha == pytest.approx(
        krippendorff.alpha(reliability_data=pooled, level_of_measurement="nominal"), abs=1e-12
    )
    assert overall.raters == 3 and overall.units == int(((~np.isnan(pooled)).sum(axis=0) >= 2).sum())
    report = agreement_report(ratings, n_boot=50, raters=["primary", "audit:m1"])
    assert report.overall.raters == 2 and tuple(report.items) == tuple(pair)


def test_fleiss_without_a_unit_every_rater_rated_says_so_and_alpha_still_reads_pairs() -> None:
    # primary and a model on units t0-t5, a person with primary on t6-t11: no unit has all three raters.
    values = ["yes", "no", "no", "yes", "no", "no"]
    ratings = [Rating(f"t{i}", f"u{i}", "conduct.closing", rater, v)
               for i, v in enumerate(values) for rater in ("primary", "audit:m")]
    ratings += [Rating(f"t{i + 6}", f"u{i}", "conduct.closing", rater, v)
                for i, v in enumerate(values) for rater in ("primary", "human:ann")]
    [found] = item_agreements(ratings, n_boot=50)
    assert (found.kappa, found.admitted, found.kappa_method, found.n) == (None, None, "fleiss", 12)
    assert found.reason is not None and "no unit was rated by all 3 raters" in found.reason
    assert found.alpha == pytest.approx(1.0)
