"""End to end on public data (skipped when ../shared/data is absent): files -> adapters -> store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factory.ingest import ingest_paths
from factory.store import Store
from knowledge_packs import load_pack
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


def test_trail_every_span_with_parents_and_kinds(tmp_path: Path) -> None:
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
    with Store(tmp_path / "s.duckdb") as st:
        rep = ingest_paths(st, [root], pack=load_pack("default"))
        stored = set(st.con.execute("SELECT trace_id, id FROM spans").fetchall())
        dangling = st.con.execute(
            "SELECT count(*) FROM spans s WHERE s.parent_id IS NOT NULL AND NOT EXISTS"
            " (SELECT 1 FROM spans p WHERE p.trace_id = s.trace_id AND p.id = s.parent_id)"
        ).fetchone()[0]  # type: ignore[index]
        mapped = dict(st.con.execute("SELECT kind, count(*) FROM spans GROUP BY kind").fetchall())
        turns = st.con.execute("SELECT count(*) FROM turns").fetchone()[0]  # type: ignore[index]
    assert len(files) == 52 and turns == 52
    # The only quarantine is one span the source repeats verbatim (same trace, same span id).
    assert rep.read == expected_spans and rep.quarantined == expected_spans - len(expected_ids) <= 1
    assert stored == expected_ids
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
