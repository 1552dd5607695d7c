"""End to end on public data (skipped when ../shared/data is absent): files -> adapters -> store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest

from agent_factory.adapters.model import DeliveryState
from agent_factory.factory.ingest.files import IngestReport, ingest_paths
from agent_factory.factory.store import Store
from agent_factory.knowledge_packs import load_pack
from tests.conftest import shared_data


def _count_spans(node: dict) -> int:
    return 1 + sum(_count_spans(c) for c in node.get("child_spans") or [])


def test_tau_bench_conversations_and_rewards_reach_the_store(tmp_path: Path) -> None:
    src = shared_data("tau-bench-airline-gpt4o", "gpt-4o-airline.json")
    with Store(tmp_path / "s.duckdb") as st:
        rep = ingest_paths(st, [src], pack=load_pack("default"))
        n_conv = st.con.execute("SELECT count(*) FROM conversations").fetchone()[0]  # type: ignore[index]
        rewards = st.con.execute(
            "SELECT count(*), sum(CAST(value AS DOUBLE)) FROM events WHERE kind = 'task_reward'"
        ).fetchone()
        user_turns = st.con.execute("SELECT count(*) FROM turns").fetchone()[0]  # type: ignore[index]
    raw = json.loads(src.read_text(encoding="utf-8"))
    assert (rep.read, rep.accepted, rep.quarantined) == (128, 128, 0)
    assert n_conv == 128
    assert rewards == (128, pytest.approx(sum(r["reward"] for r in raw)))
    assert rewards[1] == pytest.approx(53.0)
    assert user_turns == sum(1 for r in raw for m in r["traj"] if m["role"] == "user")


def test_trail_every_span_with_parents_and_kinds(trail_store: tuple[Path, IngestReport]) -> None:
    root = shared_data("trail", "traces")
    files = sorted(root.glob("*/*.json"))
    expected_spans = 0
    expected_ids: set[tuple[str, str]] = set()
    kinds: dict[str, int] = {}

    def walk(node: dict, trace: str) -> None:
        if (trace, node["span_id"]) not in expected_ids:  # a verbatim repeat is stored once
            k = (node.get("span_attributes") or {}).get("openinference.span.kind")
            kinds[k] = kinds.get(k, 0) + 1
        expected_ids.add((trace, node["span_id"]))
        for c in node.get("child_spans") or []:
            walk(c, trace)

    for f in files:
        doc = json.loads(f.read_text(encoding="utf-8"))
        for s in doc["spans"]:
            expected_spans += _count_spans(s)
            walk(s, doc["trace_id"])
    path, rep = trail_store
    with Store(path, read_only=True) as st:
        # Tool calls a model made that no span executed are spans of their own, marked as derived.
        derived = "json_extract_string(attributes, '$.tool_span_source') IS NOT NULL"
        stored = set(st.con.execute(f"SELECT trace_id, id FROM spans WHERE NOT {derived}").fetchall())
        n_derived = st.con.execute(f"SELECT count(*) FROM spans WHERE {derived}").fetchone()[0]  # type: ignore[index]
        dangling = st.con.execute(
            "SELECT count(*) FROM spans s WHERE s.parent_id IS NOT NULL AND NOT EXISTS"
            " (SELECT 1 FROM spans p WHERE p.trace_id = s.trace_id AND p.id = s.parent_id)"
        ).fetchone()[0]  # type: ignore[index]
        mapped = dict(st.con.execute(f"SELECT kind, count(*) FROM spans WHERE NOT {derived} GROUP BY kind").fetchall())
        turns = st.con.execute("SELECT count(*) FROM turns").fetchone()[0]  # type: ignore[index]
    assert len(files) == 52 and turns == 52
    # The only quarantine is one span the source repeats verbatim (same trace, same span id).
    assert rep.read == expected_spans and rep.quarantined == expected_spans - len(expected_ids) <= 1
    assert stored == expected_ids
    assert n_derived <= 5  # smolagents' managed agents' final_answer calls run no tool span
    assert dangling == 0
    assert mapped["llm"] == kinds.get("LLM", 0)
    assert mapped["tool"] == kinds.get("TOOL", 0)
    assert mapped["agent"] == kinds.get("AGENT", 0) + kinds.get("CHAIN", 0)


def test_openinference_fixtures_ingest(tmp_path: Path) -> None:
    root = shared_data("openinference-otel-fixtures", "vercel-ai-sdk-v6-spans")
    with Store(tmp_path / "s.duckdb") as st:
        rep = ingest_paths(st, [root / "all-spans.json"], pack=load_pack("default"))
        models = {r[0] for r in st.con.execute("SELECT model FROM spans WHERE model IS NOT NULL").fetchall()}
    assert (rep.read, rep.accepted, rep.quarantined) == (10, 10, 0)
    assert any(m.startswith("gpt-4o-mini") for m in models)


# ---- evidence coverage and turn assembly on the shared sets ------------------------------------------------


def _coverage_records(st: Store) -> list[tuple[str, str, dict]]:
    rows = st.con.execute(
        "SELECT t.id, t.delivery, p.record FROM turns t JOIN provenance p ON p.turn_id = t.id ORDER BY t.id"
    ).fetchall()
    return [(tid, delivery, json.loads(rec)["coverage"]) for tid, delivery, rec in rows]


def test_tau_bench_coverage_flags_only_real_gaps(tmp_path: Path) -> None:
    src = shared_data("tau-bench-airline-gpt4o", "gpt-4o-airline.json")
    raw = {f"tau-{r['task_id']}-{r['trial']}": r["traj"] for r in json.loads(src.read_text(encoding="utf-8"))}
    with Store(tmp_path / "s.duckdb") as st:
        ingest_paths(st, [src], pack=load_pack("default"))
        records = _coverage_records(st)
        attrs = dict(st.con.execute("SELECT id, attributes FROM turns").fetchall())
    assert len(records) == 954
    flagged = [(tid, delivery, cov) for tid, delivery, cov in records if not cov["complete"]]
    for tid, _delivery, cov in flagged:
        bad = [f for f in cov["fields"] if not f["complete"]]
        # Tool-calling messages (content null) are whole: no span field is ever a gap here. What remains is
        # the answer of a turn after whose request the log holds no assistant text: a real gap, cited.
        assert [f["label"] for f in bad] == ["answer"], (tid, bad)
        assert bad[0]["pointer"] == {"unit_id": tid, "field": "answer", "start": 0, "end": 0}
        traj = raw[tid.split("/")[0]]
        a = json.loads(attrs[tid])
        after = traj[a["request_message_index"] + 1:a["last_message_index"] + 1]
        assert not any(m["role"] == "assistant" and (m.get("content") or "").strip() for m in after), tid
    if {"handed_off", "closing"} <= set(get_args(DeliveryState)):
        # With hand-offs and goodbyes recognised (no answer is due after them), at most 2% of turns are flagged.
        assert len(flagged) <= 0.02 * len(records)


def test_trail_turns_have_a_request_and_an_answer_from_their_model_calls(
    trail_store: tuple[Path, IngestReport],
) -> None:
    with Store(trail_store[0], read_only=True) as st:
        rows = st.con.execute("SELECT id, request, answer, attributes FROM turns").fetchall()
        llm = {(t, i) for t, i in st.con.execute("SELECT trace_id, id FROM spans WHERE kind = 'llm'").fetchall()}
        records = {tid: cov for tid, _d, cov in _coverage_records(st)}
    assert len(rows) == 52
    both = [r for r in rows if r[1] and r[2]]
    assert len(both) >= 50
    for tid, _request, _answer, attributes in both:
        a = json.loads(attributes)
        # The roots are empty here: the text comes from model calls, and the turn and its coverage say which.
        assert (a["request_source"], a["answer_source"]) == ("llm_input", "llm_output")
        assert (tid, a["request_span_id"]) in llm and (tid, a["answer_span_id"]) in llm
        fields = {f["label"]: f for f in records[tid]["fields"]}
        assert (fields["request"]["source"], fields["request"]["source_unit_id"]) == ("llm_input",
                                                                                    a["request_span_id"])
        assert fields["answer"]["source"] == "llm_output" and fields["answer"]["complete"]
    gaia = [r for r in both if "Here is the task" in r[1]]
    assert len(gaia) >= 40 and all(r[2].strip() for r in gaia)


def test_who_and_when_logs_and_their_labels_reach_the_store(who_and_when_store: tuple[Path, IngestReport]) -> None:
    path, rep = who_and_when_store
    with Store(path, read_only=True) as st:
        events = st.con.execute(
            "SELECT e.kind, count(*), count(DISTINCT e.conversation_id) FROM events e"
            " JOIN conversations c ON c.id = e.conversation_id GROUP BY e.kind ORDER BY e.kind"
        ).fetchall()
        step_spans = st.con.execute(
            "SELECT count(*) FROM events e JOIN spans s ON s.id = json_extract_string(e.attributes, '$.span_id')"
            " WHERE e.kind = 'mistake_step'"
        ).fetchone()[0]  # type: ignore[index]
        users = st.con.execute(
            "SELECT count(*) FROM conversations WHERE user_id IS NOT NULL").fetchone()[0]  # type: ignore[index]
    assert (rep.read, rep.accepted, rep.quarantined) == (184, 184, 0)
    assert {f.format for f in rep.files} == {"who-and-when"}
    assert events == [("mistake_agent", 184, 184), ("mistake_reason", 184, 184), ("mistake_step", 184, 184)]
    assert step_spans == 184 and users == 0
