"""Results' flags: a redo of the session's last request in the user's next session.

A return is no flag (it is an outcome, not a problem), and a session with no later one seen is neither raised
nor clear: `not_applicable` here means unobservable, so it is left out."""

from __future__ import annotations

from agent_factory.evaluators.components.results.definitions import REDO
from agent_factory.evaluators.core.flags import FlagSpec

FLAGS: tuple[FlagSpec, ...] = (
    FlagSpec(id="results.redo", component="results", layer="conversation",
             label="next session redoes the last request", item=REDO, raised=("yes",), clear=("no",)),
)
