"""Provenance as a component: segment, evidence coverage and injection flags as data, and their results.

The per-turn logic lives in `evaluators.provenance` (ingest stores its records); this package turns it into
atomic data and results. The runner must feed Provenance the turns of *every* segment
(`store.iter_turns(segment=None)`), while the other components get real traffic only.
"""

from __future__ import annotations

from agent_factory.evaluators.components.provenance.analysis import NAME, VERSION, provenance_analysis
from agent_factory.evaluators.components.provenance.definitions import (
    DEFINITIONS,
    EVIDENCE_COMPLETE,
    FIELD_ITEMS,
    INJECTION_FLAGGED,
    SEGMENT,
)
from agent_factory.evaluators.components.provenance.flags import FLAGS
from agent_factory.evaluators.components.provenance.present import PRESENTATION
from agent_factory.evaluators.core.registry import Analysis, ComponentSpec

SPEC = ComponentSpec(
    name="provenance",
    present=PRESENTATION,
    definitions=DEFINITIONS,
    flags=FLAGS,
    analyses=(Analysis(name=NAME, version=VERSION, fn=provenance_analysis, layers=("trace",)),),
    description="Traffic segments, evidence coverage per field, injection isolation; fed every segment.",
    segments="all",
)

__all__ = [
    "DEFINITIONS",
    "EVIDENCE_COMPLETE",
    "FLAGS",
    "FIELD_ITEMS",
    "INJECTION_FLAGGED",
    "SEGMENT",
    "SPEC",
    "provenance_analysis",
]
