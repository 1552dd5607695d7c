"""Adjudication data (rho): none of its own. Adjudication reads the data of the other components twice.

The audit (a later issue) re-collects a sample of data with a second rater (another model, a person, or rules
against a model) and stores the second rater's value beside the first, as a fact of the same unit row under
`adjudication.<item>.rater_b` (see `rules.rater_key`). The analysis then compares the two raters per item.
"""

from __future__ import annotations

from agent_factory.evaluators.core.model import DataDefinition

DEFINITIONS: tuple[DataDefinition, ...] = ()
"""Adjudication defines no atomic data: it adjudicates the data other components define."""
