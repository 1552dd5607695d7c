"""Adjudication: proves the evaluators (docs/method.md section 6): agreement per data item and admission.

The audit (`factory/loops/audit/`) measures agreement among raters and stores its report; this component reads
that report (`audit.audit_rows`: kappa and admission per item, retired items) and presents it through its own
presentation (`present`), which the views hand the latest stored audit. `audit` says why the old per-run
convention (a second rater's value as a unit-row fact `adjudication.<item>.rater_b`, read by the registered
analysis `adjudication.kappa`) no longer feeds it, and why that analysis stays registered.
"""

from __future__ import annotations

from agent_factory.evaluators.components.adjudication.analysis import (
    NAME,
    VERSION,
    adjudicate,
    adjudication_analysis,
    rater_pairs,
)
from agent_factory.evaluators.components.adjudication.audit import audit_rows
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

__all__ = ["SPEC", "adjudicate", "audit_rows", "adjudication_analysis", "parse_rater_key", "rater_key", "rater_pairs"]
