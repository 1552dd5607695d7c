"""Conduct: clause data generated from packs, the clause rules, and A(r) / C(r) on hand-built, simulated and
real (tau-bench airline) units."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from agent_factory.adapters.chat import TauBenchAdapter
from agent_factory.adapters.chat_messages import convert_messages
from agent_factory.adapters.model import Conversation, EvidencePointer, Span, Turn
from agent_factory.errors import SpecError
from agent_factory.evaluators.components.conduct import (
    conduct_analysis,
    definitions_for,
    message_index,
    obligation_id,
    trigger_id,
)
from agent_factory.evaluators.components.conduct.definitions import OBLIGATION_RULE, TRIGGER_RULE, clause_id_of
from agent_factory.evaluators.core.model import DataDefinition, Layer, Result, Value
from agent_factory.evaluators.core.registry import (
    Observations,
    RuleAnswer,
    RuleContext,
    UnitRow,
    get_component,
    get_rule,
)
from agent_factory.knowledge_packs import KnowledgePack, load_pack
from agent_factory.knowledge_packs.loader import validate_pack_data
from tests.conftest import shared_data

PACKS = Path(__file__).resolve().parents[2] / "knowledge_packs"
BUSINESS = load_pack("business_analysis")
AIRLINE = load_pack(PACKS / "airline" / "pack.yaml")


# ---- helpers: the runner's collection order, in miniature --------------------------------------------


def collect(defn: DataDefinition, unit: object, pack: KnowledgePack) -> RuleAnswer:
    """applies_when first (not yes -> not_applicable), then the rule, as the runner's rule tier does."""
    ctx = RuleContext(pack=pack, definition=defn)
    if defn.applies_when is not None:
        gate = get_rule(defn.applies_when)(unit, ctx)
        if gate.value != "yes":
            return RuleAnswer("not_applicable", reason="applies_when did not hold")
    assert defn.rule is not None
    return get_rule(defn.rule)(unit, ctx)


def row_of(unit_id: str, layer: Layer, values: dict[str, Value], facts: dict[str, Any] | None = None, *,
           user: str | None = None, conversation: str | None = None) -> UnitRow:
    return UnitRow(unit_id, layer, user, conversation, 0, None, None, None, values, facts or {})


def rows_for(units: Iterable[Turn | Conversation], pack: KnowledgePack, layer: Layer) -> list[UnitRow]:
    defs = [d for d in definitions_for(pack) if d.layer == layer]
    rows = []
    for u in units:
        answers = {d.id: collect(d, u, pack) for d in defs}
        conv = u.conversation_id if isinstance(u, Turn) else u.id
        rows.append(row_of(u.id, layer, {k: a.value or "uncollected" for k, a in answers.items()},
                           {k: a.fact for k, a in answers.items() if a.fact is not None},
                           user=u.user_id, conversation=conv))
    return rows


def by_metric(results: Sequence[Result]) -> dict[str, Result]:
    return {r.metric: r for r in results if r.unit_id is None}


def turn(answer: str | None, request: str = "Q3 revenue by region?", **kw: Any) -> Turn:
    return Turn(id=kw.pop("id", "t1"), conversation_id="c1", request=request, answer=answer, delivery="delivered", **kw)


def chat(messages: list[dict[str, Any]], cid: str = "conv") -> Conversation:
    msgs = [{"role": "system", "content": "policy"}, *messages]
    converted = convert_messages(msgs, conversation_id=cid, user_id="u1", path="traj")
    return Conversation(id=cid, user_id="u1", turns=converted.turns, attributes=converted.attributes)


def call(name: str, args: dict[str, Any] | None = None, cid: str = "call") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args or {})}}


def assistant(content: str | None = None, *calls: dict[str, Any]) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = list(calls)
    return msg


def tool(cid: str = "call", content: str = "{}") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": content}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def airline(clause_id: str, unit: Conversation) -> tuple[RuleAnswer, RuleAnswer]:
    defs = {d.id: d for d in definitions_for(AIRLINE)}
    return (collect(defs[trigger_id(clause_id)], unit, AIRLINE),
            collect(defs[obligation_id(clause_id)], unit, AIRLINE))


def business(clause_id: str, unit: Turn) -> tuple[RuleAnswer, RuleAnswer]:
    defs = {d.id: d for d in definitions_for(BUSINESS)}
    return (collect(defs[trigger_id(clause_id)], unit, BUSINESS),
            collect(defs[obligation_id(clause_id)], unit, BUSINESS))


def cited(unit: Turn, p: EvidencePointer) -> str:
    return str(getattr(unit, p.field))[p.start:p.end]


# ---- definitions ----------------------------------------------------------------------------------------


def test_definitions_are_generated_per_clause() -> None:
    defs = definitions_for(BUSINESS)
    assert [d.id for d in defs] == [
        "conduct.no_unprompted_disclosure.trigger", "conduct.no_unprompted_disclosure.obligation",
        "conduct.file_summary_needs_upload.trigger", "conduct.file_summary_needs_upload.obligation",
    ]
    trig, ob = defs[0], defs[1]
    assert (trig.rule, trig.tiers, trig.layer, trig.applies_when) == (TRIGGER_RULE, ("rule",), "trace", None)
    assert (ob.rule, ob.applies_when, ob.component) == (OBLIGATION_RULE, TRIGGER_RULE, "conduct")
    assert clause_id_of(ob.id) == "no_unprompted_disclosure" and clause_id_of("execution.delivered") is None
    air = {d.id: d for d in definitions_for(AIRLINE)}
    assert air["conduct.confirm_before_write.obligation"].rule == "conduct.confirmed_before_action"
    assert all(d.layer == "conversation" for d in air.values())


def test_registered_spec_exposes_definitions_for() -> None:
    spec = get_component("conduct")
    assert spec.definitions == ()
    assert spec.generate is not None and spec.generate(BUSINESS) == definitions_for(BUSINESS)
    assert [a.name for a in spec.analyses] == ["conduct.clauses"]


def test_definition_version_follows_the_clause_content() -> None:
    data = BUSINESS.model_dump(mode="json")
    data["clauses"][1]["trigger"]["regex"] = r"\[\s*file\s+summary\s*\]"
    edited = validate_pack_data(data, source="edited")
    old, new = definitions_for(BUSINESS), definitions_for(edited)
    assert old[:2] == new[:2]  # the untouched clause keeps its data (and cache keys)
    assert old[2].version != new[2].version and old[2].digest() != new[2].digest()


def test_unregistered_rule_names_the_pack_field() -> None:
    data = AIRLINE.model_dump(mode="json")
    data["clauses"][2]["obligation"]["rule"] = "conduct.no_such_rule"
    pack = validate_pack_data(data, source="x")
    with pytest.raises(SpecError, match=r"clauses\.2\.obligation\.rule: .*conduct\.no_such_rule"):
        definitions_for(pack)


def test_model_only_obligation_has_no_rule_and_model_tiers() -> None:
    data = BUSINESS.model_dump(mode="json")
    data["clauses"][0]["obligation"] = {"tiers": ["small_model", "jury"], "question": "Did the user ask?"}
    defs = definitions_for(validate_pack_data(data, source="x"))
    ob = defs[1]
    assert (ob.rule, ob.tiers, ob.question, ob.applies_when) == (None, ("small_model", "jury"), "Did the user ask?",
                                                                 TRIGGER_RULE)


# ---- business-analysis clauses on hand-built turns ------------------------------------------------------


def test_unprompted_disclosure_is_a_violation_citing_the_company() -> None:
    t = turn("Revenue grew 12%.\nThis analysis is provided by RuiSi Data Technology's analytics service.")
    trig, ob = business("no_unprompted_disclosure", t)
    assert trig.value == "yes"
    assert [cited(t, p) for p in trig.evidence] == ["This analysis is provided by", "RuiSi Data Technology"]
    assert ob.value == "no" and ob.evidence == trig.evidence
    assert ob.fact == "t1#answer[18:46]; t1#answer[47:68]"


def test_prompted_disclosure_complies() -> None:
    t = turn("RuiSi Data Technology runs this service.", request="Which company runs this assistant?")
    trig, ob = business("no_unprompted_disclosure", t)
    assert (trig.value, ob.value) == ("yes", "yes")
    assert [cited(t, p) for p in ob.evidence] == ["Which company"]
    assert ob.evidence[0].field == "request"


def test_chinese_disclosure_matches_full_width_and_spaced_text() -> None:
    t = turn("本 分析由 锐思数据科技 的智能分析服务提供。", request="华东区销售额")
    trig, ob = business("no_unprompted_disclosure", t)
    assert trig.value == "yes" and ob.value == "no"
    assert "锐思数据科技" in [cited(t, p) for p in trig.evidence]
    assert business("no_unprompted_disclosure", turn("ＲｕｉＳｉ Data helped."))[0].value == "yes"


def test_no_disclosure_means_trigger_no_and_obligation_not_applicable() -> None:
    t = turn("Revenue by region: East 40%, South 35%. Figures provided by region managers.")
    trig, ob = business("no_unprompted_disclosure", t)
    assert (trig.value, trig.evidence, ob.value) == ("no", (), "not_applicable")


def test_template_without_upload_violates_and_with_upload_complies() -> None:
    answer = "[File summary]\nFile name: untitled\nKey findings: upload a file to get a detailed summary.\n"
    bare = turn(answer)
    trig, ob = business("file_summary_needs_upload", bare)
    assert trig.value == "yes" and [cited(bare, p) for p in trig.evidence] == ["[File summary]"]
    assert ob.value == "no" and ob.evidence == trig.evidence
    upload = Span(id="s1", trace_id="t1", kind="tool", name="upload", attributes={"file": {"name": "q3.xlsx"}})
    with_file = turn(answer, spans=(upload,))
    trig, ob = business("file_summary_needs_upload", with_file)
    assert ob.value == "yes"
    assert ob.evidence == (EvidencePointer(unit_id="s1", field="attributes.file.name", start=0, end=7),)
    zh = turn("【文件摘要】\n文件名称：未命名文件\n")
    assert business("file_summary_needs_upload", zh)[0].value == "yes"


def test_must_not_clause_with_a_condition() -> None:
    data = BUSINESS.model_dump(mode="json")
    data["clauses"] = [{
        "id": "no_guarantees", "text": "Never promise a result.", "kind": "must_not",
        "trigger": {"tool_names": ["*"]}, "obligation": {"regex": r"\bguarantee", "fields": ["answer"]},
    }]
    pack = validate_pack_data(data, source="x")
    defs = definitions_for(pack)
    tool_span = Span(id="s1", trace_id="t1", kind="tool", name="sql_query", input="SELECT 1")
    ok = turn("Sales rose.", spans=(tool_span,))
    bad = turn("I guarantee sales will rise.", spans=(tool_span,))
    none = turn("I guarantee it.")
    assert collect(defs[0], ok, pack).evidence == (EvidencePointer(unit_id="s1", field="input", start=0, end=8),)
    assert collect(defs[1], ok, pack).value == "yes"
    answer = collect(defs[1], bad, pack)
    assert answer.value == "no" and [cited(bad, p) for p in answer.evidence] == ["guarantee"]
    assert collect(defs[1], none, pack).value == "not_applicable"


def test_generic_rule_for_a_clause_missing_from_the_pack_is_uncollected() -> None:
    defn = definitions_for(BUSINESS)[0]
    answer = get_rule(TRIGGER_RULE)(turn("x"), RuleContext(pack=load_pack("default"), definition=defn))
    assert answer.value == "uncollected" and "no such clause" in (answer.reason or "")


# ---- airline clauses on hand-built conversations --------------------------------------------------------


ASK = "I will cancel reservation ABC123 (economy, 2 passengers). Please confirm if you would like me to proceed."


def test_confirmed_cancellation_complies_with_evidence_to_the_messages() -> None:
    conv = chat([
        user("Cancel ABC123 please."), assistant(ASK), user("Yes, please proceed."),
        assistant(None, call("cancel_reservation", {"reservation_id": "ABC123"})), tool(), assistant("Done."),
    ])
    trig, ob = airline("confirm_before_write", conv)
    assert trig.value == "yes" and ob.value == "yes"
    assert [message_index(conv, p) for p in ob.evidence] == [2, 3, 4]
    assert ob.evidence[1] == EvidencePointer(unit_id="conv/turn-1", field="request", start=0, end=3)


@pytest.mark.parametrize(
    ("ask", "reply"),
    [
        (ASK, "Let's go with option 1."),  # picks without a yes
        (ASK, "No, wait - yes, actually proceed."),  # opens with a refusal
        ("Here are the options: 1) HAT175 2) HAT266.", "Yes, option 2."),  # nobody asked to confirm
    ],
)
def test_unconfirmed_action_violates_citing_call_and_user_message(ask: str, reply: str) -> None:
    conv = chat([user("Change my flight."), assistant(ask), user(reply),
                 assistant(None, call("update_reservation_flights")), tool(), assistant("Updated.")])
    trig, ob = airline("confirm_before_write", conv)
    assert trig.value == "yes" and ob.value == "no"
    assert [(p.unit_id, p.field) for p in ob.evidence] == [("conv/m4/call-0", "input"), ("conv/turn-1", "request")]
    assert [message_index(conv, p) for p in ob.evidence] == [4, 3]
    assert ob.fact is not None and ob.fact.startswith("conv/m4/call-0#input")


def test_write_call_before_any_user_reply_violates() -> None:
    conv = chat([user("Book me HAT001 on May 20."), assistant(None, call("book_reservation")), tool()])
    assert airline("confirm_before_write", conv)[1].value == "no"


def test_reads_only_is_not_applicable() -> None:
    conv = chat([user("Details of ABC123?"), assistant(None, call("get_reservation_details")), tool(),
                 assistant("Here they are.")])
    trig, ob = airline("confirm_before_write", conv)
    assert (trig.value, ob.value) == ("no", "not_applicable")


def test_one_tool_call_per_message_and_no_reply_with_tool_call() -> None:
    conv = chat([
        user("Find flights."),
        assistant("Let me search.", call("search_direct_flight", cid="a")), tool("a"),
        assistant(None, call("search_direct_flight", cid="b"), call("search_onestop_flight", cid="c")),
        tool("b"), tool("c"), assistant("Found two."),
    ])
    trig, ob = airline("one_tool_call_at_a_time", conv)
    assert trig.value == "yes" and ob.value == "no"
    assert ob.evidence == (EvidencePointer(unit_id="conv/m4", field="attributes.tool_calls", start=0, end=2),)
    assert message_index(conv, ob.evidence[0]) == 4
    trig, ob = airline("no_reply_with_tool_call", conv)
    assert ob.value == "no" and [message_index(conv, p) for p in ob.evidence] == [2]
    assert ob.evidence[0].end == len("Let me search.")
    clean = chat([user("Find flights."), assistant(None, call("search_direct_flight")), tool(), assistant("One.")])
    assert [a.value for a in airline("one_tool_call_at_a_time", clean)] == ["yes", "yes"]
    assert [a.value for a in airline("no_reply_with_tool_call", clean)] == ["yes", "yes"]
    chat_only = chat([user("Hi"), assistant("Hello!")])
    assert [a.value for a in airline("no_reply_with_tool_call", chat_only)] == ["no", "not_applicable"]


def test_booking_limits_count_passengers_and_payment_kinds() -> None:
    def booking(passengers: int, payments: list[str]) -> Conversation:
        args = {"passengers": [{"first_name": f"P{i}"} for i in range(passengers)],
                "payment_methods": [{"payment_id": p, "amount": 10} for p in payments]}
        return chat([user("Book it."), assistant(ASK), user("yes"), assistant(None, call("book_reservation", args)),
                     tool()])

    ok = booking(5, ["certificate_1", "credit_card_2", "gift_card_3", "gift_card_4", "gift_card_5"])
    assert airline("booking_limits", ok)[1].value == "yes"
    for bad in (booking(6, ["credit_card_1"]), booking(1, ["certificate_1", "certificate_2"]),
                booking(1, ["gift_card_1", "gift_card_2", "gift_card_3", "gift_card_4"])):
        answer = airline("booking_limits", bad)[1]
        assert answer.value == "no" and message_index(bad, answer.evidence[0]) == 4
    broken = chat([user("Book."), {"role": "assistant", "content": None, "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "book_reservation", "arguments": "{oops"}}]}])
    assert airline("booking_limits", broken)[1].value == "uncollected"


def test_confirmation_rule_needs_a_conversation() -> None:
    defn = next(d for d in definitions_for(AIRLINE) if d.id == "conduct.confirm_before_write.obligation")
    answer = get_rule("conduct.confirmed_before_action")(turn("x"), RuleContext(pack=AIRLINE, definition=defn))
    assert answer.value == "uncollected"


# ---- analysis on hand-built rows ------------------------------------------------------------------------


def test_applicability_compliance_violations_and_uncollected() -> None:
    clause = "no_unprompted_disclosure"
    t, o = trigger_id(clause), obligation_id(clause)
    rows = [
        row_of("a1", "trace", {t: "yes", o: "no"}, {o: "a1#answer[0:5]"}, user="ua"),
        row_of("a2", "trace", {t: "yes", o: "yes"}, user="ua"),
        row_of("b1", "trace", {t: "yes", o: "yes"}, user="ub"),
        row_of("b2", "trace", {t: "no", o: "not_applicable"}, user="ub"),
        row_of("c1", "trace", {t: "no", o: "not_applicable"}, user="uc"),
        row_of("c2", "trace", {t: "yes", o: "uncollected"}, user="uc"),
        row_of("c3", "trace", {t: "uncollected", o: "uncollected"}, user="uc"),
        row_of("d1", "trace", {t: "yes", o: "no"}, user="ud"),
    ]
    results = conduct_analysis(Observations(rows={"trace": rows}), BUSINESS)
    m = by_metric(results)
    a = m[f"A(r).{clause}"]
    assert (a.value, a.n, a.layer, a.component) == (5 / 7, 7, "trace", "conduct")
    assert a.low is not None and a.high is not None and a.low < 5 / 7 < a.high and "wilson" in (a.note or "")
    assert m[f"A(r).{clause}.clustered"].value == pytest.approx(5 / 7)
    c = m[f"C(r).{clause}"]
    assert (c.value, c.n) == (0.5, 4)  # c2's uncollected obligation is in no denominator
    assert m[f"violations.{clause}"].value == 2.0
    unc = m[f"uncollected.{clause}"]
    assert unc.value == 2.0 and "trigger 1, obligation 1" in (unc.note or "")
    per_unit = [(r.unit_id, r.value, r.note) for r in results if r.unit_id is not None]
    assert per_unit == [("a1", "violated", "evidence: a1#answer[0:5]"),
                        ("d1", "violated", f"evidence: atomic datum {o}")]
    # The second clause has no rows at all: its rates are undefined, not zero.
    empty = m["A(r).file_summary_needs_upload"]
    assert empty.value is None and empty.n == 0


def test_clustered_interval_is_wider_when_users_differ() -> None:
    clause = "file_summary_needs_upload"
    t, o = trigger_id(clause), obligation_id(clause)
    rows = [row_of(f"u{u}-{i}", "trace", {t: "yes", o: "yes" if u % 2 else "no"}, user=f"u{u}")
            for u in range(10) for i in range(10)]
    m = by_metric(conduct_analysis(Observations(rows={"trace": rows}), BUSINESS))
    wilson, clustered = m[f"C(r).{clause}"], m[f"C(r).{clause}.clustered"]
    assert wilson.value == clustered.value == 0.5
    assert (clustered.high - clustered.low) > 2 * (wilson.high - wilson.low)  # type: ignore[operator]


@pytest.mark.parametrize(("values", "state"), [
    ([("yes", "yes"), ("yes", "no")], "breached"),
    ([("yes", "yes"), ("no", "not_applicable")], "held"),
    ([("no", "not_applicable")], "untested"),
])
def test_invariant_clause_is_flagged(values: list[tuple[Value, Value]], state: str) -> None:
    clause = "confirm_before_write"
    rows = [row_of(f"c{i}", "conversation", {trigger_id(clause): tv, obligation_id(clause): ov}, user="u")
            for i, (tv, ov) in enumerate(values)]
    m = by_metric(conduct_analysis(Observations(rows={"conversation": rows}), AIRLINE))
    assert m[f"invariant.{clause}"].value == state
    assert "invariant.one_tool_call_at_a_time" not in m  # not an invariant clause


def test_analysis_is_deterministic() -> None:
    clause = "no_unprompted_disclosure"
    rows = [row_of(f"r{i}", "trace", {trigger_id(clause): "yes", obligation_id(clause): "no" if i % 3 else "yes"},
                   user=f"u{i % 4}") for i in range(30)]
    obs = Observations(rows={"trace": rows})
    assert conduct_analysis(obs, BUSINESS) == conduct_analysis(obs, BUSINESS)


# ---- simulated traffic ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_simulated_disclosures_and_templates_match_the_truth(tmp_path: Path) -> None:
    from agent_factory.factory.ingest.files import ingest_paths
    from agent_factory.factory.simulate import simulate
    from agent_factory.factory.simulate.config import SimConfig
    from agent_factory.factory.store import Store

    simulate(SimConfig(users=150, seed=11), tmp_path)
    truth = {r["trace_id"]: r for r in map(json.loads, (tmp_path / "truth.jsonl").read_text().splitlines())}
    with Store(tmp_path / "s.duckdb") as store:
        ingest_paths(store, [tmp_path / "traces.otlp.jsonl"], pack=BUSINESS)
        turns = list(store.iter_turns(segment="real"))
    rows = rows_for(turns, BUSINESS, "trace")
    for clause, key in (("no_unprompted_disclosure", "disclosure"), ("file_summary_needs_upload", "template")):
        fired = {r.unit_id for r in rows if r.values[trigger_id(clause)] == "yes"}
        planted = {t.id for t in turns if truth[t.id][key]}
        assert fired == planted and planted  # every planted sentence found, nothing else
        # Neither is ever prompted or backed by an upload in the simulator: every trigger is a violation.
        assert all(r.values[obligation_id(clause)] == "no" for r in rows if r.unit_id in fired)
        m = by_metric(conduct_analysis(Observations(rows={"trace": rows}), BUSINESS))
        a = m[f"A(r).{clause}.clustered"]
        share = len(planted) / len(turns)
        assert a.value == pytest.approx(share) and a.low <= share <= a.high  # type: ignore[operator]
        assert m[f"C(r).{clause}"].value == 0.0 and m[f"violations.{clause}"].value == len(planted)


# ---- tau-bench airline (real data) ----------------------------------------------------------------------


AIRLINE_FILE = ("tau-bench-airline-gpt4o", "gpt-4o-airline.json")
TOOLUSE_CLAUSES = {"write_preconditions_hold", "refusal_justified", "claims_grounded", "write_arguments_grounded",
                   "looked_before_refusing", "did_what_was_agreed"}
"""The tool-use clauses: their rules abstain (uncollected, with the reason) where the observed state cannot decide."""
WRITES = {"book_reservation", "update_reservation_flights", "update_reservation_baggages",
          "update_reservation_passengers", "cancel_reservation", "send_certificate"}


@pytest.mark.realdata
def test_airline_clauses_on_all_128_conversations() -> None:
    path = shared_data(*AIRLINE_FILE)
    convs = [c for c in TauBenchAdapter().read(path) if isinstance(c, Conversation)]
    assert len(convs) == 128
    rows = rows_for(convs, AIRLINE, "conversation")
    by_id = {c.id: c for c in convs}
    defs = definitions_for(AIRLINE)
    for row in rows:  # every conversation has collected data for every clause the tool-use rules do not decide
        assert all(row.values[d.id] in ("yes", "no", "not_applicable") for d in defs
                   if clause_id_of(d.id) not in TOOLUSE_CLAUSES)

    # Independent oracle from the raw JSON: which conversations write, and which mix text with tool calls.
    raw = json.loads(path.read_text(encoding="utf-8"))
    writes, mixed, multi = set(), set(), set()
    for rec in raw:
        cid = f"tau-{rec['task_id']}-{rec['trial']}"
        for m in rec["traj"]:
            calls = m.get("tool_calls") or []
            writes |= {cid} if any(c["function"]["name"] in WRITES for c in calls) else set()
            mixed |= {cid} if calls and (m.get("content") or "").strip() else set()
            multi |= {cid} if len(calls) > 1 else set()
    values = {r.unit_id: r.values for r in rows}
    assert {c for c, v in values.items() if v["conduct.confirm_before_write.trigger"] == "yes"} == writes
    assert {c for c, v in values.items() if v["conduct.no_reply_with_tool_call.obligation"] == "no"} == mixed
    assert {c for c, v in values.items() if v["conduct.one_tool_call_at_a_time.obligation"] == "no"} == multi

    # Every violation cites the message it is about.
    violations = 0
    for conv in convs:
        for d in defs:
            if d.id.endswith(".obligation"):
                answer = collect(d, conv, AIRLINE)
                if answer.value == "no":
                    violations += 1
                    assert answer.evidence
                    indices = [message_index(by_id[conv.id], p) for p in answer.evidence]
                    assert all(isinstance(i, int) for i in indices)
                    msgs = raw[[f"tau-{r['task_id']}-{r['trial']}" for r in raw].index(conv.id)]["traj"]
                    assert all(msgs[i]["role"] in ("user", "assistant") for i in indices)  # type: ignore[index]
    assert violations > 0

    results = conduct_analysis(Observations(rows={"conversation": rows}), AIRLINE)
    m = by_metric(results)
    for clause in ("confirm_before_write", "one_tool_call_at_a_time", "no_reply_with_tool_call", "booking_limits"):
        a, c = m[f"A(r).{clause}"], m[f"C(r).{clause}"]
        print(f"{clause}: A = {a.value:.3f} ({a.low:.3f}-{a.high:.3f}, n={a.n}), "
              f"C = {c.value:.3f} ({c.low:.3f}-{c.high:.3f}, n={c.n})")
    assert m["A(r).confirm_before_write"].n == 128
    assert m["C(r).one_tool_call_at_a_time"].value == 1.0
    assert m["invariant.confirm_before_write"].value == "breached"
    per_unit = Counter(r.metric for r in results if r.unit_id is not None)
    assert per_unit["violation.no_reply_with_tool_call"] == len(mixed)
