"""A quarantine line may echo the value it rejects (a bearer token in a bad timestamp, an email as an id): what it
says is redacted before it is stored, printed or reported."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from agent_factory.factory.cli.app import app

TOKEN = "sk-proj-abcdefghijklmnopqrstuvwxyz123456"


def test_a_secret_echoed_by_a_quarantine_reason_is_redacted_everywhere(tmp_path: Path) -> None:
    f = tmp_path / "spans.jsonl"
    f.write_text(json.dumps({"timestamp": f"Bearer {TOKEN}", "trace_id": "1f0e1d2c3b4a59687766554433221100",
                             "span_id": "77fb7128d6f04862", "span_name": "x", "span_attributes": {},
                             "duration": "PT1S"}) + "\n", encoding="utf-8")
    for i, args in enumerate(([], ["--json"])):
        store = tmp_path / f"s{i}.duckdb"
        result = CliRunner().invoke(app, ["ingest", str(f), "--store", str(store), *args])
        assert result.exit_code == 1, result.output
        assert TOKEN not in result.output and "timestamp" in result.output
        con = duckdb.connect(str(store), read_only=True)
        stored = con.execute("SELECT * FROM quarantine").fetchall()
        con.close()
        assert len(stored) == 1 and TOKEN not in json.dumps(stored)


def test_an_email_used_as_a_conversation_id_is_redacted_in_a_conflict_line(tmp_path: Path) -> None:
    def chat(name: str, text: str) -> Path:
        p = tmp_path / name
        p.write_text(json.dumps({"id": "alice@example.com", "messages": [{"role": "user", "content": text}]}) + "\n",
                     encoding="utf-8")
        return p

    result = CliRunner().invoke(app, ["ingest", str(chat("a.jsonl", "A")), str(chat("b.jsonl", "B")), "--store",
                                      str(tmp_path / "s.duckdb")])
    assert result.exit_code == 3 and "alice@example.com" not in result.output and "[EMAIL]" in result.output
