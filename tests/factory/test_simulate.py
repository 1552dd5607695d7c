"""The traffic simulator: the study's shape at the default size, well-formed OTLP, truth that matches the
traces, determinism, knob validation, planted defects and constant memory."""

from __future__ import annotations

import json
import re
import tracemalloc
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agent_factory.errors import SpecError
from agent_factory.evaluators.stats import bigram_jaccard as definition_jaccard
from agent_factory.evaluators.stats import normalize_text
from agent_factory.factory.ingest.files import expand_paths
from agent_factory.factory.simulate import (
    CONFIG,
    TRACES,
    TRUTH,
    TRUTH_SESSIONS,
    TRUTH_SUMMARY,
    SimConfig,
    SimSummary,
    bigram_jaccard,
    load_config,
    simulate,
)
from agent_factory.factory.simulate.texts import INJECTIONS, followup_request, near_copy, new_request, resend_kind

HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
ROOT_KEYS = {"session.id", "user.id", "agent.mode", "session.turn_index", "user.account_type", "request.source",
             "traffic.synthetic", "openinference.span.kind", "input.value"}


# --- helpers -----------------------------------------------------------------------------------------------
def decode(v: dict[str, Any]) -> Any:
    """An OTLP AnyValue, decoded strictly (ints must be strings, as the protobuf JSON mapping writes them)."""
    (kind, raw), = v.items()
    if kind == "stringValue":
        assert isinstance(raw, str)
        return raw
    if kind == "intValue":
        assert isinstance(raw, str) and re.fullmatch(r"-?\d+", raw)
        return int(raw)
    if kind == "boolValue":
        assert isinstance(raw, bool)
        return raw
    if kind == "doubleValue":
        assert isinstance(raw, float)
        return raw
    assert kind == "arrayValue", kind
    return [decode(x) for x in raw["values"]]


def attrs(span: dict[str, Any]) -> dict[str, Any]:
    keys = [a["key"] for a in span["attributes"]]
    assert len(keys) == len(set(keys)), f"duplicate attribute keys in {span['name']}"
    return {a["key"]: decode(a["value"]) for a in span["attributes"]}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def rate(x: dict[str, Any]) -> float:
    assert x["n"] > 0
    return x["rate"]


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SimSummary]:
    out = tmp_path_factory.mktemp("sim-full")
    return out, simulate(SimConfig(), out)


@pytest.fixture(scope="module")
def full_summary(full: tuple[Path, SimSummary]) -> dict[str, Any]:
    return json.loads((full[0] / TRUTH_SUMMARY).read_text(encoding="utf-8"))


# --- the study's shape at the default size ---------------------------------------------------------------
def test_default_population_matches_the_study(full: tuple[Path, SimSummary]) -> None:
    out, s = full
    assert s.users == 1136
    assert 8537 * 0.9 <= s.real_turns <= 8537 * 1.1
    assert 4393 * 0.9 <= s.sessions <= 4393 * 1.1
    assert 3.31 - 0.2 <= s.steps_per_real_turn <= 3.31 + 0.2
    assert s.real_step_spans == s.real_spans - s.real_turns
    assert abs((s.raw_turns - s.real_turns) / s.raw_turns - 0.161) <= 0.02
    assert sum(s.segment_turns.values()) == s.raw_turns and s.segment_turns["real"] == s.real_turns
    assert all(s.segment_turns[k] > 0 for k in ("internal", "test", "suggestion", "synthetic"))
    assert s.planted == {}
    assert set(s.files) == {"traces", "truth", "truth_sessions", "truth_summary", "config"}
    assert all(Path(p).is_file() for p in s.files.values())
    # Ingesting the output directory reads the traces alone: the simulator lists the rest as not traces.
    assert expand_paths([out]) == [Path(s.files["traces"])]
    assert not list(out.glob(".*.tmp"))


def test_default_rates_match_the_study(full_summary: dict[str, Any]) -> None:
    e, cv, en = full_summary["execution"], full_summary["conversation"], full_summary["engagement"]
    assert abs(rate(e["failure_rate"]) - 0.036) <= 0.01
    assert abs(rate(e["failure_rate_by_mode"]["deep"]) - 0.080) <= 0.03
    assert rate(e["mode_share"]["normal"]) > 0.7 and 0.0 < rate(e["mode_share"]["deep"]) < 0.15
    assert rate(e["normal_fail_with_thinking"]) == 0.0
    assert abs(rate(e["normal_fail_without_thinking"]) - 0.157) <= 0.06
    assert abs(rate(e["normal_fail_without_retrieval"]) - 0.216) <= 0.07
    assert abs(rate(e["normal_fail_with_retrieval"]) - 0.010) <= 0.008
    bands = e["normal_fail_by_latency_band"]
    assert abs(rate(bands["under_5s"]) - 0.387) <= 0.10
    assert rate(bands["10_120s"]) <= 0.005
    assert rate(e["short_prompt_failure_rate"]) > rate(e["failure_rate"])
    assert rate(e["deep_early_stop_share"]) >= 0.7
    for mode, gm in (("normal", 50.0), ("simple", 8.0), ("deep", 900.0)):
        assert abs(e["latency_gm_delivered_s"][mode] / gm - 1.0) <= 0.1
    assert abs(rate(cv["single_turn_session_share"]) - 0.634) <= 0.05
    assert abs(rate(cv["replay_after_failure"]) - 0.515) <= 0.12
    assert abs(rate(cv["replay_after_success"]) - 0.126) <= 0.03
    assert abs(rate(en["redo_after_failed_session"]) - 0.386) <= 0.15
    assert abs(rate(en["redo_after_delivered_session"]) - 0.064) <= 0.02
    assert abs(rate(en["single_turn_sessions_returned"]) - 0.715) <= 0.05
    assert 270 <= en["median_return_after_failure_s"] <= 1080  # 9 min, within a factor of 2
    assert 0.75 <= en["median_return_after_success_s"] / 65520 <= 1.3  # 18.2 h
    assert 0.05 <= rate(en["users_with_failure_share"]) <= 0.16  # study 10.3%: failures cluster in users
    assert 0.7 <= rate(full_summary["population"]["chinese_share"]) <= 0.95


def test_truth_summary_agrees_with_truth_lines(full: tuple[Path, SimSummary],
                                                full_summary: dict[str, Any]) -> None:
    truth = read_jsonl(full[0] / TRUTH)
    real = [r for r in truth if r["segment"] == "real"]
    pop = full_summary["population"]
    assert len(truth) == pop["raw_turns"] and len(real) == pop["real_turns"]
    assert Counter(r["segment"] for r in truth) == pop["segment_turns"]
    assert sum(r["n_spans"] for r in truth) == pop["spans"]
    assert len({r["session_id"] for r in real}) == pop["sessions"]
    assert len({r["user_id"] for r in real}) == pop["users"]
    fails = sum(r["delivery"] != "delivered" for r in real)
    assert full_summary["execution"]["failure_rate"]["k"] == fails
    single = sum(r["session_first"] and r["session_last"] for r in real)
    assert full_summary["conversation"]["single_turn_session_share"]["k"] == single
    # replay after failure, recomputed from consecutive turns of a session
    k = n = 0
    for a, b in zip(real, real[1:], strict=False):
        if a["session_id"] == b["session_id"] and a["delivery"] != "delivered":
            n += 1
            k += b["is_replay"]
    assert full_summary["conversation"]["replay_after_failure"] == {"k": k, "n": n, "rate": round(k / n, 6)}
    # every flagged replay resends its original, recognisably
    by_id = {r["trace_id"]: r for r in truth}
    for r in real:
        if r["is_replay"]:
            assert r["replay_of"] in by_id and by_id[r["replay_of"]]["session_id"] == r["session_id"]
        if r["is_redo_of"] is not None:
            assert r["redo_jaccard"] >= 0.6 and r["session_first"]


def _logged_requests(out: Path) -> dict[str, str]:
    """Each trace's request text as the traces log it (the root span's `input.value`)."""
    texts = {}
    for line in (out / TRACES).read_text(encoding="utf-8").splitlines():
        spans = json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]
        root = next(sp for sp in spans if "parentSpanId" not in sp)
        texts[root["traceId"]] = attrs(root)["input.value"]
    return texts


def _replay_label_check(out: Path) -> tuple[int, int, list[tuple[str, str, bool, bool]]]:
    """(pairs, replays, disagreements): every turn's replay labels against the definition applied to the logged
    texts of it and the previous turn of its session (verbatim: equal once normalised; replay: verbatim or
    bigram Jaccard >= 0.6), written here from the statistics primitives rather than the simulator's helper."""
    truth = read_jsonl(out / TRUTH)
    logged = _logged_requests(out)
    sessions: dict[str, list[dict[str, Any]]] = {}
    for r in truth:
        sessions.setdefault(r["session_id"], []).append(r)
    pairs = replays = 0
    wrong = []
    for turns in sessions.values():
        turns.sort(key=lambda r: r["turn_index"])
        assert not turns[0]["is_replay"] and turns[0]["replay_of"] is None
        for a, b in pairwise(turns):
            x, y = logged[a["trace_id"]], logged[b["trace_id"]]
            verbatim = normalize_text(x) == normalize_text(y)
            replay = verbatim or definition_jaccard(x, y) >= 0.6
            pairs += 1
            replays += b["is_replay"]
            if (b["is_replay"], b["is_verbatim_replay"]) != (replay, verbatim) or \
                    b["replay_of"] != (a["trace_id"] if replay else None):
                wrong.append((x, y, b["is_replay"], b["is_verbatim_replay"]))
    return pairs, replays, wrong


def test_replay_labels_are_the_definition_applied_to_the_logged_requests(full: tuple[Path, SimSummary]) -> None:
    pairs, replays, wrong = _replay_label_check(full[0])
    assert pairs > 4000 and replays > 400
    assert wrong == []


def test_fresh_requests_do_not_come_out_as_resends(tmp_path: Path) -> None:
    # With no replay intended, every labelled replay would be the generator repeating itself: a follow-up
    # template without a slot (or with the same slot) drawn twice, a short prompt typed twice. Re-drawing
    # removes them (at 300 users, seed 11, there were 35 before).
    simulate(SimConfig(users=300, seed=11, replay_after_failure_rate=0.0, replay_after_success_rate=0.0), tmp_path)
    pairs, replays, wrong = _replay_label_check(tmp_path)
    assert pairs > 1000 and replays == 0 and wrong == []


# --- session-level behaviour and outcome truth (Trajectory) ------------------------------------------------
EVENTS = ("request_replay", "verbatim_replay", "context_repair", "clarification_loop", "session_termination",
          "abandonment", "frustration")
RECOVERY = EVENTS[:5]
STUDY_OUTCOMES = {"smooth": 14, "struggled": 34, "blocked": 13, "censored": 46}  # 107 judged sessions


def _sessions_from_truth_lines(truth: list[dict[str, Any]]) -> dict[str, tuple[dict[str, int], str]]:
    """Per real session, (event counts, outcome) recomputed here from the per-turn labels of truth.jsonl by the
    definitions of docs/method.md section 4 (independently of the simulator's own code)."""
    by_session: dict[str, list[dict[str, Any]]] = {}
    for r in truth:
        if r["segment"] == "real":
            by_session.setdefault(r["session_id"], []).append(r)
    out = {}
    for sid, turns in by_session.items():
        turns.sort(key=lambda r: r["turn_index"])
        failed = [t["delivery"] != "delivered" for t in turns]
        gave_up = sum(t["abandonment"] for t in turns)
        if gave_up == 0 and len(turns) >= 2 and failed[-1] and failed[-2] and turns[-1]["is_replay"]:
            gave_up = 1  # retried a failed request, failed again, left
        events = {
            "request_replay": sum(t["is_replay"] and not t["is_verbatim_replay"] for t in turns),
            "verbatim_replay": sum(t["is_verbatim_replay"] for t in turns),
            "context_repair": sum(t["context_repair"] for t in turns),
            "clarification_loop": max(0, sum(t["asks_clarification"] for t in turns[:-1]) - 1),
            "session_termination": int(failed[-1]),
            "abandonment": gave_up,
            "frustration": sum(t["frustration"] for t in turns),
        }
        if events["abandonment"] or events["frustration"]:
            outcome = "blocked"
        elif any(events[e] for e in RECOVERY):
            outcome = "struggled"
        else:
            outcome = "censored" if len(turns) == 1 else "smooth"
        out[sid] = (events, outcome)
    return out


def test_session_truth_is_the_outcome_rule_on_the_turn_labels(full: tuple[Path, SimSummary],
                                                               full_summary: dict[str, Any]) -> None:
    truth = read_jsonl(full[0] / TRUTH)
    sessions = read_jsonl(full[0] / TRUTH_SESSIONS)
    expected = _sessions_from_truth_lines(truth)
    lengths = Counter(r["session_id"] for r in truth if r["segment"] == "real")
    assert len(sessions) == len(expected) == full_summary["population"]["sessions"]
    for rec in sessions:
        events, outcome = expected[rec["session_id"]]
        assert (rec["events"], rec["outcome"]) == (events, outcome), rec
        assert rec["friction"] == sum(1 for e in RECOVERY if events[e])
        assert rec["turns"] == lengths[rec["session_id"]]
    # Per-turn labels are consistent with what the message is.
    for r in truth:
        assert r["frustration"] == (r["act"] == "frustration") and r["abandonment"] == (r["act"] == "abandonment")
        assert r["context_repair"] == (r["act"] == "context_repair" and r["turn_index"] > 0)
        assert not r["asks_clarification"] or r["delivery"] in ("delivered", "failed_truncated")
    traj = full_summary["trajectory"]
    n = len(sessions)
    counts = Counter(rec["outcome"] for rec in sessions)
    assert {o: traj["outcome_share"][o] for o in STUDY_OUTCOMES} == {
        o: {"k": counts[o], "n": n, "rate": round(counts[o] / n, 6)} for o in STUDY_OUTCOMES}
    for e in EVENTS:
        k = sum(rec["events"][e] > 0 for rec in sessions)
        assert traj["event_share"][e] == {"k": k, "n": n, "rate": round(k / n, 6)}, e
    assert traj["mean_friction"] == round(sum(rec["friction"] for rec in sessions) / n, 6)


def test_default_outcome_shares_are_near_the_study(full_summary: dict[str, Any]) -> None:
    # One-turn sessions without an event are censored, and the study's share of single-turn sessions (63.4%, kept
    # above) is larger than its judged sample's censored share (43%): the censored share follows the former.
    # Among the other sessions, smooth / struggled / blocked are split as in the study (14 / 34 / 13 of 61).
    traj = full_summary["trajectory"]
    share = {o: rate(traj["outcome_share"][o]) for o in STUDY_OUTCOMES}
    assert sum(share.values()) == pytest.approx(1.0, abs=1e-5)
    single = rate(full_summary["conversation"]["single_turn_session_share"])
    assert single - 0.05 <= share["censored"] <= single
    rest = 1.0 - share["censored"]
    study_rest = sum(STUDY_OUTCOMES[o] for o in ("smooth", "struggled", "blocked"))
    for o in ("smooth", "struggled", "blocked"):
        assert abs(share[o] / rest - STUDY_OUTCOMES[o] / study_rest) <= 0.1, o
    assert all(traj["event_share"][e]["k"] >= 30 for e in EVENTS), traj["event_share"]
    assert 0.15 <= traj["mean_friction"] <= 0.65  # study 0.65 with 43% censored


BEHAVIOUR_RATES = ("frustration_after_failure_rate", "frustration_after_repeat_failure_rate",
                   "frustration_after_success_rate", "abandonment_after_failure_rate",
                   "abandonment_after_success_rate", "context_repair_rate", "clarification_rate",
                   "clarification_repeat_rate")


def _event_shares(out: Path, **knobs: Any) -> dict[str, float]:
    simulate(SimConfig(users=150, seed=12, **knobs), out)
    return {e: rate(v) for e, v in json.loads((out / TRUTH_SUMMARY).read_text())["trajectory"]["event_share"].items()}


def test_behaviour_knobs_move_their_events(tmp_path: Path) -> None:
    off = _event_shares(tmp_path / "off", **{k: 0.0 for k in BEHAVIOUR_RATES})
    truth = read_jsonl(tmp_path / "off" / TRUTH)
    # No vent, no give-up phrase, no repair; the agent asks to clarify only what a greeting or a 1-5 character
    # prompt was about, and the user's answer to that is the only act left.
    assert {r["act"] for r in truth} <= {None, "clarification_reply"}
    assert all(r["short_prompt"] for r in truth if r["asks_clarification"] and r["act"] is None)
    assert off["frustration"] == off["context_repair"] == 0.0
    assert off["abandonment"] <= 0.01  # only users who resent a failed request, failed again and left
    base = _event_shares(tmp_path / "base")
    high = _event_shares(tmp_path / "high", frustration_after_success_rate=0.2, abandonment_after_success_rate=0.3,
                         context_repair_rate=0.6, clarification_rate=0.3)
    for e in ("frustration", "abandonment", "context_repair", "clarification_loop"):
        assert off[e] < base[e] < high[e], e


# --- OTLP well-formedness and agreement with truth --------------------------------------------------------
def test_otlp_lines_are_well_formed_and_match_truth(full: tuple[Path, SimSummary]) -> None:
    out, s = full
    truth = {r["trace_id"]: r for r in read_jsonl(out / TRUTH)}
    seen: set[str] = set()
    n_spans = 0
    with (out / TRACES).open(encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            (rs,) = doc["resourceSpans"]
            assert {a["key"] for a in rs["resource"]["attributes"]} >= {"service.name"}
            (ss,) = rs["scopeSpans"]
            assert ss["scope"]["name"] == "agent-factory.simulator"
            spans = ss["spans"]
            n_spans += len(spans)
            tid = spans[0]["traceId"]
            assert HEX32.match(tid) and tid not in seen
            seen.add(tid)
            t = truth[tid]
            assert len(spans) == t["n_spans"]
            _check_trace(spans, t)
    assert n_spans == s.spans and seen == set(truth)


def _check_trace(spans: list[dict[str, Any]], t: dict[str, Any]) -> None:
    ids = [sp["spanId"] for sp in spans]
    assert len(set(ids)) == len(ids) and all(HEX16.match(i) for i in ids)
    roots = [sp for sp in spans if "parentSpanId" not in sp]
    assert len(roots) == 1
    root = roots[0]
    r_start, r_end = int(root["startTimeUnixNano"]), int(root["endTimeUnixNano"])
    assert r_end - r_start == pytest.approx(t["latency_ms"] * 1e6, abs=2e3)
    kinds: Counter[str] = Counter()
    for sp in spans:
        assert sp["traceId"] == t["trace_id"]
        a = attrs(sp)
        assert a["session.id"] == t["session_id"] and a["user.id"] == t["user_id"]
        assert not {"agent.delivery", "delivery.status"} & set(a), "delivery must be derived, never stated"
        assert sp["status"]["code"] in (1, 2)
        start, end = int(sp["startTimeUnixNano"]), int(sp["endTimeUnixNano"])
        assert r_start <= start <= end <= r_end
        if sp is not root:
            assert sp["parentSpanId"] in ids and sp["parentSpanId"] != sp["spanId"]
            kinds[a["openinference.span.kind"]] += 1
            if a["openinference.span.kind"] == "LLM":
                assert a["llm.token_count.total"] == a["llm.token_count.prompt"] + a["llm.token_count.completion"]
                assert isinstance(a["llm.model_name"], str)
            if a["openinference.span.kind"] == "CHAIN":
                assert sp["name"] == "thinking" and a["agent.step"] == "thinking"
            if a["openinference.span.kind"] == "RETRIEVER":
                assert sp["name"] == "retrieve"
            if a["openinference.span.kind"] == "TOOL":
                assert a["tool.name"]
    ra = attrs(root)
    assert ROOT_KEYS <= set(ra) and ra["openinference.span.kind"] == "AGENT"
    assert ra["agent.mode"] == t["mode"] and ra["session.turn_index"] == t["turn_index"]
    assert ra["user.account_type"] == t["account_type"] and ra["request.source"] == t["request_source"]
    assert ra["traffic.synthetic"] is t["synthetic"]
    assert len(ra["input.value"]) == t["request_chars"]
    assert (kinds["CHAIN"] > 0) is t["has_thinking"] and (kinds["RETRIEVER"] > 0) is t["has_retrieval"]
    assert _delivery(root, ra) == t["delivery"]
    assert ("agent.progress" in ra) is (t["progress"] is not None)
    if t["mode"] == "normal" and t["segment"] == "real":
        assert kinds["LLM"] >= 1


def _delivery(root: dict[str, Any], a: dict[str, Any]) -> str:
    """Delivery derived from the evidence, as the assembler derives it."""
    if root["status"]["code"] == 2:
        assert "output.value" not in a and root["status"]["message"]
        return "failed_error"
    if "length" in a.get("gen_ai.response.finish_reasons", []):
        return "failed_truncated"
    return "delivered" if a["output.value"].strip() else "failed_empty"


def test_otlp_adapter_reads_the_output(tmp_path: Path) -> None:
    otel = pytest.importorskip("agent_factory.adapters.otel")
    from agent_factory.adapters.base import Quarantine
    from agent_factory.adapters.model import Span

    simulate(SimConfig(users=40, seed=3), tmp_path)
    truth = {r["trace_id"]: r for r in read_jsonl(tmp_path / TRUTH)}
    per_trace: Counter[str] = Counter()
    for item in otel.OtlpJsonAdapter().read(tmp_path / TRACES):
        assert not isinstance(item, Quarantine), item
        assert isinstance(item, Span)
        per_trace[item.trace_id] += 1
    assert per_trace == Counter({k: r["n_spans"] for k, r in truth.items()})


# --- determinism, small sizes, progress ---------------------------------------------------------------------
def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    files = (TRACES, TRUTH, TRUTH_SESSIONS, TRUTH_SUMMARY, CONFIG)
    simulate(SimConfig(users=60, seed=5), tmp_path / "a")
    simulate(SimConfig(users=60, seed=5), tmp_path / "b")
    simulate(SimConfig(users=60, seed=6), tmp_path / "c")
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    for name in (TRACES, TRUTH, TRUTH_SESSIONS, CONFIG):
        assert (tmp_path / "a" / name).read_bytes() != (tmp_path / "c" / name).read_bytes(), name


@pytest.mark.parametrize("users", [1, 7])
def test_small_sizes_and_progress(tmp_path: Path, users: int) -> None:
    calls: list[tuple[int, int]] = []
    s = simulate(SimConfig(users=users, seed=2), tmp_path, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(i, users) for i in range(1, users + 1)]
    assert s.users == users and s.real_turns >= users and s.sessions >= users
    truth = read_jsonl(tmp_path / TRUTH)
    assert len(truth) == s.raw_turns
    assert len({r["user_id"] for r in truth if r["segment"] == "real"}) == users
    assert json.loads((tmp_path / CONFIG).read_text())["users"] == users


def test_config_json_round_trips(full: tuple[Path, SimSummary]) -> None:
    cfg = load_config(full[0] / CONFIG)
    assert cfg == SimConfig()


# --- knob validation ----------------------------------------------------------------------------------------
def _is_rate(metadata: list[Any]) -> bool:
    bounds = {(type(m).__name__, getattr(m, "ge", None), getattr(m, "le", None)) for m in metadata}
    return bounds == {("Ge", 0.0, None), ("Le", None, 1.0)}


RATE_FIELDS = [name for name, f in SimConfig.model_fields.items() if _is_rate(f.metadata)]


def test_every_field_has_a_docstring_and_rates_are_found() -> None:
    assert len(RATE_FIELDS) >= 30
    src = Path(__import__("agent_factory.factory.simulate.config", fromlist=["x"]).__file__).read_text(encoding="utf-8")
    for name in SimConfig.model_fields:
        assert re.search(rf"\n    {name}: [^\n]+\n    \"\"\"", src), f"{name} lacks a docstring"


@pytest.mark.parametrize("field", RATE_FIELDS)
@pytest.mark.parametrize("bad", [-0.01, 1.01])
def test_rates_outside_unit_interval_are_rejected_by_name(field: str, bad: float) -> None:
    with pytest.raises(ValidationError) as e:
        SimConfig(**{field: bad})
    assert field in str(e.value)


@pytest.mark.parametrize(("knobs", "named"), [
    ({"users": 0}, "users"),
    ({"seed": -1}, "seed"),
    ({"latency_gm_normal_s": 0.0}, "latency_gm_normal_s"),
    ({"plant_latency_scale": -1.0}, "plant_latency_scale"),
    ({"sessions_per_user_mean": 0.5}, "sessions_per_user_mean"),
    ({"no_such_knob": 1}, "no_such_knob"),
    ({"mode_share_simple": 0.6, "mode_share_deep": 0.5}, "mode_share_simple"),
    ({"fail_rate_no_thinking": 0.02}, "fail_rate_no_thinking"),
    ({"fail_rate_with_retrieval": 0.3}, "fail_rate_with_retrieval"),
    ({"failure_share_empty": 0.7, "failure_share_error": 0.5}, "failure_share_error"),
    ({"single_turn_session_share": 0.2, "turns_per_session_mean": 1.5}, "turns_per_session_mean"),
    ({"internal_turn_share": 0.5, "test_turn_share": 0.5}, "test_turn_share"),
    ({"fast_band_s": 12.0}, "fast_band_s"),
    ({"failure_rate": 0.9}, "failure_rate"),
])
def test_invalid_knobs_name_the_field(knobs: dict[str, Any], named: str) -> None:
    with pytest.raises(ValidationError) as e:
        SimConfig(**knobs)
    assert named in str(e.value)


def test_config_is_frozen() -> None:
    with pytest.raises(ValidationError):
        SimConfig().users = 3  # type: ignore[misc]


def test_load_config_from_yaml_and_json(tmp_path: Path) -> None:
    y = tmp_path / "sim.yaml"
    y.write_text("users: 12\nchinese_share: 0.5\nstart: 2025-01-06\n", encoding="utf-8")
    cfg = load_config(y, seed=9)
    assert (cfg.users, cfg.chinese_share, cfg.seed) == (12, 0.5, 9)
    assert cfg.start.utcoffset() is not None and cfg.start.isoformat().startswith("2025-01-06T00:00:00")
    j = tmp_path / "sim.json"
    j.write_text(json.dumps({"users": 3, "plant_blank_rate": 0.2}), encoding="utf-8")
    assert load_config(j).plant_blank_rate == 0.2


@pytest.mark.parametrize(("text", "named"), [
    ("replay_after_failure_rate: 1.5\n", "replay_after_failure_rate"),
    ("users: [1, 2]\n", "users"),
    ("- just\n- a list\n", "mapping"),
    ("users: [unclosed\n", "not valid"),
])
def test_load_config_errors_are_spec_errors_naming_the_problem(tmp_path: Path, text: str, named: str) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as e:
        load_config(p)
    assert named in str(e.value) and str(p) in str(e.value)


# --- planted defects ----------------------------------------------------------------------------------------
PLANTS = {"plant_blank_rate": 0.15, "plant_replay_rate": 0.15, "plant_disclosure_rate": 0.2,
          "plant_template_rate": 0.2, "plant_injection_rate": 0.2, "plant_secret_rate": 0.2,
          "plant_latency_scale": 1.5, "defect_user_share": 0.5}


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base, bad = tmp_path_factory.mktemp("base"), tmp_path_factory.mktemp("planted")
    simulate(SimConfig(users=150, seed=4), base)
    simulate(SimConfig(users=150, seed=4, **PLANTS), bad)
    return base, bad


def _roots(path: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for line in (path / TRACES).read_text(encoding="utf-8").splitlines():
        spans = json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]
        root = next(sp for sp in spans if "parentSpanId" not in sp)
        out[root["traceId"]] = {**attrs(root), "_ns": int(root["endTimeUnixNano"]) - int(root["startTimeUnixNano"])}
    return out


def test_planted_defects_only_rewrite_the_logs(planted: tuple[Path, Path]) -> None:
    base, bad = planted
    t0 = {r["trace_id"]: r for r in read_jsonl(base / TRUTH)}
    t1 = {r["trace_id"]: r for r in read_jsonl(bad / TRUTH)}
    assert t0.keys() == t1.keys()  # the same traffic underneath
    assert all(t0[k]["natural_delivery"] == t1[k]["natural_delivery"] and t0[k]["mode"] == t1[k]["mode"]
               for k in t0)
    assert all(not r["planted"] and not r["defect_user"] for r in t0.values())
    users = {r["user_id"]: r["defect_user"] for r in t1.values() if r["segment"] == "real"}
    assert 0.3 <= sum(users.values()) / len(users) <= 0.7
    kinds = Counter(p for r in t1.values() for p in r["planted"])
    for kind in ("answer_blanked", "extra_replay", "disclosure", "template", "prompt_injection", "secret",
                 "latency_scaled"):
        assert kinds[kind] > 0, kind
    assert all(r["defect_user"] for r in t1.values() if r["planted"])
    assert all(r["segment"] == "real" for r in t1.values() if r["planted"])
    summary = json.loads((bad / TRUTH_SUMMARY).read_text(encoding="utf-8"))
    assert summary["planted"] == dict(kinds)
    assert summary["defect_users"] == sum(users.values())


def test_planted_runs_label_replays_by_the_definition_too(planted: tuple[Path, Path]) -> None:
    # A planted resend changes what the next message is compared with; the labels follow the logged text.
    for out in planted:
        pairs, replays, wrong = _replay_label_check(out)
        assert pairs > 300 and replays > 30 and wrong == []


def test_planted_items_are_visible_in_the_traces(planted: tuple[Path, Path]) -> None:
    base, bad = planted
    truth = {r["trace_id"]: r for r in read_jsonl(bad / TRUTH)}
    r0, r1 = _roots(base), _roots(bad)
    cfg = SimConfig()
    for tid, t in truth.items():
        a, b = r0[tid], r1[tid]
        if "answer_blanked" in t["planted"]:
            assert b["output.value"] == "" and t["delivery"] == "failed_empty" and t["natural_delivery"] == "delivered"
        if "disclosure" in t["planted"]:
            assert (cfg.company_name_zh in b["output.value"]) or (cfg.company_name_en in b["output.value"])
        if "template" in t["planted"]:
            assert "文件摘要" in b["output.value"] or "File summary" in b["output.value"]
        if "prompt_injection" in t["planted"]:
            assert any(inj in b["input.value"] for inj in INJECTIONS.values())
            assert t["injection"] in INJECTIONS
        for sec in t["secrets"]:
            assert sec["value"] in b["input.value"]
            if sec["kind"] == "card":
                assert _luhn_ok(sec["value"])
            if sec["kind"] == "api_key":
                assert re.fullmatch(r"sk-[A-Za-z0-9]{40}", sec["value"])
        if "extra_replay" in t["planted"]:
            assert b["input.value"] == r1[t["replay_of"]]["input.value"] and t["is_verbatim_replay"]
        if "latency_scaled" in t["planted"]:
            assert b["_ns"] == pytest.approx(a["_ns"] * 1.5, rel=1e-6, abs=5)
        elif t["segment"] == "real":
            assert b["_ns"] == a["_ns"]


def _luhn_ok(number: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(number)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def test_defect_share_zero_plants_nothing(tmp_path: Path) -> None:
    simulate(SimConfig(users=30, seed=8), tmp_path / "a")
    simulate(SimConfig(users=30, seed=8, **{**PLANTS, "defect_user_share": 0.0}), tmp_path / "b")
    for name in (TRACES, TRUTH):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


# --- text helpers -------------------------------------------------------------------------------------------
def test_bigram_jaccard() -> None:
    assert bigram_jaccard("销售额分析", "销售额分析") == 1.0
    assert bigram_jaccard("abcd", "wxyz") == 0.0
    assert bigram_jaccard("abcd", "abce") == pytest.approx(2 / 4)
    assert bigram_jaccard("a", "b") == 0.0


def test_near_copies_stay_recognisable_and_unrelated_requests_do_not() -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    pairs = [(new_request(rng, lang, short=False), new_request(rng, lang, short=False))
             for lang in ("zh", "en") for _ in range(300)]
    assert all(bigram_jaccard(near_copy(rng, a, threshold=0.6).text, a.text) >= 0.6 for a, _ in pairs)
    assert all(resend_kind(a.text, near_copy(rng, a, threshold=0.6).text, threshold=0.6) for a, _ in pairs)
    accidental = sum(bigram_jaccard(a.text, b.text) >= 0.6 for a, b in pairs)
    assert accidental / len(pairs) < 0.02


def test_resend_kind_is_the_replay_definition() -> None:
    assert resend_kind("Forecast GMV for Q3", "forecast  gmv for q3 ", threshold=0.6) == "verbatim"
    assert resend_kind("预测ＧＭＶ", "预测GMV", threshold=0.6) == "verbatim"
    assert resend_kind("？", "?", threshold=0.6) == "verbatim"
    assert resend_kind("sales by region for march", "sales by region for may", threshold=0.6) == "near"
    assert resend_kind("sales by region for march", "sales by region for may", threshold=0.95) is None
    assert resend_kind("", "", threshold=0.6) is None and resend_kind("hi", " ", threshold=0.6) is None
    assert resend_kind("再试一次：这个结论能画成图吗？", "这个结论能画成图吗？", threshold=0.6) == "near"


def test_follow_ups_of_follow_ups_repeat_themselves_without_redraws() -> None:
    # The raw generator: slot-less follow-up templates make identical consecutive follow-ups common, which is
    # why the simulator re-draws fresh requests that come out as a resend.
    import numpy as np

    rng = np.random.default_rng(1)
    prev = new_request(rng, "zh", short=False)
    repeats = 0
    for _ in range(400):
        nxt = followup_request(rng, prev, "zh")
        repeats += resend_kind(prev.text, nxt.text, threshold=0.6) is not None
        prev = nxt
    assert repeats > 20


# --- memory -------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_memory_is_constant_in_the_number_of_users(tmp_path: Path) -> None:
    def peak(users: int) -> int:
        tracemalloc.start()
        simulate(SimConfig(users=users, seed=1), tmp_path / str(users))
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    peak(2)  # first call imports what the simulator needs lazily
    small, large = peak(15), peak(120)
    assert large < small * 1.5 + 300_000
