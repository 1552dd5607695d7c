"""Ingest into the store: idempotence, atomicity per file, read = accepted + quarantined, round trips."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_factory.adapters.model import Span
from agent_factory.factory.ingest.files import ingest_paths
from agent_factory.factory.store import Batch, Store, span_row
from agent_factory.factory.store.ingest import iter_staged_spans
from agent_factory.knowledge_packs import load_pack
from tests.conftest import REPO

_spec = importlib.util.spec_from_file_location("ingest_bench", REPO / "bench" / "ingest_bench.py")
assert _spec and _spec.loader
ingest_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ingest_bench)


def _table_counts(store: Store) -> dict[str, int]:
    return {
        t: store.con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
        for t in ("spans", "turns", "conversations", "events", "provenance", "quarantine", "sources")
    }


def _chat_file(path: Path, n: int) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({
                "id": f"conv-{i}", "user_id": f"user-{i % 3}",
                "messages": [
                    {"role": "user", "content": f"what were sales in week {i}?"},
                    {"role": "assistant", "content": f"Sales in week {i} were {100 + i} units."},
                ],
            }) + "\n")
    return path


def test_ingest_is_idempotent_by_content(tmp_path: Path) -> None:
    src = ingest_bench.write_synthetic_otlp(tmp_path / "a.otlp.jsonl", spans=400)
    copy = tmp_path / "copy-of-a.jsonl"
    copy.write_bytes(src.read_bytes())
    pack = load_pack("default")
    with Store(tmp_path / "s.duckdb") as st:
        first = ingest_paths(st, [src], pack=pack)
        before = _table_counts(st)
        again = ingest_paths(st, [src, copy], pack=pack)
        after = _table_counts(st)
    assert first.read == 400 and first.accepted == 400 and first.quarantined == 0
    assert before["spans"] == 400 and before["turns"] > 100
    assert [f.status for f in again.files] == ["already-ingested", "already-ingested"]
    assert again.read == 0 and after == before


def test_ingest_runs_with_duckdb_memory_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Ingest only appends and reads its staged spans once: DuckDB's cache would only add to the peak.
    from agent_factory.factory.store.base import limit_bytes

    monkeypatch.delenv("AGENT_FACTORY_DUCKDB_MEMORY", raising=False)
    src = ingest_bench.write_synthetic_otlp(tmp_path / "a.otlp.jsonl", spans=50)
    with Store(tmp_path / "s.duckdb") as st:
        def limit() -> float | None:
            return limit_bytes(st.con.execute("SELECT current_setting('memory_limit')").fetchone()[0])

        seen: list[float | None] = []
        ingest_paths(st, [src], pack=load_pack("default"), on_file=lambda _: seen.append(limit()))
        assert seen == [pytest.approx(64e6, rel=0.01)]
        assert limit() == pytest.approx(256e6, rel=0.01)


def test_read_equals_accepted_plus_quarantined(tmp_path: Path) -> None:
    src = _chat_file(tmp_path / "chat.jsonl", 5)
    with open(src, "a", encoding="utf-8") as f:
        f.write('{"id": "broken", "messages": [{"role": "user", "content": "hi"}\n')  # truncated JSON
        f.write(json.dumps({"id": "conv-1", "messages": [{"role": "user", "content": "dup"}]}) + "\n")
    with Store(tmp_path / "s.duckdb") as st:
        rep = ingest_paths(st, [src], pack=load_pack("default"))
        counts = _table_counts(st)
    assert (rep.read, rep.accepted, rep.quarantined) == (7, 5, 2)
    assert counts["conversations"] == 5 and counts["turns"] == 5 and counts["quarantine"] == 2
    locations = sorted(e.location for e in rep.errors)
    assert locations == ["line 6", "line 7"]
    assert {e.field for e in rep.errors} >= {"id"}


def test_turns_round_trip_with_spans(tmp_path: Path) -> None:
    src = tmp_path / "t.otlp.jsonl"
    ingest_bench.write_synthetic_otlp(src, spans=50)
    with Store(tmp_path / "s.duckdb") as st:
        ingest_paths(st, [src], pack=load_pack("default"))
        turns = list(st.iter_turns(segment=None))
    assert sum(len(t.spans) for t in turns) == 50
    first = json.loads(src.read_text(encoding="utf-8").splitlines()[0])
    spans = first["resourceSpans"][0]["scopeSpans"][0]["spans"]
    t0 = next(t for t in turns if t.id == spans[0]["traceId"])
    assert [s.id for s in t0.spans] == [s["spanId"] for s in spans]
    assert t0.spans[0].parent_id is None and all(s.parent_id == spans[0]["spanId"] for s in t0.spans[1:])
    assert t0.request == "show me sales for region 0"
    assert t0.delivery == "delivered" and t0.latency_ms == pytest.approx(40_000.0)


def _running(arg: str) -> list[int]:
    """Live processes (not zombies) whose command line holds `arg` (Linux's /proc; none elsewhere)."""
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            if arg.encode() in (d / "cmdline").read_bytes() and (d / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                out.append(int(d.name))
        except (OSError, IndexError):  # it ended meanwhile
            continue
    return out


@pytest.mark.slow
def test_sigkill_mid_file_leaves_nothing_half_ingested(tmp_path: Path) -> None:
    small = tmp_path / "small.otlp.jsonl"
    big = tmp_path / "big.otlp.jsonl"
    ingest_bench.write_synthetic_otlp(small, spans=100, seed=1)
    ingest_bench.write_synthetic_otlp(big, spans=60_000, seed=2)
    store = tmp_path / "s.duckdb"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    cli = [sys.executable, "-m", "agent_factory", "ingest", "--store", str(store)]
    assert subprocess.run([*cli, str(small)], env=env, capture_output=True, check=False).returncode == 0
    proc = subprocess.Popen([*cli, str(big)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Killed once its workers are forked and at work (a fixed sleep raced them on a loaded machine).
    deadline = time.monotonic() + 30
    forked = _running(str(big))  # the ingest and the workers it forked (their command line is its own)
    while len(forked) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
        forked = _running(str(big))
    time.sleep(1.0)
    assert proc.poll() is None, "ingest finished before it could be killed; make the file bigger"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # Its workers die with it: a killed ingest's workers lived on, asleep, for good.
    deadline = time.monotonic() + 10
    while _running(str(big)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if sys.platform.startswith("linux"):
        assert len(forked) > 1 and _running(str(big)) == []
    with Store(store) as st:
        counts = _table_counts(st)
        paths = [r[0] for r in st.con.execute("SELECT path FROM sources").fetchall()]
    assert paths == [str(small)]
    assert counts["spans"] == 100
    # The interrupted file is ingested whole on the next try.
    assert subprocess.run([*cli, str(big)], env=env, capture_output=True, check=False).returncode == 0
    with Store(store) as st:
        assert _table_counts(st)["spans"] == 60_100


def test_a_directory_ignore_file_keeps_listed_files_out(tmp_path: Path) -> None:
    from agent_factory.factory.ingest.files import IGNORE_FILE, expand_paths

    d = tmp_path / "traces"
    (d / "day2").mkdir(parents=True)
    for name in ("a.jsonl", "labels.jsonl", "notes.txt", "day2/b.jsonl", "day2/answers.json", ".hidden.jsonl"):
        (d / name).write_text("{}\n", encoding="utf-8")
    (d / IGNORE_FILE).write_text("# not traces\nlabels.jsonl\n\n*/answers.json\n", encoding="utf-8")
    (d / "day2" / IGNORE_FILE).write_text("b.jsonl\n", encoding="utf-8")
    assert expand_paths([d]) == [d / "a.jsonl"]
    # A file named on the command line is read whatever an ignore file says.
    assert expand_paths([d / "labels.jsonl"]) == [d / "labels.jsonl"]


def test_staged_spans_come_back_by_trace_then_arrival_in_any_slicing(tmp_path: Path) -> None:
    arrivals = [("t3", "a"), ("t1", "b"), ("t3", "c"), ("t2", "d"), ("t1", "e"), ("t4", "f"), ("t2", "g")]
    with Store(tmp_path / "s.duckdb") as st:
        staged = Batch(st, "staged_spans")
        for seq, (trace, sid) in enumerate(arrivals):
            staged.add(span_row(Span(id=sid, trace_id=trace), seq=seq, source_id="src"))
        staged.flush()
        want = [(t, s) for t, s in sorted(arrivals, key=lambda a: (a[0], arrivals.index(a)))]
        for traces, part_bytes in ((1, 1 << 30), (2, 1 << 30), (3, 1 << 30), (100, 1 << 30), (100, 1), (100, 500)):
            got = [(s.trace_id, s.id) for s in iter_staged_spans(st, "src", traces=traces, batch=2,
                                                                part_bytes=part_bytes)]
            assert got == want, (traces, part_bytes)
        assert list(iter_staged_spans(st, "other")) == []


def _wide_otlp(path: Path, *, spans: int, text_chars: int) -> Path:
    """The synthetic OTLP file with a long `input.value` on every span (a prompt of `text_chars`)."""
    ingest_bench.write_synthetic_otlp(path, spans=spans)
    text = ("The quarterly sales table lists each region's revenue. " * (text_chars // 55 + 1))[:text_chars]
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for span in record["resourceSpans"][0]["scopeSpans"][0]["spans"]:
            span["attributes"].append({"key": "input.value", "value": {"stringValue": text}})
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_spans_of_long_prompts_ingest_whatever_duckdbs_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 3,000 spans of 10 kB under a 24 MB limit: one DuckDB vector of them (2,048 values) is 20 MB, so a fixed
    # limit failed the staging insert (and a checkpoint of long rows invalidated the store). The limit makes
    # room for three vectors of the widest rows, and a reopened store (the run that reads them) keeps it.
    from agent_factory.factory.store.base import limit_bytes

    monkeypatch.setenv("AGENT_FACTORY_DUCKDB_MEMORY", "24MB")
    src = _wide_otlp(tmp_path / "wide.otlp.jsonl", spans=3000, text_chars=10_000)
    with Store(tmp_path / "s.duckdb") as st:
        rep = ingest_paths(st, [src], pack=load_pack("default"))
        assert (rep.accepted, rep.quarantined) == (3000, 0)
        assert st.con.execute("SELECT count(*), min(strlen(input)) FROM spans").fetchone() == (3000, 10_000)
        room = limit_bytes(st.con.execute("SELECT current_setting('memory_limit')").fetchone()[0])
    assert room is not None and 3 * 2048 * 10_000 <= room < 3 * 2048 * 10_500
    with Store(tmp_path / "s.duckdb") as st:
        assert limit_bytes(st.con.execute("SELECT current_setting('memory_limit')").fetchone()[0]) == room
        with st.memory_capped():  # a cap below the room leaves the room
            assert limit_bytes(st.con.execute("SELECT current_setting('memory_limit')").fetchone()[0]) == room


def test_a_batch_flushes_on_text_as_well_as_rows(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as st:
        batch = Batch(st, "staged_spans", size=1000, max_bytes=2500)
        counts = []
        for i in range(7):
            batch.add(span_row(Span(id=f"s{i}", trace_id="t", input="x" * 1000), seq=i, source_id="src"))
            counts.append(st.con.execute("SELECT count(*) FROM staged_spans").fetchone()[0])
        assert counts == [0, 0, 3, 3, 3, 6, 6]  # every third 1 kB row fills 2.5 kB


def _rows_in_order(store: Path) -> dict[str, list[tuple]]:
    import duckdb

    con = duckdb.connect(str(store), read_only=True)
    try:
        return {t: con.execute(f"SELECT * EXCLUDE (ingested_at) FROM {t} ORDER BY rowid" if t == "sources" else
                               f"SELECT * FROM {t} ORDER BY rowid").fetchall()
                for t in ("spans", "turns", "provenance", "quarantine", "staged_spans", "sources", "meta")}
    finally:
        con.close()


def test_workers_store_what_one_process_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Traces settled by worker processes, a few spans per chunk: the same rows in the same order, the same
    # report, defects, orphans joined by a later file and client-only calls included.
    from agent_factory.factory.ingest import writer
    from agent_factory.factory.simulate import SimConfig, simulate
    from tests.factory.test_bad_input import GOOD_SPANS, TC, lines, span

    simulate(SimConfig(users=6, seed=3), tmp_path / "sim")
    extra = tmp_path / "sim" / "zz-extra.jsonl"
    td, te = "d" * 32, "e" * 32
    extra.write_bytes(lines(*GOOD_SPANS, span(TC, "5" * 16, "6" * 16), span(TC, "6" * 16, "5" * 16),
                            span(td, "8" * 16), span(td, "8" * 16), span(te, "a" * 16, "9" * 16)))
    later = tmp_path / "later.jsonl"
    later.write_bytes(lines(span(te, "9" * 16), span("f" * 32, "b" * 16)))
    monkeypatch.setattr(writer, "MIN_SPANS_FOR_WORKERS", 0)
    monkeypatch.setattr(writer, "CHUNK_SPANS", 7)
    chunks_sunk: list[int] = []  # traces per chunk the workers settled

    class Spy(writer.ProcessExecutor):  # type: ignore[type-arg]
        def run(self, chunks, *, work, sink):  # type: ignore[no-untyped-def]
            return super().run(((c, n) for c, n in chunks if not chunks_sunk.append(n)), work=work, sink=sink)

    monkeypatch.setattr(writer, "ProcessExecutor", Spy)
    pack = load_pack("business_analysis")
    stores, reports = [], []
    for workers in (1, 2):
        path = tmp_path / f"w{workers}.duckdb"
        with Store(path) as st:
            first = ingest_paths(st, [tmp_path / "sim"], pack=pack, workers=workers)
            second = ingest_paths(st, [later], pack=pack, workers=workers)
        reports.append((first.model_dump(), second.model_dump()))
        stores.append(_rows_in_order(path))
    assert reports[0] == reports[1]
    assert reports[0][0]["quarantined"] == 3 and reports[0][0]["pending_spans"] == 1
    assert reports[0][1]["pending_spans"] == 0  # the later file brought the orphan's parent
    one, two = stores
    assert {t: len(r) for t, r in one.items()} == {t: len(r) for t, r in two.items()}
    assert len(one["turns"]) > 20 and len(chunks_sunk) > 5  # the workers settled them, many chunks each time
    for table in one:
        assert one[table] == two[table], table


def test_lines_parsed_by_workers_store_what_one_process_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    # JSON lines parsed by worker processes, a few lines per chunk (OTLP lines from the simulator, flat span lines
    # with a BOM, blank lines, broken JSON, bad UTF-8 and a field over the limit): the same rows in the same order,
    # the same report, cut fields included.
    from agent_factory.adapters.jsonio import FieldLimits
    from agent_factory.factory.ingest import lines as ingest_lines
    from agent_factory.factory.simulate import SimConfig, simulate
    from tests.factory.test_bad_input import GOOD_SPANS, TC, span

    simulate(SimConfig(users=6, seed=3), tmp_path / "sim")
    flat = tmp_path / "sim" / "zz-flat.jsonl"
    long_output = {"openinference.span.kind": "LLM", "output.value": "x" * 5000}
    flat.write_bytes(b"\xef\xbb\xbf" + "\n".join([
        *GOOD_SPANS, "", span(TC, "5" * 16, attributes=long_output), '{"spanId": "7", "traceId": ', "   ",
    ]).encode() + b"\n\xff\xfe not utf-8\n" + span(TC, "6" * 16, "5" * 16).encode() + b"\n")
    monkeypatch.setattr(ingest_lines, "MIN_BYTES_FOR_WORKERS", 0)
    monkeypatch.setattr(ingest_lines, "CHUNK_BYTES", 3000)
    chunks: list[int] = []  # lines per chunk the workers read
    real_chunks = ingest_lines._chunks

    def spy(path: Path, failed: list[OSError]):  # type: ignore[no-untyped-def]
        for c, n in real_chunks(path, failed):
            chunks.append(n)
            yield c, n

    monkeypatch.setattr(ingest_lines, "_chunks", spy)
    pack = load_pack("business_analysis")
    stores, reports = [], []
    for workers in (1, 2):
        path = tmp_path / f"w{workers}.duckdb"
        with Store(path) as st:
            reports.append(ingest_paths(st, [tmp_path / "sim"], pack=pack, workers=workers,
                                        limits=FieldLimits(max_field_chars=2048)).model_dump())
        stores.append(_rows_in_order(path))
        assert bool(chunks) == (workers == 2)
    assert reports[0] == reports[1]
    assert reports[0]["quarantined"] == 2 and len(reports[0]["truncated"]) >= 1
    assert {q["location"] for q in reports[0]["errors"]} == {"line 6", "line 8"}
    assert len(chunks) > 10  # the simulator's file alone was cut into many chunks
    one, two = stores
    assert len(one["turns"]) > 20
    for table in one:
        assert one[table] == two[table], table
