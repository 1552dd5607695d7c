"""The kernel runs without a store: over units held in memory it collects the same data and the analyses give the
same results as the store-backed run stores."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from agent_factory.adapters.model import EvidencePointer
from agent_factory.evaluators import kernel
from agent_factory.evaluators.collect import Cascade, load_model_config
from agent_factory.evaluators.core import AtomicDatum, DataDefinition, EngagementView, Layer
from agent_factory.evaluators.core.rows import LayerRows
from agent_factory.factory.pipeline.engine import Runner, analysis_groups, definitions_by_layer
from agent_factory.factory.pipeline.units import group_user_units
from agent_factory.factory.simulate import SimConfig, simulate
from agent_factory.factory.store import Store, dumps
from agent_factory.factory.store import base as store_base
from agent_factory.factory.store.inputs import injection_pointers, read_run_inputs
from agent_factory.factory.store.results import result_row
from agent_factory.factory.store.units import load_rows
from agent_factory.factory.suite.read import load_suite
from agent_factory.knowledge_packs import KnowledgePack
from tests.factory.conftest import no_model  # noqa: F401
from tests.factory.test_incremental import _cli


class RecordingCollector:
    """A collector that answers with the rules-only cascade (no cache, no model) and records every unit and
    item it was asked about."""

    def __init__(self) -> None:
        self.inner = Cascade(load_model_config(None))
        self.asked: Counter[tuple[str, str]] = Counter()

    async def collect(
        self, *, unit_id: str, layer: Layer, unit: Any, definitions: Sequence[DataDefinition],
        pack: KnowledgePack, injection_ranges: Sequence[EvidencePointer] = (),
        context: EngagementView | None = None,
    ) -> list[AtomicDatum]:
        self.asked.update((unit_id, d.id) for d in definitions)
        return await self.inner.collect(unit_id=unit_id, layer=layer, unit=unit, definitions=definitions, pack=pack,
                                        injection_ranges=injection_ranges, context=context)

    def __getattr__(self, name: str) -> Any:  # the counters the runner reports
        return getattr(self.inner, name)


_CONTENT = ("component", "layer", "metric", "stratum", "unit_id", "value", "low", "high", "n", "note", "analysis")


def test_the_kernel_over_units_in_memory_gives_the_stored_results(no_model: Path,  # noqa: F811
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    simulate(SimConfig(users=6, seed=7), no_model / "sim")
    path = no_model / "store.duckdb"
    _cli("ingest", str(no_model / "sim"), "--store", str(path), "--pack", "business_analysis")
    stored_by = RecordingCollector()
    with Store(path) as st:
        suite = load_suite(None, pack=None, store=st)
        Runner(st, pack=suite.pack, collector=stored_by, specs=suite.components, inputs=read_run_inputs(st),
               full=True).run()
        stored_results = sorted(st.con.execute(f"SELECT {', '.join(_CONTENT)} FROM results").fetchall(), key=repr)
        stored_data = sorted(st.con.execute("SELECT unit_id, item, value, fact FROM atomic_data").fetchall())
        # The in-memory inputs: adapters.model objects read once; nothing below touches a store.
        turns = list(st.iter_segmented_turns(segment=None, order="user"))
        events, attrs, horizon_at = st.events(), st.conversation_attributes(), st.horizon()
        injections = injection_pointers(st)
        defs = definitions_by_layer(suite.components, suite.pack)
        by_id = {d.id: d for layer in defs.values() for ds in layer.values() for d in ds}
        component_of = {d.id: c for layer in defs.values() for c, ds in layer.items() for d in ds}
        versions = {a.name: a.content_version for s in suite.components for a in s.analyses}
        groups = analysis_groups(suite.components, names=frozenset(versions), component_of=component_of,
                                 admitted={i for i, d in by_id.items() if d.admitted})
        stored_rows = {s: kernel.freeze(load_rows(st, items=items, all_segments=s), horizon=None).rows
                       for s, items, _a in groups}

    def no_store(*_a: Any, **_k: Any) -> None:
        raise AssertionError("the kernel opened a store")

    monkeypatch.setattr(store_base.Store, "__init__", no_store)
    by_conv: dict[str, list[Any]] = {}
    by_user: dict[str, list[Any]] = {}
    for ev in events:
        if ev.conversation_id is not None:
            by_conv.setdefault(ev.conversation_id, []).append(ev)
        if ev.user_id is not None:
            by_user.setdefault(ev.user_id, []).append(ev)
    units = list(group_user_units(turns, events_by_conv=by_conv, events_by_user=by_user, attributes=attrs,
                                  horizon=horizon_at, window_days=suite.pack.thresholds.window_days))
    plan = kernel.CollectPlan(definitions=defs, pack=suite.pack, injections=injections,
                              all_segments=frozenset(s.name for s in suite.components if s.all_segments))
    in_memory = RecordingCollector()
    batches = list(kernel.collect(units, plan, in_memory))
    assert in_memory.asked == stored_by.asked and sum(in_memory.asked.values()) > 0

    data = sorted((d.unit_id, d.item, d.value, dumps(d.fact)) for b in batches for d in b.data)
    assert data == stored_data

    horizon = horizon_at.timestamp() if horizon_at is not None else None
    rows = []
    for all_segments, items, analyses in groups:
        obs = kernel.observations(batches, items=items, horizon=horizon, all_segments=all_segments)
        assert isinstance(obs.rows, MappingProxyType) and all(isinstance(r, LayerRows) for r in obs.rows.values())
        # Row for row as the store gives them, values and facts iterated in the same (item) order.
        assert {layer: [(r.unit_id, list(r.values.items()), list(r.facts.items())) for r in rs]
                for layer, rs in obs.rows.items()} == {
            layer: [(r.unit_id, list(r.values.items()), list(r.facts.items())) for r in rs]
            for layer, rs in stored_rows[all_segments].items()}
        for r in kernel.analyse(obs, analyses, suite.pack):
            row = result_row(r, run_id="memory", versions=versions)
            rows.append(tuple(row[c] for c in _CONTENT))
    assert len(rows) > 0 and sorted(rows, key=repr) == stored_results
    assert any(json.loads(r[5]) not in (None, 0) for r in rows)  # results with content, not only empty ones


def test_a_second_rater_is_read_only_when_asked() -> None:
    primary = [kernel.UnitRecord(unit_id="t1", layer="trace", user_key="u", user_id="u", conversation_id="c",
                                 index=0, start=None, end=None, mode=None)]
    who = {"tier": "rule", "name": "r"}
    data = (AtomicDatum(unit_id="t1", layer="trace", item="x.a", item_version="1", value="yes", collector=who),
            AtomicDatum(unit_id="t1", layer="trace", item="x.a", item_version="1", value="no", collector=who,
                        rater="audit:m"))
    batch = kernel.DatumBatch(user_key="u", units=tuple(primary), data=data)
    first = kernel.observations([batch], items={"x.a"}, horizon=None)
    second = kernel.observations([batch], items={"x.a"}, horizon=None, rater="audit:m")
    assert first.layer("trace")[0].values == {"x.a": "yes"}
    assert second.layer("trace")[0].values == {"x.a": "no"}
