"""Provenance: prove the evidence before anything is scored (docs/method.md section 4).

Pure functions over one `adapters.model.Turn` and a `KnowledgePack`: which traffic segment the turn belongs to
(`segment_turn`), which of its text fields arrived whole (`coverage`), whether any text is addressed to an
evaluator (`find_injections`, `scan_turn`; what the rules cannot decide: `find_suspects`, `scan_turn_suspects`), all
bundled by `provenance_record`. Each module has a `VERSION` that its results record.
"""

from agent_factory.evaluators.provenance.attacks import (
    InjectionFlag,
    find_injections,
    find_suspects,
    scan_turn,
    scan_turn_suspects,
)
from agent_factory.evaluators.provenance.coverage import Coverage, FieldCoverage, coverage
from agent_factory.evaluators.provenance.record import (
    VERSION,
    ProvenanceRecord,
    attach_record,
    provenance_record,
    record_json,
    stored_json,
    stored_record,
)
from agent_factory.evaluators.provenance.segments import SegmentEvidence, SegmentResult, segment_turn

__all__ = [
    "VERSION",
    "attach_record",
    "stored_json",
    "stored_record",
    "Coverage",
    "FieldCoverage",
    "InjectionFlag",
    "ProvenanceRecord",
    "SegmentEvidence",
    "SegmentResult",
    "coverage",
    "find_injections",
    "find_suspects",
    "provenance_record",
    "record_json",
    "scan_turn",
    "scan_turn_suspects",
    "segment_turn",
]
