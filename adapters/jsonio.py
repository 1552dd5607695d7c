"""Streaming JSON readers shared by the adapters, with record-level error reporting.

Both readers yield `(location, obj)` pairs or `Quarantine` items and never raise on bad data: a bad line
or record is reported and reading goes on where the format allows it (JSON lines), or stops with one
error naming the byte where the document broke (a single JSON document).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ijson

from adapters.base import Quarantine

MAX_FIELD_CHARS = 8 * 1024 * 1024
"""A string field longer than this quarantines its record (a 10 MB field is a defect, not evidence)."""

_NAN_KEY = re.compile(r'"([^"\\]{1,200})"\s*:\s*(?:-?NaN|-?Infinity)\b')


class _BareConstant(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _BareConstant(name)


def _nan_field(text: str) -> str | None:
    m = _NAN_KEY.search(text)
    return m.group(1) if m else None


def find_oversize(obj: Any, limit: int = MAX_FIELD_CHARS, path: str = "") -> str | None:
    """Dotted path of the first string longer than `limit` in a JSON value, or None."""
    if isinstance(obj, str):
        return path or "<value>" if len(obj) > limit else None
    if isinstance(obj, dict):
        for k, v in obj.items():
            hit = find_oversize(v, limit, f"{path}.{k}" if path else str(k))
            if hit:
                return hit
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            hit = find_oversize(v, limit, f"{path}[{i}]")
            if hit:
                return hit
    return None


def parse_json_text(text: str, *, source: str, location: str) -> Any | Quarantine:
    """Parse one JSON text strictly (no bare NaN / Infinity); a `Quarantine` on failure."""
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


def iter_json_lines(path: Path, *, max_field_chars: int = MAX_FIELD_CHARS) -> Iterator[tuple[str, Any] | Quarantine]:
    """One JSON value per non-blank line; yields `("line N", value)` or a `Quarantine` for that line."""
    source = str(path)
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            location = f"line {lineno}"
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield Quarantine(
                    source=source, location=location,
                    message=f"invalid UTF-8 at byte {e.start} of the line",
                )
                continue
            if lineno == 1 and text.startswith("\ufeff"):
                text = text[1:]
            obj = parse_json_text(text, source=source, location=location)
            if isinstance(obj, Quarantine):
                yield obj
                continue
            if len(text) > max_field_chars:
                big = find_oversize(obj, max_field_chars)
                if big:
                    yield Quarantine(
                        source=source, location=location, field=big,
                        message=f"field longer than {max_field_chars} characters",
                    )
                    continue
            yield location, obj


def iter_json_array(
    path: Path, prefix: str = "item", *, label: str = "record", max_field_chars: int = MAX_FIELD_CHARS
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
                big = find_oversize(obj, max_field_chars)
                if big:
                    yield Quarantine(
                        source=source, location=location, field=big,
                        message=f"field longer than {max_field_chars} characters",
                    )
                    continue
                yield location, obj
        except ijson.IncompleteJSONError as e:
            msg = str(e).strip().splitlines()[0] if str(e).strip() else "unexpected end of file"
            yield Quarantine(
                source=source, location=f"{label} {done}",
                message=f"JSON document broken or truncated: {msg}",
            )
        except (ijson.JSONError, UnicodeDecodeError, ValueError) as e:
            text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            yield Quarantine(source=source, location=f"{label} {done}", message=f"invalid JSON: {text}")
