"""Adapters read a source's decoded stream, whatever its kind: what a file gives, the same bytes in memory or in a
gzip request body give too, named by the source's id; decoding problems are noted once, even when the reader
stops before the end; an adapter written for `read(path)` still gets a decoded file."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

from agent_factory.adapters.base import AdapterItem, Quarantine, detect, read_head
from agent_factory.adapters.chat import OpenAIChatAdapter, TauBenchAdapter
from agent_factory.adapters.decoding import decoded
from agent_factory.adapters.otel.otlp import OtlpJsonAdapter
from agent_factory.adapters.source import BytesSource, FileSource, RequestBody, noting_problems
from agent_factory.factory.ingest.files import Opened, ingest_items
from agent_factory.factory.store import Store
from agent_factory.knowledge_packs import load_pack
from tests.conftest import FIXTURES

TAU = FIXTURES / "chat" / "tau_small.json"
OTLP_LINES = FIXTURES / "otel" / "otlp_lines.jsonl"
DOC = json.dumps([{"id": "c1", "messages": [{"role": "user", "content": "héllo 你好"},
                                            {"role": "assistant", "content": "hi"}]}], ensure_ascii=False)


def _renamed(items: list[AdapterItem], name: str) -> list[AdapterItem]:
    return [i.model_copy(update={"source": name}) if isinstance(i, Quarantine) else i for i in items]


def test_an_adapter_reads_bytes_and_a_gzip_body_as_it_reads_the_file() -> None:
    for adapter, fixture in ((TauBenchAdapter(), TAU), (OtlpJsonAdapter(), OTLP_LINES)):
        data = fixture.read_bytes()
        from_file = list(adapter.read(fixture))
        assert from_file == list(adapter.read(FileSource(path=fixture)))
        body = RequestBody(name="req-1", data=gzip.compress(data), content_encoding="gzip")
        assert _renamed(from_file, "req-1") == list(adapter.read(body))
        assert _renamed(from_file, "mem") == list(adapter.read(BytesSource(name="mem", data=data)))
        assert detect(body).name == adapter.name
        assert read_head(body, 100) == data[:100]


def test_open_text_gives_what_a_decoded_copy_holds(tmp_path: Path) -> None:
    for raw in (b"\xef\xbb\xbf" + DOC.encode(), b"\xff\xfe" + DOC.encode("utf-16-le"), gzip.compress(DOC.encode()),
                DOC.encode()):
        src = tmp_path / "doc.json"
        src.write_bytes(raw)
        with decoded(src) as path, FileSource(path=src).open_text() as f:
            assert f.read() == path.read_bytes() == DOC.encode()
        with BytesSource(name="b", data=raw).open_text() as f:
            assert f.read(7) + f.read() == DOC.encode()
        assert FileSource(path=src).size_hint() >= len(DOC.encode()) // 2


def test_a_problem_is_noted_once_even_when_the_reader_stops_early() -> None:
    lines = "".join(json.dumps({"i": i, "pad": "x" * 50}) + "\n" for i in range(20000)).encode()
    cut = BytesSource(name="cut", data=gzip.compress(lines)[:-500])
    with noting_problems() as problems:
        with cut.open_text() as f:
            f.read(10)  # stops long before the break
        with cut.open_text() as f:
            f.read()
    assert len(problems) == 1 and "gzip stream" in problems[0]
    with noting_problems() as problems, BytesSource(name="ok", data=gzip.compress(lines)).open_text() as f:
        assert f.read() == lines
    assert problems == []


class _PathOnly:
    """An adapter written before sources: `read(path)` opens a file itself."""

    name = "path-only"
    description = "chat messages, read from a path"

    def sniff(self, head: bytes, path: Path) -> bool:
        return False

    def read(self, path: Path) -> Iterator[AdapterItem]:
        assert isinstance(path, Path) and path.read_bytes() == DOC.encode()  # a decoded file
        return OpenAIChatAdapter().read(path)


def test_an_adapter_written_for_paths_gets_a_decoded_file(tmp_path: Path) -> None:
    source = BytesSource(name="utf16-export", data=b"\xff\xfe" + DOC.encode("utf-16-le"))
    adapter = _PathOnly()  # the signature of an adapter written before sources, which the protocol no longer has
    opened = Opened(source=source, adapter=adapter, source_id=source.digest(), earlier=set(), replaced=[])  # type: ignore[arg-type]
    with Store(tmp_path / "s.duckdb") as st:
        report, errors, _ = ingest_items(st, opened, pack=load_pack("default"), workers=1)
        turns = list(st.iter_turns(segment=None))
    assert (report.path, report.format, report.read, report.accepted, errors) == ("utf16-export", "path-only", 1, 1,
                                                                                  [])
    assert [t.request for t in turns] == ["héllo 你好"]
