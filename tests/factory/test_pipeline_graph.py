"""The pipeline graph: its shape, and that a change dirties exactly its descendants."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest
from typer.testing import CliRunner

from agent_factory.evaluators.collect import Cascade, ModelConfig
from agent_factory.evaluators.core import COMPONENTS, get_component
from agent_factory.factory.cli.app import app
from agent_factory.factory.pipeline.engine import definitions_by_layer
from agent_factory.factory.pipeline.graph import TracesState, build_graph, dirty, fingerprints, reads_component
from agent_factory.factory.simulate import SimConfig, simulate
from agent_factory.factory.store import Store
from agent_factory.factory.store.units import load_rows
from agent_factory.knowledge_packs import KnowledgePack, load_pack

SPECS = tuple(get_component(c) for c in COMPONENTS)
TRACES = TracesState(sources=frozenset({"a", "b"}), window_days=7.0)


def _graph(pack: KnowledgePack, *, traces: TracesState = TRACES, config: ModelConfig | None = None) -> nx.DiGraph:
    cascade = Cascade(config or ModelConfig())
    by_component: dict[str, list] = {}
    for comps in definitions_by_layer(SPECS, pack).values():
        for c, ds in comps.items():
            by_component.setdefault(c, []).extend(ds)
    versions = {d.id: cascade.definition_version(d, pack) for ds in by_component.values() for d in ds}
    return build_graph(specs=SPECS, definitions=by_component, versions=versions, pack=pack, traces=traces)


def _changed(old: nx.DiGraph, new: nx.DiGraph) -> set[str]:
    before = fingerprints(old)
    return {n for n, fp in fingerprints(new).items() if before.get(n) != fp}


def test_shape_follows_the_five_steps_and_the_declared_reads() -> None:
    g = _graph(load_pack("airline"))
    assert nx.is_directed_acyclic_graph(g)
    assert {g.nodes[n]["step"] for n in g.nodes} == {"trigger", "ingest", "collect", "analyze", "audit", "act"}
    for spec in SPECS:
        for a in spec.analyses:
            parents = {g.nodes[p]["component"] for p in g.predecessors(f"analysis:{a.name}") if p.startswith("data:")}
            expected = {c for c in COMPONENTS if reads_component(a.reads, spec.name, c)}
            assert parents <= expected
            assert f"component:{spec.name}" in g.successors(f"analysis:{a.name}")
    # Trajectory reads Execution's data; Execution does not read Trajectory's.
    traj = set(g.predecessors("analysis:trajectory.outcome"))
    assert any(p.startswith("data:execution.") for p in traj)
    assert not any(p.startswith("data:trajectory.") for p in g.predecessors("analysis:execution.failure_rate"))


def test_a_clause_edit_dirties_exactly_its_descendants() -> None:
    pack = load_pack("airline")
    clause = pack.clauses[0]
    edited = pack.model_copy(update={"clauses": (clause.model_copy(update={"text": clause.text + " (edited)"}),
                                                 *pack.clauses[1:])})
    old, new = _graph(pack), _graph(edited)
    node = f"clause:{clause.id}"
    assert _changed(old, new) == {node} | nx.descendants(new, node)
    d = dirty(new, fingerprints(old))
    assert d.items == {f"conduct.{clause.id}.trigger", f"conduct.{clause.id}.obligation"}
    assert d.analyses == {"conduct.clauses", "adjudication.kappa"}  # adjudication reads every component
    assert not d.traces_changed
    assert d.unchanged_items == sum(1 for n in new.nodes if n.startswith("definition:")) - 2


def test_definitions_to_retry_are_dirty_with_their_descendants_whatever_their_fingerprints() -> None:
    # What a run could not collect but a rerun could (budget, provider errors) is recorded as a list of
    # definitions beside the true fingerprints, not as a fingerprint no graph makes.
    g = _graph(load_pack("airline"))
    item = next(g.nodes[n]["item"] for n in sorted(g.nodes) if n.startswith("definition:"))
    assert dirty(g, fingerprints(g)).nothing
    d = dirty(g, fingerprints(g), retry=[item, "gone.definition"])  # a definition since removed is skipped
    below = nx.descendants(g, f"definition:{item}")
    assert d.items == {item} and not d.traces_changed
    assert d.analyses == {n.split(":", 1)[1] for n in below if n.startswith("analysis:")} and d.analyses


def test_confirming_an_invariant_reruns_the_conduct_analysis_only() -> None:
    pack = load_pack("airline")
    i, clause = next((i, c) for i, c in enumerate(pack.clauses) if not c.invariant)
    clauses = list(pack.clauses)
    clauses[i] = clause.model_copy(update={"invariant": True})
    d = dirty(_graph(pack.model_copy(update={"clauses": tuple(clauses)})), fingerprints(_graph(pack)))
    assert d.items == frozenset() and d.analyses == {"conduct.clauses"}


def test_knowledge_edit_dirties_rule_items_not_model_only_ones() -> None:
    pack = load_pack("airline")
    th = pack.thresholds.model_copy(update={"window_days": pack.thresholds.window_days + 1})
    old, new = _graph(pack), _graph(pack.model_copy(update={"thresholds": th}))
    d = dirty(new, fingerprints(old))
    rule_items = {new.nodes[n]["item"] for n in new.nodes if n.startswith("definition:")
                  and new.has_edge("knowledge", n)}
    assert d.items == rule_items and rule_items
    assert d.unchanged_items == sum(1 for n in new.nodes if n.startswith("definition:")) - len(rule_items)


def test_new_traces_dirty_data_and_analyses_not_definitions() -> None:
    pack = load_pack("airline")
    more = TracesState(sources=TRACES.sources | {"c"}, window_days=TRACES.window_days)
    d = dirty(_graph(pack, traces=more), fingerprints(_graph(pack)))
    assert d.traces_changed and not d.items
    assert d.analyses == {a.name for s in SPECS for a in s.analyses}


def test_a_model_change_dirties_model_tier_items_only() -> None:
    pack = load_pack("airline")
    old = _graph(pack)
    new = _graph(pack, config=ModelConfig.model_validate({"small": {"model": "openai/other"}}))
    d = dirty(new, fingerprints(old))
    model_items = {n.split(":", 1)[1] for n in new.nodes if n.startswith("definition:")} - {
        new.nodes[n]["item"] for n in new.nodes if n.startswith("definition:")
        and not any(t != "rule" for t in _tiers(new.nodes[n]["item"], pack))}
    assert d.items == model_items and d.items


def _tiers(item: str, pack: KnowledgePack) -> tuple[str, ...]:
    for comps in definitions_by_layer(SPECS, pack).values():
        for ds in comps.values():
            for d in ds:
                if d.id == item:
                    return d.tiers
    raise KeyError(item)


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, KnowledgePack]:
    root = tmp_path_factory.mktemp("reads")
    simulate(SimConfig(users=40, seed=8), root / "sim")
    store = root / "store.duckdb"
    for args in (["ingest", str(root / "sim")], ["run"]):
        res = CliRunner().invoke(app, [*args, "--store", str(store), "--pack", "business_analysis", "--json"],
                                 env={"AGENT_FACTORY_SMALL_MODEL": "", "AGENT_FACTORY_JURY": ""})
        assert res.exit_code == 0, res.output
    return store, load_pack("business_analysis")


def test_each_analysis_reads_only_what_it_declares(observed: tuple[Path, KnowledgePack]) -> None:
    """The graph's edges come from `Analysis.reads`: hiding every undeclared component's data must leave each
    analysis's results unchanged (else an edit could leave a stale result behind)."""
    from agent_factory.evaluators.core import Observations

    store, pack = observed
    items_of: dict[str, set[str]] = {}
    for comps in definitions_by_layer(SPECS, pack).values():
        for c, ds in comps.items():
            items_of.setdefault(c, set()).update(d.id for d in ds if d.admitted)
    every = set().union(*items_of.values())
    with Store(store, read_only=True) as st:
        full = Observations(rows=load_rows(st, items=every), horizon=None)
        for spec in SPECS:
            for a in spec.analyses:
                declared = set().union(*(items_of.get(c, set()) for c in COMPONENTS
                                         if reads_component(a.reads, spec.name, c)))
                part = Observations(rows=load_rows(st, items=declared), horizon=None)
                assert a.fn(full, pack) == a.fn(part, pack), a.name


def test_each_analysis_reads_only_the_layers_it_declares(observed: tuple[Path, KnowledgePack]) -> None:
    """A run loads only the layers a group of analyses declares (`Analysis.layers`): given only those, each
    analysis gives the results it gives over every layer; one that reads another layer raises."""
    from agent_factory.errors import UsageError
    from agent_factory.evaluators.core import Observations
    from agent_factory.factory.pipeline.engine import read_layers

    store, pack = observed
    every = {d.id for comps in definitions_by_layer(SPECS, pack).values() for ds in comps.values() for d in ds
             if d.admitted}
    with Store(store, read_only=True) as st:
        full = Observations(rows=load_rows(st, items=every, all_segments=True), horizon=None)
        declared = [a for spec in SPECS for a in spec.analyses if a.layers is not None]
        assert {a.name for a in declared} >= {"provenance.evidence", "execution.failure_rate", "substance.score"}
        for a in declared:
            part = Observations(rows=load_rows(st, items=every, all_segments=True, layers=a.layers), horizon=None)
            assert set(part.rows) == set(a.layers)
            assert a.fn(full, pack) == a.fn(part.only(a.layers), pack), a.name
    provenance = next(a for a in declared if a.name == "provenance.evidence")
    assert read_layers([provenance]) == {"trace"}
    assert read_layers([a for spec in SPECS for a in spec.analyses]) is None  # conduct's clauses may read any
    with pytest.raises(UsageError, match=r"read the 'span' rows but declares layers=\['trace'\]"):
        full.only(("trace",)).layer("span")
