"""A source file as every adapter reads it: decompressed and decoded to UTF-8 once, before any adapter sees it.

Users' tools write traces in more than UTF-8: PowerShell and Notepad put a UTF-8 byte-order mark before a
document, Windows tools write UTF-16 with one, and exports are gzipped (`.json.gz`, `.jsonl.gz`). `decoded(path)`
yields a file the adapters can read as they read any: for gzip (magic bytes `1f 8b`, whatever the name) a
temporary decompressed copy; for a byte-order mark (UTF-8, UTF-16, UTF-32) or BOM-less UTF-16/32 JSON (told by
its NUL bytes, RFC 4627) a temporary UTF-8 copy without the mark; else the file itself. It is streamed a block at
a time, so memory does not grow with the file, into a temporary directory deleted when the block ends.

Messages and stored paths name the original file: readers name a file by `shown(path)`, which gives the original
of a decoded copy. What could not be decoded (a gzip stream cut short, bytes that are not UTF-16) ends the copy
there and is told by `problem(path)`, for ingest to report. A file that is not UTF-8 at all (cp1252, GB18030) is
read as it is and fails where it fails; `encoding_hint` says what it looks like, for those messages.
"""

from __future__ import annotations

import codecs
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import BinaryIO

BLOCK = 1 << 20
"""Bytes read (and decoded) at a time."""
HINT_BYTES = 65536
"""How much of a file `encoding_hint` looks at."""

_BOMS = (  # longest first: the UTF-32 LE mark starts with the UTF-16 LE one
    (codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_GZIP = b"\x1f\x8b"
_NAMES = {"utf-8": "UTF-8", "utf-16-le": "UTF-16 LE", "utf-16-be": "UTF-16 BE", "utf-32-le": "UTF-32 LE",
          "utf-32-be": "UTF-32 BE"}


@dataclass(frozen=True)
class _Copy:
    original: str
    problem: str | None


_COPIES: dict[str, _Copy] = {}
"""The decoded copies alive (inside a `decoded` block), by their path."""


def shown(path: Path) -> str:
    """The name messages give `path`: the original file of a decoded copy, else `path` itself."""
    copy = _COPIES.get(str(path))
    return copy.original if copy else str(path)


def problem(path: Path) -> str | None:
    """Why a decoded copy ends before its original did (a broken gzip stream, bytes of no character), if it does."""
    copy = _COPIES.get(str(path))
    return copy.problem if copy else None


def text_encoding(head: bytes) -> tuple[str | None, int]:
    """The encoding of a JSON text that is not plain UTF-8, from its first bytes: by its byte-order mark, or by
    the NUL bytes UTF-16/32 give its first (ASCII) characters; with the length of the mark. (None, 0) for UTF-8
    without a mark, or anything else."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name, len(bom)
    if len(head) >= 4:
        z = [b == 0 for b in head[:4]]
        if z == [True, True, True, False]:
            return "utf-32-be", 0
        if z == [True, False, True, False]:
            return "utf-16-be", 0
        if z == [False, True, True, True]:
            return "utf-32-le", 0
        if z == [False, True, False, True]:
            return "utf-16-le", 0
    return None, 0


@contextmanager
def decoded(path: Path) -> Iterator[Path]:
    """`path` as UTF-8 without a byte-order mark, decompressed: the file itself when it is that already, else a
    temporary copy (named like the original, less `.gz`) that lives as long as the block."""
    with open(path, "rb") as f:
        magic = f.read(4)
    compressed = magic.startswith(_GZIP)
    if not compressed:
        encoding, _ = text_encoding(magic)
        if encoding is None:
            yield path
            return
    with tempfile.TemporaryDirectory(prefix="agent-factory-") as tmp:
        out = Path(tmp) / (path.name.removesuffix(".gz") or "source")
        _COPIES[str(out)] = _Copy(str(path), _copy(path, out, compressed=compressed))
        try:
            yield out
        finally:
            _COPIES.pop(str(out), None)


class _Gunzip:
    """The decompressed blocks of a gzip file (every member of it), a block at a time however much a block
    inflates; a stream that breaks or ends early stops them, and `problem` says where."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self.done = 0
        self.problem: str | None = None

    def __iter__(self) -> Iterator[bytes]:
        d = zlib.decompressobj(wbits=31)
        data = self._raw.read(BLOCK)
        try:
            while data:
                out = d.decompress(data, BLOCK)
                self.done += len(out)
                if out:
                    yield out
                if d.eof:  # a member ends; another may follow (zero padding does not count)
                    data = d.unused_data or self._raw.read(BLOCK)
                    if not data.strip(b"\0"):
                        return
                    d = zlib.decompressobj(wbits=31)
                else:
                    data = d.unconsumed_tail or self._raw.read(BLOCK)
            tail = d.flush()  # output zlib held back for want of room, the input all read
            self.done += len(tail)
            if tail:
                yield tail
            if not d.eof:
                self.problem = (f"the gzip stream ends early, after {self.done} bytes of content: the file is cut "
                                "short")
        except zlib.error as e:
            self.problem = (f"the gzip stream is broken after {self.done} bytes of content ({e}); what follows is "
                            "not read")


def _copy(src: Path, out: Path, *, compressed: bool) -> str | None:
    """Write `src` to `out` decompressed and as UTF-8 without a mark; what stopped the copy early, if anything."""
    with open(src, "rb") as raw, open(out, "wb") as dst:
        gz = _Gunzip(raw) if compressed else None
        blocks = iter(gz) if gz is not None else iter(lambda: raw.read(BLOCK), b"")
        head = b""
        for data in blocks:
            head += data
            if len(head) >= 4:
                break
        encoding, skip = text_encoding(head)
        rest = chain([head[skip:]], blocks)
        bad = None
        if encoding in (None, "utf-8"):
            for data in rest:
                dst.write(data)
        else:
            bad = _transcode(rest, dst, skip, encoding)
        return (gz.problem if gz is not None else None) or bad


def _transcode(blocks: Iterator[bytes], dst: BinaryIO, done: int, encoding: str) -> str | None:
    """Decode `blocks` from `encoding` into UTF-8 on `dst`; `done` is the offset of the first block. Stops at the
    first byte of no character, and says where."""
    decoder = codecs.getincrementaldecoder(encoding)("strict")
    unit = 2 if "16" in encoding else 4
    for data, final in chain(((d, False) for d in blocks), [(b"", True)]):
        pending: bytes = getattr(decoder, "buffer", b"")
        try:
            dst.write(decoder.decode(data, final=final).encode("utf-8"))
        except UnicodeDecodeError as e:
            good = (pending + data)[:e.start]
            dst.write(codecs.decode(good[:len(good) - len(good) % unit], encoding).encode("utf-8"))
            at = done - len(pending) + e.start
            name = _NAMES.get(encoding, encoding)
            return f"the file is not valid {name} at byte {at} ({e.reason}); what follows is not read"
        done += len(data)
    return None


def decoded_head(path: Path, n: int) -> tuple[bytes, str | None]:
    """The first `n` bytes (at most) of what `decoded(path)` gives, without writing a copy, and what stopped
    decoding them early (for sniffing: a character cut by the end of the head is dropped)."""
    with open(path, "rb") as raw:
        data = raw.read(max(n, 4))
        compressed = data.startswith(_GZIP)
        if not compressed and text_encoding(data)[0] is None:
            return data[:n], None
        gz = None
        if compressed:
            raw.seek(0)
            gz, data = _Gunzip(raw), b""
            for block in gz:
                data += block
                if len(data) >= 4 * n + 4:
                    break
    encoding, skip = text_encoding(data)
    data = data[skip:]
    if encoding not in (None, "utf-8"):
        unit = 2 if "16" in encoding else 4
        text = codecs.decode(data[:4 * n][:len(data[:4 * n]) // unit * unit], encoding, "replace")
        data = text.encode("utf-8")
    return data[:n], gz.problem if gz is not None else None


def encoding_hint(path: Path) -> str | None:
    """What a file that is not UTF-8 looks like, as the end of a message (`charset_normalizer` on the first
    `HINT_BYTES` of it, decompressed); None when those bytes are UTF-8 (a character cut by their end is no
    reason), or are UTF-16 or -32 with a mark (`decoded` reads those)."""
    try:
        head, _ = decoded_head(path, HINT_BYTES)
    except OSError:
        return None
    try:
        head.decode("utf-8")
        return None
    except UnicodeDecodeError as e:
        if e.reason == "unexpected end of data" and len(head) == HINT_BYTES:
            return None
    from charset_normalizer import from_bytes  # a second's import, paid only for a file that is not UTF-8

    names: list[str] = []
    for match in from_bytes(head):
        name = codecs.lookup(match.encoding).name
        if name not in names and name not in ("utf-8", "ascii"):
            names.append(name)
    if not names:
        return "the file is not UTF-8 text: convert it to UTF-8"
    more = f" (or {', '.join(names[1:3])})" if len(names) > 1 else ""
    return f"the file is not UTF-8 but looks like {names[0]}{more}: convert it to UTF-8 (iconv -f {names[0]} -t utf-8)"
