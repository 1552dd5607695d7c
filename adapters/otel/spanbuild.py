"""The part every OTel reader shares: checking ids, times and status, and building the `Span`.

Each reader pulls its source's fields into a `SpanParts`; `build_span` validates what is left and maps the
attributes. Any defect raises `BadField(field, message)` with the field named as in the source, which the
reader turns into one `Quarantine` with `quarantine(...)`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import ValidationError

from agent_factory.adapters.base import Quarantine
from agent_factory.adapters.model import Span, SpanStatus
from agent_factory.adapters.otel.attributes import exception_message, map_attributes
from agent_factory.adapters.otel.timeutil import WrongUnit, millis_between
from agent_factory.adapters.otel.values import AttributeValueError, attribute_dict, jsonable

_HEX = re.compile(r"^[0-9a-fA-F]+$")
_STATUS_WORDS: dict[str, SpanStatus] = {
    "ok": "ok", "status_code_ok": "ok", "1": "ok",
    "error": "error", "status_code_error": "error", "2": "error",
    "unset": "unset", "status_code_unset": "unset", "0": "unset", "": "unset",
}


class BadField(ValueError):
    """A record defect: the offending field (dotted, as named in the source) and what is wrong with it."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def quarantine(source: str, location: str, err: BadField) -> Quarantine:
    """The `Quarantine` item for one bad span."""
    return Quarantine(source=source, location=location, field=err.field, message=err.message)


def read_id(value: Any, field: str, *, encoding: Literal["text", "otlp"] = "text") -> str | None:
    """An id as text; None when missing or empty. `otlp` ids must be hex, or base64 (converted to hex)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadField(field, f"id must be a string, got {type(value).__name__}")
    if encoding == "text":
        return value.strip() or None
    if _HEX.match(value) and len(value) % 2 == 0:
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise BadField(field, f"id is neither hex nor base64: {value!r}") from None
    if not raw:
        return None
    return raw.hex()


def require_id(value: Any, field: str, *, encoding: Literal["text", "otlp"] = "text") -> str:
    """Like `read_id`, but a missing id is a defect."""
    got = read_id(value, field, encoding=encoding)
    if got is None:
        raise BadField(field, "missing id")
    return got


def read_status(value: Any, field: str) -> SpanStatus:
    """A status code (`Ok`, `STATUS_CODE_ERROR`, 0/1/2); unknown codes read as `unset`."""
    if value is None:
        return "unset"
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise BadField(field, f"status code must be a string or an integer, got {type(value).__name__}")
    return _STATUS_WORDS.get(str(value).strip().lower(), "unset")


def read_time(value: Any, field: str, parse: Callable[[Any], datetime | None]) -> datetime | None:
    """`parse(value)`, with a parse failure reported against `field`."""
    if value is None:
        return None
    try:
        return parse(value)
    except WrongUnit as e:
        raise BadField(field, str(e)) from None
    except ValueError as e:
        raise BadField(field, f"unparsable timestamp: {e}") from None


def read_attributes(raw: Any, container: str) -> dict[str, Any]:
    """Flat span attributes from a dict or an OTLP key/value list, defects reported against `container`."""
    try:
        return attribute_dict(raw, container)
    except AttributeValueError as e:
        raise BadField(e.key if e.key.startswith(container) else f"{container}.{e.key}", e.message) from None


def read_events(raw: Any, field: str, parse_time: Callable[[Any], datetime | None]) -> list[dict[str, Any]]:
    """Span events as `{"name", "time", "attributes"}` with flat attributes and an ISO time (or the raw one)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise BadField(field, f"events must be a list, got {type(raw).__name__}")
    out: list[dict[str, Any]] = []
    for i, ev in enumerate(raw):
        if not isinstance(ev, dict):
            raise BadField(f"{field}[{i}]", f"event must be an object, got {type(ev).__name__}")
        raw_time = next((ev[k] for k in ("timeUnixNano", "time", "Timestamp", "timestamp") if k in ev), None)
        try:
            when: Any = parse_time(raw_time) if raw_time is not None else None
            when = when.isoformat() if when is not None else None
        except ValueError:
            when = str(raw_time)  # an event's clock is informative only; its span is still sound
        attrs_key = next((k for k in ("attributes", "Attributes") if k in ev), "attributes")
        out.append({
            "name": str(ev.get("name", ev.get("Name", ""))),
            "time": when,
            "attributes": read_attributes(ev.get(attrs_key), f"{field}[{i}].{attrs_key}"),
        })
    return out


@dataclass
class SpanParts:
    """What a reader pulled out of one source span, before validation and mapping."""

    trace_id: str
    span_id: str
    parent_id: str | None = None
    name: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    """Flat attributes (resource attributes already merged under the span's); `build_span` takes ownership."""
    attrs_field: str = "attributes"
    """The source's name for the attribute container, for error fields."""
    start: datetime | None = None
    end: datetime | None = None
    end_field: str = "end"
    duration_ms: float | None = None
    duration_field: str = "duration"
    status: SpanStatus = "unset"
    status_message: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    """Source fields kept as `otel.*` attributes (scope, span kind, events, ...), never overriding the span's."""


def build_span(p: SpanParts) -> Span:
    """Validate times and tokens, map the attributes, and build the `Span`; raises `BadField`."""
    start, end, duration = p.start, p.end, p.duration_ms
    if start is not None and end is not None:
        if end < start:
            raise BadField(p.end_field, f"end {end.isoformat()} is before start {start.isoformat()}")
        duration = millis_between(start, end)
    elif duration is not None:
        if duration < 0:
            raise BadField(p.duration_field, f"negative duration {duration} ms")
        if start is not None:
            try:
                end = start + timedelta(milliseconds=duration)
            except OverflowError:
                raise BadField(p.duration_field, f"duration {duration} ms out of range") from None
    try:
        mapped = map_attributes(p.attributes, p.name)
    except AttributeValueError as e:
        raise BadField(f"{p.attrs_field}.{e.key}", e.message) from None
    status = p.status
    exc = exception_message(p.events)
    if exc is not None:
        status = "error"
    error = (p.status_message or exc) if status == "error" else None
    attrs = p.attributes  # owned by the parts, built fresh per record
    for k in mapped.consumed:
        attrs.pop(k, None)
    for k, v in p.extra.items():
        attrs.setdefault(k, jsonable(v))
    if p.events:
        attrs.setdefault("otel.events", p.events)
    try:
        return Span(
            id=p.span_id, trace_id=p.trace_id, parent_id=p.parent_id, kind=mapped.kind, name=p.name,
            input=mapped.input, output=mapped.output, status=status, error=error or None,
            start=start, end=end, duration_ms=duration, model=mapped.model, tokens=mapped.tokens,
            attributes=attrs,
        )
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ())) or None
        raise BadField(where, f"invalid span: {first.get('msg', 'validation failed')}") from None
