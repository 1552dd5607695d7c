"""The metrics Provenance's analyses emit, declared once: the analyses name them through these objects
(`Metric.of`, `.name`), and the views read their kind, direction and label from them (`present`)."""

from __future__ import annotations

from agent_factory.evaluators.core.present import UNCOLLECTED as UNCOLLECTED  # one declaration for every component
from agent_factory.evaluators.core.present import Metric

EXCLUDED = Metric(name="excluded_share", kind="rate", worse=None, label="turns outside the real segment",
                  variants=(".clustered",))
SEGMENT_SHARE = Metric(name="segment_share.{segment}", kind="rate", worse=None, label="turns of the segment")
COVERAGE = Metric(name="coverage.{field}", kind="rate", worse="lower", label="turns with the field complete",
                  variants=(".clustered",))
INCOMPLETE = Metric(name="incomplete_evidence", kind="rate", worse="higher", label="turns with incomplete evidence",
                    variants=(".clustered",))
INJECTION = Metric(name="injection_flagged", kind="rate", worse="higher", label="turns flagged for injection",
                   variants=(".clustered",))
CLEAN = Metric(name="clean.{unit}", kind="count", worse=None,
               label="real units checked for injections and not flagged")

METRICS = (EXCLUDED, SEGMENT_SHARE, COVERAGE, INCOMPLETE, INJECTION, CLEAN, UNCOLLECTED)
