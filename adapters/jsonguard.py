r"""Bounds on the JSON bytes a parser is handed: nesting depth, and lone UTF-16 surrogate escapes.

Depth: ijson keeps a prefix string per nesting level for every event (`item.item.item...`), so a document nested
n levels deep costs O(n^2) memory before any record is whole (a 40 KB file of brackets took 1.1 GB), and deep
values overflow the Python stack of whatever walks them later. `DepthScanner` finds, at the speed of a regular
expression, the first byte where a JSON text nests deeper than `MAX_DEPTH` (outside strings), however the text is
cut into chunks. A JSON line nested deeper is quarantined alone (`too_deep`). A document is read through
`BoundedJson`, which hands ijson the container that goes over the limit as the string `"\ufffe"` (`DEEP_MARK`)
and skips its bytes unparsed: the reader quarantines the record holding the mark, naming the field, and reads on.
A document that ends inside such a container gives a `TooDeep` error instead of its last bytes.

Lone surrogates: a `\ud800` escape without its pair is no Unicode character. `json` makes it a lone surrogate,
which no UTF-8 store can hold (DuckDB and Arrow raise); ijson's C backend makes it `?` or fails the document.
`mark_lone_surrogates` rewrites each such escape in the bytes to `\uffff` (`LONE_MARK`, a noncharacter, same
length), so every parser reads the record, and the reader quarantines the record holding a mark, naming its field
(`find_marks`). The choice for all readers is quarantine of that record, not repair: it is not stored altered.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from itertools import accumulate, repeat
from operator import sub
from typing import Any, BinaryIO

MAX_DEPTH = 128
"""The deepest JSON nesting read, counted from the document's (or the line's) top. The deepest real trace data
nests 18 levels (TRAIL's span trees); an OTLP attribute map nests 4 levels per level of the value it holds."""

LONE_MARK = "\uffff"
"""What a lone surrogate escape is rewritten to before parsing (a noncharacter: no text holds it)."""
DEEP_MARK = "\ufffe"
"""The string a document's container nested deeper than the limit is handed to the parser as (a noncharacter)."""
_DEEP_TEXT = b'"\\ufffe"'
_UNLIMITED = 1 << 62

_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:(")|(\\?)\Z)', re.DOTALL)
"""A string from its opening quote: to its closing quote (group 1), or to the end of the chunk (group 2: a lone
backslash left at the end). Possessive, so a string is scanned once whatever it holds."""
_STRING_REST = re.compile(rb'[^"\\]*+(?:\\.[^"\\]*+)*+(?:(")|(\\?)\Z)', re.DOTALL)
"""The rest of a string the previous chunk ended in."""
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")  # each bracket's depth step, plus one
_CANDIDATE = re.compile(rb"\\u([dD][89a-fA-F][0-9a-fA-F]{2})")
_HIGH = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")
_LOW = re.compile(rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_TAIL = 12
"""A surrogate pair's escapes are 12 bytes: a chunk's last 12 bytes may hold one cut in two."""


class TooDeep(ValueError):
    """The JSON text nests deeper than the limit from byte `offset` (of the line, or of a document that ends
    before the deep container does)."""

    def __init__(self, offset: int, limit: int = MAX_DEPTH) -> None:
        super().__init__(f"JSON nested more than {limit} levels deep at byte {offset}: no trace record is")
        self.offset = offset
        self.limit = limit


class DepthScanner:
    """The nesting depth of a JSON text fed in chunks: where it first goes over `limit`, outside strings."""

    def __init__(self, limit: int = MAX_DEPTH) -> None:
        self.limit = limit
        self.depth = 0
        self.in_string = False
        self.escaped = False

    def feed(self, chunk: bytes) -> int | None:
        """Scan the next chunk; the index in it of the bracket that goes over the limit (the scanner then stands
        before that bracket, at the limit), or None."""
        state = (self.depth, self.in_string, self.escaped)
        brackets = self._brackets(chunk)
        if not brackets:
            return None
        opens = brackets.count(b"[") + brackets.count(b"{")
        if self.depth + opens > self.limit:
            peak = max(accumulate(map(sub, brackets.translate(_STEPS), repeat(1)), initial=self.depth))
            if peak > self.limit:
                self.depth, self.in_string, self.escaped = state
                at = self._exact(chunk, closing=False)
                self.depth, self.in_string, self.escaped = self.limit, False, False
                return at
        self.depth += 2 * opens - len(brackets)
        return None

    def close(self, chunk: bytes) -> int | None:
        """Scan the next chunk of a container being skipped (`depth` brackets open); the index in it just past the
        bracket that closes it, or None."""
        state = (self.depth, self.in_string, self.escaped)
        brackets = self._brackets(chunk)
        if not brackets:
            return None
        opens = brackets.count(b"[") + brackets.count(b"{")
        if self.depth - (len(brackets) - opens) <= 0:
            low = min(accumulate(map(sub, brackets.translate(_STEPS), repeat(1)), initial=self.depth))
            if low <= 0:
                self.depth, self.in_string, self.escaped = state
                at = self._exact(chunk, closing=True)
                self.depth, self.in_string, self.escaped = 0, False, False
                return at
        self.depth += 2 * opens - len(brackets)
        return None

    def _brackets(self, chunk: bytes) -> bytes:
        """The brackets of `chunk` outside strings, in order; the string state carried to the next chunk."""
        pos = 0
        if self.in_string:
            if self.escaped:
                if not chunk:
                    return b""
                pos, self.escaped = 1, False
            m = _STRING_REST.match(chunk, pos)
            assert m is not None  # the pattern matches any rest
            if m.group(1) is None:
                self.escaped = bool(m.group(2))
                return b""
            pos, self.in_string = m.end(), False
        parts = _STRING.split(chunk[pos:] if pos else chunk)
        if len(parts) > 1 and parts[-3] is None:  # the last string runs past the chunk
            self.in_string, self.escaped = True, bool(parts[-2])
        return b"".join(parts[0::3]).translate(None, _NOT_BRACKETS)

    def _exact(self, chunk: bytes, *, closing: bool) -> int:
        """One byte at a time (once per deep container): the index of the bracket that goes over the limit, or
        just past the one that brings the depth to 0 (`closing`)."""
        depth, in_string, escaped = self.depth, self.in_string, self.escaped
        for i, b in enumerate(chunk):
            if in_string:
                if escaped:
                    escaped = False
                elif b == 0x5C:
                    escaped = True
                elif b == 0x22:
                    in_string = False
            elif b == 0x22:
                in_string = True
            elif b in (0x5B, 0x7B):
                depth += 1
                if depth > self.limit and not closing:
                    return i
            elif b in (0x5D, 0x7D):
                depth -= 1
                if depth <= 0 and closing:
                    return i + 1
        raise AssertionError("the fast scan saw the depth cross in this chunk")


def too_deep(text: bytes, limit: int = MAX_DEPTH) -> TooDeep | None:
    """A `TooDeep` for one whole JSON text (a line) nested deeper than `limit`; None otherwise."""
    if text.count(b"[") + text.count(b"{") <= limit:
        return None
    at = DepthScanner(limit).feed(text)
    return None if at is None else TooDeep(at, limit)


def mark_lone_surrogates(raw: bytes) -> tuple[bytes, list[str]]:
    r"""`raw` with each lone surrogate escape (`\ud800` not followed by a low one, a low one after no high one)
    rewritten to `\uffff` (`LONE_MARK`), and the escapes rewritten, in order. Pairs and escaped backslashes
    (`\\ud800` is text) are left alone. A text holding no escape of a surrogate is returned as it is."""
    if b"\\u" not in raw:  # the common case, at C speed
        return raw, []
    first = _CANDIDATE.search(raw)
    if first is None:
        return raw, []
    out: bytearray | None = None
    escapes: list[str] = []
    paired_low = -1
    for m in _CANDIDATE.finditer(raw, first.start()):
        at = m.start()
        run = 1
        while at - run >= 0 and raw[at - run] == 0x5C:
            run += 1
        if run % 2 == 0:  # the backslash is itself escaped: `\\ud800` is text
            continue
        if int(m.group(1), 16) < 0xDC00:  # a high half: a pair if a low half follows at once
            if _LOW.match(raw, m.end()):
                paired_low = m.end()
                continue
        elif at == paired_low:
            continue
        escapes.append(raw[at:at + 6].decode("ascii"))
        if out is None:
            out = bytearray(raw)
        out[at + 2:at + 6] = b"ffff"
    return (raw if out is None else bytes(out)), escapes


def _escape_tail(chunk: bytes) -> int:
    """Where to hold a chunk back so that no escape (or pair of escapes) is cut in two: at the first backslash in
    its last `_TAIL` bytes (or at the high half of a pair just before it), or one before so that the part of its
    run of backslashes handed on is even (what is held back then reads as the run did); the chunk's length when
    there is none."""
    at = chunk.find(b"\\", max(len(chunk) - _TAIL, 0))
    if at < 0:
        return len(chunk)
    if at >= 6 and _HIGH.match(chunk, at - 6):  # a high half just before: held back with what may be its pair
        at -= 6
    start = at
    while start > 0 and chunk[start - 1] == 0x5C:
        start -= 1
    return at - (at - start) % 2


class BoundedJson:
    r"""A binary file as ijson should read it: lone surrogate escapes marked (`LONE_MARK`), and each container
    nested deeper than the limit handed on as the string `"\ufffe"` (`DEEP_MARK`), its bytes skipped unparsed.
    A document that ends inside such a container ends with a `TooDeep` error."""

    def __init__(self, raw: BinaryIO, limit: int = MAX_DEPTH) -> None:
        self._raw = raw
        self._scan = DepthScanner(limit)
        self._skipping: DepthScanner | None = None
        self._carry = b""
        self._refused: TooDeep | None = None
        self._offset = 0
        self.escapes: deque[str] = deque()
        """Lone surrogate escapes marked and not yet reported (`take_escape`), in order."""
        self.deep: deque[int] = deque()
        """Where each container skipped began (byte offsets), not yet reported (`take_deep`), in order."""

    @property
    def limit(self) -> int:
        """The deepest nesting handed on."""
        return self._scan.limit

    @property
    def pending(self) -> bool:
        """Whether a mark handed on may be in a record not yet checked (`find_marks`)."""
        return bool(self.escapes or self.deep)

    def read(self, n: int = -1) -> bytes:
        """Up to about `n` bytes (more when escapes were held back, or a skipped container was marked); b"" at
        the end."""
        if self._refused is not None:
            raise self._refused
        if n == 0:
            return b""
        while chunk := self._next(n if n > 0 else 1 << 16):
            out = self._bound(chunk)
            if out:
                return out
        if self._skipping is not None:  # the document ends inside a container too deep to read
            self._refused = TooDeep(self.deep[-1] if self.deep else self._offset, self.limit)
            raise self._refused
        return b""

    def _next(self, size: int) -> bytes:
        """The next bytes of the file, less a tail that may hold an escape cut in two (kept for the next call)."""
        while True:
            data = self._raw.read(size)
            chunk = self._carry + data
            if not data:
                self._carry = b""
                return chunk
            keep = _escape_tail(chunk)
            chunk, self._carry = chunk[:keep], chunk[keep:]
            if chunk:
                return chunk

    def _bound(self, chunk: bytes) -> bytes:
        """What of `chunk` ijson is handed: skipped containers out, their marks in, escapes marked."""
        out: list[bytes] = []
        pos = 0
        while pos < len(chunk):
            piece = chunk[pos:] if pos else chunk
            if self._skipping is not None:
                end = self._skipping.close(piece)
                if end is None:
                    self._offset += len(piece)
                    break
                self._skipping = None
                self._offset += end
                pos += end
                continue
            cut = self._scan.feed(piece)
            handed = piece if cut is None else piece[:cut]
            marked, escapes = mark_lone_surrogates(handed)
            self.escapes.extend(escapes)
            out.append(marked)
            self._offset += len(handed)
            if cut is None:
                break
            self.deep.append(self._offset)
            out.append(_DEEP_TEXT)
            self._skipping = DepthScanner(_UNLIMITED)
            self._skipping.depth = 1
            self._offset += 1
            pos += cut + 1
        return b"".join(out)

    def take_escape(self) -> str:
        """The oldest lone surrogate escape not yet reported (for the message naming it)."""
        return self.escapes.popleft() if self.escapes else "\\ud800-\\udfff"

    def take_deep(self) -> int:
        """Where the oldest container skipped and not yet reported began."""
        return self.deep.popleft() if self.deep else self._offset


@dataclass(frozen=True)
class Marks:
    """The marks a parsed value holds: the first field with each kind, and how many of each."""

    lone_field: str | None = None
    lone: int = 0
    deep_field: str | None = None
    deep: int = 0


def find_marks(value: Any, skip: frozenset[str] = frozenset()) -> Marks:
    """The strings (and keys) in `value` holding `LONE_MARK` or equal to `DEEP_MARK`, by their dotted paths; top-level
    keys in `skip` are not looked into. Iterative: the value may be as deep as the limit allows."""
    lone_field = deep_field = None
    lone = deep = 0
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            if node == DEEP_MARK:
                deep += 1
                deep_field = deep_field or path or "<value>"
            elif (n := node.count(LONE_MARK)) > 0:
                lone += n
                lone_field = lone_field or path or "<value>"
        elif isinstance(node, dict):
            items: list[tuple[Any, str]] = []
            for k, v in node.items():
                if not path and k in skip:
                    continue
                where = f"{path}.{k}" if path else str(k)
                items += ((k, where), (v, where))
            stack.extend(reversed(items))
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(node))))
    return Marks(lone_field, lone, deep_field, deep)


def lone_surrogate_message(escape: str) -> str:
    """The one-line reason a record holding a lone surrogate escape is quarantined."""
    return (f"lone surrogate escape {escape} (half of a UTF-16 pair, often text cut inside an emoji) is no "
            "Unicode character; the record is not stored: write the text as UTF-8 or escape the whole pair")
