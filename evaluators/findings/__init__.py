"""Findings: the per-unit flags every component raises, rolled up to sessions and users, and their association
with the outcomes the traces carry (task reward, feedback). Pure: `factory.views.findings` reads the store.

- `all_flags(pack)`: every registered component's flags (`ComponentSpec.flags_for`), Conduct's from the clauses;
- `flag_table`, `roll_up`, `flag_counts`: the flag of each unit (1 / 0 / None) and the counts per component;
- `unit_outcomes`, `associations`: outcomes joined to units, the outcome with and without each flag.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.core.registry import ComponentSpec, components
from agent_factory.evaluators.findings.flags import (
    LAYER_OF,
    LEVELS,
    VERSION,
    DatumRow,
    FlagRow,
    Level,
    ResultRow,
    UnitKey,
    bad_flags,
    flag_counts,
    flag_table,
    level_units,
    read_items,
    roll_up,
    turns_of_spans,
)
from agent_factory.evaluators.findings.outcomes import Association, associations, numeric, unit_outcomes
from agent_factory.knowledge_packs import KnowledgePack


def all_flags(pack: KnowledgePack, specs: Sequence[ComponentSpec] | None = None) -> tuple[FlagSpec, ...]:
    """The flags of `specs` (default: every registered component) over `pack`, in component order."""
    return tuple(f for c in (specs if specs is not None else components()) for f in c.flags_for(pack))


__all__ = [
    "LAYER_OF", "LEVELS", "VERSION", "Association", "DatumRow", "FlagRow", "FlagSpec", "Level", "ResultRow",
    "UnitKey", "all_flags", "associations", "bad_flags", "flag_counts", "flag_table", "level_units", "numeric",
    "read_items", "roll_up", "turns_of_spans", "unit_outcomes",
]
