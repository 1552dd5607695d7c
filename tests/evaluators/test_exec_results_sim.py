"""Execution and Results on simulated traffic (rules only) against the simulator's ground truth.

`observe` below is a stand-in for the runner: it applies every rule of the two components to the real turns,
spans and sessions, builds the `UnitRow`s and the `Observations`. On this evidence the rules are exact, so the
estimates must equal the realised figures in truth.jsonl / truth_summary.json count for count, and their 95%
intervals must cover them. Seed 0 is the simulator's default, chosen before looking at any result.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from agent_factory.adapters.model import Conversation, Engagement, Turn
from agent_factory.digest import stable_id
from agent_factory.evaluators.components.execution.definitions import (
    CHAIN_COMPLETE,
    DELIVERED,
    HAS_RETRIEVAL,
    HAS_THINKING,
    LATENCY_MS,
    PROGRESS_AT_STOP,
)
from agent_factory.evaluators.core.model import DataDefinition, Result
from agent_factory.evaluators.core.registry import (
    EngagementView,
    Observations,
    RuleContext,
    SpanView,
    UnitRow,
    get_component,
    get_rule,
)
from agent_factory.factory.ingest.files import ingest_paths
from agent_factory.factory.simulate import SimConfig, simulate
from agent_factory.factory.store import Store
from agent_factory.knowledge_packs import KnowledgePack, load_pack

PACK = load_pack("business_analysis")
USERS, SEED = 400, 0
COMPONENTS = ("execution", "results")
WEEK_S = 7 * 86400.0


# ---- the runner stand-in --------------------------------------------------------------------------------


def _ts(t: datetime | None) -> float | None:
    return None if t is None else t.timestamp()


def collect(unit: object, defs: Iterable[DataDefinition], pack: KnowledgePack,
            engagement: EngagementView | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Apply each definition's rule; an abstention is recorded as uncollected (no model tier here)."""
    values: dict[str, Any] = {}
    facts: dict[str, Any] = {}
    for d in defs:
        assert d.rule is not None
        ans = get_rule(d.rule)(unit, RuleContext(pack=pack, definition=d, engagement=engagement))
        values[d.id] = ans.value if ans.value is not None else "uncollected"
        if d.kind == "fact" or ans.fact is not None:
            facts[d.id] = ans.fact
    return values, facts


def observe(turns: Sequence[Turn], pack: KnowledgePack, *, horizon: datetime | None) -> Observations:
    """Rules of both components over turns, their spans, and sessions grouped per user, in (user, time) order."""
    by_layer: dict[str, list[DataDefinition]] = defaultdict(list)
    for name in COMPONENTS:
        for d in get_component(name).definitions:
            by_layer[d.layer].append(d)
    rows: dict[str, list[UnitRow]] = defaultdict(list)
    sessions: dict[str, list[Turn]] = defaultdict(list)
    for t in sorted(turns, key=lambda t: (t.user_id or "", _ts(t.start) or 0.0, t.index)):
        v, f = collect(t, by_layer["trace"], pack)
        rows["trace"].append(UnitRow(t.id, "trace", t.user_id, t.conversation_id, t.index, _ts(t.start),
                                     _ts(t.end), t.mode, v, f))
        for s in t.spans:
            v, f = collect(SpanView(s, t), by_layer["span"], pack)
            rows["span"].append(UnitRow(s.id, "span", t.user_id, t.conversation_id, t.index, _ts(s.start),
                                        _ts(s.end), t.mode, v, f))
        sessions[t.conversation_id].append(t)
    users: dict[str, list[Conversation]] = defaultdict(list)
    for cid, ts in sessions.items():
        ts.sort(key=lambda t: t.index)
        users[ts[0].user_id or cid].append(Conversation(
            id=cid, user_id=ts[0].user_id, start=min(t.start for t in ts if t.start),
            end=max(t.end for t in ts if t.end), turns=tuple(ts)))
    for uid in sorted(users):
        convs = sorted(users[uid], key=lambda c: (_ts(c.start), c.id))
        view = EngagementView(Engagement(id=stable_id(uid, prefix="e_"), user_id=uid,
                                         conversation_ids=tuple(c.id for c in convs)), tuple(convs), horizon)
        for i, c in enumerate(convs):
            v, f = collect(c, by_layer["conversation"], pack, engagement=view)
            rows["conversation"].append(UnitRow(c.id, "conversation", uid, c.id, i, _ts(c.start), _ts(c.end),
                                                None, v, f))
    return Observations(rows=dict(rows), horizon=_ts(horizon))


def analyse(obs: Observations, pack: KnowledgePack) -> list[Result]:
    return [r for name in COMPONENTS for a in get_component(name).analyses for r in a.fn(obs, pack)]


# ---- fixtures -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sim:
    turns: list[Turn]
    truth: list[dict[str, Any]]
    """truth.jsonl records of real turns."""
    summary: dict[str, Any]
    start: datetime


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Sim:
    out = tmp_path_factory.mktemp("sim")
    config = SimConfig(users=USERS, seed=SEED)
    simulate(config, out)
    with Store(out / "store.duckdb") as store:
        ingest_paths(store, [out / "traces.otlp.jsonl"], pack=PACK)
        turns = list(store.iter_turns(segment="real"))
    with (out / "truth.jsonl").open(encoding="utf-8") as fh:
        truth = [r for line in fh if (r := json.loads(line))["segment"] == "real"]
    summary = json.loads((out / "truth_summary.json").read_text(encoding="utf-8"))
    return Sim(turns, truth, summary, config.start)


@pytest.fixture(scope="module")
def full(sim: Sim) -> tuple[Observations, list[Result]]:
    obs = observe(sim.turns, PACK, horizon=max(t.end for t in sim.turns if t.end))
    return obs, analyse(obs, PACK)


def pick(results: list[Result], metric: str, stratum: str = "all", layer: str | None = None) -> Result:
    found = [r for r in results if r.metric == metric and r.stratum == stratum and layer in (None, r.layer)]
    assert len(found) == 1, (metric, stratum, layer)
    return found[0]


def covers(r: Result, truth: float) -> bool:
    return r.low is not None and r.high is not None and r.low <= truth <= r.high


# ---- Execution ------------------------------------------------------------------------------------------


def test_rules_agree_with_truth_turn_by_turn(sim: Sim, full: tuple[Observations, list[Result]]) -> None:
    truth = {r["trace_id"]: r for r in sim.truth}
    rows = full[0].layer("trace")
    assert len(rows) == len(truth) == sim.summary["population"]["real_turns"]
    for row in rows:
        t = truth[row.unit_id]
        assert row.values[DELIVERED] == ("yes" if t["delivery"] == "delivered" else "no")
        assert row.facts.get(DELIVERED) == t["failure_kind"]
        assert row.values[HAS_THINKING] == ("yes" if t["has_thinking"] else "no")
        assert row.values[HAS_RETRIEVAL] == ("yes" if t["has_retrieval"] else "no")
        if t["mode"] == "normal":
            assert row.values[CHAIN_COMPLETE] == ("yes" if t["chain_complete"] else "no")
        assert row.facts[LATENCY_MS] == pytest.approx(t["latency_ms"], abs=0.01)
        if t["progress"] is not None:
            assert row.facts[PROGRESS_AT_STOP] == pytest.approx(t["progress"])
        else:
            assert row.values[PROGRESS_AT_STOP] == "not_applicable"


def test_failure_rate_by_mode_matches_and_is_covered(sim: Sim, full: tuple[Observations, list[Result]]) -> None:
    results = full[1]
    execution = sim.summary["execution"]
    cases = [("all", execution["failure_rate"])]
    cases += [(f"mode={m}", v) for m, v in execution["failure_rate_by_mode"].items()]
    for stratum, truth in cases:
        for metric in ("failure_rate", "failure_rate.wilson"):
            r = pick(results, metric, stratum)
            assert (round(r.value * r.n), r.n) == (truth["k"], truth["n"]), (metric, stratum)  # type: ignore[operator]
            assert covers(r, truth["rate"]), (metric, stratum, r.low, r.high, truth)
    # Failures concentrate in few users, so the user-clustered interval must be the wider one.
    clustered, wilson = pick(results, "failure_rate"), pick(results, "failure_rate.wilson")
    assert clustered.high - clustered.low > wilson.high - wilson.low  # type: ignore[operator]


def test_failure_given_chain_and_latency_bands_match_truth(sim: Sim, full: tuple[Observations, list[Result]]) -> None:
    results, execution = full[1], sim.summary["execution"]
    for metric, key in (("failure_rate.no_thinking", "normal_fail_without_thinking"),
                        ("failure_rate.thinking", "normal_fail_with_thinking"),
                        ("failure_rate.no_retrieval", "normal_fail_without_retrieval"),
                        ("failure_rate.retrieval", "normal_fail_with_retrieval")):
        r, truth = pick(results, metric, "mode=normal"), execution[key]
        assert r.n == truth["n"] and r.value == pytest.approx(truth["rate"], abs=1e-6)
        assert covers(r, truth["rate"])
    for band, key in (("<5s", "under_5s"), ("5-10s", "5_10s"), ("10-120s", "10_120s"), (">120s", "over_120s")):
        r = pick(results, f"failure_rate.band[{band}]", "mode=normal")
        truth = execution["normal_fail_by_latency_band"][key]
        assert r.n == truth["n"] and r.value == pytest.approx(truth["rate"], abs=1e-6)
    for mode, gm in execution["latency_gm_delivered_s"].items():
        assert pick(results, "latency_gm_seconds", f"mode={mode}").value == pytest.approx(gm, rel=1e-3)
    early, truth = pick(results, "early_stop_share", "mode=deep"), execution["deep_early_stop_share"]
    assert (early.n, early.value) == (truth["n"], pytest.approx(truth["rate"], abs=1e-6))


def test_rollup_matches_the_truths_session_and_user_shares(
    sim: Sim, full: tuple[Observations, list[Result]],
) -> None:
    results = full[1]
    sessions = sim.summary["conversation"]["session_failure_share"]
    users = sim.summary["engagement"]["users_with_failure_share"]
    turns = pick(results, "delivery_failure_share", layer="trace")
    conv = pick(results, "delivery_failure_share", layer="conversation")
    eng = pick(results, "delivery_failure_share", layer="engagement")
    assert (conv.n, conv.value) == (sessions["n"], pytest.approx(sessions["rate"], abs=1e-6))
    assert (eng.n, eng.value) == (users["n"], pytest.approx(users["rate"], abs=1e-6))
    assert covers(conv, sessions["rate"]) and covers(eng, users["rate"])
    assert turns.value < conv.value < eng.value  # type: ignore[operator]  # the compounding shape


# ---- Results --------------------------------------------------------------------------------------------


def test_redo_and_return_match_the_truth_summary(sim: Sim, full: tuple[Observations, list[Result]]) -> None:
    results, eng = full[1], sim.summary["engagement"]
    for stratum, key in (("after=failed", "redo_after_failed_session"),
                         ("after=delivered", "redo_after_delivered_session")):
        r = pick(results, "redo_rate", stratum)
        assert (r.n, round(r.value * r.n)) == (eng[key]["n"], eng[key]["k"])  # type: ignore[operator]
        assert covers(r, eng[key]["rate"])
    # The summary counts every session, a user's last one as a non-return; here those that are still inside
    # their window at the horizon are censored instead, so the denominators differ by exactly that count.
    returned = pick(results, "sessions.returned").value
    censored = pick(results, "sessions.censored").value
    assert returned == eng["sessions_returned"]["k"]
    assert pick(results, "return_rate_within_t").n + censored == eng["sessions_returned"]["n"]
    single = pick(results, "single_turn.returned_share")
    truth = eng["single_turn_sessions_returned"]
    assert (single.n, round(single.value * single.n)) == (truth["n"], truth["k"])  # type: ignore[operator]
    assert covers(single, truth["rate"])
    share = sim.summary["conversation"]["single_turn_session_share"]
    assert pick(results, "single_turn_session_share").value == pytest.approx(share["rate"], abs=1e-6)


def _truth_with_horizon(records: list[dict[str, Any]], horizon_s: float) -> dict[str, list[bool]]:
    """Return and redo outcomes per session end, from truth.jsonl, observing only what ended by the horizon."""
    sessions: dict[str, dict[str, Any]] = {}
    for r in sorted(records, key=lambda r: r["start_unix_nano"]):
        if r["end_unix_nano"] / 1e9 > horizon_s:
            continue
        s = sessions.setdefault(r["session_id"], {"user": r["user_id"], "start": r["start_unix_nano"] / 1e9,
                                                  "redo_j": r["redo_jaccard"]})
        s["end"], s["failed"] = r["end_unix_nano"] / 1e9, r["delivery"] != "delivered"
    by_user: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in sessions.values():
        by_user[s["user"]].append(s)
    out: dict[str, list[bool]] = defaultdict(list)
    for ss in by_user.values():
        ss.sort(key=lambda s: s["start"])
        for a, b in zip(ss, [*ss[1:], None], strict=True):
            end = "failed" if a["failed"] else "delivered"
            if b is not None:
                out["return"].append(b["start"] - a["end"] <= WEEK_S)
                out[f"redo.{end}"].append(b["redo_j"] is not None and b["redo_j"] >= PACK.thresholds.redo_jaccard)
            elif a["end"] + WEEK_S <= horizon_s:
                out["return"].append(False)
            else:
                out["censored"].append(True)
    return out


def test_results_with_an_observation_horizon_cut(sim: Sim) -> None:
    horizon = sim.start + timedelta(days=30)
    turns = [t for t in sim.turns if t.end is not None and t.end <= horizon]
    results = analyse(observe(turns, PACK, horizon=horizon), PACK)
    truth = _truth_with_horizon(sim.truth, horizon.timestamp())
    censored = pick(results, "sessions.censored").value
    assert censored == len(truth["censored"]) and censored > 50  # the cut censors many sessions: a real test
    rate = pick(results, "return_rate_within_t")
    expected = sum(truth["return"]) / len(truth["return"])
    assert (rate.n, rate.value) == (len(truth["return"]), pytest.approx(expected))
    assert covers(rate, expected)
    # Counting censored sessions as non-returns would have understated the rate.
    naive = sum(truth["return"]) / (len(truth["return"]) + censored)  # type: ignore[operator]
    assert naive < rate.low  # type: ignore[operator]
    for end in ("failed", "delivered"):
        r, outcomes = pick(results, "redo_rate", f"after={end}"), truth[f"redo.{end}"]
        assert (r.n, r.value) == (len(outcomes), pytest.approx(sum(outcomes) / len(outcomes)))
        assert covers(r, sum(outcomes) / len(outcomes))
