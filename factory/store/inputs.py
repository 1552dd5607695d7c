"""`RunInputs`: what a run reads of the store before it plans, read in one call (`read_run_inputs`).

A `Runner` takes the snapshot instead of reading the store in its constructor, so that whoever assembles a run
(`Project`, a test, a loop that reruns a suite) decides when the store is read, and a run in memory can be given
inputs that no store holds.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from agent_factory.adapters.model import EvidencePointer
from agent_factory.evaluators.provenance import ProvenanceRecord
from agent_factory.factory.store.audit import retired_items
from agent_factory.factory.store.base import Store
from agent_factory.factory.store.pipeline import current_sources
from agent_factory.frozen import Frozen


class RunInputs(Frozen):
    """The store's state a run starts from: the files ingested, where ingest flagged injected text, and the end
    of observation."""

    sources: frozenset[str]
    """Ids of the files ingested into the store (new ones, against the last run's, rebuild their users)."""
    injections: dict[str, tuple[EvidencePointer, ...]]
    """Turn id -> where provenance flagged text addressed to an evaluator in it (stored at ingest), so that every
    prompt showing that text marks it as flagged."""
    horizon_at: datetime | None
    """The end of observation: the latest time any turn ended (or started); None for a store with no turn."""
    retired: dict[str, str] = Field(default_factory=dict)
    """Item -> the version an audit retired (`store.audit`): the data of that version stay stored and leave the
    analyses; a newer version of the item is admitted until an audit says otherwise."""

    @property
    def horizon(self) -> float | None:
        """`horizon_at` as a POSIX timestamp (what the graph's state and the kernel's observations keep)."""
        return self.horizon_at.timestamp() if self.horizon_at is not None else None


def injection_pointers(store: Store) -> dict[str, tuple[EvidencePointer, ...]]:
    """Turn id -> the pointers of the injections ingest flagged in it (provenance records parsed back)."""
    return {tid: tuple(f.pointer for f in ProvenanceRecord.model_validate_json(rec).injections)
            for tid, rec in store.injection_records()}


def read_run_inputs(store: Store) -> RunInputs:
    """The snapshot a run starts from. The three reads need no transaction of their own: DuckDB lets one
    process write a store file at a time, and the run that reads them is that process."""
    return RunInputs(sources=current_sources(store), injections=injection_pointers(store),
                     horizon_at=store.horizon(), retired=retired_items(store))


__all__ = ["RunInputs", "injection_pointers", "read_run_inputs"]
