"""A store never writes into what is not a store: a foreign DuckDB file is refused unchanged by every command, read
commands open read-only, a newer store says to upgrade; a damaged store and a full disk end in one line, exit 1;
stats counts pending spans; a command that fails before writing leaves no store file behind."""

from __future__ import annotations

import hashlib
import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from agent_factory.errors import StoreError
from agent_factory.factory.cli.app import app
from agent_factory.factory.store import SCHEMA_VERSION, Store

CHAT = {"id": 1, "user_id": "alice", "messages": [{"role": "user", "content": "A"}, {"role": "assistant", "content": "a"}]}


def _foreign(path: Path) -> str:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE events (id INTEGER, source_id VARCHAR)")
    con.execute("INSERT INTO events SELECT i, NULL FROM range(100) t(i)")
    con.close()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _chat(tmp_path: Path) -> Path:
    f = tmp_path / "a.jsonl"
    f.write_text(json.dumps(CHAT) + "\n", encoding="utf-8")
    return f


@pytest.mark.parametrize("command", [["stats"], ["summary"], ["run"], ["show", "1"], ["report"],
                                     ["export", "--level", "turn", "--out", "x.csv"], ["ingest", "A"]])
def test_a_foreign_duckdb_file_is_refused_unchanged_by_every_command(tmp_path: Path, command: list[str]) -> None:
    db = tmp_path / "other.duckdb"
    before = _foreign(db)
    args = [str(_chat(tmp_path)) if a == "A" else str(tmp_path / a) if a.endswith(".csv") else a for a in command]
    result = CliRunner().invoke(app, [*args, "--store", str(db)])
    assert result.exit_code == 1, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "no agent-factory store" in lines[0] and "Traceback" not in result.output
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM events").fetchone() == (100,)
    assert [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()] == ["events"]
    con.close()


def test_the_library_refuses_it_too_and_a_store_opens(tmp_path: Path) -> None:
    db = tmp_path / "other.duckdb"
    before = _foreign(db)
    for read_only in (False, True):
        with pytest.raises(StoreError, match="no agent-factory store"):
            Store(db, read_only=read_only)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    with Store(tmp_path / "s.duckdb"):
        pass
    with Store(tmp_path / "s.duckdb", read_only=True) as st:
        assert st.get_meta("store") == "agent-factory" and st.get_meta("schema_version") == str(SCHEMA_VERSION)


def test_a_file_that_is_no_database_is_refused_unchanged(tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("my notes\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["ingest", str(_chat(tmp_path)), "--store", str(f)])
    assert result.exit_code == 1 and f.read_text(encoding="utf-8") == "my notes\n"


def test_read_commands_open_read_only(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    assert CliRunner().invoke(app, ["ingest", str(_chat(tmp_path)), "--store", str(store)]).exit_code == 0
    before = hashlib.sha256(store.read_bytes()).hexdigest()
    # Another process holding the store read-only lets read commands in; a read-write open would be refused.
    holder = duckdb.connect(str(store), read_only=True)
    try:
        for command in (["stats"], ["summary"], ["show", "1"]):
            result = CliRunner().invoke(app, [*command, "--store", str(store)])
            assert "in use" not in result.output, (command, result.output)
    finally:
        holder.close()
    assert hashlib.sha256(store.read_bytes()).hexdigest() == before


def test_read_commands_on_a_missing_store_create_nothing(tmp_path: Path) -> None:
    store = tmp_path / "none.duckdb"
    for command in (["stats"], ["summary"], ["show", "1"]):
        result = CliRunner().invoke(app, [*command, "--store", str(store)])
        assert result.exit_code == 1 and "no store" in result.output
    assert not store.exists()


def test_ingest_of_a_missing_path_leaves_no_store(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(tmp_path / "missing.jsonl"), "--store", str(store)])
    assert result.exit_code == 1 and "no such file" in result.output
    assert not store.exists()


def test_a_newer_store_says_to_upgrade(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    with Store(store):
        pass
    con = duckdb.connect(str(store))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    con.close()
    result = CliRunner().invoke(app, ["stats", "--store", str(store)])
    assert result.exit_code == 1
    assert "upgrade" in result.output and "remove" not in result.output


def test_a_damaged_store_is_one_line_and_exit_1(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    assert CliRunner().invoke(app, ["ingest", str(_chat(tmp_path)), "--store", str(store)]).exit_code == 0
    size = store.stat().st_size
    for cut in (5_000, size // 3, size - 300_000):
        damaged = tmp_path / f"d{cut}.duckdb"
        damaged.write_bytes(store.read_bytes()[:cut])
        for command in (["stats"], ["summary"], ["run"], ["show", "1"], ["ingest", str(_chat(tmp_path))]):
            result = CliRunner().invoke(app, [*command, "--store", str(damaged)])
            lines = [ln for ln in result.output.splitlines() if ln.strip()]
            assert result.exit_code == 1, (cut, command, result.output)
            assert "Traceback" not in result.output and len(lines) == 1, (cut, command, result.output)
            assert str(damaged.name) in lines[0] or "damaged" in lines[0]


def test_a_full_disk_during_ingest_is_one_line_and_exit_1(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    with big.open("w", encoding="utf-8") as f:
        for i in range(3000):
            f.write(json.dumps({"id": i, "user_id": f"u{i}", "messages": [
                {"role": "user", "content": f"question {i} " * 50}, {"role": "assistant", "content": "answer " * 200}]})
                + "\n")
    store = tmp_path / "s.duckdb"

    def small_disk() -> None:  # files may not grow past 4 MB: writes fail as on a full disk (EFBIG)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4_000_000, 4_000_000))

    proc = subprocess.run([sys.executable, "-m", "agent_factory", "ingest", str(big), "--store", str(store)],
                          preexec_fn=small_disk, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 1, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "disk is full" in lines[0] and "Traceback" not in proc.stderr
    # Nothing half-written: the store opens, and holds no row of the file that was cut off.
    result = CliRunner().invoke(app, ["stats", "--json", "--store", str(store)])
    assert result.exit_code == 0 and json.loads(result.output)["all"]["sources"] == 0


def test_stats_reports_pending_spans(tmp_path: Path) -> None:
    child = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [{
        "traceId": "a" * 32, "spanId": "b" * 16, "parentSpanId": "c" * 16, "name": "tool",
        "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000"}]}]}]}
    f = tmp_path / "child.otlp.jsonl"
    f.write_text(json.dumps(child) + "\n", encoding="utf-8")
    store = tmp_path / "s.duckdb"
    assert CliRunner().invoke(app, ["ingest", str(f), "--store", str(store)]).exit_code == 0
    data = json.loads(CliRunner().invoke(app, ["stats", "--json", "--store", str(store)]).output)
    assert data["pending"] == {"spans": 1, "traces": 1}
    text = CliRunner().invoke(app, ["stats", "--store", str(store)]).output
    assert "pending spans" in text
