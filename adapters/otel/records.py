"""One flattened span record (not OTLP-nested) as `SpanParts`, whatever naming it uses.

Three namings are read, chosen per record by its keys:
- snake: the flattened OTel export of TRAIL (`trace_id`, `span_id`, `parent_span_id`, `span_name`,
  `timestamp` + ISO `duration`, `status_code`, `span_attributes`, `resource_attributes`, `events`);
- vercel: the OTel JS `ReadableSpan` JSON (`spanContext: {traceId, spanId}`, `parentSpanId` or
  `parentSpanContext`, `startTime: [sec, nanos]`, `status: {code}`);
- camel: flat OTLP-like spans (`traceId`, `spanId`, `parentSpanId`, `startTimeUnixNano`, `status`).
Errors name the field as the record spells it (`spanId`, `spanContext.spanId`, `span_attributes.x`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from agent_factory.adapters.otel.spanbuild import (
    BadField,
    SpanParts,
    read_attributes,
    read_events,
    read_id,
    read_status,
    read_time,
    require_id,
)
from agent_factory.adapters.otel.timeutil import from_hrtime, from_unix_nanos, parse_instant, parse_iso_duration

Naming = Literal["snake", "vercel", "camel"]
_SNAKE_HINTS = ("span_id", "trace_id", "parent_span_id", "span_name", "span_attributes")
_TAKEN = {
    "trace_id", "span_id", "parent_span_id", "parent_id", "span_name", "name", "timestamp", "start_time", "end_time",
    "duration", "duration_ms", "status_code", "status_message", "span_attributes", "attributes",
    "resource_attributes", "resource", "events", "child_spans", "traceId", "spanId", "parentSpanId",
    "parentSpanContext", "spanContext", "startTimeUnixNano", "endTimeUnixNano", "startTime", "endTime", "status",
    "service_name", "scope_name", "scope_version", "span_kind", "kind", "trace_state", "traceState", "links",
    "logs", "instrumentationLibrary", "instrumentationScope",
}
"""Record keys read into typed fields or `otel.*` extras; any other top-level key is kept as an attribute."""


def naming_of(rec: Mapping[str, Any]) -> Naming:
    """Which naming a record uses."""
    if "spanContext" in rec:
        return "vercel"
    if any(k in rec for k in _SNAKE_HINTS):
        return "snake"
    return "camel"


def instant(value: Any) -> datetime | None:
    """A start / end / event time in any flat form: nanosecond string, ISO string, hrtime pair, epoch number."""
    if isinstance(value, str) and value.strip().isdigit():
        return from_unix_nanos(value)
    return parse_instant(value)


def _duration_ms(rec: Mapping[str, Any]) -> tuple[float | None, str]:
    if rec.get("duration") is not None:
        d = rec["duration"]
        try:
            if isinstance(d, list):  # JS hrtime pair
                return from_hrtime(d).timestamp() * 1000.0, "duration"
            return parse_iso_duration(d), "duration"
        except ValueError as e:
            raise BadField("duration", f"unparsable duration: {e}") from None
    d = rec.get("duration_ms")
    if d is None:
        return None, "duration"
    if isinstance(d, bool) or not isinstance(d, int | float):
        raise BadField("duration_ms", f"duration_ms must be a number, got {d!r}")
    return float(d), "duration_ms"


def _status(rec: Mapping[str, Any]) -> tuple[Any, Any, str]:
    if "status_code" in rec:
        return rec.get("status_code"), rec.get("status_message"), "status_code"
    st = rec.get("status")
    if isinstance(st, dict):
        code = st.get("code", st.get("status_code"))
        return code, st.get("message", st.get("description")), "status.code"
    return st, None, "status"


def _time(rec: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[datetime | None, str]:
    for key in keys:
        if rec.get(key) not in (None, ""):
            return read_time(rec[key], key, instant), key
    return None, keys[0]


def _resource(rec: Mapping[str, Any]) -> dict[str, Any]:
    if "resource_attributes" in rec:
        return read_attributes(rec["resource_attributes"], "resource_attributes")
    res = rec.get("resource")
    if isinstance(res, dict) and "attributes" in res:
        return read_attributes(res["attributes"], "resource.attributes")
    return {}


def _extras(rec: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    scope = rec.get("instrumentationScope") or rec.get("instrumentationLibrary")
    if isinstance(scope, dict):
        out.update({f"otel.scope.{k}": scope[k] for k in ("name", "version") if scope.get(k) not in (None, "")})
    for key, name in (("scope_name", "otel.scope.name"), ("scope_version", "otel.scope.version"),
                      ("span_kind", "otel.span_kind"), ("kind", "otel.span_kind"),
                      ("trace_state", "otel.trace_state"), ("traceState", "otel.trace_state"),
                      ("links", "otel.links"), ("logs", "otel.logs"), ("service_name", "service.name")):
        if rec.get(key) not in (None, "", [], {}):
            out.setdefault(name, rec[key])
    for key, value in rec.items():
        if key not in _TAKEN:
            out.setdefault(key, value)
    return out


def record_parts(rec: Any, *, trace_id_default: str | None = None) -> SpanParts:
    """The `SpanParts` of one record; raises `BadField` naming the field as the record spells it."""
    if not isinstance(rec, dict):
        raise BadField(None, f"span record must be an object, got {type(rec).__name__}")
    naming = naming_of(rec)
    if naming == "vercel":
        ctx = rec.get("spanContext")
        if not isinstance(ctx, dict):
            raise BadField("spanContext", f"spanContext must be an object, got {type(ctx).__name__}")
        trace_raw, trace_f = ctx.get("traceId"), "spanContext.traceId"
        span_raw, span_f = ctx.get("spanId"), "spanContext.spanId"
        pctx = rec.get("parentSpanContext")
        if rec.get("parentSpanId") is None and isinstance(pctx, dict):
            parent_raw, parent_f = pctx.get("spanId"), "parentSpanContext.spanId"
        else:
            parent_raw, parent_f = rec.get("parentSpanId"), "parentSpanId"
    elif naming == "snake":
        trace_raw, trace_f = rec.get("trace_id"), "trace_id"
        span_raw, span_f = rec.get("span_id"), "span_id"
        parent_f = "parent_span_id" if "parent_span_id" in rec or "parent_id" not in rec else "parent_id"
        parent_raw = rec.get(parent_f)
    else:
        trace_raw, trace_f = rec.get("traceId"), "traceId"
        span_raw, span_f = rec.get("spanId"), "spanId"
        parent_raw, parent_f = rec.get("parentSpanId"), "parentSpanId"
    if trace_raw in (None, "") and trace_id_default is not None:
        trace_raw = trace_id_default
    attrs_f = "span_attributes" if "span_attributes" in rec else "attributes"
    attrs = {**_resource(rec), **read_attributes(rec.get(attrs_f), attrs_f)}
    code, message, status_f = _status(rec)
    start, _ = _time(rec, ("startTimeUnixNano", "startTime", "timestamp", "start_time"))
    end, end_f = _time(rec, ("endTimeUnixNano", "endTime", "end_time"))
    duration, duration_f = _duration_ms(rec)
    name = rec.get("span_name", rec.get("name"))
    events_f = "events"
    return SpanParts(
        trace_id=require_id(trace_raw, trace_f),
        span_id=require_id(span_raw, span_f),
        parent_id=read_id(parent_raw, parent_f),
        name="" if name is None else str(name),
        attributes=attrs,
        attrs_field=attrs_f,
        start=start,
        end=end,
        end_field=end_f,
        duration_ms=duration,
        duration_field=duration_f,
        status=read_status(code, status_f),
        status_message=None if message in (None, "") else str(message),
        events=read_events(rec.get(events_f), events_f, instant),
        extra=_extras(rec),
    )
