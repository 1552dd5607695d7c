"""Nested span trees: `{"trace_id": ..., "spans": [root, ...]}` where each span lists its `child_spans`.

This is TRAIL's export (flattened-OTel span fields, OpenInference attributes). Roots are streamed one at a
time with ijson and each tree is flattened depth-first, parents before children, so memory is bounded by
the largest root tree rather than by the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_factory.adapters.base import AdapterItem, Quarantine
from agent_factory.adapters.jsonguard import LONE_MARK, BoundedJson, lone_surrogate_message
from agent_factory.adapters.jsonio import limit_record, open_document
from agent_factory.adapters.model import Span
from agent_factory.adapters.otel.records import record_parts
from agent_factory.adapters.otel.spanbuild import BadField, build_span, quarantine
from agent_factory.adapters.otel.stream import STREAM_ERRORS, head_keys, stream_error, walk
from agent_factory.adapters.source import Source, as_source

_CHILDREN = frozenset({"child_spans"})

DANGLING_PARENT_KEY = "otel.parent_span_id"
"""Attribute keeping the parent a top-level span names when that parent is not in the file (the span is a root)."""


def flatten_tree(root: Any, *, source: str, location: str, trace_id: str | None,
                 top_is_root: bool = True, marks: BoundedJson | None = None) -> Iterator[Span | Quarantine]:
    """The spans of one root tree, depth-first (parents first); a child without `parent_span_id` gets its
    enclosing span as parent. With `top_is_root` the top span is a root: a parent it names is outside the
    file (kept as `otel.parent_span_id`); without, its parent is kept as given. `marks`: the document reader
    the tree came from (a span holding what it marked, a lone surrogate escape or a container too deep, is
    quarantined; its children are read)."""
    stack: list[tuple[Any, str, str | None, bool]] = [(root, location, None, top_is_root)]
    while stack:
        node, where, enclosing, top = stack.pop()
        own_id = node.get("span_id") if isinstance(node, dict) else None
        item = _node_span(node, source=source, location=where, trace_id=trace_id, enclosing=enclosing, top=top,
                          marks=marks)
        yield item
        if not isinstance(node, dict) or node.get("child_spans") is None:
            continue
        children = node["child_spans"]
        if not isinstance(children, list):
            yield Quarantine(source=source, location=where, field="child_spans",
                             message=f"child_spans must be a list, got {type(children).__name__}")
            continue
        parent = item.id if isinstance(item, Span) else (own_id if isinstance(own_id, str) else None)
        sep = "." if where.endswith("]") else " "  # "line 3 child_spans[0].child_spans[1]"
        for i in range(len(children) - 1, -1, -1):
            stack.append((children[i], f"{where}{sep}child_spans[{i}]", parent, False))


def _node_span(node: Any, *, source: str, location: str, trace_id: str | None, enclosing: str | None,
               top: bool, marks: BoundedJson | None) -> Span | Quarantine:
    # The children are spans of their own, limited when their turn comes (a child too deep to read is a mark).
    limited = limit_record(node, source=source, location=location, skip=_CHILDREN if isinstance(node, dict) else
                           frozenset(), marks=marks)
    if isinstance(limited, Quarantine):
        return limited
    try:
        parts = record_parts(node, trace_id_default=trace_id)
        if top and parts.parent_id is not None:
            parts.extra[DANGLING_PARENT_KEY] = parts.parent_id
            parts.parent_id = None
        elif parts.parent_id is None and not top:
            parts.parent_id = enclosing
        return build_span(parts)
    except BadField as e:
        return quarantine(source, location, e)


class NestedSpanTreeAdapter:
    """Nested span trees (`{"trace_id", "spans": [{..., "child_spans": [...]}]}`), as exported by TRAIL."""

    name = "otel-nested"
    reads_sources = True
    description = "nested OTel span trees: {trace_id, spans: [span with child_spans]} (TRAIL export)"

    def sniff(self, head: bytes, path: Path) -> bool:
        """Whether the head is one JSON object with a `spans` list of nested span records."""
        first, keys = head_keys(head, record="top")
        return first == "{" and ":spans" in keys and bool(
            {"spans.item:child_spans", "spans.item:span_id"} & keys
        )

    def read(self, source: Source | Path) -> Iterator[AdapterItem]:
        """Spans of the nested tree, flattened with their parent ids; bad records as quarantines."""
        src = as_source(source)
        name = src.id
        trace_id: str | None = None
        n = lists = 0
        with open_document(src) as f:
            try:
                for what, prefix, value in walk(f, collect=("trace_id", "spans.item"), mark=("spans",)):
                    if prefix == "spans":
                        if what == "start" and value != "start_array":
                            yield Quarantine(source=name, location="file", field="spans",
                                             message="spans must be a list of root spans")
                        lists += what == "start"
                        continue
                    if prefix == "trace_id":
                        trace_id = value if isinstance(value, str) and value and LONE_MARK not in value else None
                        if isinstance(value, str) and LONE_MARK in value:
                            yield Quarantine(source=name, location="file", field="trace_id",
                                             message=lone_surrogate_message(f.take_escape()))
                        continue
                    yield from flatten_tree(value, source=name, location=f"spans[{n}]", trace_id=trace_id,
                                            marks=f)
                    n += 1
            except STREAM_ERRORS as e:
                yield stream_error(e, source=name, location=f"spans[{n}]")
                return
        if not lists:
            yield Quarantine(source=name, location="file", field="spans",
                             message="no spans list found; not a nested span tree export")
