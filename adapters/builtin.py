"""The built-in adapters with their sniffing priorities (most specific first), tagged here, registered when a
registry loads this module: the `agent_factory.adapters` entry point `builtin` (pyproject.toml) names it."""

from __future__ import annotations

from agent_factory.adapters.base import declare
from agent_factory.adapters.chat import OpenAIChatAdapter, TauBenchAdapter
from agent_factory.adapters.otel import FlatSpanLinesAdapter, NestedSpanTreeAdapter, OtlpJsonAdapter
from agent_factory.adapters.steplog import RunContractAdapter, StepLogAdapter
from agent_factory.adapters.who_when import WhoWhenAdapter

NESTED_SPAN_TREE = declare(NestedSpanTreeAdapter(), priority=10)
OTLP_JSON = declare(OtlpJsonAdapter(), priority=20)
FLAT_SPAN_LINES = declare(FlatSpanLinesAdapter(), priority=30)
TAU_BENCH = declare(TauBenchAdapter(), priority=40)
OPENAI_CHAT = declare(OpenAIChatAdapter(), priority=50)
WHO_WHEN = declare(WhoWhenAdapter(), priority=60)
RUN_CONTRACT = declare(RunContractAdapter(), priority=70)
STEP_LOG = declare(StepLogAdapter(), priority=80)
