"""Provenance's flags: problems of the evidence, not of the agent (meaning `instrument`)."""

from __future__ import annotations

from agent_factory.evaluators.components.provenance.definitions import EVIDENCE_COMPLETE, INJECTION_FLAGGED
from agent_factory.evaluators.core.flags import FlagSpec

FLAGS: tuple[FlagSpec, ...] = (
    FlagSpec(id="provenance.incomplete_evidence", component="provenance", layer="trace",
             label="incomplete evidence", meaning="instrument", item=EVIDENCE_COMPLETE, raised=("no",),
             clear=("yes",), description="A field of the turn is missing where required, or cut."),
    FlagSpec(id="provenance.injection_flagged", component="provenance", layer="trace",
             label="text addressed to the evaluator", meaning="instrument", item=INJECTION_FLAGGED,
             raised=("yes",), clear=("no",), description="An injection aimed at the instrument; the turn is isolated."),
)
