"""Streaming JSON readers shared by the adapters, with record-level error reporting.

Both readers yield `(location, obj)` pairs or `Quarantine` items and never raise on bad data: a bad line
or record is reported and reading goes on where the format allows it (JSON lines), or stops with one
error naming the byte where the document broke (a single JSON document).

Huge fields are kept: a string over the field limit is cut to its head and tail around a marker that says
how much is missing (`CUT_MARKER`; coverage declares such a field truncated), and the cut is noted for the
ingest report. Only a record over the hard limit is quarantined. Ingest sets the limits around each file
with `reading(...)`; every reader here, and the OTel readers through `limit_record`, apply them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ijson
import orjson
from pydantic import Field

from agent_factory.adapters.base import Quarantine
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

_DIGIT_MAP = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))  # every digit to "0", the rest to " "
_LONG_RUN = b"0" * 19


def _may_hold_big_int(text: str | bytes) -> bool:
    """Whether `text` may hold a JSON integer orjson would not read exactly (one of 19 digits or more: past
    64 bits it gives a float): a run of 19 digits that is not inside a string, as far as the characters before
    it tell (a number follows `:`, `,`, `[` or nothing, then spaces and a sign). Digits quoted as a string (OTLP
    nanosecond times) are no such run; a false alarm only costs `json`'s speed."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    digits = raw.translate(_DIGIT_MAP)
    at = digits.find(_LONG_RUN)
    while at >= 0:  # `find` gives the first position of a run: `at` starts one
        j = at - 1
        if j >= 0 and raw[j] == 45:  # "-"
            j -= 1
        while j >= 0 and raw[j] in b" \t\r\n":
            j -= 1
        if j < 0 or raw[j] in b":,[":
            return True
        end = at + len(_LONG_RUN)
        while end < len(digits) and digits[end] == 48:
            end += 1
        at = digits.find(_LONG_RUN, end)
    return False
_NAN_KEY = re.compile(r'"([^"\\]{1,200})"\s*:\s*(?:-?NaN|-?Infinity)\b')


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

    Adapters keep their `read(path)` signature: the readers below look the limits up here, so ingest sets
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
    obj: Any, *, source: str, location: str, skip: frozenset[str] = frozenset(),
) -> Any | Quarantine:
    """`obj` with every string over the field limit cut (in place: the record is fresh from the parser), or
    a `Quarantine` when its text is over the record limit. Top-level keys in `skip` (a span's children,
    read as records of their own) are neither measured nor cut. Cuts are noted in the `reading` block."""
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
    except RecursionError:
        # ijson builds arbitrarily deep values without recursion; walking one this deep is no trace record.
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


class _BareConstant(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _BareConstant(name)


def _nan_field(text: str) -> str | None:
    m = _NAN_KEY.search(text)
    return m.group(1) if m else None


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`, the same values (types included), faster: orjson where it gives exactly those values.

    orjson refuses what it does not read like `json` (bare NaN, lone surrogate escapes, syntax errors), and
    those texts go to `json`, which accepts or raises as before. So does a text with a run of 19 digits or
    more that is a number (not a string): orjson reads an integer past 64 bits as a float, where `json` keeps
    it exact.
    """
    if not _may_hold_big_int(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def parse_json_text(text: str, *, source: str, location: str) -> Any | Quarantine:
    """Parse one JSON text strictly (no bare NaN / Infinity); a `Quarantine` on failure."""
    try:
        # The fast parser's values where it gives `json`'s (see `loads`); the rest is parsed, or reported, by
        # `json` as before.
        if not _may_hold_big_int(text):
            return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except _BareConstant as e:
        return Quarantine(
            source=source, location=location, field=_nan_field(text),
            message=f"bare {e} is not valid JSON; write null or a string",
        )
    except json.JSONDecodeError as e:
        return Quarantine(
            source=source, location=location, field=None,
            message=f"invalid JSON at column {e.colno}: {e.msg}",
        )
    except RecursionError:
        return Quarantine(source=source, location=location, message="JSON nested too deeply")


def iter_json_lines(path: Path) -> Iterator[tuple[str, Any] | Quarantine]:
    """One JSON value per non-blank line; yields `("line N", value)` or a `Quarantine` for that line."""
    source = str(path)
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            item = json_line(raw, lineno=lineno, source=source)
            if item is not None:
                yield item


def json_line(raw: bytes, *, lineno: int, source: str) -> tuple[str, Any] | Quarantine | None:
    """Line `lineno` of a JSON-lines file as `("line N", value)`, a `Quarantine` for it, or None when blank
    (what `iter_json_lines` yields for it; ingest's worker processes read lines with it too)."""
    if not raw.strip():
        return None
    location = f"line {lineno}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return Quarantine(source=source, location=location, message=f"invalid UTF-8 at byte {e.start} of the line")
    if lineno == 1 and text.startswith("\ufeff"):
        text = text[1:]
    obj = parse_json_text(text, source=source, location=location)
    if not isinstance(obj, Quarantine) and not _fits(len(text)):
        obj = limit_record(obj, source=source, location=location)
    return obj if isinstance(obj, Quarantine) else (location, obj)


def iter_json_array(
    path: Path, prefix: str = "item", *, label: str = "record",
) -> Iterator[tuple[str, Any] | Quarantine]:
    """Stream the items under `prefix` of one JSON document (ijson); `("record N", item)` pairs.

    A syntax error (truncated file, invalid UTF-8, bare NaN) ends the stream with one `Quarantine` that
    names the record index reached: the records before it are kept.
    """
    source = str(path)
    done = 0
    with open(path, "rb") as f:
        try:
            for obj in ijson.items(f, prefix, use_float=True):
                location = f"{label} {done}"
                done += 1
                item = limit_record(obj, source=source, location=location)
                yield item if isinstance(item, Quarantine) else (location, item)
        except ijson.IncompleteJSONError as e:
            msg = str(e).strip().splitlines()[0] if str(e).strip() else "unexpected end of file"
            yield Quarantine(
                source=source, location=f"{label} {done}",
                message=f"JSON document broken or truncated: {msg}",
            )
        except (ijson.JSONError, UnicodeDecodeError, ValueError) as e:
            text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            yield Quarantine(source=source, location=f"{label} {done}", message=f"invalid JSON: {text}")
