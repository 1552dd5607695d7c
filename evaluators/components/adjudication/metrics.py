"""The metrics Adjudication's analyses emit, declared once: the analyses name them through these objects
(`Metric.of`, `.name`), and the views read their kind, direction and label from them (`present`)."""

from __future__ import annotations

from agent_factory.evaluators.core.present import Metric
from agent_factory.evaluators.stats import ADMISSION_THRESHOLD

KAPPA = Metric(name="kappa.{item}", kind="score", worse="lower", label="Cohen's kappa between two raters")
ADMISSION = Metric(name="admission.{item}", kind="label", worse=None,
                   label=f"admitted at kappa >= {ADMISSION_THRESHOLD:.2f}, else retired")

METRICS = (KAPPA, ADMISSION)
