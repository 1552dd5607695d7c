"""Traffic simulator: a business-analysis agent's traces (OTLP JSON lines) with their ground truth.

`simulate(SimConfig(...), out_dir)` reproduces the shape of the reference study (docs/method.md sections 3, 4
and 7) at its default size, streams `traces.otlp.jsonl`, `truth.jsonl` (one line per turn) and
`truth_sessions.jsonl` (one line per real session: its Trajectory events, friction and outcome) in constant
memory, and records the rates and outcome shares actually realised in `truth_summary.json`. Planted defects
(all off by default) rewrite logged turns so the gate and the later components can be tested against a
known answer.
"""

from agent_factory.evaluators.stats.text import bigram_jaccard
from agent_factory.factory.simulate.config import SimConfig, load_config
from agent_factory.factory.simulate.writer import (
           CONFIG,
           TRACES,
           TRUTH,
           TRUTH_SESSIONS,
           TRUTH_SUMMARY,
           SimSummary,
           simulate,
)

__all__ = ["CONFIG", "TRACES", "TRUTH", "TRUTH_SESSIONS", "TRUTH_SUMMARY", "SimConfig", "SimSummary",
           "bigram_jaccard", "load_config", "simulate"]
