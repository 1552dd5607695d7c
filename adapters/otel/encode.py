"""Stored units back out as OTLP/JSON: the inverse of `otlp.py` and the turn assembly (`adapters.assemble`).

A span is written so that the project's own OTLP adapter maps it back to the same `Span`: its id, trace, parent,
name, times and status as OTLP fields; the attributes the mapping left (`Span.attributes`) as they are, except the
`otel.*` extras that came from OTLP fields (scope, span kind, trace state, links, events), which go back to those
fields; and, for each normalized field the remaining attributes do not give back (`map_attributes` is asked), the
OTel GenAI or OpenInference attribute that the mapping reads into that field: `gen_ai.tool.call.arguments` /
`gen_ai.tool.call.result` on a tool span, `input.value` / `output.value` otherwise (copied verbatim and dropped on
the way in, so they add no attribute), `gen_ai.request.model`, `gen_ai.usage.*_tokens`, `openinference.span.kind`
or `gen_ai.operation.name`. A turn's session, user and index go on its resource (`session.id`, `user.id`,
`session.turn_index`) when no span names them. Spans that assembly derives from a model call's output
(`tool_span_source`) are left out: the reader derives them again.

What a span of an OTel source holds comes back (a duration the source gave without an end, as TRAIL does, to
within float rounding: the reader computes end - start); a span of another source (a chat log) may hold what OTLP
cannot say (an id that is no OTLP hex, a duration without times, an error on a span that did not fail):
`Encoded.lost` names such fields, and a carrier attribute a non-OTel span needed stays an attribute on the way
back. Pure functions; `text` is applied to every text taken from the trace (the export's redactor), and an id it
would change is replaced by its digest.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_factory.adapters.assemble import INDEX_KEYS, USER_KEYS, first_attr, roots_first
from agent_factory.adapters.calls import CALL_GROUP
from agent_factory.adapters.model import Span, SpanKind, TokenUsage, Turn
from agent_factory.adapters.otel.attributes import SESSION_KEYS, exception_message, map_attributes
from agent_factory.adapters.otel.timeutil import from_unix_nanos, millis_between
from agent_factory.adapters.otel.toolcalls import DERIVED
from agent_factory.adapters.otel.values import encode_any_value

Text = Callable[[str], str]
"""What every text from a trace passes through on its way out (the identity, or a redactor's `redact_text`)."""
RESOURCE_PREFIXES = ("service.", "telemetry.", "host.", "process.", "os.", "deployment.", "container.", "k8s.",
                     "cloud.")
"""Attributes of the OTel resource conventions: written once on a block's resource when every span of it has the
same value (the reader merges the resource into each span, so the spans read back the same)."""
_SPAN_KIND_CODES = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}
_STATUS_CODES = {"ok": 1, "error": 2}
_KIND_CARRIERS: dict[SpanKind, tuple[tuple[str, str], ...]] = {
    "llm": (("gen_ai.operation.name", "chat"), ("openinference.span.kind", "LLM")),
    "tool": (("gen_ai.operation.name", "execute_tool"), ("openinference.span.kind", "TOOL")),
    "retrieval": (("openinference.span.kind", "RETRIEVER"), ("gen_ai.operation.name", "retrieval")),
    "embedding": (("gen_ai.operation.name", "embeddings"), ("openinference.span.kind", "EMBEDDING")),
    "agent": (("gen_ai.operation.name", "invoke_agent"), ("openinference.span.kind", "AGENT")),
    "reasoning": (("openinference.span.kind", "REASONING"),),
    "other": (("openinference.span.kind", "UNKNOWN"),),
}
"""Attributes that make the mapping read each kind, in the order tried (`attributes.span_kind`)."""
_HEX_ID = re.compile(r"^(?:[0-9a-f]{2})+$")
_MAPPED = ("kind", "input", "output", "model", "tokens")
"""The `Span` fields the reader takes from attributes (`attributes.map_attributes`)."""


def _same(s: str) -> str:
    return s


def encode_value(v: Any) -> dict[str, Any]:
    """Any stored attribute value as an OTLP `AnyValue` that `decode_any_value` reads back equal: None as the
    empty value, dicts as kvlists (the scalars as `encode_any_value` writes them)."""
    if v is None:
        return {}
    if isinstance(v, Mapping):
        return {"kvlistValue": {"values": [{"key": str(k), "value": encode_value(x)} for k, x in v.items()]}}
    if isinstance(v, list | tuple):
        return {"arrayValue": {"values": [encode_value(x) for x in v]}}
    return encode_any_value(v)


def key_values(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An OTLP attribute list of `attrs`, None values included (the reader keeps them as None)."""
    return [{"key": k, "value": encode_value(v)} for k, v in attrs.items()]


def scrub(value: Any, text: Text) -> Any:
    """`value` with `text` applied to every string in it, keys of mappings included; numbers as they are."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, Mapping):
        return {text(str(k)): scrub(v, text) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v, text) for v in value]
    return value


def otlp_id(value: str, length: int, text: Text = _same) -> str:
    """An id as OTLP writes it: the stored id when it is lowercase hex and `text` leaves it as it is (every id an
    OTLP source gave), else `length` hex digits of its digest (an id of another source, or one `text` redacts)."""
    if _HEX_ID.match(value) and text(value) == value:
        return value
    return hashlib.sha256(value.encode("utf-8")).hexdigest()[:length]


def unix_nanos(t: datetime) -> str:
    """A time as OTLP's decimal string of nanoseconds since the epoch (exact for the store's microseconds)."""
    aware = t if t.tzinfo is not None else t.replace(tzinfo=UTC)  # the model's times are UTC; never local time
    micros = (aware - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    return str(micros * 1000)


@dataclass(frozen=True)
class Encoded:
    """One span as an OTLP/JSON span object, the scope it goes under, and the fields OTLP cannot carry for it."""

    span: dict[str, Any]
    scope: tuple[str | None, str | None]
    """The instrumentation scope's name and version (`otel.scope.*`), None when the span named none."""
    lost: tuple[str, ...] = ()
    """`Span` fields the reader will not give back as stored (module docstring)."""


def _events(value: Any) -> list[dict[str, Any]] | None:
    """`otel.events` (as `spanbuild.read_events` wrote them) as OTLP events; None when it is not that shape."""
    if not isinstance(value, list) or not value:
        return None
    out = []
    for ev in value:
        if not isinstance(ev, Mapping) or set(ev) != {"name", "time", "attributes"} \
                or not isinstance(ev["attributes"], Mapping) or not isinstance(ev["name"], str):
            return None
        event: dict[str, Any] = {"name": ev["name"], "attributes": key_values(ev["attributes"])}
        if ev["time"] is not None:
            try:
                nanos = unix_nanos(datetime.fromisoformat(str(ev["time"])))
            except ValueError:
                return None  # a clock the source wrote unparsed: kept as the attribute it is
            when = from_unix_nanos(nanos)
            if when is None or when.isoformat() != ev["time"]:
                return None  # a time the reader would write otherwise (no zone, nanoseconds)
            event["timeUnixNano"] = nanos
        out.append(event)
    return out


def _structural(span: Span, attrs: dict[str, Any], obj: dict[str, Any]) -> None:
    """Move the `otel.*` extras that came from OTLP fields back to those fields (`obj`), where they read back the
    same; an extra that would not stays an attribute (the reader's extras never override one)."""
    kind = attrs.get("otel.span_kind")
    if isinstance(kind, str) and kind in _SPAN_KIND_CODES:
        obj["kind"] = _SPAN_KIND_CODES[kind]
        del attrs["otel.span_kind"]
    for key, field in (("otel.trace_state", "traceState"), ("otel.links", "links")):
        value = attrs.get(key)
        if isinstance(value, str | list) and value:
            obj[field] = value
            del attrs[key]
    events = _events(attrs.get("otel.events"))
    exc = exception_message(attrs["otel.events"]) if events is not None else None
    # An exception event makes the reader's span fail: only a span that failed with that message gets it back.
    if events is not None and (exc is None or (span.status == "error" and span.error)):
        obj["events"] = events
        del attrs["otel.events"]


def _status(span: Span, obj: dict[str, Any]) -> list[str]:
    code = _STATUS_CODES.get(span.status)
    if code is not None:
        obj["status"] = {"code": code, **({"message": span.error} if span.status == "error" and span.error else {})}
    # OTLP reads a status message only on a failed span, and an empty one as none.
    return ["error"] if span.error is not None and (span.status != "error" or not span.error) else []


def _times(span: Span, obj: dict[str, Any]) -> list[str]:
    if span.start is not None:
        obj["startTimeUnixNano"] = unix_nanos(span.start)
    if span.end is not None:
        obj["endTimeUnixNano"] = unix_nanos(span.end)
    if span.duration_ms is None:
        return []
    if span.start is None or span.end is None or millis_between(span.start, span.end) != span.duration_ms:
        return ["duration_ms"]  # OTLP has times, no duration of its own
    return []


def _carry(attrs: dict[str, Any], name: str, field: str, want: Any,
           candidates: Iterable[tuple[str, Any]]) -> bool:
    """Whether `attrs` map to `want` in `field`, adding the first candidate attribute that makes them (one the
    span does not hold already: its value would be lost)."""
    if getattr(map_attributes(attrs, name), field) == want:
        return True
    for key, value in candidates:
        if key in attrs:
            continue
        attrs[key] = value
        if getattr(map_attributes(attrs, name), field) == want:
            return True
        del attrs[key]
    return False


def _token_carrier(t: TokenUsage) -> list[tuple[str, Any]]:
    parts = {"gen_ai.usage.input_tokens": t.input, "gen_ai.usage.output_tokens": t.output,
             "gen_ai.usage.total_tokens": t.total}
    return [(k, v) for k, v in parts.items() if v is not None]


def _attributes(span: Span, attrs: dict[str, Any]) -> list[str]:
    """Add to `attrs` what the mapping needs to read `span`'s typed fields back; the fields it cannot."""
    read = map_attributes(attrs, span.name)
    if all(getattr(read, f) == getattr(span, f) for f in _MAPPED):
        return []  # a span of an OTel source: its attributes give every field back as they are
    lost = []
    tool = span.kind == "tool"
    io = (("input", span.input, ("gen_ai.tool.call.arguments",) if tool else ()),
          ("output", span.output, ("gen_ai.tool.call.result",) if tool else ()))
    for field, want, first in io:
        keys = (*first, f"{field}.value", field)
        if not _carry(attrs, span.name, field, want, [] if want is None else [(k, want) for k in keys]):
            lost.append(field)
    if not _carry(attrs, span.name, "model", span.model,
                  [] if span.model is None else [("gen_ai.request.model", span.model), ("llm.model_name", span.model)]):
        lost.append("model")
    tokens = span.tokens
    if map_attributes(attrs, span.name).tokens != tokens:
        carrier = _token_carrier(tokens) if tokens is not None else []
        if carrier and not any(k in attrs for k, _ in carrier):
            attrs.update(carrier)
            if map_attributes(attrs, span.name).tokens != tokens:
                for k, _ in carrier:
                    del attrs[k]
                lost.append("tokens")
        else:
            lost.append("tokens")
    if not _carry(attrs, span.name, "kind", span.kind, _KIND_CARRIERS[span.kind]):
        lost.append("kind")
    # A carrier read for one field may change another's reading (a model name makes a span a model call).
    final = map_attributes(attrs, span.name)
    return sorted(set(lost) | {f for f in _MAPPED if getattr(final, f) != getattr(span, f)})


def encode_span(span: Span, text: Text = _same) -> Encoded:
    """One stored span as an OTLP/JSON span object (module docstring); `text` applied to its texts first."""
    s = span if text is _same else redacted_span(span, text)
    attrs = dict(s.attributes)
    obj: dict[str, Any] = {"traceId": otlp_id(span.trace_id, 32, text), "spanId": otlp_id(span.id, 16, text)}
    if span.parent_id is not None:
        obj["parentSpanId"] = otlp_id(span.parent_id, 16, text)
    obj["name"] = s.name
    _structural(s, attrs, obj)
    scope: list[str | None] = []
    for k in ("name", "version"):
        v = attrs.get(f"otel.scope.{k}")
        # The reader takes a scope's non-empty name and version; any other value stays the attribute it is.
        scope.append(v if isinstance(v, str) and v else None)
        if scope[-1] is not None:
            del attrs[f"otel.scope.{k}"]
    lost = _attributes(s, attrs) + _status(s, obj) + _times(s, obj)
    obj["attributes"] = attrs  # made a key/value list by `resource_block`, after the resource takes its share
    if (span.trace_id, span.id, span.parent_id) != (obj["traceId"], obj["spanId"], obj.get("parentSpanId")):
        lost.append("ids")
    return Encoded(obj, (scope[0], scope[1]), tuple(sorted(lost)))


def redacted_span(span: Span, text: Text) -> Span:
    """`span` with `text` applied to its name, texts, model and attributes (keys and values)."""
    return span.model_copy(update={
        "name": text(span.name), "input": None if span.input is None else text(span.input),
        "output": None if span.output is None else text(span.output),
        "error": None if span.error is None else text(span.error),
        "model": None if span.model is None else text(span.model), "attributes": scrub(span.attributes, text),
    })


def resource_block(spans: Sequence[Encoded], extra: Mapping[str, Any]) -> dict[str, Any]:
    """One `resourceSpans` block of encoded spans: the resource attributes they all share (`RESOURCE_PREFIXES`)
    and `extra` on the resource, then one scope block per scope in first-seen order."""
    shared: dict[str, Any] = {}
    first = spans[0].span["attributes"]
    for k, v in first.items():
        if k.startswith(RESOURCE_PREFIXES) and k not in extra and \
                all(k in e.span["attributes"] and e.span["attributes"][k] == v for e in spans):
            shared[k] = v
    scopes: dict[tuple[str | None, str | None], list[dict[str, Any]]] = {}
    for e in spans:
        own = {k: v for k, v in e.span["attributes"].items() if k not in shared}
        scopes.setdefault(e.scope, []).append({**e.span, "attributes": key_values(own)})
    blocks = []
    for (name, version), objs in scopes.items():
        scope = {k: v for k, v in (("name", name), ("version", version)) if v is not None}
        blocks.append({**({"scope": scope} if scope else {}), "spans": objs})
    return {"resource": {"attributes": key_values({**shared, **extra})}, "scopeSpans": blocks}


@dataclass(frozen=True)
class EncodedTurn:
    """A turn as OTLP/JSON `resourceSpans` blocks (one per trace), with what it leaves out and cannot carry."""

    blocks: list[dict[str, Any]]
    spans: int
    """Spans written."""
    derived: int
    """Spans left out because the reader derives them again (`tool_span_source`)."""
    lost: dict[str, int]
    """Per `Span` field (and the turn's `conversation_id`, `user_id`, `index`), how many of the turn's units the
    reader will not give it back for."""


def encode_turn(turn: Turn, text: Text = _same) -> EncodedTurn:
    """A stored turn's spans as `resourceSpans` blocks, one per trace, in stored order; the turn's session and
    user on the resource when no span names them."""
    written = [s for s in turn.spans if s.attributes.get(DERIVED) is None]
    lost: dict[str, int] = {}
    extra: dict[str, Any] = {}
    carried = (("conversation_id", "session.id", SESSION_KEYS, turn.id), ("user_id", "user.id", USER_KEYS, None),
               ("index", "session.turn_index", INDEX_KEYS, 0))
    # A turn of client-only model calls gets its conversation and index from grouping them, again on the way in.
    for field, key, names, default in carried if CALL_GROUP not in turn.attributes else ():
        value, named = getattr(turn, field), first_attr(roots_first(written), names)  # as `assemble_turn` looks
        if named is None and value != default:
            extra[key] = text(value) if isinstance(value, str) else value
        elif named is not None and named != value and str(named) != value:
            lost[field] = 1
    by_trace: dict[str, list[Encoded]] = {}
    for s in written:
        e = encode_span(s, text)
        by_trace.setdefault(e.span["traceId"], []).append(e)
        for f in e.lost:
            lost[f] = lost.get(f, 0) + 1
    blocks = [resource_block(spans, extra) for spans in by_trace.values()]
    return EncodedTurn(blocks, len(written), len(turn.spans) - len(written), lost)


def encode_turns(turns: Iterable[Turn], text: Text = _same) -> dict[str, Any]:
    """Stored turns as one OTLP/JSON `ExportTraceServiceRequest` document (`{"resourceSpans": [...]}`)."""
    return {"resourceSpans": [b for t in turns for b in encode_turn(t, text).blocks]}


__all__ = ["RESOURCE_PREFIXES", "Encoded", "EncodedTurn", "Text", "encode_span", "encode_turn", "encode_turns",
           "encode_value", "key_values", "otlp_id", "redacted_span", "resource_block", "scrub", "unix_nanos"]
