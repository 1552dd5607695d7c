"""OTLP/JSON traces: one `ExportTraceServiceRequest` document, or one request per line (collector file exporter).

A single document is streamed with ijson events: the resource and scope of each block are kept as context
and spans are built one at a time, so memory is bounded by one span (plus, only when a block writes its
spans before its resource or scope, that block's spans). A JSON-lines file is read line by line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_factory.adapters.base import AdapterItem, LineItems, Quarantine, read_head
from agent_factory.adapters.jsonguard import BoundedJson
from agent_factory.adapters.jsonio import iter_json_lines, limit_record, marked, open_document
from agent_factory.adapters.model import OutcomeEvent, Span
from agent_factory.adapters.otel.attributes import SESSION_KEYS
from agent_factory.adapters.otel.spanbuild import (
    BadField,
    SpanParts,
    build_span,
    quarantine,
    read_attributes,
    read_events,
    read_id,
    read_status,
    read_time,
    require_id,
)
from agent_factory.adapters.otel.stream import STREAM_ERRORS, head_keys, stream_error, walk
from agent_factory.adapters.otel.timeutil import from_unix_nanos
from agent_factory.adapters.source import Source, as_source

LOGS_REJECTED = (
    "OTLP logs (GenAI events) are not read: message content must be on the spans; export traces with content "
    "captured on spans (opentelemetry-instrumentation-openai-v2: OTEL_SEMCONV_STABILITY_OPT_IN="
    "gen_ai_latest_experimental and OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only)"
)
"""The one-line reason an OTLP logs export is turned away (GenAI `event_only` capture writes content as logs)."""
_RS = "resourceSpans.item"
_SS = f"{_RS}.scopeSpans.item"
_SPAN = f"{_SS}.spans.item"
_SPAN_KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


@dataclass
class _Scope:
    attributes: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def resource_attributes(resource: Any, *, source: str, location: str) -> tuple[dict[str, Any], Quarantine | None]:
    """A `resource` object's attributes; a bad one is reported once and read as empty."""
    if resource is None:
        return {}, None
    try:
        if not isinstance(resource, dict):
            raise BadField("resource", f"resource must be an object, got {type(resource).__name__}")
        return read_attributes(resource.get("attributes"), "resource.attributes"), None
    except BadField as e:
        return {}, quarantine(source, location, e)


def scope_context(scope: Any, *, source: str, location: str) -> tuple[_Scope, Quarantine | None]:
    """An instrumentation `scope`: name / version as `otel.scope.*` extras, plus its attributes."""
    if scope is None:
        return _Scope(), None
    try:
        if not isinstance(scope, dict):
            raise BadField("scope", f"scope must be an object, got {type(scope).__name__}")
        extra = {f"otel.scope.{k}": scope[k] for k in ("name", "version") if scope.get(k) not in (None, "")}
        return _Scope(read_attributes(scope.get("attributes"), "scope.attributes"), extra), None
    except BadField as e:
        return _Scope(), quarantine(source, location, e)


def otlp_span(raw: Any, *, resource: Mapping[str, Any], scope: _Scope, source: str, location: str) -> Span | Quarantine:
    """One OTLP/JSON span object as a `Span`, or the `Quarantine` saying why not."""
    try:
        if not isinstance(raw, dict):
            raise BadField(None, f"span must be an object, got {type(raw).__name__}")
        attrs = {**resource, **scope.attributes, **read_attributes(raw.get("attributes"), "attributes")}
        status = raw.get("status") or {}
        if not isinstance(status, dict):
            raise BadField("status", f"status must be an object, got {type(status).__name__}")
        extra = dict(scope.extra)
        kind = raw.get("kind")
        if kind not in (None, "", 0):
            extra["otel.span_kind"] = _SPAN_KINDS.get(kind, str(kind)) if isinstance(kind, int) else \
                str(kind).removeprefix("SPAN_KIND_")
        for key, name in (("traceState", "otel.trace_state"), ("links", "otel.links")):
            if raw.get(key):
                extra[name] = raw[key]
        message = status.get("message")
        parts = SpanParts(
            trace_id=require_id(raw.get("traceId"), "traceId", encoding="otlp"),
            span_id=require_id(raw.get("spanId"), "spanId", encoding="otlp"),
            parent_id=read_id(raw.get("parentSpanId"), "parentSpanId", encoding="otlp"),
            name=str(raw.get("name") or ""),
            attributes=attrs,
            start=read_time(raw.get("startTimeUnixNano"), "startTimeUnixNano", from_unix_nanos),
            end=read_time(raw.get("endTimeUnixNano"), "endTimeUnixNano", from_unix_nanos),
            end_field="endTimeUnixNano",
            status=read_status(status.get("code"), "status.code"),
            status_message=None if message in (None, "") else str(message),
            events=read_events(raw.get("events"), "events", from_unix_nanos),
            extra=extra,
        )
        return build_span(parts)
    except BadField as e:
        return quarantine(source, location, e)


TASK_OUTCOME_KEYS = ("task.success", "task.id", "task.trial", "task.suite")
"""Root-span attributes by which a trace says it is one trial of a task and whether the trial succeeded (the task
runner's traces, `factory/tasks/spans.py`): read as the conversation's `task_success` outcome, so Trajectory and
Results see how the task went instead of an open session."""


def task_outcome(span: Span) -> OutcomeEvent | None:
    """The `task_success` outcome a root span states (`task.success`, a boolean, and the trace's session id), else
    None. Its attributes keep the task, trial and suite."""
    success = span.attributes.get("task.success")
    if span.parent_id is not None or not isinstance(success, bool):
        return None
    conversation = next((v for k in SESSION_KEYS if isinstance(v := span.attributes.get(k), str) and v), None)
    if conversation is None:
        return None
    extra = {k.removeprefix("task."): span.attributes[k] for k in TASK_OUTCOME_KEYS[1:] if k in span.attributes}
    return OutcomeEvent(id=f"{conversation}/task_success", kind="task_success", conversation_id=conversation,
                        time=span.end, value=success, attributes=extra)


def _with_outcome(item: Span | Quarantine) -> Iterator[AdapterItem]:
    """The span, then the task outcome it states, if any."""
    yield item
    if isinstance(item, Span) and (event := task_outcome(item)) is not None:
        yield event


def request_items(obj: Any, *, source: str, where: str) -> Iterator[AdapterItem]:
    """The spans of one export request already in memory (one JSON line)."""
    blocks = obj.get("resourceSpans") if isinstance(obj, dict) else None
    if not isinstance(blocks, list):
        yield Quarantine(source=source, location=where, field="resourceSpans",
                         message="expected an object with a `resourceSpans` list")
        return
    for ri, block in enumerate(blocks):
        rloc = f"{where} resourceSpans[{ri}]"
        if not isinstance(block, dict):
            yield Quarantine(source=source, location=rloc, message="resource block must be an object")
            continue
        resource, bad = resource_attributes(block.get("resource"), source=source, location=rloc)
        if bad:
            yield bad
        scopes = block.get("scopeSpans") or []
        if not isinstance(scopes, list):
            yield Quarantine(source=source, location=rloc, field="scopeSpans", message="scopeSpans must be a list")
            continue
        for si, sblock in enumerate(scopes):
            sloc = f"{rloc}.scopeSpans[{si}]"
            if not isinstance(sblock, dict) or not isinstance(sblock.get("spans") or [], list):
                yield Quarantine(source=source, location=sloc, field="spans",
                                 message="scope block must be an object with a `spans` list")
                continue
            scope, bad = scope_context(sblock.get("scope"), source=source, location=sloc)
            if bad:
                yield bad
            for ki, raw in enumerate(sblock.get("spans") or []):
                yield from _with_outcome(otlp_span(raw, resource=resource, scope=scope, source=source,
                                                   location=f"{sloc}.spans[{ki}]"))


def document_items(given: Source | Path) -> Iterator[AdapterItem]:  # noqa: C901 - one branch per event of the stream's state machine
    """Stream one OTLP/JSON document (or several concatenated) span by span."""
    src = as_source(given)
    source = src.id
    ri = si = ki = -1
    resource: dict[str, Any] | None = None
    scopes: dict[int, _Scope] = {}
    pending: list[tuple[Any, str, int]] = []

    def loc() -> str:
        return f"resourceSpans[{ri}].scopeSpans[{si}].spans[{ki}]"

    def flush(final: bool) -> Iterator[AdapterItem]:
        nonlocal pending
        keep = []
        for raw, where, s in pending:
            if final or (resource is not None and s in scopes):
                yield from _with_outcome(otlp_span(raw, resource=resource or {}, scope=scopes.get(s, _Scope()),
                                                   source=source, location=where))
            else:
                keep.append((raw, where, s))
        pending = keep

    lists = 0
    with open_document(src) as f:
        try:
            for what, prefix, value in walk(f, collect=(f"{_RS}.resource", f"{_SS}.scope", _SPAN),
                                            mark=("resourceSpans", _RS, _SS), multiple_values=True):
                if prefix == "resourceSpans":
                    if what == "start" and value != "start_array":
                        yield Quarantine(source=source, location="file", field="resourceSpans",
                                         message="resourceSpans must be a list")
                    lists += what == "start"
                elif what == "start" and prefix == _RS:
                    ri, si, resource, scopes = ri + 1, -1, None, {}
                elif what == "start":
                    si, ki = si + 1, -1
                elif what == "end" and prefix == _SS:
                    scopes.setdefault(si, _Scope())
                    yield from flush(False)
                elif what == "end":
                    yield from flush(True)
                    resource = None
                elif prefix.endswith(".resource"):
                    value, lone = _checked(value, f, "resource", source=source, location=f"resourceSpans[{ri}]")
                    resource, bad = resource_attributes(value, source=source, location=f"resourceSpans[{ri}]")
                    for q in (lone, bad):
                        if q:
                            yield q
                    yield from flush(False)
                elif prefix.endswith(".scope"):
                    where = f"resourceSpans[{ri}].scopeSpans[{si}]"
                    value, lone = _checked(value, f, "scope", source=source, location=where)
                    scopes[si], bad = scope_context(value, source=source, location=where)
                    for q in (lone, bad):
                        if q:
                            yield q
                    yield from flush(False)
                else:
                    ki += 1
                    value = limit_record(value, source=source, location=loc(), marks=f)  # lines: by iter_json_lines
                    if isinstance(value, Quarantine):
                        yield value
                    elif resource is not None and si in scopes:
                        yield from _with_outcome(otlp_span(value, resource=resource, scope=scopes[si], source=source,
                                                           location=loc()))
                    else:
                        pending.append((value, loc(), si))
        except STREAM_ERRORS as e:
            yield from flush(True)
            ki += 1
            yield stream_error(e, source=source, location=loc() if ri >= 0 else "file")
            return
    if not lists:
        yield Quarantine(source=source, location="file", field="resourceSpans",
                         message="no resourceSpans found; not an OTLP/JSON trace export")


def _checked(value: Any, f: BoundedJson, what: str, *, source: str, location: str) -> tuple[Any, Quarantine | None]:
    """A resource or scope as read, or None (read as absent) with the quarantine naming what `f` marked in it (a
    lone surrogate escape, a container too deep to read)."""
    bad = marked({what: value}, source=source, location=location, reader=f) if f.pending else None
    return (value, None) if bad is None else (None, bad)


def looks_like_json_lines(head: bytes) -> bool:
    """True if one of the first complete lines of `head` is a whole export request on its own (a line ends at
    LF, CRLF or a lone CR, as `jsonio.iter_lines` reads them)."""
    lines = [ln for ln in head.splitlines(keepends=True) if ln.endswith((b"\n", b"\r"))]  # the last may be cut
    for raw in [ln for ln in lines if ln.strip()][:3]:
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and "resourceSpans" in obj:
            return True
    return False


def _logs_only(head: bytes) -> bool:
    """An OTLP logs export with no spans (turned away with one quarantine, `LOGS_REJECTED`)."""
    return b'"resourceLogs"' in head and b'"resourceSpans"' not in head


class OtlpJsonAdapter:
    """OTLP/JSON trace exports (`{"resourceSpans": [...]}`), as one document or as JSON lines."""

    name = "otlp-json"
    reads_sources = True
    description = "OTLP/JSON traces: one export request document, or one request per line (collector file exporter)"

    def sniff(self, head: bytes, path: Path) -> bool:
        """Whether `resourceSpans` (or `resourceLogs`, to be turned away) is a top-level key."""
        # The cheap test first; then make sure it is the top-level key, not text inside some other record.
        # OTLP logs are taken too, to be turned away with the setting that puts their content on spans.
        keys = head_keys(head, record="top")[1] if b'"resource' in head else ""
        return (b'"resourceSpans"' in head and ":resourceSpans" in keys) or \
            (b'"resourceLogs"' in head and ":resourceLogs" in keys)

    def read(self, source: Source | Path) -> Iterator[AdapterItem]:
        """Spans of an OTLP JSON document or OTLP JSON lines; a logs-only source as one quarantine."""
        src = as_source(source)
        if _logs_only(read_head(src)):
            yield Quarantine(source=src.id, location="file", field="resourceLogs", message=LOGS_REJECTED)
            return
        per_line = self.line_items(src)
        if per_line is None:
            yield from document_items(src)
            return
        for item in iter_json_lines(src):
            if isinstance(item, Quarantine):
                yield item
            else:
                yield from per_line(*item)

    def line_items(self, source: Source | Path) -> LineItems | None:
        """`request_items` of each line, for OTLP JSON lines (not a single document, nor a logs-only source)."""
        src = as_source(source)
        head = read_head(src)
        if _logs_only(head) or not looks_like_json_lines(head):
            return None
        name = src.id
        return lambda where, obj: request_items(obj, source=name, where=where)
