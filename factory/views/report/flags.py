"""The report's per-unit flags: the store's units, data, per-unit results and outcome events read into the
pure `evaluators.findings` functions, which decide every flag (nothing is re-decided here)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, cast

from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.core.model import Layer
from agent_factory.evaluators.findings import (
    LAYER_OF,
    LEVELS,
    Association,
    DatumRow,
    FlagRow,
    Level,
    ResultRow,
    UnitKey,
    associations,
    bad_flags,
    flag_table,
    read_items,
    roll_up,
    unit_outcomes,
)
from agent_factory.factory.store import Store
from agent_factory.factory.views.report.model import LayerCell

ASSOCIATION_LEVEL: Level = "conversation"
"""Outcomes (a task's reward, a session's feedback) belong to sessions: flags are compared there."""


def _units(store: Store, user: str | None = None) -> list[UnitKey]:
    where, args = (" WHERE user_id = ?", [user]) if user is not None else ("", [])
    rows = store.con.execute(
        "SELECT unit_id, layer, conversation_id, user_id, coalesce(idx, 0) FROM units" + where
        + " ORDER BY layer, unit_id", args).fetchall()
    return [UnitKey(u, cast(Layer, layer), c, user, int(i)) for u, layer, c, user, i in rows]


@lru_cache(maxsize=65536)
def _fact(raw: str | None) -> float | str | None:
    # Cached: the result values and facts read are few distinct strings (`"violated"`, `null`, labels) over
    # hundreds of thousands of rows; decoding each again took 2 of the 12 s of `show --worst` on the quick start.
    if raw is None:
        return None
    v: Any = json.loads(raw)
    return v if isinstance(v, int | float | str) and not isinstance(v, bool) else None


def read_flag_rows(store: Store, specs: Sequence[FlagSpec], *,
                   user: str | None = None) -> tuple[list[UnitKey], list[FlagRow]]:
    """The units of the last run and every flag of `specs` on them; with `user`, only that user's units (every
    unit a roll-up of one of them reads lies within its user, so their flags are the same as in the whole)."""
    items, metrics = read_items(specs)
    units = _units(store, user)
    # A user's units are few: filtering the rows by unit id keeps `show UNIT_ID` quick on a large store.
    mine = " AND unit_id IN (SELECT unit_id FROM units WHERE user_id = ?)" if user is not None else ""
    extra = [user] if user is not None else []
    # Only the flags with a `fact` condition read the fact: decoding every datum's JSON fact cost most of the read.
    with_fact = sorted({s.item for s in specs if s.source == "datum" and s.fact is not None})
    data = [DatumRow(u, i, v, _fact(f) if f is not None else None) for u, i, v, f in store.con.execute(
        "SELECT unit_id, item, value, CASE WHEN item IN (SELECT unnest(?)) THEN fact END FROM atomic_data"
        " WHERE rater = 'primary' AND item IN (SELECT unnest(?))" + mine,
        [with_fact, sorted(items), *extra]).fetchall()]
    wanted = {f"{c}/{m}" for c, m in metrics}
    results = [ResultRow(u, c, m, _fact(v)) for u, c, m, v in store.con.execute(
        "SELECT unit_id, component, metric, value FROM results WHERE unit_id IS NOT NULL" + mine, extra).fetchall()
        if f"{c}/{m}" in wanted]
    return units, flag_table(specs, units, data, results)


def layer_cells(specs: Sequence[FlagSpec], units: Sequence[UnitKey], rows: Sequence[FlagRow]) -> list[LayerCell]:
    """Per component and layer: units with at least one of its problem flags raised, over units with at least
    one decided below them (flags meaning `bad` only: a hand-off or an instrument problem is no failure of the agent,
    except for Provenance, whose flags are all about the evidence)."""
    bad = bad_flags(specs) | {s.id for s in specs if s.component == "provenance"}
    counted = [r for r in rows if r.flag in bad]
    # A unit counts in the denominator when any unit below it was decided: a user whose last session is
    # still open (undecided) was still checked on the others. Rolled up as "any decided row below".
    checked = [r._replace(value=1) for r in counted if r.value is not None]
    out: list[LayerCell] = []
    for level in LEVELS:
        state: dict[tuple[str, str], list[bool]] = defaultdict(lambda: [False, False])
        for r in roll_up(counted, units, level=level):
            state[(r.component, r.unit_id)][0] |= r.value == 1
        for r in roll_up(checked, units, level=level):
            state[(r.component, r.unit_id)][1] = True
        per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for (component, _), (flagged, decided) in state.items():
            per[component][0] += int(flagged)
            per[component][1] += int(decided)
        out.extend(LayerCell(component=c, layer=LAYER_OF[level], flagged=f, units=n)
                   for c, (f, n) in sorted(per.items()))
    return out


def read_associations(store: Store, specs: Sequence[FlagSpec], units: Sequence[UnitKey],
                      rows: Sequence[FlagRow]) -> tuple[Association, ...]:
    """Each flag against each outcome kind the traces carry, at the conversation level."""
    events = store.events()
    if not events:
        return ()
    outcomes = unit_outcomes(events, units, level=ASSOCIATION_LEVEL)
    rolled = roll_up(list(rows), units, level=ASSOCIATION_LEVEL)
    return tuple(associations(specs, rolled, outcomes, level=ASSOCIATION_LEVEL))
