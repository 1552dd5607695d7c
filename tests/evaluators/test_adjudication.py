"""Adjudication: Cohen's kappa per item between two raters and admission at 0.60 (two decimals)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from agent_factory.evaluators.components.adjudication import (
    adjudicate,
    adjudication_analysis,
    parse_rater_key,
    rater_key,
    rater_pairs,
)
from agent_factory.evaluators.core.model import Layer, Result, Value
from agent_factory.evaluators.core.registry import Observations, UnitRow, get_component
from agent_factory.knowledge_packs import load_pack

PACK = load_pack("default")


def table(item: str, yy: int, yn: int, ny: int, nn: int) -> list[tuple[str, Value, Value]]:
    """Pairs from a 2x2 table: yy both yes, yn A yes / B no, ny A no / B yes, nn both no."""
    cells: list[tuple[Value, Value, int]] = [("yes", "yes", yy), ("yes", "no", yn), ("no", "yes", ny), ("no", "no", nn)]
    return [(item, a, b) for a, b, k in cells for _ in range(k)]


def by_metric(results: Sequence[Result]) -> dict[str, Result]:
    return {r.metric: r for r in results}


def test_kappa_of_a_known_table() -> None:
    # P_o = 0.7, P_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5, kappa = 0.2 / 0.5 = 0.4.
    m = by_metric(adjudicate(table("trajectory.verbatim_replay", 20, 10, 5, 15)))
    k = m["kappa.trajectory.verbatim_replay"]
    assert k.value == pytest.approx(0.4) and k.n == 50
    assert (k.component, k.layer, k.analysis) == ("adjudication", "trace", "adjudication.kappa")
    assert "observed agreement 0.7000, chance 0.5000" in (k.note or "")
    adm = m["admission.trajectory.verbatim_replay"]
    assert adm.value == "retired" and "reads 0.40" in (adm.note or "")


@pytest.mark.parametrize(
    ("cells", "kappa", "decision", "reads"),
    [
        ((4, 1, 2, 10), 0.5984251968503937, "admitted", "0.60"),  # on the line, like session termination 0.599
        ((2, 1, 1, 13), 0.5952380952380952, "admitted", "0.60"),  # like context repair 0.596
        ((2, 0, 2, 10), 0.5882352941176471, "retired", "0.59"),
        ((10, 0, 0, 10), 1.0, "admitted", "1.00"),
    ],
)
def test_admission_at_two_decimals_reports_the_unrounded_kappa(
    cells: tuple[int, int, int, int], kappa: float, decision: str, reads: str
) -> None:
    m = by_metric(adjudicate(table("x.item", *cells)))
    assert m["kappa.x.item"].value == pytest.approx(kappa, abs=1e-15)
    adm = m["admission.x.item"]
    assert adm.value == decision
    assert repr(kappa) in (adm.note or "") and f"reads {reads}" in (adm.note or "")


def test_uncollected_and_not_applicable_pairs_are_excluded_and_counted() -> None:
    pairs = table("i.a", 5, 0, 0, 5) + [
        ("i.a", "uncollected", "yes"), ("i.a", "no", "uncollected"),
        ("i.a", "not_applicable", "not_applicable"), ("i.a", "not_applicable", "yes"),
    ]
    m = by_metric(adjudicate(pairs))
    k = m["kappa.i.a"]
    assert (k.value, k.n) == (1.0, 10)
    assert "excluded: 2 not_applicable (1 where only one rater found it applicable), 2 uncollected" in (k.note or "")


def test_undefined_kappa_is_not_admitted() -> None:
    m = by_metric(adjudicate(table("all.yes", 8, 0, 0, 0)))
    assert m["kappa.all.yes"].value is None and "P_e = 1" in (m["kappa.all.yes"].note or "")
    assert m["admission.all.yes"].value == "retired"
    empty = by_metric(adjudicate([("none.x", "uncollected", "uncollected")]))
    assert empty["kappa.none.x"].value is None and empty["kappa.none.x"].n == 0
    assert empty["admission.none.x"].value == "retired"


def test_items_are_reported_in_sorted_order_whatever_the_input_order() -> None:
    pairs = table("z.last", 3, 1, 1, 3) + table("a.first", 3, 0, 1, 4)
    results = adjudicate(pairs, layer="conversation")
    assert [r.metric for r in results] == ["kappa.a.first", "admission.a.first", "kappa.z.last", "admission.z.last"]
    assert all(r.layer == "conversation" for r in results)
    assert adjudicate(list(reversed(pairs)), layer="conversation") == results


# ---- from observations ------------------------------------------------------------------------------------


def urow(unit: str, layer: Layer, values: dict[str, Value], facts: dict[str, Any]) -> UnitRow:
    return UnitRow(unit, layer, "u", "c", 0, None, None, None, values, facts)


def test_fact_key_convention() -> None:
    assert rater_key("execution.delivered", "rater_b") == "adjudication.execution.delivered.rater_b"
    assert parse_rater_key("adjudication.execution.delivered.rater_b") == ("execution.delivered", "rater_b")
    assert parse_rater_key("adjudication.x.rater_c") is None and parse_rater_key("execution.delivered") is None


def test_analysis_reads_second_rater_facts_per_layer() -> None:
    item = "trajectory.replay"
    rows = [
        urow(f"t{i}", "trace", {item: a}, {rater_key(item, "rater_b"): b})
        for i, (_, a, b) in enumerate(table(item, 6, 1, 1, 6))
    ]
    rows.append(urow("t-unsampled", "trace", {item: "yes"}, {}))  # not in the audit sample
    rows.append(urow("t-bad", "trace", {item: "yes"}, {rater_key(item, "rater_b"): "maybe"}))  # malformed
    conv_item = "conduct.c.obligation"
    conv_rows = [
        # Rater A given explicitly (two re-collections), overriding the stored value.
        urow("c1", "conversation", {conv_item: "no"}, {rater_key(conv_item, "rater_a"): "yes",
                                                       rater_key(conv_item, "rater_b"): "yes"}),
        urow("c2", "conversation", {}, {rater_key(conv_item, "rater_b"): "no"}),  # rater A never collected it
    ]
    obs = Observations(rows={"trace": rows, "conversation": conv_rows})
    assert len(rater_pairs(obs, "trace")) == 15
    assert rater_pairs(obs, "conversation") == [(conv_item, "yes", "yes"), (conv_item, "uncollected", "no")]
    results = adjudication_analysis(obs, PACK)
    m = {(r.layer, r.metric): r for r in results}
    trace = m[("trace", f"kappa.{item}")]
    assert trace.n == 14 and trace.value == pytest.approx((12 / 14 - 0.5) / 0.5)
    assert "1 uncollected" in (trace.note or "")
    conv = m[("conversation", f"kappa.{conv_item}")]
    assert conv.n == 1 and "1 uncollected" in (conv.note or "")


def test_registered_component_and_no_pairs() -> None:
    spec = get_component("adjudication")
    assert spec.definitions == () and [a.name for a in spec.analyses] == ["adjudication.kappa"]
    assert adjudication_analysis(Observations(rows={"trace": [urow("t", "trace", {"x.y": "yes"}, {})]}), PACK) == []
