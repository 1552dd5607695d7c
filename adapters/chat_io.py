"""Record-level reading shared by the chat and step-log adapters: file layout, sniffing, ids, field paths.

These formats come as JSON lines, as one JSON array of records, or as one (often pretty-printed) JSON
document holding a single record. `detect_layout` tells them apart from the first bytes alone, so reading
stays a single streaming pass; `iter_records` then yields `(location, record)` pairs or `Quarantine` items
through `adapters.jsonio`, so bad input is reported the same way as in every other adapter.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import ijson
from ijson.common import ObjectBuilder
from pydantic import ValidationError

from agent_factory.adapters.base import HEAD_BYTES, AdapterItem, Quarantine, read_head
from agent_factory.adapters.jsonio import iter_json_array, iter_json_lines
from agent_factory.adapters.model import Conversation
from agent_factory.adapters.source import Source, as_source
from agent_factory.digest import canonical_json

Layout = Literal["lines", "array", "document"]
"""`lines`: one record per line; `array`: a JSON array of records; `document`: the whole file is one record."""

ItemTest = Callable[[Any], bool]
"""Tells whether the first element of a top-level array is a piece of one record (a chat message) rather
than a record: then the array is itself a record (a message list), not a list of records."""

_BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"[\r\n]")


class RecordProblem(Exception):
    """One record is unacceptable; `field` is the dotted path of the offending field (None for the record)."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def never(_: Any) -> bool:
    """An `ItemTest` for formats whose records are never arrays."""
    return False


def _strip(head: bytes) -> bytes:
    return head[len(_BOM):].lstrip() if head.startswith(_BOM) else head.lstrip()


MAX_SNIFF_DEPTH = 64
"""Nesting deeper than this in a file's head is no record of any format we read."""


def partial_value(data: bytes) -> Any:
    """The first JSON value in `data`, as far as it goes: a value cut off by the end of `data` comes back
    with what was read (open containers closed), so sniffing works on a file's head."""
    builder = ObjectBuilder()
    depth = 0
    try:
        # basic_parse builds no prefixes: ijson.parse's prefix strings make a deeply nested head quadratic.
        for event, value in ijson.basic_parse(io.BytesIO(data), multiple_values=True):
            builder.event(event, value)
            if event in ("start_map", "start_array"):
                depth += 1
                if depth > MAX_SNIFF_DEPTH:
                    return None
            elif event in ("end_map", "end_array"):
                depth -= 1
            if depth == 0:
                break
    except (ijson.JSONError, ValueError, UnicodeDecodeError):
        pass
    return getattr(builder, "value", None)


def _first_line(text: bytes, *, complete_file: bool) -> bytes | None:
    """The first line if it ends inside `text` (or `text` is the whole file), else None. A line ends at LF, CRLF
    or a lone CR, as `jsonio.iter_lines` reads them."""
    m = _LINE_END.search(text)
    if m is not None:
        return text[:m.start()]
    return text if complete_file else None


def detect_layout(head: bytes, *, is_item: ItemTest = never) -> Layout:
    """How the records of a file are laid out, from its first bytes.

    A file whose first line is a lone `{` or `[` is a pretty-printed document: one record (`{`, or `[` of
    chat messages) or an array of records. Otherwise a first line holding a whole JSON value means JSON
    lines, except that a one-line file holding an array of records is an array.
    """
    text = _strip(head)
    complete_file = len(head) < HEAD_BYTES
    line = _first_line(text, complete_file=complete_file)
    first = line.strip() if line is not None else None
    if first == b"{":
        return "document"
    if first == b"[":
        return "document" if is_item(_first_item(text)) else "array"
    if not text.startswith(b"["):
        return "lines"
    if first is not None:
        try:
            value = json.loads(first)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, list):
            more = bool(text[len(line or b""):].strip()) or not complete_file
            if more or not value or is_item(value[0]):
                return "lines"
            return "array"
    # A first line longer than the head (or unparsable): decide by what its first element is.
    return "lines" if is_item(_first_item(text)) else "array"


def _first_item(text: bytes) -> Any:
    value = partial_value(text)
    return value[0] if isinstance(value, list) and value else None


def first_record(head: bytes, *, is_item: ItemTest = never) -> Any:
    """The first record of a file (possibly cut short at the end of `head`), for sniffing; None if unreadable."""
    text = _strip(head)
    layout = detect_layout(head, is_item=is_item)
    value = partial_value(text)
    if layout == "array":
        return value[0] if isinstance(value, list) and value else None
    return value


def iter_records(source: Source | Path, *, is_item: ItemTest = never) -> Iterator[tuple[str, Any] | Quarantine]:
    """Stream a source's records as `("line N" | "record N", value)` pairs or `Quarantine` items."""
    src = as_source(source)
    layout = detect_layout(read_head(src), is_item=is_item)
    if layout == "lines":
        return iter_json_lines(src)
    return iter_json_array(src, "item" if layout == "array" else "")


def read_conversations(
    source: Source | Path, convert: Callable[[Any], Conversation], *, kind: str, is_item: ItemTest = never,
) -> Iterator[AdapterItem]:
    """Stream a source's records through `convert`; a `RecordProblem` or a reused id becomes a `Quarantine`."""
    src = as_source(source)
    name = src.id
    seen = SeenIds()
    for item in iter_records(src, is_item=is_item):
        if isinstance(item, Quarantine):
            yield item
            continue
        location, value = item
        try:
            conv = convert(value)
        except RecordProblem as p:
            yield Quarantine(source=name, location=location, field=p.field, message=p.message)
            continue
        first = seen.add(conv.id, location)
        if first is not None:
            yield Quarantine(source=name, location=location, field="id",
                             message=f"duplicate {kind} id {conv.id!r}: already used at {first}")
            continue
        yield conv


def loc_number(location: str) -> int:
    """The number in a `line N` / `record N` location."""
    try:
        return int(location.rsplit(" ", 1)[-1])
    except ValueError:
        return -1


class SeenIds:
    """The ids a file has used so far, for duplicate checks at constant memory per file.

    Ids are kept as 64-bit digests with the record number of their first use, in a preallocated
    open-addressing table: 1 MiB holds 32k ids before the table doubles (16 bytes per id beyond that),
    so reading a file does not keep its records or their id strings alive. Two different ids share a
    digest with probability about n^2 / 2^65 (3e-9 for a million ids).
    """

    def __init__(self, *, slots_log2: int = 16) -> None:
        self._size = 1 << slots_log2
        self._keys = array("Q", [0]) * self._size
        self._vals = array("q", [0]) * self._size
        self._count = 0
        self._label = "record"

    @staticmethod
    def _digest(key: str) -> int:
        d = int.from_bytes(hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")
        return d or 1

    def _slot(self, keys: array[int], mask: int, d: int) -> int:
        i = d & mask
        while keys[i] != 0 and keys[i] != d:
            i = (i + 1) & mask
        return i

    def add(self, key: str, location: str) -> str | None:
        """Record `key` as used at `location`; if it was used before, the location of its first use."""
        self._label = location.rsplit(" ", 1)[0] if " " in location else self._label
        d = self._digest(key)
        i = self._slot(self._keys, self._size - 1, d)
        if self._keys[i] == d:
            return f"{self._label} {self._vals[i]}"
        self._keys[i] = d
        self._vals[i] = loc_number(location)
        self._count += 1
        if 2 * self._count > self._size:
            self._grow()
        return None

    def _grow(self) -> None:
        size = 2 * self._size
        keys = array("Q", [0]) * size
        vals = array("q", [0]) * size
        for k, v in zip(self._keys, self._vals, strict=True):
            if k:
                j = self._slot(keys, size - 1, k)
                keys[j] = k
                vals[j] = v
        self._size, self._keys, self._vals = size, keys, vals

    def __len__(self) -> int:
        return self._count


def _is_union_tag(part: str) -> bool:
    # pydantic adds the union member tried (`str`, `list[Step]`, `function-after[...]`) to error locations.
    return any(c in part for c in "[(-") or part in {"str", "int", "float", "bool", "none", "dict", "list"}


def dotted(loc: tuple[int | str, ...] | list[int | str], prefix: str = "") -> str:
    """A pydantic error location as a dotted path: `("messages", 3, "content")` -> `messages[3].content`."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _is_union_tag(part):
            out += f".{part}" if out else part
    return out


def json_type(value: Any) -> str:
    """The JSON type name of a value, for messages (`object`, `array`, `string`, `number`, ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def problem_from(err: ValidationError, prefix: str = "") -> RecordProblem:
    """The most specific error of a pydantic validation as a `RecordProblem` with a dotted field path."""
    errors = err.errors(include_url=False)
    best = max(errors, key=lambda e: len([p for p in e["loc"] if not (isinstance(p, str) and _is_union_tag(p))]))
    field = dotted(best["loc"], prefix) or (prefix or None)
    kind = best["type"]
    if kind == "missing":
        return RecordProblem(field, "required field is missing")
    if kind == "extra_forbidden":
        return RecordProblem(field, "unknown field (not part of the schema)")
    msg = best["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind not in ("value_error", "assertion_error"):
        got = best.get("input")
        shown = repr(got) if isinstance(got, int | float) or (isinstance(got, str) and len(got) <= 40) else None
        msg = f"{msg} (got {shown or json_type(got)})"
    return RecordProblem(field, msg)


def to_text(value: Any) -> str | None:
    """A JSON value as span text: strings unchanged, anything else as compact JSON, None stays None."""
    if value is None or isinstance(value, str):
        return value
    return canonical_json(value)


def json_safe(value: Any) -> Any:
    """A value made JSON-compatible for span and conversation attributes (floats from ijson stay floats)."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return str(value)
