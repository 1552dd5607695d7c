"""rho of Results (docs/method.md section 4): what followed a session - a return within T, how soon, a redo.

Layer choice: each datum is about one *session* (conversation layer), answering "what followed it?". Its rule
reads the session's place among the user's sessions from `RuleContext.engagement` (the user's
`EngagementView`, with the observation horizon), so analyses can split returns and redos by how the session
ended (Execution's `execution.delivered` on its last turn), which a single per-user datum could not.

Censoring: `results.returned_within_t` is a *fact* with three labels - `returned`, `not_returned` and
`censored` (no later session seen and the window T after the session's end reaches past the horizon).
Censored is an observed state, not a collection gap, so it is not `uncollected`; analyses leave it out of the
return rate's denominator and report how many there were. It is never a return and never a non-return.
"""

from __future__ import annotations

from agent_factory.evaluators.core.model import DataDefinition

RETURNED_WITHIN_T = "results.returned_within_t"
RETURN_INTERVAL_S = "results.return_interval_s"
REDO = "results.redo"
FEEDBACK = "results.feedback"

RETURNED, NOT_RETURNED, CENSORED = "returned", "not_returned", "censored"
"""The labels of `results.returned_within_t`."""
FEEDBACK_KINDS = ("feedback", "user_feedback", "rating", "thumbs")
"""Outcome-event kinds that are explicit user feedback."""


def _d(id: str, question: str, *, kind: str = "check", description: str = "") -> DataDefinition:
    return DataDefinition(
        id=id, question=question, component="results", layer="conversation", kind=kind,
        rule=id, tiers=("rule",), description=description,
    )


DEFINITIONS: tuple[DataDefinition, ...] = (
    _d(RETURNED_WITHIN_T, "Did the user start another session within T after this session ended?", kind="fact",
       description=f"Fact {RETURNED!r} / {NOT_RETURNED!r} / {CENSORED!r}; T is `pack.thresholds.window_days`. "
                   f"{CENSORED!r}: no later session seen and the end + T is past the observation horizon."),
    _d(RETURN_INTERVAL_S, "How many seconds after this session ended did the user's next session start?",
       kind="fact",
       description="Any later session, inside T or not; not_applicable (censored) when none was seen."),
    _d(REDO, "Does the user's next session start by redoing this session's last request?",
       description="Character-bigram Jaccard of the two requests >= `pack.thresholds.redo_jaccard` (0.6); the fact "
                   "holds the similarity. Adjacent requests across sessions only: redos inside a session are "
                   "Trajectory's replays. not_applicable when no later session was seen."),
    _d(FEEDBACK, "What explicit feedback did the user give on this session?", kind="fact",
       description=f"The latest outcome event of kind {', '.join(FEEDBACK_KINDS)} tied to the session (booleans as "
                   "1.0 / 0.0); not_applicable when there is none."),
)
"""Results' data definitions (conversation layer)."""
