"""The bad-input corpus: every kind of broken record gives one line naming file, record and field, no traceback,
and every good record beside it is still ingested. Exit code 3 when some records were accepted, 1 when none was.
A huge field is no broken record: it is cut, head and tail kept, and the cut declared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_factory.factory.cli.app import EXIT_QUARANTINED, EXIT_USER_ERROR, app
from agent_factory.factory.store import Store

T0 = 1_700_000_000_000_000_000


def chat(i: int, **over: object) -> str:
    rec: dict[str, object] = {
        "id": f"c{i}",
        "messages": [
            {"role": "user", "content": f"question {i}"},
            {"role": "assistant", "content": f"answer {i}"},
        ],
    }
    rec.update(over)
    return json.dumps(rec)


def span(trace: str, sid: str, parent: str | None = None, **over: object) -> str:
    rec: dict[str, object] = {
        "traceId": trace, "spanId": sid, "name": "step", "startTimeUnixNano": str(T0),
        "endTimeUnixNano": str(T0 + 1_000_000), "attributes": {"openinference.span.kind": "LLM"},
    }
    if parent:
        rec["parentSpanId"] = parent
    rec.update(over)
    return json.dumps(rec)


TA, TB, TC = "a" * 32, "b" * 32, "c" * 32
GOOD_SPANS = [span(TA, "1" * 16), span(TA, "2" * 16, "1" * 16), span(TB, "3" * 16)]
GOOD_CHAT = [chat(1), chat(2)]


def tau(i: int, **over: object) -> dict[str, object]:
    rec: dict[str, object] = {
        "task_id": i, "trial": 0, "reward": 1.0,
        "info": {"task": {"user_id": f"u{i}", "instruction": "x", "actions": [], "outputs": []}, "source": "user"},
        "traj": [{"role": "system", "content": "policy"}, {"role": "user", "content": "hi"},
                 {"role": "assistant", "content": "hello"}],
    }
    rec.update(over)
    return rec


@dataclass(frozen=True)
class Case:
    name: str
    filename: str
    content: bytes
    good: int
    """Records expected to be accepted."""
    bad: int = 1
    """Records expected to be quarantined."""
    field: str | None = None
    """A substring the reported field must contain (None: the error is about the file or the record)."""
    args: tuple[str, ...] = ()
    """Extra `ingest` options."""


def lines(*xs: str) -> bytes:
    return ("\n".join(xs) + "\n").encode("utf-8")


MIB = 1024 * 1024

CASES: list[Case] = [
    # --- chat JSON lines -----------------------------------------------------------------------
    Case("truncated-json-line", "c.jsonl", lines(*GOOD_CHAT, '{"id": "c9", "messages": [{"role": "us'), 2),
    Case("record-not-object", "c.jsonl", lines(*GOOD_CHAT, "42"), 2),
    Case("messages-wrong-type", "c.jsonl", lines(*GOOD_CHAT, chat(3, messages="hello")), 2, field="messages"),
    Case("missing-messages", "c.jsonl", lines(*GOOD_CHAT, json.dumps({"id": "c3", "user_id": "u"})), 2,
         field="messages"),
    Case("content-wrong-type", "c.jsonl",
         lines(*GOOD_CHAT, chat(3, messages=[{"role": "user", "content": 12345}])), 2, field="content"),
    Case("missing-role", "c.jsonl", lines(*GOOD_CHAT, chat(3, messages=[{"content": "hi"}])), 2, field="role"),
    Case("unknown-role", "c.jsonl", lines(*GOOD_CHAT, chat(3, messages=[{"role": "wizard", "content": "hi"}])), 2,
         field="role"),
    Case("duplicate-conversation-id", "c.jsonl", lines(*GOOD_CHAT, chat(1)), 2, field="id"),
    Case("tool-result-without-call", "c.jsonl", lines(*GOOD_CHAT, chat(3, messages=[
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "nope", "content": "{}"}])), 2, field="tool_call_id"),
    Case("tool-call-arguments-not-string", "c.jsonl", lines(*GOOD_CHAT, chat(3, messages=[
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "f", "arguments": 7}}]}])), 2,
         field="arguments"),
    # A record over the hard limit; its fields alone would only be cut (see test_huge_field_is_cut_and_declared).
    Case("record-over-hard-limit", "c.jsonl", lines(*GOOD_CHAT, chat(3, messages=[
        {"role": "user", "content": "y" * 600_000}, {"role": "assistant", "content": "z" * 600_000}])), 2,
         field="messages[0].content", args=("--max-field-chars", "500000", "--max-record-chars", "1000000")),
    Case("invalid-utf8", "c.jsonl", lines(*GOOD_CHAT) + b'{"id": "c3", "messages": "\xff\xfe"}\n', 2),
    Case("bare-nan", "c.jsonl", lines(*GOOD_CHAT, '{"id": "c3", "score": NaN, "messages": []}'), 2, field="score"),
    Case("bare-infinity", "c.jsonl", lines(*GOOD_CHAT, '{"id": "c3", "score": -Infinity, "messages": []}'), 2,
         field="score"),
    Case("deeply-nested", "c.jsonl", lines(*GOOD_CHAT, "[" * 100_000 + "]" * 100_000), 2),
    # --- spans, one per line -------------------------------------------------------------------
    Case("missing-span-id", "s.jsonl", lines(*GOOD_SPANS, json.dumps({"traceId": TC, "name": "x"})), 3,
         field="spanId"),
    Case("missing-trace-id", "s.jsonl", lines(*GOOD_SPANS, json.dumps({"spanId": "4" * 16, "name": "x"})), 3,
         field="traceId"),
    Case("span-id-wrong-type", "s.jsonl", lines(*GOOD_SPANS, span(TC, 12345)), 3, field="spanId"),  # type: ignore[arg-type]
    Case("duplicate-span-id", "s.jsonl", lines(*GOOD_SPANS, span(TB, "3" * 16)), 3, field="span_id"),
    Case("parent-cycle", "s.jsonl", lines(*GOOD_SPANS, span(TC, "5" * 16, "6" * 16), span(TC, "6" * 16, "5" * 16)),
         3, bad=2, field="parent"),
    Case("end-before-start", "s.jsonl", lines(*GOOD_SPANS, span(TC, "8" * 16, endTimeUnixNano=str(T0 - 5))), 3,
         field="endTimeUnixNano"),
    Case("unparsable-timestamp", "s.jsonl", lines(*GOOD_SPANS, span(TC, "9" * 16, startTimeUnixNano="yesterday")),
         3, field="startTimeUnixNano"),
    Case("negative-tokens", "s.jsonl", lines(*GOOD_SPANS, span(TC, "a" * 16, attributes={
        "openinference.span.kind": "LLM", "llm.token_count.prompt": -5})), 3, field="token"),
    Case("tokens-not-a-number", "s.jsonl", lines(*GOOD_SPANS, span(TC, "b" * 16, attributes={
        "openinference.span.kind": "LLM", "llm.token_count.completion": "many"})), 3, field="token"),
    Case("attributes-not-object", "s.jsonl", lines(*GOOD_SPANS, span(TC, "c" * 16, attributes="oops")), 3,
         field="attributes"),
    Case("trail-negative-duration", "s.jsonl", lines(*GOOD_SPANS, json.dumps({
        "trace_id": TC, "span_id": "d" * 16, "parent_span_id": None, "span_name": "x",
        "timestamp": "2025-03-19T16:32:08Z", "duration": "-PT5S", "span_attributes": {}})), 3, field="duration"),
    # --- whole documents -----------------------------------------------------------------------
    Case("truncated-json-document", "tau.json",
         (json.dumps([tau(1), tau(2)])[:-1] + ', {"task_id": 3, "tri').encode(), 2),
    Case("reward-not-a-number", "tau.json", json.dumps([tau(1), tau(2), tau(3, reward="high")]).encode(), 2,
         field="reward"),
    Case("otlp-span-missing-id", "o.json", json.dumps({"resourceSpans": [{"resource": {"attributes": []},
         "scopeSpans": [{"scope": {}, "spans": [
             {"traceId": TA, "spanId": "1" * 16, "name": "ok", "startTimeUnixNano": str(T0),
              "endTimeUnixNano": str(T0 + 1)},
             {"traceId": TA, "name": "no id"}]}]}]}).encode(), 1, field="spanId"),
    Case("empty-file", "e.jsonl", b"", 0),
    Case("whitespace-only-file", "w.jsonl", b"\n\n   \n", 0),
    Case("unknown-format", "u.jsonl", lines(json.dumps({"hello": "world"})), 0),
    Case("binary-garbage", "g.json", bytes(range(256)) * 4, 0),
    Case("step-log-bad-timestamp", "steps.jsonl", lines(
        json.dumps({"run_id": "r1", "steps": [{"index": 0, "type": "tool_call", "name": "f",
                                                "started_at": "2026-01-01T00:00:00Z", "duration_ms": 5}]}),
        json.dumps({"run_id": "r2", "steps": [{"index": 0, "type": "tool_call", "name": "f",
                                                "started_at": "not a time", "duration_ms": 5}]})), 1,
         field="started_at"),
    Case("run-contract-unknown-step", "rc.jsonl", lines(
        json.dumps({"run_id": "r1", "steps": [{"type": "thought", "content": "plan"},
                                              {"type": "final_output", "content": "done"}]}),
        json.dumps({"run_id": "r2", "steps": [{"type": "thought", "content": "plan"},
                                              {"type": "teleport", "content": "??"}]})), 1, field="type"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case: Case, tmp_path: Path) -> None:
    src = tmp_path / case.filename
    src.write_bytes(case.content)
    result = CliRunner().invoke(app, ["ingest", str(src), "--store", str(tmp_path / "s.duckdb"), "--json",
                                      *case.args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    # Nothing accepted is a failure of the whole ingest, not a partial one.
    assert result.exit_code == (EXIT_QUARANTINED if case.good else EXIT_USER_ERROR), result.output
    report = json.loads(result.stdout)
    assert report["accepted"] == case.good
    assert report["quarantined"] == case.bad
    assert report["read"] == report["accepted"] + report["quarantined"]
    assert len(report["errors"]) == case.bad
    for e in report["errors"]:
        assert e["source"] == str(src)
        assert e["location"]
        assert "\n" not in e["message"] and "Traceback" not in e["message"]
        if case.field is not None:
            assert e["field"] is not None and case.field in e["field"], e


def test_corpus_has_thirty_kinds() -> None:
    assert len({c.name for c in CASES}) >= 30


def test_human_output_is_one_line_per_error_without_traceback(tmp_path: Path) -> None:
    src = tmp_path / "mixed.jsonl"
    src.write_bytes(lines(*GOOD_CHAT, chat(3, messages=[{"role": "wizard", "content": "hi"}]), "{oops"))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "300"}
    proc = subprocess.run(
        [sys.executable, "-m", "agent_factory", "ingest", str(src), "--store", str(tmp_path / "s.duckdb")],
        capture_output=True, text=True, env=env, check=False,
    )
    assert proc.returncode == EXIT_QUARANTINED
    err_lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(err_lines) == 2 and "Traceback" not in proc.stderr
    assert err_lines[0].startswith(f"{src}: line 3: messages[0].role:")
    assert err_lines[1].startswith(f"{src}: line 4:")
    assert "read 4, accepted 2, quarantined 2" in proc.stdout


def test_huge_field_is_cut_and_declared(tmp_path: Path) -> None:
    big = "HEAD:" + "x" * (12 * MIB) + ":TAIL"
    src = tmp_path / "c.jsonl"
    src.write_bytes(lines(*GOOD_CHAT, chat(3, messages=[{"role": "user", "content": big},
                                                        {"role": "assistant", "content": "ok"}])))
    store = tmp_path / "s.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(src), "--store", str(store), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["read"], report["accepted"], report["quarantined"]) == (3, 3, 0)
    assert report["files"][0]["truncated"] == 1
    [cut] = report["truncated"]
    assert (cut["source"], cut["location"], cut["field"]) == (str(src), "line 3", "messages[0].content")
    assert cut["original_chars"] == len(big) and 8 * MIB - 200 <= cut["kept_chars"] <= 8 * MIB
    with Store(store) as st:
        request, record = st.con.execute(
            "SELECT t.request, p.record FROM turns t JOIN provenance p ON p.turn_id = t.id WHERE t.id = 'c3/turn-0'"
        ).fetchone()  # type: ignore[misc]
    assert len(request) == cut["kept_chars"] and request.startswith("HEAD:x") and request.endswith("x:TAIL")
    fields = {f["label"]: f for f in json.loads(record)["coverage"]["fields"]}
    req = fields["request"]
    assert req["truncated"] and req["reasons"] == ["cut_at_ingest"] and not req["complete"]
    assert (req["declared_length"], req["declared_by"]) == (len(big), "ingest")
    marker = request[req["pointer"]["start"]:req["pointer"]["end"]]
    cut_chars = len(big) - (len(request) - len(marker) - 2)  # head + tail kept, with a newline either side
    assert marker == f"[agent-factory: {cut_chars} of {len(big)} characters cut here at ingest]"
    assert fields["answer"]["complete"]


def test_field_limit_is_an_ingest_option(tmp_path: Path) -> None:
    src = tmp_path / "c.jsonl"
    src.write_bytes(lines(*GOOD_CHAT, chat(3, messages=[{"role": "user", "content": "q" * 5000}])))
    result = CliRunner().invoke(app, ["ingest", str(src), "--store", str(tmp_path / "s.duckdb"), "--json",
                                      "--max-field-chars", "2000"])
    assert result.exit_code == 0, result.output
    [cut] = json.loads(result.stdout)["truncated"]
    assert cut["original_chars"] == 5000 and cut["kept_chars"] <= 2000
    too_small = CliRunner().invoke(app, ["ingest", str(src), "--store", str(tmp_path / "t.duckdb"),
                                         "--max-field-chars", "10"])
    assert too_small.exit_code == 2  # usage error: the marker alone would not fit


def test_nothing_accepted_exits_1_and_says_so(tmp_path: Path) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_bytes(lines(chat(1, messages=[{"role": "wizard", "content": "hi"}]), "{oops"))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "300"}
    proc = subprocess.run(
        [sys.executable, "-m", "agent_factory", "ingest", str(src), "--store", str(tmp_path / "s.duckdb")],
        capture_output=True, text=True, env=env, check=False,
    )
    assert proc.returncode == EXIT_USER_ERROR
    assert "read 2, accepted 0, quarantined 2" in proc.stdout
    assert "no record was accepted" in proc.stderr and "Traceback" not in proc.stderr


def test_an_orphan_span_is_kept_pending_not_quarantined(tmp_path: Path) -> None:
    # Its parent may be in a file not read yet (a rotating exporter): it waits, and the wait is reported once.
    src = tmp_path / "s.jsonl"
    src.write_bytes(lines(*GOOD_SPANS, span(TC, "7" * 16, "f" * 16)))
    store = str(tmp_path / "s.duckdb")
    result = CliRunner().invoke(app, ["ingest", str(src), "--store", store, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["accepted"], report["quarantined"]) == (4, 0)
    assert (report["pending_spans"], report["pending_traces"]) == (1, 1)
    assert report["files"][0]["pending"] == 1
    human = CliRunner().invoke(app, ["ingest", str(src), "--store", str(tmp_path / "t.duckdb")])
    assert "1 span(s) of 1 trace(s) wait for their parent span" in human.output
