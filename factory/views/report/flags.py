"""The report's layer table: per component and layer, the units a problem flag was raised on, over the units
checked, from the flags `factory.views.findings` read (pure: nothing is read or re-decided here)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.findings import LAYER_OF, LEVELS, FlagRow, UnitKey, bad_flags, roll_up
from agent_factory.factory.views.report.model import LayerCell


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
