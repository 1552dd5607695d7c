from __future__ import annotations

import json
import math

import pytest

from agent_factory.evaluators.stats import Kappa, admit, cohen_kappa, fleiss_kappa, rating_counts, two_decimals
from agent_factory.evaluators.stats.agreement import VERSION
from tests.conftest import shared_data

# Textbook 2x2 table: both yes 20, A yes / B no 5, A no / B yes 10, both no 15 (n = 50).
# P_o = 35/50 = 0.7; A says yes 25/50, B 30/50: P_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5; kappa = 0.2/0.5 = 0.4
RATER_A = ["yes"] * 25 + ["no"] * 25
RATER_B = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15

# Fleiss (1971) as worked on Wikipedia: 10 subjects, 14 raters, 5 categories; P-bar 0.378, P_e 0.213, 0.210
FLEISS_WIKI = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def test_module_is_versioned() -> None:
    assert VERSION == "1"


def test_cohen_kappa_textbook_table() -> None:
    k = cohen_kappa(RATER_A, RATER_B)
    assert k.value == pytest.approx(0.4)
    assert (k.observed, k.expected, k.n, k.raters, k.labels, k.method, k.reason) == (
        pytest.approx(0.7), pytest.approx(0.5), 50, 2, ("no", "yes"), "cohen", None,
    )
    assert cohen_kappa(RATER_B, RATER_A).value == pytest.approx(0.4)


def test_cohen_kappa_all_one_category_is_undefined() -> None:
    k = cohen_kappa([True] * 8, [True] * 8)
    assert (k.value, k.observed, k.expected) == (None, 1.0, 1.0)
    assert k.reason is not None and "P_e = 1" in k.reason
    # declaring an unused category does not rescue it: chance agreement is still 1
    assert cohen_kappa([True] * 8, [True] * 8, labels=[True, False]).value is None


def test_cohen_kappa_one_constant_rater_is_zero() -> None:
    # A always "yes", B says yes on 6 of 10: P_o = 0.6, P_e = 1 * 0.6 = 0.6 -> kappa 0
    assert cohen_kappa(["yes"] * 10, ["yes"] * 6 + ["no"] * 4).value == pytest.approx(0.0)


def test_cohen_kappa_perfect_and_opposite() -> None:
    assert cohen_kappa([0, 1, 0, 1], [0, 1, 0, 1]).value == 1.0
    assert cohen_kappa([0, 1, 0, 1], [1, 0, 1, 0]).value == -1.0


def test_cohen_kappa_labels_and_bad_input() -> None:
    assert cohen_kappa(["b", "a"], ["b", "a"], labels=["b", "a", "c"]).labels == ("b", "a", "c")
    assert cohen_kappa([], []).reason == "no items"
    with pytest.raises(ValueError):
        cohen_kappa(["a", "x"], ["a", "a"], labels=["a", "b"])
    with pytest.raises(ValueError):
        cohen_kappa(["a", None], ["a", "b"])
    with pytest.raises(ValueError):
        cohen_kappa(["a"], ["a", "b"])


def test_fleiss_kappa_wikipedia_example() -> None:
    k = fleiss_kappa(FLEISS_WIKI)
    assert k.observed == pytest.approx(0.378, abs=5e-4)
    assert k.expected == pytest.approx(0.213, abs=5e-4)
    assert k.value == pytest.approx(0.210, abs=5e-4)
    assert (k.n, k.raters, k.method) == (10, 14, "fleiss")


def test_fleiss_with_two_raters_is_scotts_pi() -> None:
    # pooled yes share (25 + 30) / 100 = 0.55: P_e = 0.55^2 + 0.45^2 = 0.505; pi = (0.7 - 0.505)/0.495
    matrix, labels = rating_counts(list(zip(RATER_A, RATER_B, strict=True)))
    k = fleiss_kappa(matrix, labels=labels)
    assert k.value == pytest.approx(0.195 / 0.495)
    assert k.labels == ("no", "yes")


def test_fleiss_degenerate_and_bad_input() -> None:
    k = fleiss_kappa([[3, 0], [3, 0]])
    assert k.value is None and k.reason is not None and "one category" in k.reason
    with pytest.raises(ValueError):
        fleiss_kappa([[3, 0], [2, 0]])
    with pytest.raises(ValueError):
        fleiss_kappa([[1, 0], [0, 1]])
    with pytest.raises(ValueError):
        fleiss_kappa([[1.5, 1.5]])


@pytest.mark.parametrize(
    ("kappa", "rounded", "admitted"),
    [
        (0.599, 0.60, True),  # session termination in the study
        (0.596, 0.60, True),  # context repair in the study
        (0.605, 0.61, True),
        (0.594, 0.59, False),
        (0.595, 0.60, True),  # half up; Python's round(0.595, 2) gives 0.59
        (0.93, 0.93, True),
        (0.38, 0.38, False),
        (0.21, 0.21, False),
    ],
)
def test_admission_at_two_decimals(kappa: float, rounded: float, admitted: bool) -> None:
    a = admit(kappa)
    assert (a.admitted, a.rounded, a.kappa, a.threshold) == (admitted, rounded, kappa, 0.60)
    assert repr(kappa) in a.reason


def test_admission_rounds_half_up_not_half_even() -> None:
    assert round(0.595, 2) == 0.59  # the binary value is just below 0.595; the rule reads the decimal
    assert str(two_decimals(0.595 - 1e-12)) == "0.60"  # float noise from a computation is ignored
    # at a threshold of 0.61, 0.605 is admitted only under half up (half even would read 0.60)
    assert admit(0.605, threshold=0.61).admitted
    assert not admit(0.6049, threshold=0.61).admitted


def test_admission_of_undefined_kappa() -> None:
    undefined = cohen_kappa(["x"] * 4, ["x"] * 4)
    a = admit(undefined)
    assert (a.admitted, a.kappa, a.rounded) == (False, None, None)
    assert "P_e = 1" in a.reason
    assert not admit(None).admitted
    assert not admit(math.nan).admitted
    assert not admit(cohen_kappa(RATER_A, RATER_B)).admitted


@pytest.mark.realdata
def test_mast_three_annotators() -> None:
    path = shared_data("mast-mad-human-labelled", "MAD_human_labelled_dataset.json")
    records = json.loads(path.read_text(encoding="utf-8"))
    items = [
        (ann["annotator_1"], ann["annotator_2"], ann["annotator_3"])
        for rec in records
        for ann in rec["annotations"]
        if all(isinstance(ann[f"annotator_{i}"], bool) for i in (1, 2, 3))
    ]
    unanimous = sum(len(set(item)) == 1 for item in items)
    matrix, labels = rating_counts(items)
    k = fleiss_kappa(matrix, labels=labels)
    assert (k.n, k.raters, k.labels) == (len(items), 3, ("False", "True"))
    # with 3 raters on 2 categories an item agrees fully (P_i = 1) or splits 2-1 (P_i = 1/3)
    assert k.observed == pytest.approx((unanimous + (len(items) - unanimous) / 3) / len(items))
    assert isinstance(k, Kappa) and k.value is not None and 0.6 < k.value <= 1.0
    for i, j in ((0, 1), (0, 2), (1, 2)):
        pair = cohen_kappa([x[i] for x in items], [x[j] for x in items])
        assert pair.value is not None and admit(pair).admitted
