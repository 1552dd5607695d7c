"""Ingest takes a source: a file, a directory, bytes or a request body enter the same way, each with an id and a
digest; what a file stores, the same bytes from memory or in a gzip request body store too; and every quarantine
the report counts (a whole file no adapter reads included) is in the store."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from agent_factory.errors import SpecError
from agent_factory.factory.cli.app import EXIT_QUARANTINED, app
from agent_factory.factory.ingest.files import IngestReport, file_digest, ingest_paths, ingest_sources
from agent_factory.factory.ingest.sources import (
    BytesSource,
    DirectorySource,
    FileSource,
    RequestBody,
    Source,
    expand_paths,
    expand_sources,
)
from agent_factory.factory.store import Store
from agent_factory.knowledge_packs import load_pack
from tests.conftest import FIXTURES

PACK = load_pack("default")
TAU = FIXTURES / "chat" / "tau_small.json"
OTLP_LINES = FIXTURES / "otel" / "otlp_lines.jsonl"
OTLP_DOC = FIXTURES / "otel" / "otlp_doc.json"
BAD_CHAT = (b'{"id": "c1", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\n'
            b'{"id": "c2", "messages": [{"role": "wizard", "content": "hi"}]}\n{oops\n')


def _ingest(store: Path, *sources: Source | Path) -> tuple[IngestReport, list[dict[str, Any]], dict[str, Any]]:
    """The report, every stored turn (with its spans) and the store's counts."""
    with Store(store) as st:
        report = ingest_sources(st, list(sources), pack=PACK, workers=1)
        turns = [t.model_dump(mode="json") for t in st.iter_turns(segment=None)]
        counts = st.counts()
    return report, turns, counts


def _same_but_source(a: IngestReport, b: IngestReport, *, a_id: str, b_id: str) -> None:
    assert (a.read, a.accepted, a.quarantined, a.already_stored) == (b.read, b.accepted, b.quarantined,
                                                                     b.already_stored)
    assert [f.format for f in a.files] == [f.format for f in b.files]
    assert [q.model_copy(update={"source": b_id}) for q in a.errors] == b.errors
    assert all(q.source == a_id for q in a.errors)


@pytest.mark.parametrize("fixture", [TAU, OTLP_LINES, OTLP_DOC], ids=lambda p: p.name)
def test_bytes_and_a_gzip_request_body_store_what_the_file_stores(tmp_path: Path, fixture: Path) -> None:
    data = fixture.read_bytes()
    from_file, file_turns, file_counts = _ingest(tmp_path / "file.duckdb", fixture)
    from_bytes, bytes_turns, bytes_counts = _ingest(tmp_path / "bytes.duckdb", BytesSource(name="run-7", data=data))
    body = RequestBody(name="otlp-request-1", data=gzip.compress(data), content_encoding="gzip")
    from_body, body_turns, body_counts = _ingest(tmp_path / "body.duckdb", body)
    assert from_file.accepted > 0 and file_turns
    _same_but_source(from_file, from_bytes, a_id=str(fixture), b_id="run-7")
    _same_but_source(from_file, from_body, a_id=str(fixture), b_id="otlp-request-1")
    assert file_turns == bytes_turns == body_turns  # the same stored rows
    assert file_counts == bytes_counts == body_counts  # the same counts
    assert [f.path for f in from_body.files] == ["otlp-request-1"]


def test_quarantines_of_bytes_name_the_source_and_are_stored(tmp_path: Path) -> None:
    plain = tmp_path / "c.jsonl"
    plain.write_bytes(BAD_CHAT)
    from_file, _, file_counts = _ingest(tmp_path / "f.duckdb", plain)
    utf16 = BytesSource(name="chat-export", data=b"\xff\xfe" + BAD_CHAT.decode().encode("utf-16-le"))
    from_bytes, _, bytes_counts = _ingest(tmp_path / "b.duckdb", utf16)
    assert (from_file.read, from_file.accepted, from_file.quarantined) == (3, 1, 2)
    _same_but_source(from_file, from_bytes, a_id=str(plain), b_id="chat-export")
    assert bytes_counts["all"]["quarantined"] == from_bytes.quarantined == 2
    assert file_counts == bytes_counts


def test_each_source_has_an_id_and_a_digest_and_the_same_bytes_are_read_once(tmp_path: Path) -> None:
    data = TAU.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    assert FileSource(path=TAU).id == str(TAU) and FileSource(path=TAU).digest() == digest == file_digest(TAU)
    src = BytesSource(name="task-run-1", data=data, format="tau-bench")
    assert (src.id, src.digest(), src.format) == ("task-run-1", digest, "tau-bench")
    body = RequestBody(name="r", data=gzip.compress(data), content_encoding="gzip")
    assert body.digest() == hashlib.sha256(body.data).hexdigest()  # the bytes as they arrived
    with Store(tmp_path / "s.duckdb") as st:
        first = ingest_sources(st, [src], pack=PACK, workers=1)
        again = ingest_sources(st, [BytesSource(name="task-run-1", data=data)], pack=PACK, workers=1)
    assert first.files[0].status == "ingested" and first.accepted > 0
    assert [f.status for f in again.files] == ["already-ingested"] and again.read == 0


def test_a_request_body_says_what_it_cannot_be() -> None:
    data = OTLP_DOC.read_bytes()
    with pytest.raises(ValidationError, match=r"application/x-protobuf.*valid: application/json"):
        RequestBody(name="r", data=data, content_type="application/x-protobuf")
    with pytest.raises(ValidationError, match=r"'br' is not read; valid: identity, gzip"):
        RequestBody(name="r", data=data, content_encoding="br")
    with pytest.raises(ValidationError, match=r"'gzip' but the body is not gzip"):
        RequestBody(name="r", data=data, content_encoding="gzip")
    with pytest.raises(ValidationError):
        BytesSource(name="", data=data)
    assert RequestBody(name="r", data=data, content_type="application/json; charset=utf-8").content_type


def test_a_directory_expands_into_file_sources_by_the_rules_of_expand_paths(tmp_path: Path) -> None:
    d = tmp_path / "traces"
    (d / "sub").mkdir(parents=True)
    for name in ("a.jsonl", "sub/b.json.gz", "notes.txt", ".hidden.jsonl"):
        (d / name).write_bytes(b"{}\n")
    files = DirectorySource(path=d, format="openai-chat").files()
    assert [f.path for f in files] == expand_paths([d]) == [d / "a.jsonl", d / "sub" / "b.json.gz"]
    assert {f.format for f in files} == {"openai-chat"}
    one = BytesSource(name="x", data=b"{}")
    assert expand_sources([one, d, DirectorySource(path=d)]) == [one, *(FileSource(path=f.path) for f in files),
                                                                 *(FileSource(path=f.path) for f in files)]
    for missing, said in ((FileSource(path=d / "gone.jsonl"), "no such file"),
                          (DirectorySource(path=d / "gone"), "no such directory"), (d / "gone", "no such file")):
        with pytest.raises(SpecError, match=said):
            expand_sources([missing])


def test_whole_file_refusals_are_stored_so_the_counts_printed_are_the_counts_stored(tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_bytes(BAD_CHAT)  # 1 accepted, 2 quarantined
    (d / "empty.jsonl").write_bytes(b"")  # refused: nothing to ingest
    (d / "unknown.jsonl").write_bytes(b'{"hello": "world"}\n')  # refused: no adapter reads it
    store = tmp_path / "s.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(d), "--store", str(store)])
    assert result.exit_code == EXIT_QUARANTINED, result.output
    assert "read 5, accepted 1, quarantined 4 from 3 file(s)" in result.stdout
    with Store(store) as st:
        assert st.counts()["all"]["quarantined"] == 4
        again = ingest_paths(st, [d], pack=PACK, workers=1)  # the same bytes: nothing new, nothing refused twice
        assert [f.status for f in again.files] == ["already-ingested"] * 3 and again.quarantined == 0
        assert st.counts()["all"]["quarantined"] == 4
        # Told its format, a refused file is read after all, and its refusal goes.
        told = ingest_paths(st, [d / "unknown.jsonl"], fmt="openai-chat", pack=PACK, workers=1)
        assert told.files[0].status == "ingested" and told.errors[0].field != "format"
        assert (told.read, told.quarantined) == (1, 1)  # read as chat now: the record has no messages
        assert st.counts()["all"]["quarantined"] == 4 - 1 + 1
