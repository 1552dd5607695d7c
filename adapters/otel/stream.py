"""ijson event streaming for OTel documents, and cheap sniffing of a file's head.

`walk` hands over whole values only at the prefixes asked for (one span, one resource) and marks the start
and end of enclosing containers, so a reader can keep per-block context (resource attributes, indices)
while memory stays bounded by one span rather than by the file.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO, Literal

import ijson
from ijson.common import ObjectBuilder

from agent_factory.adapters.base import Quarantine
from agent_factory.adapters.jsonguard import BoundedJson
from agent_factory.adapters.jsonio import DOCUMENT_ERRORS, document_error

Event = tuple[Literal["value", "start", "end"], str, Any]
_OPEN = ("start_map", "start_array")
_CLOSE = ("end_map", "end_array")


def walk(f: BoundedJson | BinaryIO, *, collect: Iterable[str], mark: Iterable[str] = (),
         multiple_values: bool = False) -> Iterator[Event]:
    """Stream `("value", prefix, obj)` for each whole value at a prefix in `collect`, and `("start" | "end",
    prefix, event)` around containers at a prefix in `mark` (event: `start_map`, `end_array`, ...).
    Raises ijson / decoding errors as they come."""
    want, marks = frozenset(collect), frozenset(mark)
    events = ijson.parse(f, use_float=True, multiple_values=multiple_values)
    for prefix, event, value in events:
        if event == "map_key":
            continue
        if prefix in want and event not in _CLOSE:
            if event in _OPEN:
                builder = ObjectBuilder()
                builder.event(event, value)
                depth = 1
                for _p, ev, val in events:
                    builder.event(ev, val)
                    if ev in _OPEN:
                        depth += 1
                    elif ev in _CLOSE:
                        depth -= 1
                        if depth == 0:
                            break
                yield "value", prefix, builder.value
            else:
                yield "value", prefix, value
        elif prefix in marks:
            if event in _OPEN:
                yield "start", prefix, event
            elif event in _CLOSE:
                yield "end", prefix, event


def stream_error(exc: Exception, *, source: str, location: str) -> Quarantine:
    """The one `Quarantine` that ends a document the stream could not read on (`adapters.jsonio.document_error`)."""
    return document_error(exc, source=source, location=location)


STREAM_ERRORS = DOCUMENT_ERRORS
"""What `walk` may raise on bad input (ijson.IncompleteJSONError is a JSONError, `jsonguard.TooDeep` a
ValueError)."""


def head_keys(head: bytes, *, record: Literal["top", "first_item"], limit: int = 2000) -> tuple[str, set[str]]:
    """The first character of the head and the keys seen in it, as `prefix:key` for keys of the first record.

    `record="top"` reads the first JSON value (a line of JSON lines, or a whole document); `first_item` reads
    the first element of a top-level array. A truncated head just yields the keys seen before the cut.
    """
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    first = text[:1].decode("ascii", "replace")
    keys: set[str] = set()
    depth = 0
    try:
        for n, (prefix, event, value) in enumerate(ijson.parse(io.BytesIO(text), multiple_values=True)):
            if n > limit * 50:
                break
            if event == "map_key":
                keys.add(f"{prefix}:{value}")
                if len(keys) > limit:
                    break
            elif event in _OPEN:
                depth += 1
                if depth > 64:  # no span format nests this deep; ijson's prefixes would make it quadratic
                    break
            elif event in _CLOSE:
                depth -= 1
                done_top = record == "top" and depth == 0
                done_item = record == "first_item" and depth == 1 and prefix == "item"
                if done_top or done_item:
                    break
    except (ijson.JSONError, UnicodeDecodeError, ValueError):
        pass  # a truncated or odd head: decide on what was seen
    return first, keys
