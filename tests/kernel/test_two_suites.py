"""Two suites over different packs (`default` and `airline`) through the kernel: interleaved in one process, and in
a forked worker, each gives exactly what it gives alone in a fresh interpreter: the same data, the same results,
and the same memo work (hits and misses per table), so no memo entry and no registration of one suite's run
reaches the other's."""

from __future__ import annotations

import json
import multiprocessing
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_factory import plugins
from agent_factory.evaluators import kernel
from agent_factory.evaluators.collect import Cascade, ModelConfig
from agent_factory.evaluators.core import DataDefinition, components, memo
from agent_factory.evaluators.core.memo import RunMemos
from agent_factory.knowledge_packs import load_pack

ROOT = Path(__file__).resolve().parents[2]
PACKS = ("default", "airline")
MEMO_TABLES = {"provenance.turn", "coverage.markers", "coverage.text_facts", "cache.rule_identity",
               "source.modules"}
"""The run memo tables these suites use (`evaluators.core.memo`): conduct's patterns are used by lexicon clauses
only, the turn digest by a cache only."""


@pytest.fixture(scope="module")
def units_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One simulated traffic's units (every user), read from a store once and pickled: what every run reads."""
    from agent_factory.factory.pipeline.units import group_user_units
    from agent_factory.factory.simulate import SimConfig, simulate
    from agent_factory.factory.store import Store
    from tests.factory.test_incremental import _cli

    where = tmp_path_factory.mktemp("two_suites")
    simulate(SimConfig(users=8, seed=11), where / "sim")
    path = where / "store.duckdb"
    _cli("ingest", str(where / "sim"), "--store", str(path), "--pack", "default")
    with Store(path) as st:
        turns = list(st.iter_segmented_turns(segment=None, order="user"))
        events, attrs, horizon = st.events(), st.conversation_attributes(), st.horizon()
    by_conv: dict[str, list[Any]] = {}
    by_user: dict[str, list[Any]] = {}
    for ev in events:
        if ev.conversation_id is not None:
            by_conv.setdefault(ev.conversation_id, []).append(ev)
        if ev.user_id is not None:
            by_user.setdefault(ev.user_id, []).append(ev)
    units = list(group_user_units(turns, events_by_conv=by_conv, events_by_user=by_user, attributes=attrs,
                                  horizon=horizon, window_days=load_pack("default").thresholds.window_days))
    assert len(units) >= 8
    # As an in-memory caller (the gate) would hold them: without the provenance ingest stored, so every run
    # computes coverage and injection flags itself, through its memo tables.
    for u in units:
        for t in [*u.excluded, *(t for c in (u.view.conversations if u.view else ()) for t in c.turns)]:
            t._stored = None
    out = where / "units.pickle"
    out.write_bytes(pickle.dumps((units, horizon.timestamp() if horizon is not None else None)))
    return out


class _Run:
    """One suite's run: its pack, plan and rules-only collector (no model: `ModelConfig()`), its own memo tables, and the kernel's generator over the
    units (advanced by the caller, so two runs can take turns)."""

    def __init__(self, pack_name: str, units: list[kernel.UserUnits], registry: plugins.Registry) -> None:
        self.pack = load_pack(pack_name)
        self.specs = components()
        defs: dict[str, dict[str, list[DataDefinition]]] = {}
        for spec in self.specs:
            for d in spec.definitions_for(self.pack):
                defs.setdefault(d.layer, {}).setdefault(spec.name, []).append(d)
        self.items = sorted(d.id for layer in defs.values() for ds in layer.values() for d in ds)
        plan = kernel.CollectPlan(definitions=defs, pack=self.pack,  # type: ignore[arg-type]
                                  all_segments=frozenset(s.name for s in self.specs if s.all_segments))
        self.memos = RunMemos()
        self.batches: list[kernel.DatumBatch] = []
        self.steps: Iterator[kernel.DatumBatch] = kernel.collect(
            units, plan, Cascade(ModelConfig()), memos=self.memos, registry=registry)

    def step(self) -> bool:
        """Collect the next user; False when every user is done."""
        batch = next(self.steps, None)
        if batch is None:
            return False
        self.batches.append(batch)
        return True

    def outcome(self, horizon: float | None) -> dict[str, Any]:
        """The run's data, its results (every analysis of every component) and its memo work, as JSON values."""
        data = sorted([d.unit_id, d.item, d.rater, str(d.value), json.dumps(d.fact), d.reason or "",
                       [p.model_dump(mode="json") for p in d.evidence]] for b in self.batches for d in b.data)
        results = []
        for spec in self.specs:
            obs = kernel.observations(self.batches, items=self.items, horizon=horizon,
                                      all_segments=spec.all_segments)
            for r in kernel.analyse(obs, spec.analyses, self.pack):
                results.append(r.model_dump(mode="json"))
        return {"data": data, "results": sorted(results, key=lambda r: json.dumps(r, sort_keys=True)),
                "memos": {k: list(v) for k, v in self.memos.stats().items()}}


def _load(units_file: Path) -> tuple[list[kernel.UserUnits], float | None]:
    units, horizon = pickle.loads(units_file.read_bytes())
    return units, horizon


def run_interleaved(units_file: Path, packs: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Every suite of `packs` over the units, a user of each in turn, in this process; with each, whether the
    memos of code outside any run (the process's own) stayed as they were."""
    units, horizon = _load(units_file)
    outside = memo.memos().stats() if memo.process_memos_made() else None
    # Each suite looks its rules up in a registry of its own, built from the entry points on first use.
    registries = {p: plugins.Registry() for p in packs}
    runs = {p: _Run(p, units, registries[p]) for p in packs}
    while any([r.step() for r in runs.values()]):
        pass
    untouched = outside == (memo.memos().stats() if memo.process_memos_made() else None)
    return {p: {**r.outcome(horizon), "outside_untouched": untouched, "rules": registries[p].names("rule")}
            for p, r in runs.items()}


def _in_worker(units_file: Path, packs: tuple[str, ...], conn: Any) -> None:
    conn.send(json.dumps(run_interleaved(units_file, packs)))
    conn.close()


def run_forked(units_file: Path, packs: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """`run_interleaved` in a worker forked from this process (which has run suites already)."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    worker = ctx.Process(target=_in_worker, args=(units_file, packs, child))
    worker.start()
    got: dict[str, dict[str, Any]] = json.loads(parent.recv())
    worker.join(timeout=300)
    assert worker.exitcode == 0
    return got


def run_alone(units_file: Path, pack: str) -> dict[str, Any]:
    """One suite alone in a fresh interpreter."""
    script = ("import json, sys; from pathlib import Path; from tests.kernel.test_two_suites import run_interleaved; "
              "print(json.dumps(run_interleaved(Path(sys.argv[1]), (sys.argv[2],))[sys.argv[2]]))")
    out = subprocess.run([sys.executable, "-c", script, str(units_file), pack], cwd=ROOT, capture_output=True,
                         text=True, check=False, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.slow
def test_two_suites_in_one_process_and_in_a_forked_worker_give_what_each_gives_alone(
    units_file: Path,
) -> None:
    alone = {p: run_alone(units_file, p) for p in PACKS}
    assert alone["default"]["data"] and alone["airline"]["data"] and alone["default"]["results"]
    assert alone["default"]["data"] != alone["airline"]["data"]  # two suites that differ, or the test proves nothing
    # Every memo table lives in the run's context and is used there (hits, misses); none outside it.
    for a in alone.values():
        assert set(a["memos"]) >= MEMO_TABLES and all(misses > 0 for _, misses in a["memos"].values())
        assert sum(hits for hits, _ in a["memos"].values()) > 0 and a["outside_untouched"]

    # Each suite's registry holds what the entry points give, as a new one here does.
    assert alone["default"]["rules"] == alone["airline"]["rules"] == plugins.Registry().names("rule")

    rules_before = plugins.names("rule")
    together = run_interleaved(units_file, PACKS)
    for p in PACKS:
        assert together[p]["data"] == alone[p]["data"], p
        assert together[p]["results"] == alone[p]["results"], p
        assert together[p]["memos"] == alone[p]["memos"], p
        assert together[p]["rules"] == alone[p]["rules"], p
    assert plugins.names("rule") == rules_before  # running suites registers nothing in the process's registry

    forked = run_forked(units_file, PACKS[::-1])
    for p in PACKS:
        assert forked[p] == alone[p], p
