"""The built-in adapters with their sniffing priorities (most specific first), registered when this module is
imported: the `agent_factory.adapters` entry point `builtin` (pyproject.toml) names it."""

from __future__ import annotations

from agent_factory.adapters.base import register
from agent_factory.adapters.chat import OpenAIChatAdapter, TauBenchAdapter
from agent_factory.adapters.otel import FlatSpanLinesAdapter, NestedSpanTreeAdapter, OtlpJsonAdapter
from agent_factory.adapters.steplog import RunContractAdapter, StepLogAdapter
from agent_factory.adapters.who_when import WhoWhenAdapter

NESTED_SPAN_TREE = register(NestedSpanTreeAdapter(), priority=10)
OTLP_JSON = register(OtlpJsonAdapter(), priority=20)
FLAT_SPAN_LINES = register(FlatSpanLinesAdapter(), priority=30)
TAU_BENCH = register(TauBenchAdapter(), priority=40)
OPENAI_CHAT = register(OpenAIChatAdapter(), priority=50)
WHO_WHEN = register(WhoWhenAdapter(), priority=60)
RUN_CONTRACT = register(RunContractAdapter(), priority=70)
STEP_LOG = register(StepLogAdapter(), priority=80)
