"""Adjudication data (rho): none of its own. Adjudication reads the data of the other components twice.

The audit re-collects a sample of data with a second rater (another model; people's labels are imported) and
stores the second rater's values as atomic data beside the first, keyed by rater (`audit:<model>`,
`human:<name>`); it compares the raters per item and stores its report, which this component presents
(`audit`).
"""

from __future__ import annotations

from agent_factory.evaluators.core.model import DataDefinition

DEFINITIONS: tuple[DataDefinition, ...] = ()
"""Adjudication defines no atomic data: it adjudicates the data other components define."""
