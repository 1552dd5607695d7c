"""The store's reads for the views (`factory.store.findings`, `lookup`, `export`, `results`, `units`, `runs`):
checked against each other and against the turns the store gives back, on a small simulated store that was
ingested and run (rules only)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pj
import pytest

from agent_factory.adapters.model import Turn
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.findings import all_flags, read_items
from agent_factory.factory.store import Store
from agent_factory.factory.store.export import layer_tables, write_json_lines
from agent_factory.factory.store.findings import decode_fact, flag_data, flag_results, unit_keys
from agent_factory.factory.store.lookup import (
    evidence,
    field_text,
    field_value,
    locate,
    spans_of,
    turns_of,
    unit_data,
    unit_results,
    user_conversations,
)
from agent_factory.factory.store.results import per_unit_counts, per_unit_findings, population_results
from agent_factory.factory.store.runs import last_finished
from agent_factory.factory.store.units import layer_counts
from agent_factory.factory.suite.read import load_suite
from agent_factory.factory.views.report.read import read_report


def suite_flags(st: Store) -> tuple[FlagSpec, ...]:
    """Every flag of the suite the store's runs use (the pack used at ingest), as `Project.flags` gives them."""
    chosen = load_suite(None, pack=None, store=st, allow_unapproved=True)
    return all_flags(chosen.pack, chosen.components)


@pytest.fixture(scope="module")
def store(sim_store: tuple[Path, str]) -> Iterator[Store]:
    with Store(sim_store[0], read_only=True) as st:
        yield st


@pytest.fixture(scope="module")
def turns(store: Store) -> list[Turn]:
    return list(store.iter_turns(segment=None))


def test_locate_names_each_kind_and_nothing_else(store: Store, turns: list[Turn]) -> None:
    t = next(t for t in turns if t.user_id is not None and t.spans)
    assert locate(store, t.id) == ("turn", t.conversation_id, t.user_id, t.id)
    assert locate(store, t.conversation_id) == ("conversation", t.conversation_id, t.user_id, None)
    assert locate(store, t.spans[0].id) == ("span", t.conversation_id, t.user_id, t.id)
    assert locate(store, t.user_id or "") == ("user", None, t.user_id, None)
    assert locate(store, "no such id") is None


def test_turn_and_span_rows_and_fields_are_the_stored_ones(store: Store, turns: list[Turn]) -> None:
    t = next(t for t in turns if t.request and t.spans)
    (row,) = turns_of(store, turn_id=t.id)
    assert (row.id, row.idx, row.request, row.answer) == (t.id, t.index, t.request, t.answer)
    assert [r.id for r in turns_of(store, conversation_id=t.conversation_id)] == [
        u.id for u in sorted((u for u in turns if u.conversation_id == t.conversation_id), key=lambda u: u.index)]
    assert sorted(s.id for s in spans_of(store, turn_id=t.id)) == sorted(s.id for s in t.spans)
    assert [s.id for s in spans_of(store, span_id=t.spans[0].id)] == [t.spans[0].id]
    assert field_text(store, t.id, "request") == field_value(store, t.id, "request") == t.request
    assert field_text(store, t.id, "no_such_field") is None and field_value(store, "no such id", "request") is None
    mine = Counter(u.conversation_id for u in turns if u.user_id == t.user_id)
    assert dict(user_conversations(store, t.user_id or "")) == dict(mine)


def test_flag_reads_of_one_user_are_the_whole_reads_restricted(store: Store) -> None:
    specs = suite_flags(store)
    items, metrics = read_items(specs)
    with_fact = {s.item for s in specs if s.source == "datum" and s.fact is not None}
    units = unit_keys(store)
    assert units == sorted(units, key=lambda u: (u.layer, u.unit_id))
    assert Counter(u.layer for u in units) == layer_counts(store)
    user = next(u.user_id for u in units if u.user_id is not None)
    theirs = {u.unit_id for u in units if u.user_id == user}
    assert {u.unit_id for u in unit_keys(store, user=user)} == theirs
    data = flag_data(store, items=items, with_fact=with_fact)
    assert data and {d.item for d in data} <= items
    assert all(d.fact is None for d in data if d.item not in with_fact)
    assert sorted(flag_data(store, items=items, with_fact=with_fact, user=user)) == sorted(
        d for d in data if d.unit_id in theirs)
    results = flag_results(store, metrics=metrics)
    assert {(r.component, r.metric) for r in results} <= metrics
    assert sorted(flag_results(store, metrics=metrics, user=user)) == sorted(r for r in results if r.unit_id in theirs)


def test_results_reads_agree(store: Store) -> None:
    found = per_unit_findings(store)
    assert found == sorted(found)
    assert per_unit_counts(store) == {k: len(v) for k, v in _units_per_finding(found).items()}
    assert population_results(store) and all(r.value is None or json.loads(r.value) is not None or r.value == "null"
                                              for r in population_results(store))
    assert last_finished(store) is not None
    on = found[0][2]
    assert {(r.component, r.metric) for r in unit_results(store, [on])} >= {(c, m) for c, m, u in found if u == on}
    data = unit_data(store, [on])
    primary = next(d for d in data if d.rater == "primary")
    assert evidence(store, on, primary.item) == primary.evidence
    assert evidence(store, on, "no such item") is None


def _units_per_finding(found: list[tuple[str, str, str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for c, m, u in found:
        out.setdefault(f"{c}/{m}", set()).add(u)
    return out


def test_layer_tables_and_json_lines(store: Store, tmp_path: Path) -> None:
    tables = layer_tables(store, "trace")
    assert tables.data.column_names == ["unit_id", "item", "value", "fact"]
    assert tables.results.column_names == ["unit_id", "name", "value"]
    assert tables.analysed.num_rows == layer_counts(store)["trace"]
    users = layer_tables(store, "engagement", by_user=True).analysed
    expected = {u.user_id for u in unit_keys(store) if u.user_id is not None}
    assert set(users["unit_id"].to_pylist()) == expected and users.num_rows == len(expected)
    table = pa.table({"a": ["x", None, "it's"], "b": [1.5, 2.0, None]})
    out = tmp_path / "o'dd.jsonl"
    write_json_lines(table, out)
    assert pj.read_json(out).to_pylist() == table.to_pylist()


def test_decode_fact_keeps_numbers_and_strings() -> None:
    assert [decode_fact(v) for v in ('"violated"', "3", "2.5", "true", "null", '{"a": 1}', None)] == [
        "violated", 3, 2.5, None, None, None, None]


def test_report_reads_the_flags_table_and_associations_only_with_flags(store: Store) -> None:
    flags = suite_flags(store)
    with_flags, without = read_report(store, flags=flags), read_report(store)
    assert with_flags.layer_table and with_flags.associations is not None
    assert without.layer_table is None and without.associations is None
    assert with_flags.model_copy(update={"layer_table": None, "associations": None}) == without
