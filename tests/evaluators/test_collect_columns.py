"""Rules as columns: a definition at a time over a batch of units, answers appended to `DataColumns`, the same
data the one-unit path gives; batch rules (`rule(..., batch=True)`), a rule's crash or bad answer recorded on its
unit only; the columns' stored JSON equal to the datum's."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from agent_factory import plugins
from agent_factory.adapters.model import EvidencePointer, Turn
from agent_factory.evaluators.collect import Cascade, ModelConfig
from agent_factory.evaluators.core import DataDefinition, RuleAnswer, rule
from agent_factory.evaluators.core.columns import DataColumns, UnitInput
from agent_factory.evaluators.core.registry import RuleColumns, RuleContext, register_rule, rule_outcomes
from agent_factory.factory.store.data import datum_row, evidence_json, fact_json
from agent_factory.factory.store.rows import dumps
from tests.evaluators.test_collect_support import DEFINITIONS, PACK, make_turn


@pytest.fixture
def rules() -> Any:
    """Temporary rules: a batch rule over turns' answer lengths, a rule that crashes on one unit, one that answers
    a value no datum may take."""
    names = ["test.batch_long_answer", "test.crash_on_two", "test.bad_value"]

    @register_rule
    @rule(names[0], batch=True)
    def long_answer(units: Sequence[Turn], ctx: RuleContext) -> RuleColumns:
        lengths = [len(t.answer or "") for t in units]
        return RuleColumns(values=["yes" if n > 40 else "no" for n in lengths], facts=[float(n) for n in lengths],
                           evidence=[(EvidencePointer(unit_id=t.id, field="answer", start=0, end=n),)
                                     for t, n in zip(units, lengths, strict=True)])

    @register_rule
    @rule(names[1])
    def crash_on_two(unit: Turn, ctx: RuleContext) -> RuleAnswer:
        if unit.id.endswith("2"):
            raise KeyError("boom")
        return RuleAnswer("yes", fact=3)  # an int fact is stored as a float, as AtomicDatum would have it

    @register_rule
    @rule(names[2])
    def bad_value(unit: Turn, ctx: RuleContext) -> RuleAnswer:
        return RuleAnswer("maybe")  # type: ignore[arg-type]

    yield names
    for n in names:
        plugins.unregister("rule", n)


def _def(rule_name: str) -> DataDefinition:
    return DataDefinition(id=f"substance.{rule_name.split('.')[1]}", question="?", component="substance",
                          layer="trace", rule=rule_name)


def _units(n: int) -> list[UnitInput]:
    return [UnitInput(t.id, t) for t in (make_turn(i) for i in range(n))]


def _collect(definitions: Sequence[DataDefinition], units: Sequence[UnitInput]) -> DataColumns:
    return asyncio.run(Cascade(ModelConfig()).collect_units(layer="trace", units=units, definitions=definitions,
                                                            pack=PACK))


def test_batch_and_unit_rules_give_one_datum_per_unit(rules: list[str]) -> None:
    ds = [_def(n) for n in rules]
    cols = _collect(ds, _units(4))
    assert len(cols) == 12
    by = {(d.unit_id, d.item): d for d in cols.iter_data()}
    long = [by[(f"turn-{i:03d}", ds[0].id)] for i in range(4)]
    assert [d.fact for d in long] == [float(len(make_turn(i).answer or "")) for i in range(4)]
    assert all(d.evidence[0].field == "answer" and d.collector.name == rules[0] for d in long)
    crashed = by[("turn-002", ds[1].id)]
    assert crashed.value == "uncollected" and crashed.reason == "rule error: test.crash_on_two: KeyError: 'boom'"
    assert [by[(f"turn-{i:03d}", ds[1].id)].fact for i in (0, 1, 3)] == [3.0, 3.0, 3.0]
    bad = by[("turn-000", ds[2].id)]
    assert bad.value == "uncollected" and "returned value 'maybe'; valid: no, not_applicable, uncollected, yes" in (
        bad.reason or "")


def test_a_batch_rule_that_fails_fails_its_batch_only(rules: list[str]) -> None:
    ctx = RuleContext(pack=PACK, definition=_def(rules[0]))
    assert rule_outcomes(rules[0], [], ctx) == []
    out = rule_outcomes(rules[0], [object()], ctx)  # not a turn: the batch raises
    assert len(out) == 1 and isinstance(out[0], AttributeError)


def test_the_batch_path_gives_the_one_unit_paths_data() -> None:
    units = _units(5)
    cols = _collect(DEFINITIONS, units)
    one_by_one = [d for u in units for d in asyncio.run(Cascade(ModelConfig()).collect(
        unit_id=u.unit_id, layer="trace", unit=u.unit, definitions=DEFINITIONS, pack=PACK))]
    assert sorted(cols.iter_data(), key=lambda d: (d.unit_id, d.item)) == sorted(
        one_by_one, key=lambda d: (d.unit_id, d.item))
    assert DataColumns.of(one_by_one).columns().keys() == cols.columns().keys()


def test_the_columns_json_is_the_datums_stored_json() -> None:
    cols = _collect(DEFINITIONS, _units(3))
    ptrs = (EvidencePointer(unit_id='t "1" é', field="attributes.ключ", start=2, end=9),
            EvidencePointer(unit_id="t2", field="answer", start=0, end=0))
    assert evidence_json(ptrs) == dumps([p.model_dump() for p in ptrs]) and evidence_json(()) == dumps([])
    for fact in (None, 2.5, 3.0, "deep", "引用"):
        assert fact_json(fact) == dumps(fact)
    for d in cols.iter_data():
        row = datum_row(d, run_id="r")
        assert row["evidence"] == evidence_json(d.evidence) and row["fact"] == fact_json(d.fact)
