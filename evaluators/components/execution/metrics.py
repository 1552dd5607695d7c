"""The metrics Execution's analyses emit, declared once: the analyses name them through these objects
(`Metric.of`, `.name`), and the views read their kind, direction and label from them (`present`)."""

from __future__ import annotations

from agent_factory.evaluators.core.present import UNCOLLECTED as UNCOLLECTED  # one declaration for every component
from agent_factory.evaluators.core.present import Metric

STEPS = ("thinking", "retrieval", "chain_complete")
"""The chain steps failure is compared without and with (`analysis.failure_by_chain`)."""

FAILURE_RATE = Metric(name="failure_rate", kind="rate", worse="higher", label="delivery failure",
                      variants=(".wilson",))
FAILURE_WITH = Metric(name="failure_rate.{step}", kind="rate", worse="higher", label="failure with the step",
                      choices={"step": STEPS})
FAILURE_WITHOUT = Metric(name="failure_rate.no_{step}", kind="rate", worse="higher",
                         label="failure without the step", choices={"step": STEPS})
BAND = Metric(name="failure_rate.band[{band}]", kind="rate", worse="higher", label="failure by latency band")
HANDED_OFF = Metric(name="handed_off", kind="count", worse=None, label="turns handed to a person")
LATENCY_SECONDS = Metric(name="latency_gm_seconds", kind="seconds", worse="higher",
                         label="geometric-mean latency of delivered turns")
LATENCY_RATIO = Metric(name="latency_gm_ratio", kind="score", worse="higher",
                       label="geometric-mean latency / the pack's baseline")
EARLY_STOP = Metric(name="early_stop_share", kind="rate", worse="higher", label="abnormal stops at <= 20% progress")
STOP_MEDIAN = Metric(name="stop_median_seconds", kind="seconds", worse=None,
                     label="median time to an abnormal stop")
SPAN_ERROR_RATE = Metric(name="span_error_rate", kind="rate", worse="higher", label="spans ended in an error")
FAILURE_ROLLUP = Metric(name="delivery_failure_share", kind="rate", worse="higher",
                label="units with at least one failed turn")

METRICS = (FAILURE_RATE, FAILURE_WITH, FAILURE_WITHOUT, BAND, HANDED_OFF, LATENCY_SECONDS, LATENCY_RATIO,
           EARLY_STOP, STOP_MEDIAN, SPAN_ERROR_RATE, FAILURE_ROLLUP, UNCOLLECTED)
