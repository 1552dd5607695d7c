"""OpenTelemetry trace readers: OTLP/JSON, flattened span lines, and nested span trees.

All three yield one `Span` per source span (and a `Quarantine` per bad one); ingest groups spans into turns
with `adapters.assemble`. Attribute conventions (OpenInference, OTel GenAI, Vercel AI SDK) are mapped to the
typed span fields in `adapters.otel.attributes`.
"""

from agent_factory.adapters.otel.flat import FlatSpanLinesAdapter
from agent_factory.adapters.otel.nested import NestedSpanTreeAdapter
from agent_factory.adapters.otel.otlp import OtlpJsonAdapter

__all__ = ["FlatSpanLinesAdapter", "NestedSpanTreeAdapter", "OtlpJsonAdapter"]
