"""The provenance record of one turn: segment, evidence coverage and injection flags, with their versions.

Ingest stores one record per turn; analyses read `usable` (real traffic, no attack on the evaluator) and the
coverage before trusting a turn's evidence.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from agent_factory.adapters.jsonio import loads
from agent_factory.adapters.model import Stored, Turn
from agent_factory.digest import stable_id

# Names imported from the modules, not the modules themselves: the package binds `coverage` to the function.
from agent_factory.evaluators.provenance.attacks import VERSION as ATTACKS_VERSION
from agent_factory.evaluators.provenance.attacks import InjectionFlag, scan_turn, scan_turn_suspects
from agent_factory.evaluators.provenance.coverage import VERSION as COVERAGE_VERSION
from agent_factory.evaluators.provenance.coverage import Coverage, coverage
from agent_factory.evaluators.provenance.endings import VERSION as ENDINGS_VERSION
from agent_factory.evaluators.provenance.segments import VERSION as SEGMENTS_VERSION
from agent_factory.evaluators.provenance.segments import SegmentResult, segment_turn
from agent_factory.frozen import Frozen
from agent_factory.knowledge_packs import KnowledgePack

VERSION = (f"2;segments={SEGMENTS_VERSION};coverage={COVERAGE_VERSION};attacks={ATTACKS_VERSION};"
           f"endings={ENDINGS_VERSION}")
"""Version of the provenance component's logic (without the pack, whose digest is recorded separately)."""


class ProvenanceRecord(Frozen):
    """Everything provenance establishes about one turn."""

    turn_id: str
    """The turn."""
    pack: str
    """Name of the knowledge pack used."""
    pack_version: str
    """That pack's declared version."""
    pack_digest: str
    """Content hash of the pack: changes with any edit, even one that forgot to bump `pack_version`."""
    knowledge_digest: str = ""
    """`KnowledgePack.knowledge_digest()`: the pack less its clauses and labels, all that provenance reads. A
    stored record holds for any pack with this digest, so a suite compiled from a spec (the ingest pack plus the
    spec's clauses) reuses what ingest stored. Empty in records written before it existed (never reused)."""
    segment: SegmentResult
    """Traffic segment and the evidence for it."""
    coverage: Coverage
    """Evidence coverage per text field."""
    injections: tuple[InjectionFlag, ...] = ()
    """Text addressed to an evaluator, found anywhere in the turn."""
    suspects: tuple[InjectionFlag, ...] = ()
    """Text the scan found suspicious but could not decide (only when nothing is flagged): the injection datum
    abstains on such a turn, so a configured model decides; without one it is uncollected, never a pass."""
    attacked: bool
    """True when there is at least one injection flag: the turn is isolated from evaluation."""
    usable: bool
    """Real traffic and not attacked: the turn may enter analysis (coverage is reported, not gated, here)."""
    version: str = VERSION
    """Version of the provenance logic."""

    def key(self) -> str:
        """Cache key of this record's inputs: the logic version, the pack digest and the turn id."""
        return stable_id(self.version, self.pack_digest, self.turn_id, prefix="prov")


def provenance_record(turn: Turn, pack: KnowledgePack) -> ProvenanceRecord:
    """Segment, coverage and injection scan of `turn` under `pack`, bundled with their versions."""
    seg = segment_turn(turn, pack)
    flags = tuple(scan_turn(turn, pack))
    suspects = () if flags else tuple(scan_turn_suspects(turn, pack))
    return ProvenanceRecord(
        turn_id=turn.id,
        pack=pack.name,
        pack_version=pack.version,
        pack_digest=pack.digest(),
        knowledge_digest=pack.knowledge_digest(),
        segment=seg,
        coverage=coverage(turn, pack),
        injections=flags,
        suspects=suspects,
        attacked=bool(flags),
        usable=not seg.excluded and not flags,
    )


def record_json(rec: ProvenanceRecord) -> str:
    """The record as ingest stores it: JSON without the fields that hold their default (most of a field's
    coverage is None or empty), which reading it back (`stored_record`, `model_validate`) fills in again; the
    record's own `version`, which names the logic that made every part of it, is always written.

    The records are the store's largest column (3.7 kB a turn in full, 2.2 kB so) and every run reads them."""
    out = rec.model_dump(mode="json", exclude_defaults=True)
    out["version"] = rec.version
    return orjson.dumps(out).decode()


INPUTS = ("id", "user_id", "request", "answer", "delivery", "attributes", "spans")
"""The turn's fields a provenance record is computed from (segment, coverage, injection scan and endings read
nothing else): a stored record holds for a turn read back with these unchanged."""


def _inputs(turn: Turn) -> tuple[object, ...]:
    d = turn.__dict__
    return tuple(d[f] for f in INPUTS)


def attach_record(turn: Turn, record_json: str) -> Turn:
    """`turn` (the same object) carrying the provenance record ingest stored for it, as JSON; read lazily."""
    turn._stored = Stored(record_json, _inputs(turn))
    return turn


def stored_json(turn: Turn, pack: KnowledgePack) -> dict[str, Any] | None:
    """The record ingest stored for `turn` as parsed JSON, if the turn carries one that still holds: made by this
    provenance logic (`VERSION`) under a pack with this pack's knowledge (its `knowledge_digest`: clauses and
    labels are not read by provenance), for this turn with the fields it has now.
    None otherwise: the caller computes it afresh (`provenance_record`), which gives what a fresh ingest would
    store. Parsed once per turn."""
    private = turn.__pydantic_private__
    st = private.get("_stored") if private else None
    if st is None or not st.matches(_inputs(turn)):
        return None
    rec = st.payload
    if isinstance(rec, str):
        try:
            rec = loads(rec)
        except ValueError:
            rec = None
        st.payload = rec
    if not isinstance(rec, dict) or rec.get("version") != VERSION or rec.get("turn_id") != turn.id \
            or rec.get("knowledge_digest") != pack.knowledge_digest():
        return None
    return rec


def stored_record(turn: Turn, pack: KnowledgePack) -> ProvenanceRecord | None:
    """The record ingest stored for `turn`, as `stored_json` finds it, as a model; None if there is none that
    holds (or it is of another shape)."""
    rec = stored_json(turn, pack)
    if rec is None:
        return None
    try:
        return ProvenanceRecord.model_validate(rec)
    except ValidationError:  # written by another version of the record's schema: not this logic's
        return None
