"""Bytes decoded once before any adapter reads them: gzip, byte-order marks, UTF-16/32; a hint for bytes in
another encoding.

Users' tools write traces in more than UTF-8: PowerShell and Notepad put a UTF-8 byte-order mark before a
document, Windows tools write UTF-16 with one, and exports are gzipped (`.json.gz`, `.jsonl.gz`), as OTLP
exporters compress request bodies. `open_decoded` reads raw bytes as the adapters read any file: for gzip (magic
bytes `1f 8b`, whatever the name) decompressed; for a byte-order mark (UTF-8, UTF-16, UTF-32) or BOM-less
UTF-16/32 JSON (told by its NUL bytes, RFC 4627) as UTF-8 without the mark; else as they are. It is decoded a
block at a time, so memory does not grow with the content. What could not be decoded (a gzip stream cut short,
bytes that are not UTF-16) ends the stream there and is noted (`noting_problems`), for ingest to report. Bytes
that are not UTF-8 at all (cp1252, GB18030) are read as they are and fail where they fail; `hint_for` says what
they look like, for those messages.

`decoded(path)` gives a file the same content as a file: the file itself, or a temporary decoded copy whose
`shown` name is the original's and whose `problem` says what stopped it (for readers that need a file).
"""

from __future__ import annotations

import codecs
import io
import tempfile
import zlib
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, BinaryIO, cast

BLOCK = 1 << 20
"""Bytes read (and decoded) at a time."""
HINT_BYTES = 65536
"""How much of a file `encoding_hint` looks at."""

_BOMS = (  # longest first: the UTF-32 LE mark starts with the UTF-16 LE one
    (codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"),
)
GZIP_MAGIC = b"\x1f\x8b"
"""The first bytes of a gzip stream (RFC 1952), whatever its name says."""
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
    if not needs_decoding(magic):
        yield path
        return
    with decoded_copy(lambda: open(path, "rb"), shown_as=str(path),
                       name=path.name.removesuffix(".gz") or "source") as out:
        yield out


def needs_decoding(magic: bytes) -> bool:
    """Whether bytes starting with `magic` (their first 4) are compressed or not plain UTF-8 without a mark."""
    return magic.startswith(GZIP_MAGIC) or text_encoding(magic)[0] is not None


@contextmanager
def decoded_copy(open_raw: Callable[[], BinaryIO], *, shown_as: str, name: str) -> Iterator[Path]:
    """A temporary file holding the raw bytes `open_raw` opens, decoded (or as they are, when they need no
    decoding), named `name`, shown in messages as `shown_as`, alive as long as the block."""
    with tempfile.TemporaryDirectory(prefix="agent-factory-") as tmp:
        out = Path(tmp) / name
        with open_raw() as raw:
            compressed = raw.read(4).startswith(GZIP_MAGIC)
            raw.seek(0)
            _COPIES[str(out)] = _Copy(shown_as, _copy(raw, out, compressed=compressed))
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


class _Decoding:
    """The blocks of raw bytes decompressed and as UTF-8 without a mark, a block at a time; `problem` says what
    stopped them early (a broken gzip stream, bytes of no character) once they end."""

    def __init__(self, raw: BinaryIO, *, compressed: bool) -> None:
        self._raw = raw
        self._gz = _Gunzip(raw) if compressed else None
        self.problem: str | None = None
        self.ended = False

    def __iter__(self) -> Iterator[bytes]:
        gz = self._gz
        blocks = iter(gz) if gz is not None else iter(lambda: self._raw.read(BLOCK), b"")
        head = b""
        for data in blocks:
            head += data
            if len(head) >= 4:
                break
        encoding, skip = text_encoding(head)
        rest = chain([head[skip:]], blocks)
        bad = None
        if encoding in (None, "utf-8"):
            yield from rest
        else:
            bad = yield from _transcoded(rest, skip, encoding)
        self.problem = (gz.problem if gz is not None else None) or bad
        self.ended = True


def _copy(raw: BinaryIO, out: Path, *, compressed: bool) -> str | None:
    """Write `raw` to `out` decompressed and as UTF-8 without a mark; what stopped the copy early, if anything."""
    decoding = _Decoding(raw, compressed=compressed)
    with open(out, "wb") as dst:
        for data in decoding:
            dst.write(data)
    return decoding.problem


def _transcoded(blocks: Iterator[bytes], done: int, encoding: str) -> Generator[bytes, None, str | None]:
    """`blocks` decoded from `encoding` into UTF-8; `done` is the offset of the first block. Stops at the first
    byte of no character, and returns where."""
    decoder = codecs.getincrementaldecoder(encoding)("strict")
    unit = 2 if "16" in encoding else 4
    for data, final in chain(((d, False) for d in blocks), [(b"", True)]):
        pending: bytes = getattr(decoder, "buffer", b"")
        try:
            yield decoder.decode(data, final=final).encode("utf-8")
        except UnicodeDecodeError as e:
            good = (pending + data)[:e.start]
            yield codecs.decode(good[:len(good) - len(good) % unit], encoding).encode("utf-8")
            at = done - len(pending) + e.start
            name = _NAMES.get(encoding, encoding)
            return f"the file is not valid {name} at byte {at} ({e.reason}); what follows is not read"
        done += len(data)
    return None


_PROBLEMS: ContextVar[list[str] | None] = ContextVar("adapters_decoding_problems", default=None)


@contextmanager
def noting_problems() -> Iterator[list[str]]:
    """Inside the block, every decoded stream (`open_decoded`) that ends early notes why in the list yielded
    (once per distinct reason), when it is closed: read to its end first if its reader stopped before."""
    problems: list[str] = []
    token = _PROBLEMS.set(problems)
    try:
        yield problems
    finally:
        _PROBLEMS.reset(token)


class _DecodedStream(io.RawIOBase):
    """Raw bytes read decoded (`_Decoding`), as a binary file the readers take (`iter_lines`, ijson)."""

    def __init__(self, raw: BinaryIO, *, compressed: bool) -> None:
        super().__init__()
        self._raw = raw
        self._decoding = _Decoding(raw, compressed=compressed)
        self._blocks = iter(self._decoding)
        self._buf = b""
        self._at = 0

    def readable(self) -> bool:
        """Always: a stream to read."""
        return True

    def readinto(self, b: Any) -> int:
        """Fill `b` with what comes next (at most one decoded block's rest); 0 at the end."""
        while self._at >= len(self._buf):
            block = next(self._blocks, None)
            if block is None:
                return 0
            self._buf, self._at = block, 0
        n = min(len(b), len(self._buf) - self._at)
        memoryview(b)[:n] = self._buf[self._at:self._at + n]
        self._at += n
        return n

    def close(self) -> None:
        """Close the raw bytes; note why decoding ended early, if it did, in a `noting_problems` block."""
        if not self.closed:
            problems = _PROBLEMS.get()
            if problems is not None:
                if not self._decoding.ended:  # the reader stopped before the end: what decoding would say
                    for _ in self._blocks:
                        pass
                if self._decoding.problem is not None and self._decoding.problem not in problems:
                    problems.append(self._decoding.problem)
            self._raw.close()
        super().close()


def open_decoded(raw: BinaryIO) -> BinaryIO:
    """`raw` (read from its start, seekable) as a binary file of its content decompressed and as UTF-8 without a
    mark: `raw` itself when it is that already. Closing it closes `raw`."""
    magic = raw.read(4)
    raw.seek(0)
    if not needs_decoding(magic):
        return raw
    return cast(BinaryIO, _DecodedStream(raw, compressed=magic.startswith(GZIP_MAGIC)))


def decoded_size(raw: BinaryIO) -> int:
    """About how many bytes `open_decoded(raw)` gives (a gzip stream's recorded size, modulo 4 GiB; UTF-16 and
    -32 in characters' worth of ASCII), for choosing how to read it; `raw` is left at its start."""
    magic = raw.read(4)
    end = raw.seek(0, io.SEEK_END)
    size = end
    if magic.startswith(GZIP_MAGIC) and end >= 18:  # the smallest gzip member; its last 4 bytes are its size
        raw.seek(-4, io.SEEK_END)
        size = int.from_bytes(raw.read(4), "little")
    else:
        encoding, _ = text_encoding(magic)
        size = end // (4 if "32" in (encoding or "") else 2 if "16" in (encoding or "") else 1)
    raw.seek(0)
    return size


def decoded_head(path: Path, n: int) -> tuple[bytes, str | None]:
    """The first `n` bytes (at most) of what `decoded(path)` gives, without writing a copy, and what stopped
    decoding them early (for sniffing: a character cut by the end of the head is dropped)."""
    with open(path, "rb") as raw:
        return head_of(raw, n)


def head_of(raw: BinaryIO, n: int) -> tuple[bytes, str | None]:
    """`decoded_head` of an open binary stream of raw bytes (read from its start)."""
    data = raw.read(max(n, 4))
    compressed = data.startswith(GZIP_MAGIC)
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
    return hint_for(head)


def hint_for(head: bytes) -> str | None:
    """`encoding_hint` of the first `HINT_BYTES` of a source, decoded as `head_of` gives them."""
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
