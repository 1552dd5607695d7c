"""The store's findings read for people: the suite's flags, each unit's flags at a level, outcome associations.

The part that does I/O around the pure `evaluators.findings` (which decides every flag and association), over
the rows `factory.store.findings` reads; `summary`, `show`, `export` and `report` all read through here (never
the reverse), so a flag means the same in each of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.findings import (
    Association,
    FlagRow,
    Level,
    UnitKey,
    associations,
    flag_table,
    read_items,
    roll_up,
    unit_outcomes,
)
from agent_factory.factory.store import Store
from agent_factory.factory.store.findings import flag_data, flag_results, unit_keys
from agent_factory.heap import bulk_objects

ASSOCIATION_LEVEL: Level = "conversation"
"""Outcomes (a task's reward, a session's feedback) belong to sessions: flags are compared there."""


class Findings(NamedTuple):
    """What a store's flags say: its units, every flag on its own unit, and the associations with outcomes."""

    specs: tuple[FlagSpec, ...]
    units: list[UnitKey]
    rows: list[FlagRow]
    """Each flag on the units of its own layer (1 / 0 / None)."""
    associations: tuple[Association, ...]
    """Each flag against each outcome kind, at the conversation level (empty without outcome events)."""

    def at(self, level: Level) -> list[FlagRow]:
        """The flags rolled up to the units of `level` (a unit raises a flag when any unit below it does)."""
        with bulk_objects():
            return roll_up(self.rows, self.units, level=level)


def read_flag_rows(store: Store, specs: Sequence[FlagSpec], *,
                   user: str | None = None) -> tuple[list[UnitKey], list[FlagRow]]:
    """The units of the last run and every flag of `specs` on them; with `user`, only that user's units (every
    unit a roll-up of one of them reads lies within its user, so their flags are the same as in the whole)."""
    items, metrics = read_items(specs)
    units = unit_keys(store, user=user)
    # Only the flags with a `fact` condition read the fact: decoding every datum's JSON fact cost most of the read.
    with_fact = {s.item for s in specs if s.source == "datum" and s.fact is not None}
    data = flag_data(store, items=items, with_fact=with_fact, user=user)
    results = flag_results(store, metrics=metrics, user=user)
    return units, flag_table(specs, units, data, results)


def read_associations(store: Store, specs: Sequence[FlagSpec], units: Sequence[UnitKey],
                      rows: Sequence[FlagRow]) -> tuple[Association, ...]:
    """Each flag against each outcome kind the traces carry, at the conversation level: outcomes only, never an
    annotation (`OutcomeEvent.is_outcome`: a mistake step is a label, not how the task went)."""
    events = [e for e in store.events() if e.is_outcome]
    if not events:
        return ()
    outcomes = unit_outcomes(events, units, level=ASSOCIATION_LEVEL)
    rolled = roll_up(list(rows), units, level=ASSOCIATION_LEVEL)
    return tuple(associations(specs, rolled, outcomes, level=ASSOCIATION_LEVEL))


def read_findings(store: Store, specs: Sequence[FlagSpec], *, with_associations: bool = True,
                  user: str | None = None) -> Findings:
    """Read every flag of `specs` off the store's last run (and, unless told not to, their outcome associations).
    With `user`: that user's units only (what `show` needs of one unit), without associations."""
    with bulk_objects():
        units, rows = read_flag_rows(store, specs, user=user)
        with_associations = with_associations and user is None
        assoc = read_associations(store, specs, units, rows) if with_associations else ()
    return Findings(tuple(specs), units, rows, assoc)
