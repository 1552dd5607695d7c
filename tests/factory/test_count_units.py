"""Every count names its unit from the layer its rows were judged on (issue 32): a clause judged per
conversation counts conversations, not turns, in the summary and in the report."""

from __future__ import annotations

import pytest

from agent_factory.evaluators.core import FlagSpec
from agent_factory.evaluators.core.model import LAYERS
from agent_factory.evaluators.core.present import UNIT_NAMES, units_of
from agent_factory.evaluators.findings import all_flags
from agent_factory.factory.views.report.model import LAYER_NAMES
from agent_factory.factory.views.results import ResultRow, StoreFacts
from agent_factory.factory.views.summary import build_summary
from agent_factory.knowledge_packs import load_pack

FACTS = StoreFacts(path="s.duckdb", turns=864, sessions=128, users=21, spans=2272, segments={"real": 864},
                   quarantined=0, units={}, last_run=None)


def _row(component: str, metric: str, value: float, n: int, layer: str) -> ResultRow:
    return ResultRow(component=component, layer=layer, metric=metric, stratum="all", value=value, n=n)


def test_every_layer_has_a_unit_name_and_every_flag_layer_is_one() -> None:
    assert set(UNIT_NAMES) == set(LAYERS)
    assert [units_of(layer) for layer in LAYERS] == ["spans", "turns", "conversations", "users"]
    assert (units_of("conversation", 1), units_of("trace", 2), units_of(None)) == ("conversation", "turns", "units")
    assert {f.layer for f in all_flags(load_pack("airline"))} <= set(UNIT_NAMES)


@pytest.mark.parametrize(("layer", "unit"), [("conversation", "conversations"), ("trace", "turns"),
                                             ("span", "spans")])
def test_a_clause_counts_the_units_of_the_layer_it_was_judged_on(layer: str, unit: str) -> None:
    rows = [_row("conduct", "C(r).confirm_before_write", 127 / 128, 128, layer)]
    flags = [FlagSpec(id="conduct.confirm_before_write.violated", component="conduct", layer="conversation",
                      label="violated", item="conduct.confirm_before_write.obligation", raised=("no",))]
    lines = [ln.text for ln in build_summary(FACTS, rows, flags=flags).components["conduct"]]
    assert lines[0].startswith(f"1 of 128 {unit} broke confirm_before_write: C(r) 99.2%"), lines


def test_one_unit_is_named_in_the_singular() -> None:
    lines = [ln.text for ln in build_summary(FACTS, [_row("conduct", "C(r).x", 0.0, 1, "conversation")])
             .components["conduct"]]
    assert lines[0].startswith("1 of 1 conversation broke x"), lines


def test_trajectory_outcomes_count_conversations() -> None:
    rows = [_row("trajectory", f"outcome_share.{k}", v, 128, "conversation")
            for k, v in (("blocked", 0.01), ("struggled", 0.3), ("smooth", 0.69))]
    lines = [ln.text for ln in build_summary(FACTS, rows).components["trajectory"]]
    assert lines[1].strip() == "n=128 conversations", lines


def test_the_reports_layer_table_names_units_as_the_summary_does() -> None:
    assert LAYER_NAMES == {layer: units_of(layer) for layer in LAYERS}
    assert LAYER_NAMES["conversation"] == "conversations"
