"""Ingest of files as users' tools write them: byte-order marks, UTF-16, gzip, other encodings, lone surrogates,
old Mac line ends; and of hostile JSON (100,000 levels deep) within bounded time and memory."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_factory.factory.cli.app import EXIT_QUARANTINED, EXIT_USER_ERROR, app
from agent_factory.factory.ingest.files import IngestReport, expand_paths, ingest_paths
from agent_factory.factory.store import Store
from agent_factory.knowledge_packs import load_pack
from tests.conftest import FIXTURES, REPO

_spec = importlib.util.spec_from_file_location("deep_json_bench", REPO / "bench" / "deep_json_bench.py")
assert _spec and _spec.loader
deep_json_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(deep_json_bench)

TAU = FIXTURES / "chat" / "tau_small.json"
T0 = 1_700_000_000_000_000_000


def _ingest(tmp_path: Path, *paths: Path, store: str = "s.duckdb") -> IngestReport:
    with Store(tmp_path / store) as st:
        return ingest_paths(st, list(paths), pack=load_pack("default"), workers=1)


def _counts(r: IngestReport) -> tuple[int, int, int]:
    return r.read, r.accepted, r.quarantined


def span(i: int, **over: object) -> str:
    rec: dict[str, object] = {"traceId": "a" * 32, "spanId": f"{i:016x}", "name": f"s{i}",
                              "startTimeUnixNano": str(T0 + i), "endTimeUnixNano": str(T0 + i + 1000)}
    rec.update(over)
    return json.dumps(rec)


@pytest.fixture(scope="module")
def tau_counts(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, int, int]:
    return _counts(_ingest(tmp_path_factory.mktemp("plain"), TAU))


@pytest.mark.parametrize(("encoding", "bom"), [
    ("utf-8", b"\xef\xbb\xbf"), ("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff"), ("utf-32-le", b"\xff\xfe\0\0"),
])
def test_bom_and_utf16_documents_read_like_utf8(tmp_path: Path, tau_counts: tuple[int, int, int], encoding: str,
                                                bom: bytes) -> None:
    src = tmp_path / "tau.json"
    src.write_bytes(bom + TAU.read_text(encoding="utf-8").encode(encoding))
    report = _ingest(tmp_path, src)
    assert _counts(report) == tau_counts
    assert [f.path for f in report.files] == [str(src)] and report.files[0].format == "tau-bench"
    assert all(q.source == str(src) for q in report.errors)  # the original file, never a temporary one


def test_gzip_files_in_a_directory_are_found_and_read(tmp_path: Path, tau_counts: tuple[int, int, int]) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "tau.json.gz").write_bytes(gzip.compress(TAU.read_bytes()))
    (d / "spans.jsonl.gz").write_bytes(gzip.compress((span(1) + "\n" + span(2) + "\n{broken\n").encode()))
    (d / "more.ndjson.gz").write_bytes(gzip.compress((span(3) + "\n").encode()))
    (d / "notes.txt.gz").write_bytes(gzip.compress(b"not traces"))
    assert [p.name for p in expand_paths([d])] == ["more.ndjson.gz", "spans.jsonl.gz", "tau.json.gz"]
    report = _ingest(tmp_path, d)
    by_name = {Path(f.path).name: f for f in report.files}
    assert (by_name["tau.json.gz"].read, by_name["tau.json.gz"].accepted) == tau_counts[:2]
    assert (by_name["spans.jsonl.gz"].read, by_name["spans.jsonl.gz"].accepted) == (3, 2)
    bad = [q for q in report.errors if q.location == "line 3"]
    assert [q.source for q in bad] == [str(d / "spans.jsonl.gz")]
    with Store(tmp_path / "s.duckdb") as st:
        paths = {r[0] for r in st.con.execute("SELECT path FROM sources").fetchall()}
        stored = {r[0] for r in st.con.execute("SELECT path FROM quarantine").fetchall()}
    assert paths == {str(d / n) for n in by_name} and stored <= paths
    again = _ingest(tmp_path, d)  # the digest is the compressed file's: nothing changes
    assert {f.status for f in again.files} == {"already-ingested"}


def test_a_file_in_another_encoding_is_refused_with_a_hint(tmp_path: Path) -> None:
    src = tmp_path / "latin.jsonl"
    text = "".join(json.dumps({"id": f"c{i}", "messages": [{"role": "user", "content": "caf\u00e9 cr\u00e8me"},
                                                             {"role": "assistant", "content": "d\u00e9j\u00e0 vu"}]},
                              ensure_ascii=False) + "\n" for i in range(20))
    src.write_bytes(text.encode("cp1252"))
    report = _ingest(tmp_path, src)
    assert report.accepted == 0 and report.errors
    assert all("convert it to UTF-8" in q.message for q in report.errors), [q.line() for q in report.errors]


def test_a_lone_surrogate_costs_its_record_only_and_no_later_file(tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    a.write_text(span(1) + "\n" + span(2, name="x\\ud800y").replace("\\\\ud800", "\\ud800") + "\n" + span(3) + "\n")
    b = tmp_path / "b.json"
    b.write_text("[" + span(4) + "," + span(5, name="\\udc00").replace("\\\\udc00", "\\udc00") + "]")
    c = tmp_path / "c.jsonl"
    c.write_text(span(6) + "\n")
    report = _ingest(tmp_path, a, b, c)
    assert [(f.read, f.accepted, f.quarantined) for f in report.files] == [(3, 2, 1), (2, 1, 1), (1, 1, 0)]
    assert [(q.location, q.field) for q in report.errors] == [("line 2", "name"), ("record 1", "name")]
    with Store(tmp_path / "s.duckdb") as st:
        names = sorted(r[0] for r in st.con.execute("SELECT name FROM spans").fetchall())
    assert names == ["s1", "s3", "s4", "s6"]  # nothing stored altered


def test_lone_cr_line_ends_count_each_record(tmp_path: Path) -> None:
    src = tmp_path / "mac.jsonl"
    src.write_bytes(b"\r".join(s.encode() for s in (span(1), span(2), "{broken", span(4))) + b"\r")
    report = _ingest(tmp_path, src)
    assert _counts(report) == (4, 3, 1) and [q.location for q in report.errors] == ["line 3"]


def test_lone_cr_line_ends_count_each_record_in_worker_processes(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_factory.factory.ingest import lines as ingest_lines

    monkeypatch.setattr(ingest_lines, "MIN_BYTES_FOR_WORKERS", 0)
    monkeypatch.setattr(ingest_lines, "CHUNK_BYTES", 300)
    body = b"\r".join(s.encode() for s in [span(i) for i in range(1, 20)] + ["{broken", span(30)]) + b"\r"
    src = tmp_path / "mac.jsonl"
    src.write_bytes(body)
    gz = tmp_path / "mac-again.jsonl.gz"  # the same records (stored once), gzipped: its lines read by workers too
    gz.write_bytes(gzip.compress(body.replace(b"{broken", b"{broken again")))
    with Store(tmp_path / "w.duckdb") as st:
        report = ingest_paths(st, [src, gz], pack=load_pack("default"), workers=2)
    assert [(f.read, f.quarantined) for f in report.files] == [(21, 1), (21, 1)]
    assert [(q.source, q.location) for q in report.errors] == [(str(src), "line 20"), (str(gz), "line 20")]


def test_seconds_in_a_unix_nano_field_are_refused(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    src.write_text(span(1) + "\n" + span(2, startTimeUnixNano="1700000000", endTimeUnixNano="1700000001") + "\n")
    report = _ingest(tmp_path, src)
    assert _counts(report) == (2, 1, 1)
    (q,) = report.errors
    assert q.field == "startTimeUnixNano" and "seconds" in q.message


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["ingest", *args])
    return result.exit_code, result.output


def test_exit_codes_of_directories(tmp_path: Path) -> None:
    only_gz = tmp_path / "gz"
    only_gz.mkdir()
    (only_gz / "t.jsonl.gz").write_bytes(gzip.compress((span(1) + "\n").encode()))
    assert _cli(str(only_gz), "--store", str(tmp_path / "a.duckdb"))[0] == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "readme.txt").write_text("no traces here")
    code, out = _cli(str(empty), "--store", str(tmp_path / "b.duckdb"))
    assert code == EXIT_USER_ERROR and "no trace file" in out
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "x.json").write_bytes('[{"id": "c1", "caf\u00e9": 1}]'.encode("cp1252"))
    assert _cli(str(legacy), "--store", str(tmp_path / "c.duckdb"))[0] == EXIT_USER_ERROR
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "t.jsonl").write_text(span(1) + "\n{broken\n")
    assert _cli(str(mixed), "--store", str(tmp_path / "d.duckdb"))[0] == EXIT_QUARANTINED


@pytest.mark.parametrize("name", list(deep_json_bench.cases()))
def test_deep_documents_are_refused_in_bounded_time_and_memory(tmp_path: Path, name: str) -> None:
    text, fmt, accepted = deep_json_bench.cases()[name]
    got = deep_json_bench.run_case(tmp_path, name, text, fmt)
    assert got["seconds"] < deep_json_bench.MAX_SECONDS and got["peak_rss_mb"] < deep_json_bench.MAX_RSS_MB, got
    assert got["accepted"] == accepted and got["quarantined"] >= 1 and got["errors"], got
