"""Session truth: the Trajectory events of a real session and its outcome, from the simulator's own labels.

Each event is defined as docs/method.md section 4 and the Trajectory data definitions state it, and counted the way
their facts count it, but read from what the simulator knows (what each message does, which turns resend
the previous one, the logged delivery) rather than from any lexicon:

- request replay / verbatim replay: turns that resend the previous request, near-verbatim / verbatim;
- context repair: later turns whose message corrects the context (a repair in the first message of a session
  repairs nothing in it);
- clarification loop: answers asking to clarify that the user answered (a later turn follows), beyond the
  first; a loop when there are two or more;
- session termination: the session ends on a failed turn;
- abandonment: give-up messages, or, failing any, the session ending on a failed resend of a failed turn
  (the user retried, failed again and left);
- frustration: frustrated messages.

Friction F is the number of recovery events (the first five) that occurred. The outcome: abandonment or
frustration -> blocked; else F >= 1 -> struggled; else one turn -> censored; else smooth.
"""

from __future__ import annotations

from typing import Any, Literal

from agent_factory.factory.simulate.plan import TurnPlan

RECOVERY_EVENTS = ("request_replay", "verbatim_replay", "context_repair", "clarification_loop",
                   "session_termination")
"""Recovery events a_s, whose number of occurrences in a session is its friction F."""
BLOCKING_EVENTS = ("abandonment", "frustration")
"""Events that make a session blocked."""
EVENTS = RECOVERY_EVENTS + BLOCKING_EVENTS
Outcome = Literal["smooth", "struggled", "blocked", "censored"]
OUTCOMES: tuple[Outcome, ...] = ("smooth", "struggled", "blocked", "censored")


def failed(tp: TurnPlan) -> bool:
    """Whether the logged turn failed to deliver its answer."""
    return tp.delivery != "delivered"


def session_events(turns: list[TurnPlan]) -> dict[str, int]:
    """Occurrences of each event in one session (turns in order), counted as the Trajectory facts count them."""
    last = turns[-1]
    exchanges = sum(t.asks_clarification for t in turns[:-1])
    abandon = sum(t.request.act == "abandonment" for t in turns)
    if not abandon and len(turns) >= 2 and failed(last) and failed(turns[-2]) and last.is_replay:
        abandon = 1
    return {
        "request_replay": sum(t.is_replay and not t.is_verbatim_replay for t in turns),
        "verbatim_replay": sum(t.is_verbatim_replay for t in turns),
        "context_repair": sum(t.request.act == "context_repair" for t in turns[1:]),
        "clarification_loop": max(0, exchanges - 1),
        "session_termination": int(failed(last)),
        "abandonment": abandon,
        "frustration": sum(t.request.act == "frustration" for t in turns),
    }


def outcome(events: dict[str, int], n_turns: int) -> Outcome:
    """The docs/method.md outcome rule on a session's event counts."""
    if any(events[e] for e in BLOCKING_EVENTS):
        return "blocked"
    if any(events[e] for e in RECOVERY_EVENTS):
        return "struggled"
    return "censored" if n_turns == 1 else "smooth"


def session_record(turns: list[TurnPlan]) -> dict[str, Any]:
    """The truth_sessions.jsonl line of one real session."""
    events = session_events(turns)
    return {
        "session_id": turns[0].session_id, "user_id": turns[0].user_id, "turns": len(turns),
        "events": events,
        "friction": sum(1 for e in RECOVERY_EVENTS if events[e]), "outcome": outcome(events, len(turns)),
    }
