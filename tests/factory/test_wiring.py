"""Wiring an outside review found broken, and small truths: the approved suite's templates are what renders, a
locked store is one line, a suite cannot silently run over a store ingested with another pack, excluded traffic
counts in Provenance's excluded share, `--version`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_factory.factory.cli.app import app
from agent_factory.factory.simulate import SimConfig, simulate
from agent_factory.factory.store import Store
from tests.conftest import REPO
from tests.fakes.openai_server import FakeOpenAIServer, fake_openai  # noqa: F401

SPEC = REPO / "specs" / "business_analysis_zh.md"
MARKER = "MARKER-FROM-APPROVED-SUITE"


def _ok(*args: str) -> dict:
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_an_approved_template_edit_is_what_renders(model_env: Path, fake_openai: FakeOpenAIServer) -> None:  # noqa: F811
    simulate(SimConfig(users=4, seed=3), model_env / "sim")
    store = model_env / "store.duckdb"
    _ok("ingest", str(model_env / "sim"), "--store", str(store), "--pack", "business_analysis")
    suite = model_env / "suite"
    _ok("build", "--spec", str(SPEC), "--pack", "business_analysis", "--out", str(suite), "--no-model")
    checklist = suite / "templates" / "checklist.j2"
    checklist.write_text(checklist.read_text(encoding="utf-8") + f"\n{MARKER}\n", encoding="utf-8")
    _ok("approve", str(suite), "--by", "test")
    report = _ok("run", "--store", str(store), "--suite", str(suite))
    assert report["model_calls"] == fake_openai.calls > 0
    prompts = [json.dumps(body["messages"], ensure_ascii=False) for body in fake_openai.requests]
    assert all(MARKER in p for p in prompts), "a prompt rendered from the package's template, not the suite's"


def test_a_template_edited_after_approval_does_not_render(model_env: Path, fake_openai: FakeOpenAIServer) -> None:  # noqa: F811
    simulate(SimConfig(users=3, seed=5), model_env / "sim")
    store = model_env / "store.duckdb"
    _ok("ingest", str(model_env / "sim"), "--store", str(store), "--pack", "business_analysis")
    suite = model_env / "suite"
    _ok("build", "--spec", str(SPEC), "--pack", "business_analysis", "--out", str(suite), "--no-model")
    _ok("approve", str(suite), "--by", "test")
    checklist = suite / "templates" / "checklist.j2"  # the working copy: not approved
    checklist.write_text(checklist.read_text(encoding="utf-8") + f"\n{MARKER}\n", encoding="utf-8")
    res = CliRunner().invoke(app, ["run", "--store", str(store), "--suite", str(suite), "--json"])
    assert res.exit_code == 0, res.output
    assert fake_openai.calls > 0
    assert not any(MARKER in json.dumps(b["messages"], ensure_ascii=False) for b in fake_openai.requests)


def test_a_locked_store_is_one_line_and_exit_1(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    with Store(store):
        pass
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True);"
         " time.sleep(60)", str(store)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        for args in (["stats"], ["run"], ["ingest", str(REPO / "tests" / "fixtures" / "chat" / "conversation.json")]):
            done = subprocess.run([sys.executable, "-m", "agent_factory", *args, "--store", str(store)],
                                  capture_output=True, text=True, cwd=tmp_path, timeout=120)
            lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
            assert done.returncode == 1, (args, done.stderr)
            assert len(lines) == 1, (args, done.stderr)
            assert "in use by process" in lines[0] and str(store.name) in lines[0]
            assert "Traceback" not in done.stderr
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.1)
    with Store(store):  # free again
        pass


def test_a_suite_of_another_pack_is_refused(no_model: Path) -> None:
    tmp_path = no_model
    simulate(SimConfig(users=3, seed=2), tmp_path / "sim")
    store = tmp_path / "store.duckdb"
    _ok("ingest", str(tmp_path / "sim"), "--store", str(store), "--pack", "default")
    suite = tmp_path / "suite"
    _ok("build", "--spec", str(SPEC), "--pack", "business_analysis", "--out", str(suite), "--no-model")
    _ok("approve", str(suite), "--by", "test")
    res = CliRunner().invoke(app, ["run", "--store", str(store), "--suite", str(suite)])
    assert res.exit_code == 1
    assert "ingested with pack 'default'" in res.output and "business_analysis" in res.output
    with Store(store, read_only=True) as st:
        assert st.con.execute("SELECT count(*) FROM results").fetchone()[0] == 0


def test_excluded_share_counts_every_turn(no_model: Path) -> None:
    tmp_path = no_model
    simulate(SimConfig(users=30, seed=4), tmp_path / "sim")
    store = tmp_path / "store.duckdb"
    _ok("ingest", str(tmp_path / "sim"), "--store", str(store), "--pack", "business_analysis")
    stats = _ok("stats", "--store", str(store))
    total = sum(stats["segments"].values())
    excluded = total - stats["segments"].get("real", 0)
    assert excluded > 0
    _ok("run", "--store", str(store), "--pack", "business_analysis")
    with Store(store, read_only=True) as st:
        value, n = st.con.execute("SELECT value, n FROM results WHERE component = 'provenance' AND metric = "
                                  "'excluded_share' AND stratum = 'all' AND unit_id IS NULL").fetchone()
    assert n == total
    assert float(value) == pytest.approx(excluded / total)


def test_version() -> None:
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0
    assert res.stdout.startswith("agent-factory ")
