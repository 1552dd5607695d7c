"""Provenance data definitions (rho): one turn's segment, evidence coverage and injection flags.

All are collected by rules on the trace layer (the turn) from the same pure functions ingest uses
(`evaluators.provenance`), so the data agree with the provenance records in the store. Unlike every other
component, Provenance must see *all* segments: the runner feeds it every turn, not only real traffic.
"""

from __future__ import annotations

from agent_factory.evaluators.core.model import DataDefinition

SEGMENT = "provenance.segment"
EVIDENCE_COMPLETE = "provenance.evidence_complete"
INJECTION_FLAGGED = "provenance.injection_flagged"
FIELD_ITEMS: dict[str, str] = {
    "request": "provenance.request_complete",
    "answer": "provenance.answer_complete",
    "span_inputs": "provenance.span_inputs_complete",
    "span_outputs": "provenance.span_outputs_complete",
}
"""Coverage field -> data id: is that field of the turn complete (present where required, not cut)?"""


def _check(item: str, question: str, description: str) -> DataDefinition:
    return DataDefinition(
        id=item, question=question, component="provenance", layer="trace", rule=item, description=description,
    )


DEFINITIONS: tuple[DataDefinition, ...] = (
    DataDefinition(
        id=SEGMENT,
        question="Which traffic segment is this turn (real, internal test, cached suggestion, synthetic ...)?",
        component="provenance",
        layer="trace",
        kind="fact",
        rule=SEGMENT,
        description="Fact: the segment name from the pack's ordered segmentation rules (first match, else real).",
    ),
    _check(
        EVIDENCE_COMPLETE,
        "Did every text field of this turn arrive whole (required fields present, nothing truncated)?",
        "No when any field is cut or a required field is missing; the fact lists the incomplete fields.",
    ),
    _check(
        FIELD_ITEMS["request"], "Is the turn's request complete?", "Present if required, and not truncated.",
    ),
    _check(
        FIELD_ITEMS["answer"], "Is the turn's answer complete?",
        "Present if required, and not truncated (markers, declared length, finish reason, truncated delivery).",
    ),
    _check(
        FIELD_ITEMS["span_inputs"], "Are the inputs of all the turn's spans complete?",
        "not_applicable for a turn without spans.",
    ),
    _check(
        FIELD_ITEMS["span_outputs"], "Are the outputs of all the turn's spans complete?",
        "not_applicable for a turn without spans; an errored span's missing output is not a gap.",
    ),
    _check(
        INJECTION_FLAGGED,
        "Does any text of this turn address an evaluator (an injection aimed at the instrument)?",
        "Yes = flagged (the turn is isolated); the fact lists the matching pattern ids.",
    ),
)
