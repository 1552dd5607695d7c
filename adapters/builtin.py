"""Registers the built-in adapters, in sniffing order (most specific first)."""

from __future__ import annotations

from adapters.base import register
from adapters.chat import OpenAIChatAdapter, TauBenchAdapter
from adapters.otel import FlatSpanLinesAdapter, NestedSpanTreeAdapter, OtlpJsonAdapter
from adapters.steplog import RunContractAdapter, StepLogAdapter
from adapters.who_when import WhoWhenAdapter

for _adapter in (
    NestedSpanTreeAdapter(),
    OtlpJsonAdapter(),
    FlatSpanLinesAdapter(),
    TauBenchAdapter(),
    OpenAIChatAdapter(),
    WhoWhenAdapter(),
    RunContractAdapter(),
    StepLogAdapter(),
):
    register(_adapter)
