"""`agent-factory watch DIR`: new files are ingested when they settle, and only new users' units are computed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_factory.factory.cli.app import app
from agent_factory.factory.pipeline.watch import Watcher
from agent_factory.factory.simulate import SimConfig, simulate
from agent_factory.factory.store import Store


def _watch(directory: Path, store: Path) -> list[dict]:
    res = CliRunner().invoke(app, ["watch", str(directory), "--store", str(store), "--pack", "business_analysis",
                                   "--interval", "0", "--settle", "0", "--cycles", "1", "--json"])
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()]


def test_watch_ingests_new_files_and_runs_only_on_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("AGENT_FACTORY_SMALL_MODEL", "AGENT_FACTORY_JURY", "AGENT_FACTORY_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    simulate(SimConfig(users=8, seed=31), tmp_path / "a")
    simulate(SimConfig(users=6, seed=32), tmp_path / "b")
    inbox, store = tmp_path / "inbox", tmp_path / "store.duckdb"
    inbox.mkdir()
    shutil.copy(tmp_path / "a" / "traces.otlp.jsonl", inbox / "a.otlp.jsonl")

    (first,) = _watch(inbox, store)
    assert first["new_files"] == [str(inbox / "a.otlp.jsonl")]
    assert first["run"]["plan"]["trigger"] == "first run"
    assert first["run"]["model_calls"] == 0

    (idle,) = _watch(inbox, store)  # a new watcher re-reads the file: already ingested, so no run
    assert idle["new_files"] == [] and idle["run"] is None

    shutil.copy(tmp_path / "b" / "traces.otlp.jsonl", inbox / "b.otlp.jsonl")
    (second,) = _watch(inbox, store)
    assert second["new_files"] == [str(inbox / "b.otlp.jsonl")]
    run = second["run"]
    assert run["plan"]["trigger"] == "1 new trace file(s)"
    with Store(store, read_only=True) as st:
        new_users = st.con.execute(
            "SELECT count(DISTINCT coalesce(t.user_id, t.conversation_id)) FROM turns t JOIN sources s"
            " ON t.source_id = s.source_id WHERE s.path LIKE '%b.otlp.jsonl'").fetchone()[0]  # type: ignore[index]
    assert new_users > 0
    assert new_users <= run["plan"]["users_visited"] < run["plan"]["users_total"]
    assert run["items"]["kept"] > 0


def test_a_file_still_being_written_waits(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text("{}\n", encoding="utf-8")
    w = Watcher(tmp_path, settle=60.0)
    ready, waiting = w.ready()
    assert ready == [] and waiting == [tmp_path / "t.jsonl"]
    ready, waiting = w.ready(now=(tmp_path / "t.jsonl").stat().st_mtime + 61)
    assert ready == [tmp_path / "t.jsonl"] and waiting == []
