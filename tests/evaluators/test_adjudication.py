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


# ---- the latest audit, as the component presents it ---------------------------------------------------------

def _item(item: str, kappa: float | None, admitted: bool | None, **kw: Any) -> Any:
    from agent_factory.evaluators.audit.model import ItemAgreement

    return ItemAgreement(item=item, component=item.split(".", 1)[0], raters=("audit:openai/gpt-4.1", "primary"),
                         n=kw.pop("n", 40), labels=80, kappa=kappa, kappa_method="cohen" if kappa is not None else None,
                         admitted=admitted, **kw)


def _report() -> Any:
    from agent_factory.evaluators.audit.model import AuditReport

    items = (
        _item("trajectory.verbatim_replay", 0.93, True, kappa_low=0.85, kappa_high=0.99, alpha=0.93),
        _item("trajectory.context_repair", 0.596, True, kappa_low=0.41, kappa_high=0.75, near_line=True),
        _item("substance.s1_specific", 0.38, False, kappa_low=0.21, kappa_high=0.52),
        _item("conduct.case_clause", 0.30, False, n=6, kappa_low=-0.2, kappa_high=0.8, near_line=True),
        _item("execution.delivered", None, None, reason="every label is `yes`: chance agreement is 1"),
    )
    return AuditReport(audit_id="audit-1", started_at="2026-12-06T20:00:00+00:00", seconds=3.0, model_calls=12,
                       raters=("audit:openai/gpt-4.1",), items=items,
                       retired=("substance.s1_specific", "substance.e1_no_contradiction"))


def test_the_audit_becomes_the_components_kappa_and_admission_rows() -> None:
    from agent_factory.evaluators.components.adjudication import audit_rows
    from agent_factory.evaluators.components.adjudication.present import PRESENTATION

    rows = audit_rows(_report())
    by = {r.metric: r for r in rows}
    k = by["kappa.substance.s1_specific"]
    assert (k.component, k.value, k.low, k.high, k.n) == ("adjudication", 0.38, 0.21, 0.52, 40)
    assert k.note is not None and k.note.startswith("audit audit-1; cohen kappa among audit:openai/gpt-4.1, primary")
    assert {m.removeprefix("admission."): r.value for m, r in by.items() if m.startswith("admission.")} == {
        "trajectory.verbatim_replay": "admitted", "trajectory.context_repair": "admitted",
        "substance.s1_specific": "retired", "conduct.case_clause": "below the line",
        "execution.delivered": "undecided", "substance.e1_no_contradiction": "retired"}
    assert by["admission.substance.e1_no_contradiction"].n == 0 and "kappa.substance.e1_no_contradiction" not in by
    assert by["kappa.execution.delivered"].value is None and "chance agreement" in (by["kappa.execution.delivered"]
                                                                                     .note or "")
    # Every row is of a metric the component declares: the views read its kind and label from it.
    assert all(PRESENTATION.metric_of(r.metric) is not None for r in rows)


def test_headline_and_lines_say_what_the_latest_audit_admitted_and_retired() -> None:
    from agent_factory.evaluators.components.adjudication import audit_rows
    from agent_factory.evaluators.components.adjudication.present import PRESENTATION
    from agent_factory.evaluators.core.present import Rows

    rows = Rows(audit_rows(_report()))
    counts = "2 of 6 audited items admitted, 1 below the 0.60 line, not retired, 1 undecided, 2 retired"
    assert PRESENTATION.box is not None and PRESENTATION.box(rows) == [counts]
    lines = [line.text for line in PRESENTATION.summary(rows, ())]
    assert lines == [counts,
                     "conduct.case_clause: kappa 0.3 [-0.2 – 0.8] (below the 0.60 line) n=6",
                     "substance.s1_specific: kappa 0.38 [0.21 – 0.52] (below the 0.60 line) n=40",
                     "trajectory.context_repair: kappa 0.596 [0.41 – 0.75] n=40"]
    # Before any audit: the spine box and the summary say so.
    assert PRESENTATION.box(Rows([])) == ["no second rater yet: no kappa"] and PRESENTATION.summary(Rows([]), ()) == []


def test_summary_and_the_reports_spine_box_present_the_stored_audit() -> None:
    from agent_factory.factory.views.report import report_sections
    from agent_factory.factory.views.report.model import ReportData
    from agent_factory.factory.views.results import StoreFacts
    from agent_factory.factory.views.summary import build_summary, render

    facts = StoreFacts(path="s.duckdb", turns=10, sessions=4, users=2, spans=20, segments={"real": 10},
                       quarantined=0, units={"trace": 10}, last_run=None)
    before = build_summary(facts, [])
    assert "second rater" in before.absent["adjudication"] and before.components["adjudication"] == ()
    after = build_summary(facts, [], audit=_report())
    assert "adjudication" not in after.absent
    texts = [line.text for line in after.components["adjudication"]]
    assert texts[0].startswith("2 of 6 audited items admitted") and len(texts) == 4
    assert after.components["adjudication"][1].value == 0.3 and after.components["adjudication"][1].n == 6
    printed = render(after)
    assert "Adjudication" in printed and not any("no kappa yet" in line for line in printed)
    spine = {s.key: s for s in report_sections(ReportData(facts=facts, rows=(), per_unit={}, audit=_report()))}
    assert spine["spine"].extra["boxes"]["adjudication"][0].startswith("2 of 6 audited items admitted")
    plain = {s.key: s for s in report_sections(ReportData(facts=facts, rows=(), per_unit={}))}
    assert plain["spine"].extra["boxes"]["adjudication"] == ["no second rater yet: no kappa"]
    # An audit without a second rater (rules only: validity alone) does not read as "no audit".
    bare = build_summary(facts, [], audit=_report().model_copy(update={"items": (), "retired": ()}))
    assert "no item has two raters yet" in bare.absent["adjudication"]
