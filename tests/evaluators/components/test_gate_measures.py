"""The components' gated measures (`<component>/gate.py`): what each puts before the gate, and that each measure's
ratio over every user is the population result its component's analysis stores (they share one per-row reading,
so they cannot drift apart), on a simulated store and on tau-bench."""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from agent_factory.evaluators.components.conduct import clause_results
from agent_factory.evaluators.components.conduct.definitions import obligation_id, trigger_id
from agent_factory.evaluators.components.execution.analysis import mode_of
from agent_factory.evaluators.components.execution.definitions import DELIVERED
from agent_factory.evaluators.components.substance import ITEMS, score
from agent_factory.evaluators.components.trajectory.analysis import replay_counts
from agent_factory.evaluators.components.trajectory.definitions import REPLAY_TURNS, TURNS
from agent_factory.evaluators.core.gate import GateMeasure
from agent_factory.evaluators.core.model import Value
from agent_factory.evaluators.core.registry import ComponentSpec, Observations, UnitRow, components, get_component
from agent_factory.factory.loops.gate.data import Side, gate_measures, load_side, side_rows
from agent_factory.factory.store import Store
from agent_factory.factory.store.results import PopulationResult, population_results
from agent_factory.knowledge_packs import KnowledgePack, load_pack
from tests.factory.conftest import sim_store, tau_store  # noqa: F401 - fixtures: pytest finds them by name here

UNGATED = {"provenance", "adjudication"}
"""The instruments: they measure the evaluator, not the agent, so the gate does not judge them."""


def _measures(pack: KnowledgePack) -> tuple[GateMeasure, ...]:
    return gate_measures(pack, components())


def _pooled(results: list[PopulationResult], m: GateMeasure) -> PopulationResult | None:
    found = [r for r in results if r.component == m.component and r.metric == m.name and r.stratum in ("all", None)]
    assert len(found) <= 1, f"{m.key}: {len(found)} pooled results"
    return found[0] if found else None


def _check_pooled(store: Path, pack: KnowledgePack) -> tuple[dict[str, tuple[float, float, int]], set[str]]:
    """Each measure's sum(y)/sum(x) over all rows against the stored pooled result: (y, x, rows) per measure, and
    the measures compared (those whose metric the analyses store pooled)."""
    measures = _measures(pack)
    with Store(store, read_only=True) as st:
        cols = load_side(st, Side(store=store), measures)
        results = population_results(st)
    seen: dict[str, tuple[float, float, int]] = {}
    compared: set[str] = set()
    for m, rows in zip(cols.measures, cols.rows, strict=True):
        y, x = float(rows.y.sum()), float(rows.x.sum())
        seen[m.key] = (y, x, len(rows.y))
        stored = _pooled(results, m)
        if stored is None:
            continue
        compared.add(m.key)
        stored_value = None if stored.value is None else json.loads(stored.value)
        if not len(rows.y):
            assert stored_value is None, f"{m.key}: no gate row, but the analysis stored {stored_value}"
            continue
        # The analysis' n counts the units of its denominator: rows for a per-unit rate, next messages (x) for
        # Trajectory's per-conversation counts.
        assert stored.n == x, f"{m.key}: the analysis counts n={stored.n}, the gate's rows weigh {x}"
        if np.all(rows.x == 1.0):
            assert stored.n == len(rows.y)
        value = math.exp(y / x) if m.scale == "log" else y / x
        assert stored_value == pytest.approx(value, rel=1e-12, abs=1e-12), m.key
    return seen, compared


def test_the_pooled_measures_are_the_stored_results_on_a_simulation(sim_store: tuple[Path, str]) -> None:  # noqa: F811
    pack = load_pack("business_analysis")
    seen, compared = _check_pooled(sim_store[0], pack)
    assert compared == {"execution:failure_rate", "trajectory:replay_per_next_message", "results:redo_rate",
                        "substance:S", *(f"conduct:violation_rate.{c.id}" for c in pack.clauses)}
    # The simulation plants replays, redos, failures and violations: the comparison is not of zeros.
    for key in ("execution:failure_rate", "trajectory:replay_per_next_message", "results:redo_rate"):
        assert seen[key][0] > 0, key
    assert any(seen[f"conduct:violation_rate.{c.id}"][0] > 0 for c in pack.clauses)
    # A rules-only run scores no checklist item: S has no row (the gate says undecided).
    assert seen["substance:S"][2] == 0
    # Replay per next message counts from the sessions' facts; replay after a failed / a delivered turn pairs
    # the trace rows. Every delivery of the simulation is decided, so the pairs are every next message.
    with Store(sim_store[0], read_only=True) as st:
        after = [r for r in population_results(st) if r.metric in ("replay_after_failure", "replay_after_success")]
    y, x, _ = seen["trajectory:replay_per_next_message"]
    assert (sum(json.loads(r.value or "null") * (r.n or 0) for r in after), sum(r.n or 0 for r in after)) == \
        pytest.approx((y, x), rel=1e-12)


def test_the_pooled_measures_are_the_stored_results_on_tau_bench(tau_store: Path) -> None:  # noqa: F811
    pack = load_pack("airline")
    seen, compared = _check_pooled(tau_store, pack)
    assert {"execution:failure_rate", "trajectory:replay_per_next_message",
            *(f"conduct:violation_rate.{c.id}" for c in pack.clauses)} <= compared
    assert any(seen[f"conduct:violation_rate.{c.id}"][2] > 0 for c in pack.clauses)
    assert seen["trajectory:replay_per_next_message"][1] > 0


def test_latency_per_mode_is_the_stored_ratio_to_the_baseline(sim_store: tuple[Path, str]) -> None:  # noqa: F811
    # The analysis gives the ratio per mode only (each mode has its baseline); the gate pools log(s / baseline)
    # over modes. Per mode, the measure's rows are the analysis' turns.
    store = sim_store[0]
    m = next(x for x in _measures(load_pack("business_analysis")) if x.key == "execution:latency_gm_ratio")
    with Store(store, read_only=True) as st:
        rows = side_rows(st, Side(store=store), [m])["trace"]
        stored = {r.stratum: r for r in population_results(st) if r.component == "execution" and r.metric == m.name}
    logs: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if (c := m.contribution(r)) is not None:
            logs[f"mode={mode_of(r)}"].append(c[0])
    assert logs and set(stored) == set(logs)
    for stratum, got in logs.items():
        assert stored[stratum].n == len(got)
        assert json.loads(stored[stratum].value or "null") == pytest.approx(math.exp(sum(got) / len(got)), rel=1e-9)


def test_replay_counts_read_the_session_facts() -> None:
    def conv(value: Value, replays: float | str | None, turns: float | None) -> UnitRow:
        return UnitRow("c", "conversation", "u", "c", 0, None, None, None, {REPLAY_TURNS: value, TURNS: "yes"},
                       {REPLAY_TURNS: replays, TURNS: turns})

    assert replay_counts(conv("yes", "1,3", 4.0)) == (2, 3)
    assert replay_counts(conv("yes", "", 4.0)) == (0, 3)
    assert replay_counts(conv("yes", 2.0, 3.0)) == (1, 2)
    assert replay_counts(conv("yes", "", 1.0)) is None  # one turn: no next message
    assert replay_counts(conv("uncollected", None, 4.0)) is None
    assert replay_counts(conv("yes", "1,x", 4.0)) is None  # unreadable
    assert replay_counts(conv("yes", "1,2,3", 3.0)) is None  # the facts disagree
    assert replay_counts(conv("yes", "1", None)) is None


def _reads(spec: ComponentSpec) -> set[str]:
    out: set[str] = {spec.name}
    for a in spec.analyses:
        out |= set(a.reads)
    return out


@pytest.mark.parametrize("pack_name", ["business_analysis", "airline"])
def test_every_agent_component_declares_measures_on_its_own_data(pack_name: str) -> None:
    pack = load_pack(pack_name)
    for spec in components():
        got = spec.gate_for(pack)
        if spec.name in UNGATED:
            assert got == (), spec.name
            continue
        assert got, f"{spec.name} declares no gated measure"
        assert spec.present is not None
        # Data the component's analyses read: its own, or a component's it declares in `reads` (Substance's S
        # is zero on a failed delivery, read from Execution's datum).
        known = {d.id for name in _reads(spec) for d in get_component(name).definitions_for(pack)}
        for m in got:
            assert m.component == spec.name and m.metric.worse in ("higher", "lower"), m.key
            assert m.metric in spec.present.metrics, f"{m.key}: its metric is not one {spec.name} declares"
            assert m.items and set(m.items) <= known, f"{m.key} reads {set(m.items) - known}"
    keys = [m.key for m in _measures(pack)]
    assert len(keys) == len(set(keys))


def test_conduct_declares_one_measure_per_clause_with_its_invariant() -> None:
    pack = load_pack("airline")
    got = get_component("conduct").gate_for(pack)
    assert [(m.name, m.layer, m.items, m.invariant) for m in got] == [
        (f"violation_rate.{c.id}", c.layer, (trigger_id(c.id), obligation_id(c.id)), c.invariant)
        for c in pack.clauses]
    assert any(m.invariant for m in got)


_STATES: dict[str, tuple[Value | None, Value | None, float | None]] = {
    # (trigger, obligation) -> the unit's violation in violation_rate (None: outside its denominator)
    "outside": (None, None, None),
    "not_applicable": ("not_applicable", None, None),
    "trigger_uncollected": ("uncollected", None, None),
    "not_triggered": ("no", None, 0.0),
    "obligation_uncollected": ("yes", "uncollected", None),
    "inconsistent": ("yes", "not_applicable", None),
    "complied": ("yes", "yes", 0.0),
    "violated": ("yes", "no", 1.0),
}


def test_violation_rate_counts_planted_violations_over_many_seeds() -> None:
    clause = load_pack("airline").clauses[0]
    measure = get_component("conduct").gate_for(load_pack("airline"))[0]
    tid, oid = trigger_id(clause.id), obligation_id(clause.id)
    for seed in range(30):
        rng = random.Random(seed)
        rows, truth = [], []
        for k in range(rng.randint(1, 60)):
            trig, ob, v = _STATES[rng.choice(list(_STATES))]
            values = {i: val for i, val in ((tid, trig), (oid, ob)) if val is not None}
            rows.append(UnitRow(f"u{k}", clause.layer, f"user{rng.randint(0, 5)}", f"c{k}", 0, None, None, None,
                                values, {}))
            truth.append(v)
        decided = [v for v in truth if v is not None]
        got = {r.metric: r for r in clause_results(clause, rows)}[f"violation_rate.{clause.id}"]
        assert got.n == len(decided)
        assert got.value == (sum(decided) / len(decided) if decided else None)
        contributions = [measure.contribution(r) for r in rows]
        assert [c if c is None else c[0] for c in contributions] == truth


def _turn(k: int, delivered: Value, items: dict[str, Value]) -> UnitRow:
    return UnitRow(f"t{k}", "trace", f"user{k % 3}", f"c{k}", 0, None, None, "normal", {DELIVERED: delivered, **items},
                   {})


def test_s_per_delivered_turn_is_the_analysis_mean_when_every_turn_is_delivered_in_one_mode() -> None:
    # One stratum (one mode, all delivered): the analysis' stratified S is the plain mean of the scored turns,
    # an independent computation of what the gate's measure averages.
    rng = random.Random(3)
    rows = [_turn(k, "yes", {i: rng.choice(["yes", "no", "not_applicable", "uncollected"]) for i in ITEMS})
            for k in range(40)]
    measure = get_component("substance").gate_for(load_pack("business_analysis"))[0]
    got = [c for r in rows if (c := measure.contribution(r)) is not None]
    stored = {(r.metric, r.stratum): r for r in score(Observations(rows={"trace": rows}), load_pack("default"))}
    assert stored[("S", "all")].value == pytest.approx(sum(y for y, _ in got) / sum(x for _, x in got), rel=1e-12)
    # A failed turn (S = 0 by definition) is Execution's failure, not a Substance row; nor is an unscored turn.
    assert measure.contribution(_turn(99, "no", {})) is None
    assert measure.contribution(_turn(98, "yes", dict.fromkeys(ITEMS, "uncollected"))) is None

