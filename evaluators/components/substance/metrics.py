"""The metrics Substance's analyses emit, declared once: the analyses name them through these objects
(`Metric.of`, `.name`), and the views read their kind, direction and label from them (`present`)."""

from __future__ import annotations

from agent_factory.evaluators.core.present import UNCOLLECTED as UNCOLLECTED  # one declaration for every component
from agent_factory.evaluators.core.present import Metric

SCORE = Metric(name="S", kind="score", worse="lower",
               label="substance score: delivery x the mean of the admitted applicable checklist items")
PASS_RATE = Metric(name="pass_rate.{item}", kind="rate", worse="lower", label="checklist item pass rate")
NO_ITEMS = Metric(name="no_collected_items", kind="count", worse="higher",
                  label="delivered turns with no collected checklist item")
DELIVERY_UNDECIDED = Metric(name="delivery_undecided", kind="count", worse="higher",
                            label="turns whose delivery is undecided")

METRICS = (SCORE, PASS_RATE, NO_ITEMS, DELIVERY_UNDECIDED, UNCOLLECTED)
