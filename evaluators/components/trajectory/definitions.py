"""rho of Trajectory (docs/method.md section 4): how a session went, read from what the user did next.

Every item is about one conversation (session). The recovery events (request replay, verbatim replay, context
repair, clarification loop, session termination) sum to the friction F(x); abandonment and frustration block the
session. Each check's rule also returns the number of occurrences as its fact, and cites the turns involved.
Two fact items carry what the analyses need beyond yes/no: the number of turns (a one-turn session without
events is censored unless its end was observed) and which turns resend the previous request (replay after a failed
vs a delivered turn). A third check says whether the source observed the session's end (a graded task).
Ids are constants so the analyses and other components refer to them without string typos.
"""

from __future__ import annotations

from agent_factory.evaluators.core.model import DataDefinition, DatumKind, Projection, Tier

REQUEST_REPLAY = "trajectory.request_replay"
VERBATIM_REPLAY = "trajectory.verbatim_replay"
CONTEXT_REPAIR = "trajectory.context_repair"
CLARIFICATION_LOOP = "trajectory.clarification_loop"
SESSION_TERMINATION = "trajectory.session_termination"
ABANDONMENT = "trajectory.abandonment"
FRUSTRATION = "trajectory.frustration"
TURNS = "trajectory.turns"
REPLAY_TURNS = "trajectory.replay_turns"
SESSION_ENDED = "trajectory.session_ended"

RECOVERY_EVENTS: tuple[str, ...] = (
    REQUEST_REPLAY, VERBATIM_REPLAY, CONTEXT_REPAIR, CLARIFICATION_LOOP, SESSION_TERMINATION,
)
"""The recovery events a_s whose sum over a session is its friction F(x)."""
BLOCKING_EVENTS: tuple[str, ...] = (ABANDONMENT, FRUSTRATION)
"""Events that make a session `blocked` whatever its friction."""

_SESSION = Projection(fields=("turns",))


def _d(
    id: str,
    question: str,
    *,
    kind: DatumKind = "check",
    tiers: tuple[Tier, ...] = ("rule",),
    description: str,
) -> DataDefinition:
    return DataDefinition(
        id=id, question=question, component="trajectory", layer="conversation", kind=kind, rule=id, tiers=tiers,
        projection=_SESSION, description=description,
    )


DEFINITIONS: tuple[DataDefinition, ...] = (
    _d(REQUEST_REPLAY,
       "Does a user request in this session re-ask the request just before it in other or slightly edited words?",
       description="Rule: a request whose character-bigram Jaccard similarity with the previous request is at or "
                   "above the pack's redo_jaccard threshold but is not identical to it (identical ones are "
                   "verbatim replays). A message that answers the agent (opens with a yes, a no or a choice: the "
                   "pack's reply lexicon) is a reply, not a resent request. Fact: number of such requests. "
                   "Evidence: both requests of each pair."),
    _d(VERBATIM_REPLAY, "Does a user resend exactly the request just before it?",
       description="Rule: equal after Unicode (NFKC), case and whitespace normalisation; a reply to the agent "
                   "(\"yes\" again after it asked again) is no resent request. Fact: number of such requests. "
                   "Evidence: both requests of each pair."),
    _d(CONTEXT_REPAIR,
       "Does the user restate or correct context the agent lost or misunderstood (\"I meant...\", \"as I said...\")?",
       tiers=("rule", "small_model"),
       description="Rule: a request after the first matching the pack's context_repair lexicon -> yes (fact: "
                   "number of such requests); a one-turn session -> no (nothing earlier to repair). Otherwise the "
                   "rule abstains (a restatement in the user's own words needs a model), unless the pack lists "
                   "this item in rules_decide: then no."),
    _d(CLARIFICATION_LOOP,
       "Does the agent ask the user to clarify, the user answer, and the agent ask again?",
       description="Rule: an answer matching the pack's clarification lexicon (the agent asks what the user "
                   "meant or for missing information; asking for a yes on an action it restated is a "
                   "confirmation, not a clarification) that the user answers (a request follows it) is one "
                   "clarification exchange; two or more exchanges in a session are a loop. "
                   "Fact: exchanges beyond the first. Evidence: the clarifying phrases and the user's answers."),
    _d(SESSION_TERMINATION, "Does the session end right after a turn whose answer failed to reach the user?",
       description="Rule: the last turn's delivery state is a failure (empty, error, truncated). A hand-off to a "
                   "person is no failure; the user's closing message (goodbye, stop token) is no turn, so the "
                   "session's last turn is the one before it. Uncollected when the source cannot tell whether the "
                   "last answer was delivered. Fact: 1 or 0."),
    _d(ABANDONMENT, "Does the user give up on the agent in this session?",
       description="Rule: a request matching the pack's abandonment lexicon (\"forget it\", \"算了\"), or the session "
                   "ends on a failed turn that resent an earlier failed request (the user retried, failed again "
                   "and left). A single failure at the end is session termination, not abandonment."),
    _d(FRUSTRATION, "Does the user express frustration with the agent?",
       description="Rule: a request after the session's first matching the pack's frustration lexicon (the "
                   "opening request comes before anything the agent did: frustration there is with the user's "
                   "situation). Fact: number of such requests."),
    _d(TURNS, "How many turns does the session have?", kind="fact",
       description="Fact: the number of turns. A one-turn session with no event is censored (unless its end "
                   "was observed: see trajectory.session_ended), not smooth."),
    _d(REPLAY_TURNS, "Which turns resend the request just before them (verbatim or near-verbatim)?", kind="fact",
       description="Fact: comma-separated turn indices (empty when none); read with execution.delivered of the "
                   "previous turn to compare replay after a failed and after a delivered answer."),
    _d(SESSION_ENDED, "Does the source show that this session's task ran to its end?",
       description="Rule: yes when the source records the task's end: a task outcome on the session (a reward or "
                   "a task success), a benchmark record the source marks as graded (`task_finished`), or a "
                   "final-answer tool call; else no (the session may still continue). Censored means no end "
                   "observed, so a one-turn session with this yes is not censored."),
)
