"""Flattened spans, one per JSON line or as the items of one JSON array (see `records` for the namings)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from agent_factory.adapters.base import AdapterItem, LineItems, Quarantine, read_head
from agent_factory.adapters.jsonio import iter_json_array, iter_json_lines
from agent_factory.adapters.model import Span
from agent_factory.adapters.otel.nested import flatten_tree
from agent_factory.adapters.otel.records import record_parts
from agent_factory.adapters.otel.spanbuild import BadField, build_span, quarantine
from agent_factory.adapters.otel.stream import head_keys
from agent_factory.adapters.source import Source, as_source

SPAN_ID_KEYS = frozenset({"spanId", "span_id", "spanContext"})
"""Keys whose presence in a record's top level marks it as a span."""


def record_span(rec: object, *, source: str, location: str) -> Span | Quarantine:
    """One flattened span record as a `Span`, or the `Quarantine` saying why not."""
    try:
        return build_span(record_parts(rec))
    except BadField as e:
        return quarantine(source, location, e)


def is_array_file(head: bytes) -> bool:
    """True if the file is one JSON array (rather than JSON lines)."""
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"["


class FlatSpanLinesAdapter:
    """Flattened OTel spans: TRAIL's flat export, OTel JS `ReadableSpan` JSON, or flat OTLP-like objects."""

    name = "otel-spans-jsonl"
    description = (
        "flattened OTel spans, one per JSON line or as a JSON array (TRAIL flat, Vercel ReadableSpan, OTLP-like)"
    )
    reads_sources = True

    def sniff(self, head: bytes, path: Path) -> bool:
        """Whether the head's first record (or first array item) carries a span id key."""
        array = is_array_file(head)
        _, keys = head_keys(head, record="first_item" if array else "top")
        prefix = "item" if array else ""
        return any(f"{prefix}:{k}" in keys for k in SPAN_ID_KEYS)

    def read(self, source: Source | Path) -> Iterator[AdapterItem]:
        """Spans of the source, one per JSON line or array item; bad records as quarantines."""
        src = as_source(source)
        items = iter_json_array(src, "item") if is_array_file(read_head(src, 4096)) else iter_json_lines(src)
        for item in items:
            if isinstance(item, Quarantine):
                yield item
            else:
                yield from _record_items(*item, source=src.id)

    def line_items(self, source: Source | Path) -> LineItems | None:
        """Each line's span (or subtree), for JSON lines (not one JSON array)."""
        src = as_source(source)
        if is_array_file(read_head(src, 4096)):
            return None
        name = src.id
        return lambda location, rec: _record_items(location, rec, source=name)


def _record_items(location: str, rec: object, *, source: str) -> Iterator[AdapterItem]:
    if isinstance(rec, dict) and rec.get("child_spans"):
        # A flat line that still carries its subtree (TRAIL's shape): read the subtree too.
        yield from flatten_tree(rec, source=source, location=location, trace_id=None, top_is_root=False)
    else:
        yield record_span(rec, source=source, location=location)
