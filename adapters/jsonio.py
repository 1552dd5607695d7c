r"""Streaming JSON readers shared by the adapters, with record-level error reporting.

Both readers yield `(location, obj)` pairs or `Quarantine` items and never raise on bad data: a bad line
or record is reported and reading goes on where the format allows it (JSON lines), or stops with one
error naming the byte where the document broke (a single JSON document).

Huge fields are kept: a string over the field limit is cut to its head and tail around a marker that says
how much is missing (`CUT_MARKER`; coverage declares such a field truncated), and the cut is noted for the
ingest report. Only a record over the hard limit is quarantined. Ingest sets the limits around each file
with `reading(...)`; every reader here, and the OTel readers through `limit_record`, apply them.

Every reader is bounded in depth and refuses lone surrogates the same way (`jsonguard`): a line nested deeper
than `MAX_DEPTH` is quarantined alone; a document is read through `open_document`, which hands the parser each
container nested deeper as a mark and skips its bytes unparsed, so the record holding it is quarantined naming
the field and reading goes on (a document that ends inside one ends with one line naming the record). A record
holding a lone surrogate escape (`\ud800` without its pair) is quarantined naming the field, never stored
altered. JSON-lines records end at LF, CRLF or a lone CR, as an editor numbers the lines (`iter_lines`); a
Unicode line separator inside a string is text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import ijson
from pydantic import Field

from agent_factory.adapters.base import Quarantine
from agent_factory.adapters.jsonguard import (
    LONE_MARK,
    MAX_DEPTH,
    BoundedJson,
    TooDeep,
    find_marks,
    lone_surrogate_message,
    mark_lone_surrogates,
    too_deep,
)
from agent_factory.adapters.jsontext import REFUSED, fast_loads, parse_json_text
from agent_factory.adapters.jsontext import loads as loads
from agent_factory.adapters.jsontext import loads_embedded as loads_embedded
from agent_factory.adapters.source import Source, as_source
from agent_factory.frozen import Frozen

MAX_FIELD_CHARS = 8 * 1024 * 1024
"""Default longest string field kept whole (8 MiB characters); a longer one is cut, head and tail kept."""
MAX_RECORD_CHARS = 64 * 1024 * 1024
"""Default hard limit: a record holding more text than this (all its strings together) is quarantined."""
MIN_FIELD_CHARS = 1024
"""The smallest field limit accepted: what is kept must hold the cut marker and some text on either side."""

CUT_MARKER = "[agent-factory: {cut} of {total} characters cut here at ingest]"
"""What replaces the middle of a cut field; coverage finds it with `CUT_PATTERN` and declares the cut."""
CUT_PATTERN = re.compile(r"\[agent-factory: (\d+) of (\d+) characters cut here at ingest\]")
"""Finds a cut marker; group 1 is the characters cut, group 2 the field's original length."""

class FieldLimits(Frozen):
    """How much text one field and one record may hold when read."""

    max_field_chars: int = Field(default=MAX_FIELD_CHARS, ge=MIN_FIELD_CHARS)
    """A string longer than this is cut to this length: its head and tail are kept around a marker saying how
    much was cut (OpenTelemetry's attribute-length limit truncates too, but silently)."""
    max_record_chars: int = Field(default=MAX_RECORD_CHARS, gt=0)
    """A record whose strings hold more characters than this in all is quarantined, not cut: no single field
    is the problem, and keeping pieces of every field would not be the record any more."""


class FieldCut(Frozen):
    """One field that was cut on reading: where it was, how long it was, how much was kept."""

    source: str
    """The file."""
    location: str
    """The record (`line 3`, `record 0`, `spans[0] child_spans[2]`, ...)."""
    field: str
    """Dotted path of the string within the record, as the source spells it."""
    original_chars: int = Field(ge=0)
    """Length of the string in the source."""
    kept_chars: int = Field(ge=0)
    """Length of what was kept, marker included."""


@dataclass(frozen=True)
class _Reading:
    limits: FieldLimits
    cuts: list[FieldCut] | None


_READING: ContextVar[_Reading] = ContextVar("adapters_jsonio_reading", default=_Reading(FieldLimits(), None))


@contextmanager
def reading(limits: FieldLimits) -> Iterator[list[FieldCut]]:
    """Read with `limits` inside the block; the list it yields collects every field cut meanwhile.

    Adapters keep their `read(source)` signature: the readers below look the limits up here, so ingest sets
    them once around a file instead of every adapter passing them down.
    """
    cuts: list[FieldCut] = []
    token = _READING.set(_Reading(limits, cuts))
    try:
        yield cuts
    finally:
        _READING.reset(token)


def current_limits() -> FieldLimits:
    """The limits in force (the defaults outside a `reading` block)."""
    return _READING.get().limits


def cut_text(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters: head, a marker saying how much is missing, tail."""
    if len(text) <= limit:
        return text
    probe = CUT_MARKER.format(cut=len(text), total=len(text))
    keep = max(limit - len(probe) - 2, 0)
    head = keep - keep // 2
    tail = keep - head
    marker = CUT_MARKER.format(cut=len(text) - head - tail, total=len(text))
    return f"{text[:head]}\n{marker}\n{text[len(text) - tail:] if tail else ''}"


def limit_record(
    obj: Any, *, source: str, location: str, skip: frozenset[str] = frozenset(), marks: BoundedJson | None = None,
) -> Any | Quarantine:
    """`obj` with every string over the field limit cut (in place: the record is fresh from the parser), or
    a `Quarantine` when its text is over the record limit. Top-level keys in `skip` (a span's children,
    read as records of their own) are neither measured nor cut. Cuts are noted in the `reading` block.
    `marks`: the document reader `obj` came from: a record holding what it marked is quarantined (`marked`)."""
    if marks is not None and marks.pending:
        bad = marked(obj, source=source, location=location, reader=marks, skip=skip)
        if bad is not None:
            return bad
    limits = _READING.get().limits
    total = 0
    largest: tuple[int, str] = (-1, "")
    cuts: list[tuple[str, int, int]] = []

    def visit(value: Any, path: str) -> Any:
        nonlocal total, largest
        if isinstance(value, str):
            n = len(value)
            total += n
            if n > largest[0]:
                largest = (n, path or "<value>")
            if n > limits.max_field_chars:
                value = cut_text(value, limits.max_field_chars)
                cuts.append((path or "<value>", n, len(value)))
            return value
        if isinstance(value, dict):
            for k in value:
                if not path and k in skip:
                    continue
                total += len(k)
                value[k] = visit(value[k], f"{path}.{k}" if path else str(k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                value[i] = visit(v, f"{path}[{i}]")
        return value

    try:
        obj = visit(obj, "")
    except RecursionError:  # not within MAX_DEPTH, which every reader holds records to (a backstop)
        return Quarantine(source=source, location=location, message="JSON nested too deeply")
    if total > limits.max_record_chars:
        return Quarantine(
            source=source, location=location, field=largest[1] if largest[0] >= 0 else None,
            message=(f"record holds {total} characters of text, over the hard limit of {limits.max_record_chars}"
                     f" (largest field: {largest[0]} characters)"),
        )
    sink = _READING.get().cuts
    if sink is not None:
        sink.extend(FieldCut(source=source, location=location, field=f, original_chars=n, kept_chars=k)
                    for f, n, k in cuts)
    return obj


def _fits(text_chars: int) -> bool:
    # A JSON text no longer than the field limit has no string over it and no more text than that in all.
    limits = _READING.get().limits
    return text_chars <= min(limits.max_field_chars, limits.max_record_chars)


def marked(
    obj: Any, *, source: str, location: str, reader: BoundedJson | None = None, escapes: list[str] | None = None,
    skip: frozenset[str] = frozenset(),
) -> Quarantine | None:
    """A `Quarantine` naming the field of `obj` that holds a container too deep to read or a lone surrogate escape
    (as `jsonguard` marked them: in a document by `reader`, in a line with `escapes`), or None. The marks found are
    taken from the reader, so each is reported once."""
    found = find_marks(obj, skip)
    if not (found.deep or found.lone):
        return None
    taken = [reader.take_escape() for _ in range(found.lone)] if reader is not None else escapes or []
    escape = taken[0] if taken else "\\ud800-\\udfff"
    offsets = [reader.take_deep() for _ in range(found.deep)] if reader is not None else []
    if found.deep_field is not None:
        limit = reader.limit if reader is not None else MAX_DEPTH
        return Quarantine(source=source, location=location, field=_short(found.deep_field),
                          message=(f"JSON nested more than {limit} levels deep at byte {offsets[0] if offsets else 0} "
                                   "of the document: no trace record is"))
    field = (found.lone_field or "<value>").replace(LONE_MARK, escape)
    return Quarantine(source=source, location=location, field=_short(field), message=lone_surrogate_message(escape))


def _short(field: str, most: int = 160) -> str:
    """A field path shown whole up to `most` characters, else its head and tail (a path as deep as the limit)."""
    return field if len(field) <= most else f"{field[:most // 2]}...{field[-(most // 2):]}"


def too_deep_message(e: TooDeep, *, document: bool) -> str:
    """The one-line reason for JSON nested deeper than the limit, in a document (whose rest is not read) or a
    line."""
    if document:
        return (f"JSON nested more than {e.limit} levels deep at byte {e.offset} of the document: no trace record "
                "is; the rest of the document is not read")
    return f"JSON nested more than {e.limit} levels deep at byte {e.offset} of the line: no trace record is"


class Hinted:
    """Adds a source's encoding hint (`Source.encoding_hint`, looked up once) to a quarantine that says the
    source is not UTF-8."""

    def __init__(self, source: Source | Path) -> None:
        self._source = as_source(source)
        self._hint: str | None = None
        self._looked = False

    def __call__(self, q: Quarantine) -> Quarantine:
        """`q`, with the hint when it is about invalid UTF-8 and the file looks like another encoding."""
        if "utf-8" not in q.message.lower():
            return q
        if not self._looked:
            self._hint, self._looked = self._source.encoding_hint(), True
        return q if self._hint is None else q.model_copy(update={"message": f"{q.message}; {self._hint}"})


def iter_lines(f: BinaryIO, block: int = 1 << 20) -> Iterator[tuple[int, bytes]]:
    """A binary file's lines with their numbers from 1, each with its line end: a line ends at LF, CRLF or a lone
    CR (old Mac files), the lines an editor shows; nothing else ends one (U+2028 and the like are text in a
    string). Read a block at a time, so a file without any LF is not read whole."""
    lineno = 0
    pending: list[bytes] = []
    after_cr = False
    while data := f.read(block):
        if after_cr and data[:1] == b"\n":
            data = data[1:]  # the LF of a CRLF cut between blocks
        after_cr = data[-1:] == b"\r"
        for piece in data.splitlines(keepends=True):  # bytes split at LF, CRLF and CR only
            if piece[-1:] in (b"\n", b"\r"):
                if pending:
                    pending.append(piece)
                    piece = b"".join(pending)
                    pending = []
                lineno += 1
                yield lineno, piece
            else:
                pending.append(piece)
    if pending:
        yield lineno + 1, b"".join(pending)


def iter_json_lines(given: Source | Path) -> Iterator[tuple[str, Any] | Quarantine]:
    """One JSON value per non-blank line of a source (decoded); yields `("line N", value)` or a `Quarantine` for
    that line."""
    src = as_source(given)
    source = src.id
    hinted = Hinted(src)
    with src.open_text() as f:
        for lineno, raw in iter_lines(f):
            item = json_line(raw, lineno=lineno, source=source)
            if item is not None:
                yield hinted(item) if isinstance(item, Quarantine) else item


def json_line(raw: bytes, *, lineno: int, source: str) -> tuple[str, Any] | Quarantine | None:
    """Line `lineno` of a JSON-lines file as `("line N", value)`, a `Quarantine` for it, or None when blank
    (what `iter_json_lines` yields for it; ingest's worker processes read lines with it too)."""
    if not raw.strip():
        return None
    location = f"line {lineno}"
    deep = too_deep(raw)
    if deep is not None:
        return Quarantine(source=source, location=location, message=too_deep_message(deep, document=False))
    obj = fast_loads(raw)  # most lines; what it reads holds no lone surrogate, no invalid UTF-8
    if obj is REFUSED:
        raw, escapes = mark_lone_surrogates(raw)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            return Quarantine(source=source, location=location,
                              message=f"invalid UTF-8 at byte {e.start} of the line")
        if lineno == 1 and text.startswith("\ufeff"):
            text = text[1:]
        obj = parse_json_text(text, source=source, location=location)
        if escapes and not isinstance(obj, Quarantine):
            obj = marked(obj, source=source, location=location, escapes=escapes) or obj
    if not isinstance(obj, Quarantine) and not _fits(len(raw)):  # bytes: at least the characters
        obj = limit_record(obj, source=source, location=location)
    return obj if isinstance(obj, Quarantine) else (location, obj)


@contextmanager
def open_document(given: Source | Path) -> Iterator[BoundedJson]:
    """A source (decoded) opened for ijson within the bounds of every reader (`jsonguard.BoundedJson`): lone
    surrogate escapes and containers nested deeper than `MAX_DEPTH` marked (pass it to `limit_record` as
    `marks`)."""
    with as_source(given).open_text() as f:
        yield BoundedJson(f)


def document_error(e: Exception, *, source: str, location: str) -> Quarantine:
    """The one `Quarantine` that ends a document the parser could not read on: too deep, broken or truncated,
    invalid."""
    if isinstance(e, TooDeep):
        return Quarantine(source=source, location=location, message=too_deep_message(e, document=True))
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    if isinstance(e, ijson.IncompleteJSONError):
        return Quarantine(source=source, location=location,
                          message=f"JSON document broken or truncated: {text or 'unexpected end of file'}")
    return Quarantine(source=source, location=location, message=f"invalid JSON: {text or type(e).__name__}")


DOCUMENT_ERRORS = (ijson.JSONError, UnicodeDecodeError, ValueError)
"""What reading a document through ijson may raise on bad input (`TooDeep` is a ValueError, IncompleteJSONError a
JSONError)."""


def iter_json_array(
    given: Source | Path, prefix: str = "item", *, label: str = "record",
) -> Iterator[tuple[str, Any] | Quarantine]:
    """Stream the items under `prefix` of one JSON document (ijson); `("record N", item)` pairs.

    A syntax error (truncated file, invalid UTF-8, bare NaN) or nesting over `MAX_DEPTH` ends the stream with
    one `Quarantine` that names the record index reached: the records before it are kept.
    """
    src = as_source(given)
    source = src.id
    done = 0
    with open_document(src) as f:
        try:
            for obj in ijson.items(f, prefix, use_float=True):
                location = f"{label} {done}"
                done += 1
                item = limit_record(obj, source=source, location=location, marks=f)
                yield item if isinstance(item, Quarantine) else (location, item)
        except DOCUMENT_ERRORS as e:
            yield Hinted(src)(document_error(e, source=source, location=f"{label} {done}"))
