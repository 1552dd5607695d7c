"""Seeded defects (`factory.loops.gate.defects`) on a small simulated store run with the suite built from the
business-analysis spec: a defect that changes nothing gives back the stored run's columns; blanking raises the
failure rate by p times the delivered share; a disclosure or the template makes violations of its own clause
only; a resent request is seen by Trajectory's replay measure; latency moves its log measure by log(factor);
forked workers give what one process gives; and nothing is written to the store."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from agent_factory import open_project
from agent_factory.adapters.model import Turn
from agent_factory.evaluators.gate.columns import GateColumns, MeasureRows
from agent_factory.evaluators.gate.power import align, power
from agent_factory.factory.cli.app import app
from agent_factory.factory.loops.gate.data import Side, gate_measures, load_side
from agent_factory.factory.loops.gate.defects import (
    DEFECTS,
    defect_turn,
    defected_columns,
    defected_sides,
    disclosure_sentences,
)
from agent_factory.factory.project.root import Project
from agent_factory.factory.simulate import SimConfig, simulate
from agent_factory.knowledge_packs.loader import load_pack

ROOT = Path(__file__).resolve().parents[4]
SPEC = ROOT / "specs" / "business_analysis_zh.md"
_ENV = {"AGENT_FACTORY_SMALL_MODEL": "", "AGENT_FACTORY_JURY": "", "AGENT_FACTORY_CONFIG": ""}


def _cli(*args: str) -> Any:
    res = CliRunner().invoke(app, list(args), env=_ENV)
    assert res.exit_code == 0, res.output
    return res


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    """150 simulated users ingested and run, rules only, with the spec's suite (approved): the project, read-only."""
    root = tmp_path_factory.mktemp("defects")
    simulate(SimConfig(users=150, seed=3), root / "sim")
    suite, store = root / "suite", root / "store.duckdb"
    _cli("build", "--spec", str(SPEC), "--pack", "business_analysis", "--out", str(suite))
    _cli("approve", str(suite))
    _cli("ingest", str(root / "sim"), "--pack", "business_analysis", "--store", str(store))
    _cli("run", "--suite", str(suite), "--store", str(store))
    with open_project(store=store, suite=suite) as p:
        yield p


@pytest.fixture(scope="module")
def clean(project: Project) -> GateColumns:
    return load_side(project.store(), Side(store=project.store_path), _measures(project))


@pytest.fixture(scope="module")
def defected(project: Project, clean: GateColumns) -> dict[str, GateColumns]:
    """Every defect's columns (one pass each, in this process), aligned with `clean`."""
    got = defected_sides(project.store(), Side(store=project.store_path), _measures(project), project.pack,
                         project.suite.components, DEFECTS, clean=clean, workers=1)
    return {kind: align(clean, cols)[1] for kind, cols in got.items()}


def _measures(project: Project) -> tuple[Any, ...]:
    return gate_measures(project.pack, project.suite.components)


def _index(cols: GateColumns, key: str) -> int:
    if key not in cols.keys:
        pytest.skip(f"the suite gates no {key}")
    return cols.keys.index(key)


def _aligned(clean: GateColumns, defected: GateColumns, key: str) -> tuple[MeasureRows, MeasureRows]:
    c, d = align(clean, defected)
    i = _index(c, key)
    return c.rows[i], d.rows[i]


def test_a_defect_that_changes_nothing_gives_back_the_stored_columns(project: Project, clean: GateColumns) -> None:
    # Latency x 1: every timed turn is rewritten (a copy) and recollected, and must read as the run stored it.
    same = defected_columns(project.store(), Side(store=project.store_path), _measures(project), project.pack,
                            project.suite.components, "latency", factor=1.0, clean=clean, workers=1)
    assert same.users == clean.users and same.keys == clean.keys
    for r0, r1 in zip(clean.rows, same.rows, strict=True):
        assert r1.unit_ids == r0.unit_ids
        np.testing.assert_array_equal(r1.user, r0.user)
        np.testing.assert_array_equal(r1.y, r0.y)
        np.testing.assert_array_equal(r1.x, r0.x)


def test_blank_fails_every_delivered_turn_and_raises_the_rate_by_p_times_the_delivered_share(
        clean: GateColumns, defected: dict[str, GateColumns]) -> None:
    r0, r1 = _aligned(clean, defected["blank"], "execution:failure_rate")
    assert np.all(r1.y[r0.x > 0] == 1.0) and np.all(r1.x == r0.x)  # every decided turn now failed
    delivered = float((r0.y == 0).sum() / r0.x.sum())
    assert 0.5 < delivered < 1.0
    lat0, lat1 = _aligned(clean, defected["blank"], "execution:latency_gm_ratio")
    assert np.all(lat1.x == 0) and lat0.x.sum() > 0  # a failed turn leaves the latency measure
    sign = np.array([m.sign for m in clean.measures])
    thresholds = dict.fromkeys(clean.keys, 3.0)
    got = power(clean, defected["blank"], sign, thresholds, strengths=(0.05, 0.2), draws=200, seed=0)
    assert got.metric == "execution:failure_rate"
    for point in got.curve:
        # The candidate half's delivered share is the whole side's, up to the draw of halves.
        assert point.effect == pytest.approx(100.0 * point.strength * delivered, rel=0.1)


@pytest.mark.parametrize(("kind", "clause", "other"), [
    ("disclosure", "no_unprompted_disclosure", "file_summary_needs_upload"),
    ("template", "file_summary_needs_upload", "no_unprompted_disclosure"),
])
def test_disclosure_and_template_rows_become_violations_of_their_clause(
        clean: GateColumns, defected: dict[str, GateColumns], kind: str, clause: str, other: str) -> None:
    r0, r1 = _aligned(clean, defected[kind], f"conduct:violation_rate.{clause}")
    f0, f1 = _aligned(clean, defected["blank"], "execution:failure_rate")
    delivered = int((f0.y == 0).sum())
    triggered = int((r1.x > 0).sum())
    assert triggered >= delivered  # every delivered answer now triggers the clause
    assert r1.y.sum() >= 0.9 * triggered > r0.y.sum()  # almost all unprompted (a few users asked who runs it)
    o0, o1 = _aligned(clean, defected[kind], f"conduct:violation_rate.{other}")
    np.testing.assert_array_equal(o1.y, o0.y)  # the other clause does not move
    np.testing.assert_array_equal(o1.x, o0.x)


def test_replay_is_seen_by_the_trajectory_replay_measure(clean: GateColumns,
                                                          defected: dict[str, GateColumns]) -> None:
    r0, r1 = _aligned(clean, defected["replay"], "trajectory:replay_per_next_message")
    assert np.array_equal(r1.x, r0.x)  # the same messages, more of them replays
    rate0, rate1 = r0.y.sum() / r0.x.sum(), r1.y.sum() / r1.x.sum()
    # Every other later turn resends the one before: about half of the next messages become replays.
    assert rate1 - rate0 > 0.3


def test_latency_moves_the_log_measure_by_log_factor(clean: GateColumns, defected: dict[str, GateColumns]) -> None:
    r0, r1 = _aligned(clean, defected["latency"], "execution:latency_gm_ratio")
    both = (r0.x > 0) & (r1.x > 0)
    assert both.sum() == (r0.x > 0).sum() > 0
    np.testing.assert_allclose(r1.y[both] - r0.y[both], math.log(2.0), rtol=1e-12)


def test_forked_workers_give_what_one_process_gives(project: Project, clean: GateColumns,
                                                    defected: dict[str, GateColumns]) -> None:
    got = defected_sides(project.store(), Side(store=project.store_path), _measures(project), project.pack,
                         project.suite.components, ("template",), clean=clean, workers=2)["template"]
    want = defected["template"]
    for r0, r1 in zip(want.rows, align(clean, got)[1].rows, strict=True):
        assert r1.unit_ids == r0.unit_ids
        np.testing.assert_array_equal(r1.y, r0.y)
        np.testing.assert_array_equal(r1.x, r0.x)


def test_a_selector_side_gets_the_whole_stores_defected_rows_of_its_conversations(
        project: Project, defected: dict[str, GateColumns]) -> None:
    side = Side(store=project.store_path, key="agent.mode", values=("simple",))
    measures = _measures(project)
    picked = load_side(project.store(), side, measures)
    whole = defected["blank"]
    assert 0 < len(picked.users) < len(whole.users)
    got = align(picked, defected_sides(project.store(), side, measures, project.pack, project.suite.components,
                                       ("blank",), clean=picked, workers=1)["blank"])[1]
    where = {u: i for i, u in enumerate(whole.users)}
    for key in ("execution:failure_rate", "conduct:violation_rate.no_unprompted_disclosure"):
        i = _index(got, key)
        r, w = got.rows[i], whole.rows[i]
        assert r.unit_ids == picked.rows[i].unit_ids and len(r.unit_ids) > 0
        at = {u: k for k, u in enumerate(w.unit_ids)}
        rows = [at[u] for u in r.unit_ids]
        np.testing.assert_array_equal(r.y, w.y[rows])
        np.testing.assert_array_equal(r.x, w.x[rows])
        assert [where[picked.users[u]] for u in r.user] == list(w.user[rows])


def test_nothing_is_written_to_the_store(project: Project, clean: GateColumns) -> None:
    path = project.store_path
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    defected_columns(project.store(), Side(store=path), _measures(project), project.pack, project.suite.components,
                     "blank", clean=clean, workers=1)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def _turn(i: int, request: str, answer: str | None, delivery: str = "delivered") -> Turn:
    return Turn(id=f"t{i}", conversation_id="c", user_id="u", index=i, request=request, answer=answer,
                delivery=delivery, latency_ms=1000.0 * (i + 1))  # type: ignore[arg-type]


def test_rewrites_touch_only_eligible_turns() -> None:
    pack = load_pack("business_analysis")
    sentences = disclosure_sentences(pack)
    turns = [_turn(0, "本月销售额", "销售额为 120 万。"), _turn(1, "按地区拆分", "华东 50 万。"),
             _turn(2, "再看华北", None, "failed_error"), _turn(3, "show margins", "Margin is 21%.")]

    def apply(kind: str) -> list[Turn]:
        return [defect_turn(t, kind, previous=turns[i - 1] if i else None, position=i,  # type: ignore[arg-type]
                            sentences=sentences, factor=3.0) for i, t in enumerate(turns)]

    blank = apply("blank")
    assert [(t.answer, t.delivery) for t in blank[:2]] == [("", "failed_empty")] * 2 and blank[2] is turns[2]
    replay = apply("replay")  # odd positions resend the turn before; even ones (and turn 0) are left as they are
    assert [t.request for t in replay] == ["本月销售额", "本月销售额", "再看华北", "再看华北"]
    assert replay[0] is turns[0] and replay[2] is turns[2]
    disclosure = apply("disclosure")
    assert disclosure[0].answer == f"销售额为 120 万。\n{sentences['zh']}" and disclosure[2] is turns[2]
    assert disclosure[3].answer == f"Margin is 21%.\n{sentences['en']}"
    template = apply("template")
    assert template[0].answer is not None and template[0].answer.startswith("【文件摘要】")
    assert template[3].answer is not None and template[3].answer.startswith("[File summary]")
    assert [t.latency_ms for t in apply("latency")] == [3000.0, 6000.0, 9000.0, 12000.0]


def test_the_disclosure_sentence_is_the_packs_own_else_the_simulators() -> None:
    pack = load_pack("business_analysis")
    sentences = disclosure_sentences(pack)
    for lang, sentence in sentences.items():
        assert any(re.search(p.pattern, sentence, re.IGNORECASE) for p in pack.lexicons[lang].disclosure)
    bare = disclosure_sentences(load_pack("default"))  # no disclosure lexicon: the simulator's sentence
    assert bare["en"].startswith("This analysis is provided by") and set(bare) == {"en", "zh"}


def test_an_unknown_defect_is_refused(project: Project, clean: GateColumns) -> None:
    with pytest.raises(ValueError, match="not one of blank, replay"):
        defected_sides(project.store(), Side(store=project.store_path), _measures(project), project.pack,
                       project.suite.components, ("typo",), clean=clean)  # type: ignore[arg-type]
