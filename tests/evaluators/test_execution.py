"""Execution: every rule on hand-built turns and spans, every analysis on hand-built rows, with known answers."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pytest

from agent_factory.adapters.model import EvidencePointer, Span, Turn
from agent_factory.evaluators.components.execution import analysis as ex
from agent_factory.evaluators.components.execution.definitions import (
    CHAIN_COMPLETE,
    DEFINITIONS,
    DELIVERED,
    FAST_ANSWER,
    HAS_RETRIEVAL,
    HAS_THINKING,
    LATENCY_MS,
    MODE,
    PROGRESS_AT_STOP,
    SPAN_ERROR,
)
from agent_factory.evaluators.core.model import Result
from agent_factory.evaluators.core.registry import (
    Observations,
    RuleAnswer,
    RuleContext,
    SpanView,
    UnitRow,
    get_component,
    get_rule,
)
from agent_factory.evaluators.stats import cluster_proportion_ci, proportion_ci
from agent_factory.knowledge_packs import Baselines, KnowledgePack, load_pack

PACK = load_pack("business_analysis")
DEFS = {d.id: d for d in DEFINITIONS}


def span(sid: str, kind: str = "llm", parent: str | None = "root", **kw: Any) -> Span:
    return Span(id=sid, trace_id="t1", parent_id=parent, kind=kind, **kw)  # type: ignore[arg-type]


ROOT = span("root", "agent", parent=None, status="ok")
THINK = span("think", "reasoning", output="The user wants Q3 revenue by region.")
RETRIEVE = span("ret", "retrieval", output="tables: orders, regions")
LLM = span("llm", "llm", output="Revenue grew 12% in the east.")


def turn(**kw: Any) -> Turn:
    base: dict[str, Any] = {
        "id": "t1", "conversation_id": "c1", "user_id": "u1", "mode": "normal",
        "request": "Q3 revenue by region?", "answer": "Revenue grew 12% in the east.", "delivery": "delivered",
        "latency_ms": 42_000.0, "spans": (ROOT, THINK, RETRIEVE, LLM),
    }
    base.update(kw)
    return Turn(**base)


def ask(item: str, unit: object, pack: KnowledgePack = PACK) -> RuleAnswer:
    return get_rule(item)(unit, RuleContext(pack=pack, definition=DEFS[item]))


# ---- registration ---------------------------------------------------------------------------------------


def test_component_registers_every_definition_with_its_rule() -> None:
    spec = get_component("execution")
    assert [d.id for d in spec.definitions] == [
        MODE, DELIVERED, HAS_THINKING, HAS_RETRIEVAL, CHAIN_COMPLETE, LATENCY_MS, FAST_ANSWER, PROGRESS_AT_STOP,
        SPAN_ERROR,
    ]
    for d in spec.definitions:
        assert d.rule == d.id and d.tiers == ("rule",) and d.component == "execution"
        get_rule(d.rule)  # raises if unregistered
    assert {d.layer for d in spec.definitions} == {"trace", "span"}
    assert DEFS[SPAN_ERROR].layer == "span"
    assert all(a.version for a in spec.analyses)


def test_chain_requirement_is_part_of_the_definition_digest() -> None:
    d = DEFS[CHAIN_COMPLETE]
    assert "normal: thinking (reasoning) + retrieval (retrieval)" in d.description
    assert "deep: thinking (reasoning) + retrieval (retrieval) + tool or model step (llm/tool)" in d.description
    edited = d.model_copy(update={"description": d.description.replace("deep:", "deep (edited):")})
    assert edited.digest() != d.digest()


# ---- rules: mode, delivery ------------------------------------------------------------------------------


def test_mode_is_a_fact_with_a_pointer_to_the_field() -> None:
    a = ask(MODE, turn(mode="deep"))
    assert (a.value, a.fact) == ("yes", "deep")
    assert a.evidence == (EvidencePointer(unit_id="t1", field="mode", start=0, end=4),)
    missing = ask(MODE, turn(mode=None))
    assert missing.value == "uncollected" and "no agent mode" in (missing.reason or "")


def test_delivered_answer_is_yes_with_the_answer_cited() -> None:
    a = ask(DELIVERED, turn())
    assert (a.value, a.fact) == ("yes", None)
    assert a.evidence == (EvidencePointer(unit_id="t1", field="answer", start=0, end=29),)


@pytest.mark.parametrize("state,answer", [("failed_empty", ""), ("failed_truncated", "Revenue grew 1")])
def test_empty_and_truncated_answers_fail_with_their_kind(state: str, answer: str) -> None:
    a = ask(DELIVERED, turn(delivery=state, answer=answer))
    assert (a.value, a.fact) == ("no", state)
    assert a.evidence == (EvidencePointer(unit_id="t1", field="answer", start=0, end=len(answer)),)


def test_error_cites_every_erroring_span() -> None:
    failing = span("llm", "llm", status="error", error="upstream model timeout")
    root = span("root", "agent", parent=None, status="error", error="task aborted")
    a = ask(DELIVERED, turn(delivery="failed_error", answer=None, spans=(root, THINK, failing)))
    assert (a.value, a.fact) == ("no", "failed_error")
    assert a.evidence == (
        EvidencePointer(unit_id="root", field="error", start=0, end=12),
        EvidencePointer(unit_id="llm", field="error", start=0, end=22),
    )
    assert "task aborted" in (a.reason or "")


def test_error_without_an_erroring_span_cites_the_answer() -> None:
    a = ask(DELIVERED, turn(delivery="failed_error", answer=None, spans=()))
    assert a.value == "no" and a.evidence == (EvidencePointer(unit_id="t1", field="answer", start=0, end=0),)


def test_a_run_stopped_before_any_answer_is_cut_off_citing_where_it_stopped() -> None:
    # A step-limit stop is its own failure kind, not an empty answer: the evidence is the last step's output, or
    # without steps the request nobody answered.
    tool = span("lookup", "tool", output='{"reservation": "ABC123"}')
    a = ask(DELIVERED, turn(delivery="cut_off", answer=None, spans=(ROOT, LLM, tool)))
    assert (a.value, a.fact) == ("no", "cut_off")
    assert a.evidence == (EvidencePointer(unit_id="lookup", field="output", start=0, end=25),)
    assert "stopped before the agent answered" in (a.reason or "")
    bare = ask(DELIVERED, turn(delivery="cut_off", answer=None, spans=()))
    assert bare.evidence == (EvidencePointer(unit_id="t1", field="request", start=0, end=21),)


def test_unknown_delivery_is_uncollected_not_a_pass() -> None:
    a = ask(DELIVERED, turn(delivery="unknown", answer=None))
    assert a.value == "uncollected" and a.reason


# ---- rules: chain ---------------------------------------------------------------------------------------


def test_thinking_and_retrieval_from_span_kinds() -> None:
    t = ask(HAS_THINKING, turn())
    assert t.value == "yes"
    assert t.evidence == (EvidencePointer(unit_id="think", field="output", start=0, end=36),)
    r = ask(HAS_RETRIEVAL, turn(spans=(ROOT, THINK, LLM)))
    assert r.value == "no" and r.evidence == ()
    assert ask(HAS_THINKING, turn(spans=(ROOT, RETRIEVE))).value == "no"
    assert ask(HAS_RETRIEVAL, turn()).value == "yes"


def test_no_span_tree_leaves_step_items_uncollected() -> None:
    bare = turn(spans=())
    for item in (HAS_THINKING, HAS_RETRIEVAL, CHAIN_COMPLETE):
        a = ask(item, bare)
        assert a.value == "uncollected" and "no span tree" in (a.reason or "")


def test_chain_complete_per_mode() -> None:
    full = ask(CHAIN_COMPLETE, turn())
    assert full.value == "yes"
    assert [p.unit_id for p in full.evidence] == ["think", "ret"]
    no_ret = ask(CHAIN_COMPLETE, turn(spans=(ROOT, THINK, LLM)))
    assert (no_ret.value, no_ret.fact) == ("no", "retrieval")
    nothing = ask(CHAIN_COMPLETE, turn(spans=(ROOT, LLM)))
    assert (nothing.value, nothing.fact) == ("no", "thinking, retrieval")
    # deep also needs a tool or model step; thinking and retrieval alone are not enough
    deep = ask(CHAIN_COMPLETE, turn(mode="deep", spans=(ROOT, THINK, RETRIEVE)))
    assert (deep.value, deep.fact) == ("no", "tool or model step")
    tool = span("tool", "tool", output="rows: 12")
    assert ask(CHAIN_COMPLETE, turn(mode="deep", spans=(ROOT, THINK, RETRIEVE, tool))).value == "yes"
    assert ask(CHAIN_COMPLETE, turn(mode="simple", spans=(ROOT, LLM))).value == "not_applicable"
    assert ask(CHAIN_COMPLETE, turn(mode=None)).value == "not_applicable"
    assert ask(CHAIN_COMPLETE, turn(mode="exotic")).value == "not_applicable"


def test_a_root_only_turn_counts_its_root_as_the_step() -> None:
    lone = span("only", "llm", parent=None, output="answer")
    deep = ask(CHAIN_COMPLETE, turn(mode="deep", spans=(lone,)))
    assert (deep.value, deep.fact) == ("no", "thinking, retrieval")  # the llm step is there, the others are not


# ---- rules: latency, fast band, progress, span error ----------------------------------------------------


def test_latency_fact_and_missing_timing() -> None:
    a = ask(LATENCY_MS, turn(latency_ms=1234.5))
    assert (a.value, a.fact) == ("yes", 1234.5)
    assert a.evidence == (EvidencePointer(unit_id="t1", field="latency_ms", start=0, end=0),)
    assert ask(LATENCY_MS, turn(latency_ms=None)).value == "uncollected"
    assert ask(FAST_ANSWER, turn(latency_ms=None)).value == "uncollected"


def test_fast_answer_uses_the_pack_band_with_a_strict_edge() -> None:
    assert ask(FAST_ANSWER, turn(latency_ms=4999.0)).value == "yes"
    assert ask(FAST_ANSWER, turn(latency_ms=5000.0)).value == "no"
    slow_band = PACK.model_copy(update={"baselines": Baselines(fast_failure_seconds=10.0)})
    assert ask(FAST_ANSWER, turn(latency_ms=6000.0), slow_band).value == "yes"


def test_progress_at_stop() -> None:
    failed_deep = dict(mode="deep", delivery="failed_error", answer=None)
    a = ask(PROGRESS_AT_STOP, turn(attributes={"agent.progress": 0.15}, **failed_deep))
    assert (a.value, a.fact) == ("yes", 0.15)
    assert a.evidence == (EvidencePointer(unit_id="t1", field="attributes.agent.progress", start=0, end=0),)
    pct = ask(PROGRESS_AT_STOP, turn(attributes={"agent.progress": 45}, **failed_deep))
    assert pct.fact == pytest.approx(0.45)
    on_span = span("job", "agent", attributes={"job.progress": "0.3"})
    s = ask(PROGRESS_AT_STOP, turn(spans=(ROOT, on_span), **failed_deep))
    assert s.fact == pytest.approx(0.3) and s.evidence[0].unit_id == "job"
    assert ask(PROGRESS_AT_STOP, turn(attributes={"agent.progress": "half"}, **failed_deep)).value == "uncollected"
    assert ask(PROGRESS_AT_STOP, turn(attributes={"agent.progress": 250}, **failed_deep)).value == "uncollected"
    assert ask(PROGRESS_AT_STOP, turn(**failed_deep)).value == "uncollected"  # a stopped job that says nothing
    assert ask(PROGRESS_AT_STOP, turn(mode="deep")).value == "not_applicable"  # completed: no stop
    assert ask(PROGRESS_AT_STOP, turn()).value == "not_applicable"


def test_span_error_cites_the_error_message() -> None:
    bad = span("s9", "tool", status="error", error="HTTP 503 from warehouse")
    a = ask(SPAN_ERROR, SpanView(bad, turn()))
    assert (a.value, a.fact) == ("yes", "HTTP 503 from warehouse")
    assert a.evidence == (EvidencePointer(unit_id="s9", field="error", start=0, end=23),)
    assert ask(SPAN_ERROR, SpanView(LLM, turn())).value == "no"
    assert ask(SPAN_ERROR, SpanView(span("u", status="unset"), turn())).value == "no"


def test_rules_are_deterministic() -> None:
    t = turn(delivery="failed_error", answer=None, spans=(ROOT, span("x", status="error", error="boom")))
    for d in DEFINITIONS:
        unit = SpanView(t.spans[1], t) if d.layer == "span" else t
        assert ask(d.id, unit) == ask(d.id, unit)


# ---- analyses -------------------------------------------------------------------------------------------


def row(uid: str, user: str | None, *, mode: str | None = "normal", delivered: str = "yes",
        latency_s: float | None = None, conv: str | None = None, index: int = 0,
        values: Mapping[str, str] | None = None, facts: Mapping[str, Any] | None = None) -> UnitRow:
    vals = {DELIVERED: delivered, **(values or {})}
    fct: dict[str, Any] = dict(facts or {})
    if latency_s is not None:
        vals[LATENCY_MS] = "yes"
        fct[LATENCY_MS] = latency_s * 1000.0
    return UnitRow(uid, "trace", user, conv or f"c-{uid}", index, None, None, mode, vals, fct)


def obs(*rows: UnitRow, spans: tuple[UnitRow, ...] = ()) -> Observations:
    return Observations(rows={"trace": list(rows), "span": list(spans)})


def pick(results: list[Result], metric: str, stratum: str = "all") -> Result:
    found = [r for r in results if r.metric == metric and r.stratum == stratum]
    assert len(found) == 1, (metric, stratum, [(r.metric, r.stratum) for r in results])
    return found[0]


def test_failure_rate_wilson_and_clustered_with_uncollected_left_out() -> None:
    rows = [row(f"a{i}", "a", delivered="no" if i < 2 else "yes") for i in range(4)]
    rows += [row(f"b{i}", "b", mode="deep", delivered="yes") for i in range(6)]
    rows += [row("x", "b", delivered="uncollected"), row("y", "b", delivered="not_applicable")]
    res = ex.failure_rate(obs(*rows), PACK)
    clustered, wilson = pick(res, "failure_rate"), pick(res, "failure_rate.wilson")
    assert (clustered.value, clustered.n, wilson.n) == (0.2, 10, 10)
    exp_w, exp_c = proportion_ci(2, 10), cluster_proportion_ci([2, 0], [4, 6])
    assert (wilson.low, wilson.high) == (exp_w.low, exp_w.high)
    assert (clustered.low, clustered.high) == (exp_c.low, exp_c.high)
    assert "user-clustered (2 clusters)" in (clustered.note or "")
    assert pick(res, "failure_rate", "mode=normal").value == 0.5
    assert pick(res, "failure_rate", "mode=deep").value == 0.0
    assert pick(res, "uncollected", f"item={DELIVERED}").value == 1
    assert all(r.analysis == "execution.failure_rate" and r.analysis_version == ex.VERSION for r in res)


def test_mode_falls_back_to_the_collected_fact() -> None:
    r = row("t", "u", mode=None, delivered="no", facts={MODE: "deep"})
    assert pick(ex.failure_rate(obs(r), PACK), "failure_rate", "mode=deep").value == 1.0


def test_failure_conditional_on_chain_steps() -> None:
    rows = []
    for i in range(10):  # normal turns: 4 without thinking (2 fail), 6 with thinking (0 fail)
        thinking = "no" if i < 4 else "yes"
        rows.append(row(f"t{i}", f"u{i}", delivered="no" if i < 2 else "yes",
                        values={HAS_THINKING: thinking, HAS_RETRIEVAL: "yes", CHAIN_COMPLETE: thinking}))
    rows.append(row("s", "u0", mode="simple", delivered="no",
                    values={HAS_THINKING: "no", HAS_RETRIEVAL: "no", CHAIN_COMPLETE: "not_applicable"}))
    res = ex.failure_by_chain(obs(*rows), PACK)
    assert pick(res, "failure_rate.no_thinking", "mode=normal").value == 0.5
    assert pick(res, "failure_rate.thinking", "mode=normal").value == 0.0
    assert pick(res, "failure_rate.no_thinking").value == pytest.approx(3 / 5)
    assert pick(res, "failure_rate.retrieval", "mode=normal").value == 0.2
    assert pick(res, "failure_rate.no_retrieval", "mode=simple").value == 1.0
    assert pick(res, "failure_rate.no_chain_complete").n == 4  # not_applicable is no evidence either way
    zero = pick(res, "failure_rate.thinking", "mode=normal")
    assert zero.low == 0.0 and zero.high == pytest.approx(proportion_ci(0, 6).high)  # no point interval at 0


def test_latency_geometric_mean_against_the_baseline() -> None:
    rows = [row("a", "u1", latency_s=25.0), row("b", "u2", latency_s=100.0),
            row("f", "u3", delivered="no", latency_s=1.0),  # failures are not in the baseline
            row("s", "u1", mode="simple", latency_s=8.0), row("s2", "u2", mode="simple", latency_s=8.0),
            row("e", "u1", mode="exotic", latency_s=3.0)]
    res = ex.latency_vs_baseline(obs(*rows), PACK)
    normal = pick(res, "latency_gm_ratio", "mode=normal")
    assert normal.value == pytest.approx(1.0) and normal.n == 2  # sqrt(25 * 100) = 50 = baseline
    assert pick(res, "latency_gm_seconds", "mode=normal").value == pytest.approx(50.0)
    assert normal.low is not None and normal.high is not None and normal.low <= 1.0 <= normal.high
    simple = pick(res, "latency_gm_ratio", "mode=simple")
    assert simple.value == pytest.approx(1.0)
    assert pick(res, "latency_gm_seconds", "mode=exotic").value == pytest.approx(3.0)
    assert not [r for r in res if r.metric == "latency_gm_ratio" and r.stratum == "mode=exotic"]
    assert ex.latency_vs_baseline(obs(*rows), PACK) == res  # fixed bootstrap seed: same data, same interval


def test_latency_bands_follow_the_pack_edge() -> None:
    assert ex.latency_bands(5.0) == [("<5s", 0.0, 5.0), ("5-10s", 5.0, 10.0), ("10-120s", 10.0, 120.0),
                                     (">120s", 120.0, math.inf)]
    assert [n for n, _, _ in ex.latency_bands(12.0)] == ["<12s", "12-120s", ">120s"]


def test_fast_failure_band() -> None:
    rows = [row("a", "u1", delivered="no", latency_s=1.0), row("b", "u2", latency_s=2.0),
            row("c", "u3", latency_s=4.99), row("d", "u1", latency_s=5.0), row("e", "u2", latency_s=50.0),
            row("f", "u3", delivered="no", latency_s=300.0), row("g", "u4", mode="simple", latency_s=3.0),
            row("h", "u4", delivered="no")]  # no latency: in no band
    res = ex.fast_failure_band(obs(*rows), PACK)
    under5 = pick(res, "failure_rate.band[<5s]", "mode=normal")
    assert (under5.value, under5.n) == (pytest.approx(1 / 3), 3)
    assert pick(res, "failure_rate.band[<5s]").n == 4
    assert pick(res, "failure_rate.band[5-10s]", "mode=normal").value == 0.0
    assert pick(res, "failure_rate.band[>120s]", "mode=normal").value == 1.0
    assert pick(res, "failure_rate.band[>120s]", "mode=simple").value is None


def test_progress_at_abnormal_stops() -> None:
    def stop(uid: str, user: str, p: float, secs: float, delivered: str = "no") -> UnitRow:
        return row(uid, user, mode="deep", delivered=delivered, latency_s=secs,
                   values={PROGRESS_AT_STOP: "yes"}, facts={PROGRESS_AT_STOP: p})
    rows = [stop("a", "u1", 0.1, 30.0), stop("b", "u2", 0.2, 60.0), stop("c", "u3", 0.5, 90.0),
            stop("d", "u4", 0.05, 120.0), stop("ok", "u5", 1.0, 900.0, delivered="yes")]
    res = ex.progress_at_stop(obs(*rows), PACK)
    early = pick(res, "early_stop_share", "mode=deep")
    assert (early.value, early.n) == (0.75, 4)  # <= 0.2 inclusive; the completed job is not a stop
    assert pick(res, "stop_median_seconds", "mode=deep").value == pytest.approx(75.0)


def test_span_error_rate() -> None:
    spans = tuple(UnitRow(f"s{i}", "span", "u1" if i < 2 else "u2", "c", 0, None, None, "normal",
                          {SPAN_ERROR: "yes" if i == 0 else "no"}, {}) for i in range(4))
    res = ex.span_error_rate(obs(spans=spans), PACK)
    assert pick(res, "span_error_rate").value == 0.25 and pick(res, "span_error_rate").layer == "span"


def test_every_analysis_is_pure_and_handles_empty_observations() -> None:
    empty = Observations(rows={})
    for a in get_component("execution").analyses:
        first = a.fn(empty, PACK)
        assert first == a.fn(empty, PACK)
        assert all(r.component == "execution" and r.analysis == a.name and r.analysis_version == a.version
                   for r in first)
