"""Traces written by the real instrumentation (tests/fixtures/producers, made by its generate.py) assemble into
the turns the app had: its own per-turn truth sits beside each export."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent_factory.evaluators.components.conduct.rules import is_tool_call, tool_name
from agent_factory.factory.ingest.files import ingest_paths
from agent_factory.factory.pipeline.units import iter_user_units
from agent_factory.factory.store import Store
from agent_factory.knowledge_packs import load_pack

PRODUCERS = Path(__file__).resolve().parents[1] / "fixtures" / "producers"
SHAPES = sorted(p.name for p in PRODUCERS.iterdir() if (p / "truth.json").exists()) if PRODUCERS.exists() else []
TRACE_SHAPES = [s for s in SHAPES if s != "genai_events"]
# The app's system prompt (tests/fixtures/producers/script.py), read from its source so the test imports nothing
# of the generator (which needs the producers' packages).
_SCRIPT = (PRODUCERS / "script.py").read_text(encoding="utf-8") if PRODUCERS.exists() else ""
_PROMPT = re.search(r'^SYSTEM_PROMPT = "(.*)"$', _SCRIPT, re.M)
SYSTEM_SHA = hashlib.sha256(_PROMPT.group(1).encode()).hexdigest() if _PROMPT else None


def _ingest(shape: str, tmp: Path) -> tuple[dict[str, Any], list[Any], Any, dict[str, bool]]:
    truth = json.loads((PRODUCERS / shape / "truth.json").read_text(encoding="utf-8"))
    files = [PRODUCERS / shape / f for f in truth["files"]["traces"]]
    with Store(tmp / "s.duckdb") as st:
        report = ingest_paths(st, files, pack=load_pack("default"))
        units = iter_user_units(st, window_days=30, horizon=st.horizon())
        convs = [c for u in units if u.view for c in u.view.conversations]
        complete = dict(st.con.execute("SELECT turn_id, complete FROM provenance").fetchall())
    return truth, convs, report, complete


def _tool_calls(turn: Any) -> list[tuple[str, Any]]:
    # As Conduct sees them: its tool-call clauses match `is_tool_call` spans by `tool_name`.
    return sorted(((tool_name(s), json.loads(s.input) if s.input else None)
                   for s in turn.spans if is_tool_call(s, ("*",))), key=repr)


def _tokens(turn: Any) -> dict[str, int | None] | None:
    t = turn.attributes.get("tokens")
    return None if t is None else {"input": t["input"], "output": t["output"]}


@pytest.mark.parametrize("shape", TRACE_SHAPES)
def test_producer_turns_match_the_app(shape: str, tmp_path: Path) -> None:
    truth, convs, report, complete = _ingest(shape, tmp_path)
    assert report.quarantined == 0 and report.pending_spans == 0
    turns = [t for c in convs for t in c.turns]
    assert len(turns) == len(truth["turns"]) == 12
    assert len(convs) == 6
    if truth["sets_user"]:
        assert {c.user_id for c in convs} == {t["user_id"] for t in truth["turns"]}
    got = {(c.id if truth["sets_session"] else None, t.index, t.request): t for c in convs for t in c.turns}
    for want in truth["turns"]:
        key = (want["session_id"] if truth["sets_session"] else None, want["index_in_session"], want["request"])
        assert key in got, (shape, key, sorted(got, key=repr))
        t = got[key]
        assert t.delivery == want["delivery"], (shape, key)
        # Every turn's answer is the app's: the partial text of the cut-off one, none for the failed call.
        assert t.answer == want["answer"], (shape, key)
        assert _tokens(t) == want["tokens"], (shape, key)
        assert _tool_calls(t) == sorted(((c["name"], c["arguments"]) for c in want["tool_calls"]), key=repr), \
            (shape, key)
        # Each model call carries the calls it made (what one-call-per-message clauses count).
        asked = sum(len(s.attributes.get("tool_calls") or ()) for s in t.spans if s.kind == "llm")
        assert asked == len(want["tool_calls"]), (shape, key)
        assert complete[t.id], (shape, key)
        assert t.attributes["system_prompt_sha256"] == SYSTEM_SHA, (shape, key)


def _turn_rows(st: Store) -> list[tuple[Any, ...]]:
    return sorted(st.con.execute("SELECT id, request, answer, delivery, n_spans FROM turns").fetchall())


@pytest.mark.skipif("split_files" not in SHAPES, reason="no split_files fixture")
@pytest.mark.parametrize("order", ["in order", "reversed"])
def test_traces_split_across_files_and_ingests_are_joined(order: str, tmp_path: Path) -> None:
    folder = PRODUCERS / "split_files"
    truth = json.loads((folder / "truth.json").read_text(encoding="utf-8"))
    parts = [folder / f for f in truth["files"]["traces"]]
    if order == "reversed":
        parts.reverse()
    with Store(tmp_path / "one.duckdb") as st:
        ingest_paths(st, parts, pack=load_pack("default"))
        together = _turn_rows(st)
    with Store(tmp_path / "apart.duckdb") as st:
        reports = [ingest_paths(st, [p], pack=load_pack("default")) for p in parts]
        apart = _turn_rows(st)
        spans = st.con.execute("SELECT count(*), count(DISTINCT (trace_id, id)) FROM spans").fetchone()
        staged = st.con.execute("SELECT count(*) FROM staged_spans").fetchone()
    # In order, spans whose parent is in a later file wait for it (kept, counted), then join their trace;
    # reversed, the roots come first and each later file's spans rebuild the turn already stored.
    assert any(r.pending_spans > 0 for r in reports[:-1]) == (order == "in order")
    assert all(r.quarantined == 0 and r.files[0].status == "ingested" for r in reports)
    assert reports[-1].pending_spans == 0 and staged == (0,)
    assert apart == together and len(apart) == 12
    assert spans is not None and spans[0] == spans[1]  # no span stored twice


@pytest.mark.skipif("genai_events" not in SHAPES, reason="no genai_events fixture")
def test_otlp_logs_are_turned_away_with_the_capture_mode_to_use(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as st:
        report = ingest_paths(st, [PRODUCERS / "genai_events" / "logs.json"], pack=load_pack("default"))
    assert report.accepted == 0 and report.quarantined == 1
    line = report.errors[0].line()
    assert "logs.json" in line and "span_only" in line and "\n" not in line
