"""How components present themselves (`evaluators.core.present`): metric names and patterns, one number format
per kind, and every registered component declaring what the views need."""

from __future__ import annotations

import pytest

from agent_factory.evaluators.core.present import Metric, Rows, fmt
from agent_factory.evaluators.core.registry import components
from agent_factory.factory.views.results import ResultRow

BAND = Metric(name="failure_rate.band[{band}]", kind="rate", worse="higher", label="failure by band")
WITH = Metric(name="failure_rate.{step}", kind="rate", worse="higher", label="with", choices={"step": ("thinking",)})
KAPPA = Metric(name="C(r).{clause}", kind="rate", worse="lower", label="compliance", variants=(".clustered",))


def test_a_pattern_parses_its_parameters_and_variants_and_nothing_else() -> None:
    assert BAND.parse("failure_rate.band[<5s]") == ({"band": "<5s"}, "")
    assert BAND.param("failure_rate.band[10-120s]") == "10-120s"
    assert WITH.parse("failure_rate.thinking") == ({"step": "thinking"}, "")
    assert WITH.parse("failure_rate.no_thinking") is None and WITH.parse("failure_rate.wilson") is None
    assert KAPPA.parse("C(r).confirm.clustered") == ({"clause": "confirm"}, ".clustered")
    assert KAPPA.headline("C(r).confirm") and not KAPPA.headline("C(r).confirm.clustered")
    assert KAPPA.of(clause="x") == "C(r).x"


def test_one_number_format_per_kind() -> None:
    assert fmt(0.4921, "rate") == "49.2%" and fmt(0.0024, "rate") == "0.24%"
    assert fmt(1892.0, "count") == "1,892" and fmt(12345, "count") == "12,345"
    assert fmt(0.6234, "score") == "0.623" and fmt(None, "rate") == "undefined"
    assert fmt(786.0, "seconds") == "13.1 min" and fmt(58_680.0, "seconds") == "16.3 h"
    assert fmt("admitted", "label") == "admitted"


def test_rows_index_by_declared_metric_without_variants() -> None:
    rows = Rows([ResultRow(component="conduct", layer="trace", metric=m, stratum="all", value=0.5, n=4)
                 for m in ("C(r).a", "C(r).a.clustered", "C(r).b")])
    assert [r.metric for r in rows.of(KAPPA)] == ["C(r).a", "C(r).b"]
    assert rows.get(KAPPA, clause="b") is not None and rows.get(KAPPA, clause="c") is None


@pytest.mark.parametrize("spec", components(), ids=lambda s: s.name)
def test_every_component_presents_itself_with_a_direction_for_each_metric(spec: object) -> None:
    from agent_factory.evaluators.core.registry import ComponentSpec

    assert isinstance(spec, ComponentSpec) and spec.present is not None
    how = spec.present
    assert how.metrics and how.headline and how.section.blocks and how.section.decisive
    names = [m.name for m in how.metrics]
    assert len(names) == len(set(names))
    for m in how.metrics:
        assert m.worse in ("higher", "lower", None) and m.kind in ("rate", "count", "score", "seconds", "label")
    declared = set(names)
    for _, m in how.headline:
        assert m.name in declared
    for block in how.section.blocks:
        for m in getattr(block, "metrics", ()) or tuple(c for _, c in getattr(block, "columns", ())):
            assert m.name in declared, (spec.name, block.title, m.name)


def test_the_datum_behind_a_per_unit_result_and_the_clause_of_a_flag_are_declared() -> None:
    from agent_factory.evaluators.core.registry import get_component

    conduct, provenance = get_component("conduct").present, get_component("provenance").present
    assert conduct is not None and conduct.evidence_of is not None and conduct.flag_param is not None
    assert conduct.evidence_of("violation.confirm") == "conduct.confirm.obligation"
    assert conduct.evidence_of("violations.confirm") is None
    assert conduct.flag_param[0] == "clause" and conduct.flag_param[1]("conduct.confirm.violated") == "confirm"
    assert provenance is not None and provenance.evidence_of is not None
    assert provenance.evidence_of("incomplete_evidence") == "provenance.evidence_complete"
