"""The store's findings read for people: the suite's flags, each unit's flags at a level, outcome associations.

The part that does I/O around the pure `evaluators.findings` (which decides every flag and association);
`summary`, `show`, `export` and `report` all read through here, so a flag means the same in each of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.findings import Association, FlagRow, Level, UnitKey, all_flags, roll_up
from agent_factory.factory.store import Store
from agent_factory.factory.views.report.flags import read_associations, read_flag_rows
from agent_factory.heap import bulk_objects


def suite_flags(store: Store, suite: Path | None, pack: str | None) -> tuple[FlagSpec, ...]:
    """Every flag of the suite's components over its pack (Conduct's from its clauses). Without `suite` and
    `pack`: the suite `load_suite` picks for the store (the pack used at ingest)."""
    from agent_factory.factory.suite.read import load_suite

    chosen = load_suite(suite, pack=pack, store=store, allow_unapproved=True)
    return all_flags(chosen.pack, chosen.components)


def flags_at(path: Path, suite: Path | None, pack: str | None) -> tuple[FlagSpec, ...] | None:
    """`suite_flags` of the store at `path` (opened read-only); None when there is no store there."""
    if not path.exists():
        return None
    with Store(path, read_only=True) as store:
        return suite_flags(store, suite, pack)


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


def read_findings(store: Store, specs: Sequence[FlagSpec], *, with_associations: bool = True,
                  user: str | None = None) -> Findings:
    """Read every flag of `specs` off the store's last run (and, unless told not to, their outcome associations).
    With `user`: that user's units only (what `show` needs of one unit), without associations."""
    with bulk_objects():
        units, rows = read_flag_rows(store, specs, user=user)
        with_associations = with_associations and user is None
        assoc = read_associations(store, specs, units, rows) if with_associations else ()
    return Findings(tuple(specs), units, rows, assoc)
