"""A source file decoded once before any adapter sees it: gzip, byte-order marks, UTF-16/32; a hint for a file in
another encoding; the original file's name in every message."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from agent_factory.adapters.base import detect
from agent_factory.adapters.source import decoded, encoding_hint, problem, shown

DOC = json.dumps([{"id": "c1", "messages": [{"role": "user", "content": "héllo 你好 \U0001F600"},
                                            {"role": "assistant", "content": "hi"}]}], ensure_ascii=False)


@pytest.mark.parametrize(("encoding", "bom"), [
    ("utf-8", b"\xef\xbb\xbf"), ("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff"),
    ("utf-32-le", b"\xff\xfe\x00\x00"), ("utf-32-be", b"\x00\x00\xfe\xff"),
    ("utf-16-le", b""), ("utf-16-be", b""),
])
def test_byte_order_marks_and_utf16_become_plain_utf8(tmp_path: Path, encoding: str, bom: bytes) -> None:
    src = tmp_path / "doc.json"
    src.write_bytes(bom + DOC.encode(encoding))
    with decoded(src) as path:
        assert path != src and path.read_bytes() == DOC.encode("utf-8")
        assert shown(path) == str(src)
        assert detect(path).name == "openai-chat"
    assert not path.exists() and shown(path) == str(path)


@pytest.mark.parametrize("name", ["t.json.gz", "t.jsonl.gz", "no-suffix"])
def test_gzip_is_decompressed_whatever_the_name(tmp_path: Path, name: str) -> None:
    src = tmp_path / name
    src.write_bytes(gzip.compress(b"\xef\xbb\xbf" + DOC.encode()))
    with decoded(src) as path:
        assert path.read_bytes() == DOC.encode() and shown(path) == str(src)
        assert not path.name.endswith(".gz")


def test_a_plain_utf8_file_is_read_in_place(tmp_path: Path) -> None:
    src = tmp_path / "plain.json"
    src.write_text(DOC, encoding="utf-8")
    with decoded(src) as path:
        assert path == src and shown(path) == str(src)


def test_a_large_file_is_decoded_in_chunks(tmp_path: Path) -> None:
    src = tmp_path / "big.jsonl"
    line = json.dumps({"id": "x", "text": "é" * 1000}, ensure_ascii=False) + "\n"
    body = line * 3000  # ~6 MB as UTF-16
    src.write_bytes(b"\xff\xfe" + body.encode("utf-16-le"))
    with decoded(src) as path:
        assert path.read_bytes() == body.encode()


def test_broken_gzip_and_broken_utf16_are_read_as_far_as_they_go_and_say_so(tmp_path: Path) -> None:
    src = tmp_path / "cut.json.gz"
    whole = "".join(json.dumps({"i": i, "h": hashlib.sha256(str(i).encode()).hexdigest()}) + "\n" for i in range(5000))
    src.write_bytes(gzip.compress(whole.encode())[:-2000])
    with decoded(src) as path:
        data = path.read_bytes()
        assert data and whole.encode().startswith(data) and len(data) < len(whole.encode())
        assert "gzip" in (problem(path) or "")
    odd = tmp_path / "odd.json"
    odd.write_bytes(b"\xff\xfe" + DOC.encode("utf-16-le") + b"\x00")
    with decoded(odd) as path:
        assert path.read_bytes() == DOC.encode()
        assert "UTF-16" in (problem(path) or "") and str(2 + len(DOC.encode("utf-16-le"))) in (problem(path) or "")
    plain = tmp_path / "plain.json"
    plain.write_text(DOC, encoding="utf-8")
    with decoded(plain) as path:
        assert problem(path) is None


@pytest.mark.parametrize(("text", "codec", "named"), [
    ('{"note": "caf\u00e9 cr\u00e8me br\u00fbl\u00e9e, d\u00e9j\u00e0 vu, na\u00efve fa\u00e7ade"}\n' * 20,
     "cp1252", ("cp1252", "latin", "iso-8859", "cp125")),
    ('{"note": "\u4f60\u597d\uff0c\u8fd9\u662f\u4e00\u4e2a\u6d4b\u8bd5\u6587\u4ef6\u3002\u6211\u4eec\u68c0\u67e5\u7f16'
     '\u7801\u3002"}\n' * 20, "gb18030", ("gb", "big5", "cp936")),
])
def test_a_file_in_another_encoding_gets_a_hint(tmp_path: Path, text: str, codec: str, named: tuple[str, ...]) -> None:
    src = tmp_path / "legacy.jsonl"
    src.write_bytes(text.encode(codec))
    hint = encoding_hint(src)
    assert hint is not None and "UTF-8" in hint and any(n in hint.lower() for n in named), hint


def test_a_utf8_file_gets_no_hint(tmp_path: Path) -> None:
    src = tmp_path / "ok.json"
    src.write_text(DOC, encoding="utf-8")
    assert encoding_hint(src) is None
    cut = tmp_path / "cut.json"  # a multi-byte character cut by the end of the head is no reason for a hint
    cut.write_bytes(("x" * 65535 + "é").encode())
    assert encoding_hint(cut) is None
