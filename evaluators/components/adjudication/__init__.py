"""Adjudication: proves the evaluators (docs/method.md section 6); here the kappa-and-admission part.

`adjudicate(pairs)` is the pure entry point; the registered analysis reads a second rater's values from unit
rows' facts `adjudication.<item>.rater_b` (see `rules`). Variance decomposition, ICC and the audit loop that
re-collects a sample come with a later issue.
"""

from __future__ import annotations

from agent_factory.evaluators.components.adjudication.analysis import (
    NAME,
    VERSION,
    adjudicate,
    adjudication_analysis,
    rater_pairs,
)
from agent_factory.evaluators.components.adjudication.definitions import DEFINITIONS
from agent_factory.evaluators.components.adjudication.present import PRESENTATION
from agent_factory.evaluators.components.adjudication.rules import parse_rater_key, rater_key
from agent_factory.evaluators.core.registry import Analysis, ComponentSpec

SPEC = ComponentSpec(
    name="adjudication",
    present=PRESENTATION,
    definitions=DEFINITIONS,
    analyses=(Analysis(name=NAME, version=VERSION, fn=adjudication_analysis, reads=("*",)),),
    description="Cohen's kappa per data item between two raters; admission at 0.60 (two decimals).",
)

__all__ = ["SPEC", "adjudicate", "adjudication_analysis", "parse_rater_key", "rater_key", "rater_pairs"]
