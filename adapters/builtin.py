"""Registers the built-in adapters, in sniffing order (most specific first)."""

from __future__ import annotations

from agent_factory.adapters.base import register
from agent_factory.adapters.chat import OpenAIChatAdapter, TauBenchAdapter
from agent_factory.adapters.otel import FlatSpanLinesAdapter, NestedSpanTreeAdapter, OtlpJsonAdapter
from agent_factory.adapters.steplog import RunContractAdapter, StepLogAdapter
from agent_factory.adapters.who_when import WhoWhenAdapter

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
