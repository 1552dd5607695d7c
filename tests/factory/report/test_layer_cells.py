"""The layer table's denominators: a unit counts when any unit below it was checked."""

from __future__ import annotations

from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.findings import FlagRow, UnitKey
from agent_factory.factory.views.report.flags import layer_cells

REDO = FlagSpec(id="results.redo", component="results", layer="conversation", label="redo", item="results.redo",
                raised=("yes",), clear=("no",))


def test_a_user_with_an_open_last_session_is_still_counted_as_checked() -> None:
    units = [UnitKey("c1", "conversation", "c1", "u1"), UnitKey("c2", "conversation", "c2", "u1"),
             UnitKey("c3", "conversation", "c3", "u2"), UnitKey("c4", "conversation", "c4", "u2"),
             UnitKey("c5", "conversation", "c5", "u3")]
    # u1: checked clear, then open (undecided); u2: flagged, then open; u3: never decided.
    rows = [FlagRow("c1", "conversation", "c1", "u1", "results", REDO.id, 0),
            FlagRow("c2", "conversation", "c2", "u1", "results", REDO.id, None),
            FlagRow("c3", "conversation", "c3", "u2", "results", REDO.id, 1),
            FlagRow("c4", "conversation", "c4", "u2", "results", REDO.id, None),
            FlagRow("c5", "conversation", "c5", "u3", "results", REDO.id, None)]
    cells = {(c.component, c.layer): (c.flagged, c.units) for c in layer_cells([REDO], units, rows)}
    assert cells[("results", "conversation")] == (1, 2)
    assert cells[("results", "engagement")] == (1, 2)  # u1 and u2 were checked; u3 was not
