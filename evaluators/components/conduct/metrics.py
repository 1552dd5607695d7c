"""The metrics Conduct's analyses emit, declared once: the analyses name them through these objects
(`Metric.of`, `.name`), and the views read their kind, direction and label from them (`present`)."""

from __future__ import annotations

from agent_factory.evaluators.core.present import Metric

APPLIES = Metric(name="A(r).{clause}", kind="rate", worse=None, label="applicability P(trigger)",
                 variants=(".clustered",))
COMPLIES = Metric(name="C(r).{clause}", kind="rate", worse="lower", label="compliance P(obligation | trigger)",
                  variants=(".clustered",))
VIOLATIONS = Metric(name="violations.{clause}", kind="count", worse="higher",
                    label="triggered units that did not comply")
VIOLATION_RATE = Metric(name="violation_rate.{clause}", kind="rate", worse="higher",
                        label="units that broke the clause")
VIOLATION = Metric(name="violation.{clause}", kind="label", worse=None, label="a unit that broke the clause",
                   per_unit=True)
UNCOLLECTED = Metric(name="uncollected.{clause}", kind="count", worse="higher",
                     label="trigger or obligation data left uncollected")
INVARIANT = Metric(name="invariant.{clause}", kind="label", worse=None,
                   label="a zero-tolerance clause held, breached or untested")

METRICS = (APPLIES, COMPLIES, VIOLATION_RATE, VIOLATIONS, VIOLATION, UNCOLLECTED, INVARIANT)
