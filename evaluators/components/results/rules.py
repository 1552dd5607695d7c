"""Results' rule collectors: pure functions of one session, its user's window and the knowledge pack.

Each rule finds the session among the user's sessions (`RuleContext.engagement`), in time order, and looks at
the next one. Without that window a rule cannot see what followed, and says so (`uncollected`). The horizon is
the earlier of the view's observation horizon and the engagement's window end.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from agent_factory.adapters.model import Conversation, EvidencePointer, OutcomeEvent, Turn
from agent_factory.evaluators.components.execution.rules import field_pointer, text_pointer
from agent_factory.evaluators.components.results.definitions import (
    CENSORED,
    FEEDBACK,
    FEEDBACK_KINDS,
    NOT_RETURNED,
    REDO,
    RETURN_INTERVAL_S,
    RETURNED,
    RETURNED_WITHIN_T,
)
from agent_factory.evaluators.core.registry import EngagementView, RuleAnswer, RuleContext, rule
from agent_factory.evaluators.stats import bigram_jaccard

VERSION = "2"
"""Version of these rules; the cache also keys on this module's source."""

_NO_WINDOW = "the user's later sessions were not provided (no engagement view)"

NOT_OBSERVABLE = "not_observable"
"""The fact of a cross-session datum (return, interval, redo) where the source's user ids name no real person:
no later session of the same person can be seen, so the datum is `not_applicable` with this fact and a reason."""

IDENTITY_KEY = "user_identity"
"""Conversation attribute in which an adapter says what its user ids name: `person` (an OTel `user.id` /
`enduser.id`, a chat log's `user_id`), `simulated` (a benchmark's simulated customer, shared by independent
trials), or `none`. Absent: `person` when the conversation has a user id, `none` otherwise."""


def identity(conv: Conversation) -> str:
    """What the conversation's user id names: `person`, `simulated`, `none` (see `IDENTITY_KEY`)."""
    declared = conv.attributes.get(IDENTITY_KEY)
    if isinstance(declared, str) and declared:
        return declared
    return "person" if conv.user_id is not None else "none"


def not_observable(conv: Conversation) -> RuleAnswer | None:
    """A `not_applicable` answer saying why later sessions of this user cannot be observed, or None."""
    who = identity(conv)
    if who == "person":
        return None
    why = ("the source names no user" if who == "none" else
           f"the source's user ids name {who} users, not people (independent sessions share them)")
    return RuleAnswer("not_applicable", fact=NOT_OBSERVABLE, reason=f"not observable: {why}")


def _utc(t: datetime | None) -> datetime | None:
    # A naive time is taken as UTC (as adapters write them), so naive and aware times never meet in a comparison.
    return t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t


def session_start(conv: Conversation) -> datetime | None:
    """When the session started: its own start, else its earliest turn start."""
    if conv.start is not None:
        return _utc(conv.start)
    starts = [_utc(t.start) for t in conv.turns if t.start is not None]
    return min(starts) if starts else None  # type: ignore[type-var]


def session_end(conv: Conversation) -> datetime | None:
    """When the session ended: its own end, else its latest turn end (or start)."""
    if conv.end is not None:
        return _utc(conv.end)
    ends = [_utc(t.end or t.start) for t in conv.turns if (t.end or t.start) is not None]
    return max(ends) if ends else session_start(conv)  # type: ignore[type-var]


def ordered_sessions(view: EngagementView) -> list[Conversation]:
    """The user's sessions by start time (sessions without one last), ties by id."""
    def key(c: Conversation) -> tuple[bool, float, str]:
        start = session_start(c)
        return start is None, start.timestamp() if start is not None else 0.0, c.id

    return sorted(view.conversations, key=key)


def horizon_of(view: EngagementView) -> datetime | None:
    """End of observation for this user: the earlier of the horizon and the engagement window's end."""
    ends = [_utc(t) for t in (view.horizon, view.engagement.window_end) if t is not None]
    return min(ends) if ends else None  # type: ignore[type-var]


class Following(NamedTuple):
    """A session and what the user did next."""

    conv: Conversation
    end: datetime | None
    next: Conversation | None
    horizon: datetime | None


def following(conv: Conversation, ctx: RuleContext) -> Following | RuleAnswer:
    """The session's successor in the user's window, or an answer saying why it cannot be found: `uncollected`
    without the window, `not_applicable` (not observable) when the user id names no person."""
    hidden = not_observable(conv)
    if hidden is not None:
        return hidden
    view = ctx.engagement
    if view is None:
        return RuleAnswer("uncollected", reason=_NO_WINDOW)
    sessions = ordered_sessions(view)
    pos = next((i for i, c in enumerate(sessions) if c.id == conv.id), None)
    if pos is None:
        return RuleAnswer("uncollected", reason=f"session {conv.id!r} is not in the user's engagement window")
    nxt = sessions[pos + 1] if pos + 1 < len(sessions) else None
    return Following(conv, session_end(conv), nxt, horizon_of(view))


def _gap_seconds(f: Following) -> float | None:
    start = session_start(f.next) if f.next is not None else None
    if f.end is None or start is None:
        return None
    return max((start - f.end).total_seconds(), 0.0)


def _first_turn(conv: Conversation) -> Turn | None:
    return min(conv.turns, key=lambda t: t.index) if conv.turns else None


def _last_turn(conv: Conversation) -> Turn | None:
    return max(conv.turns, key=lambda t: t.index) if conv.turns else None


def _return_pointer(nxt: Conversation) -> EvidencePointer:
    first = _first_turn(nxt)
    if first is None:
        return field_pointer(nxt.id, "start")
    return text_pointer(first.id, "request", first.request)


@rule(RETURNED_WITHIN_T)
def returned_within_t(conv: Conversation, ctx: RuleContext) -> RuleAnswer:
    f = following(conv, ctx)
    if isinstance(f, RuleAnswer):
        return f
    if f.end is None:
        return RuleAnswer("uncollected", reason="the session has no end time")
    window = timedelta(days=ctx.pack.thresholds.window_days)
    days = f"{ctx.pack.thresholds.window_days:g} d"
    if f.next is not None:
        gap = _gap_seconds(f)
        if gap is None:
            return RuleAnswer("uncollected", reason="the next session has no start time")
        within = gap <= window.total_seconds()
        where = "within" if within else "beyond"
        return RuleAnswer("yes", fact=RETURNED if within else NOT_RETURNED, evidence=(_return_pointer(f.next),),
                          reason=f"next session {gap / 3600:.2f} h after the end ({where} {days})")
    end_pointer = (field_pointer(conv.id, "end"),)
    if f.horizon is None:
        return RuleAnswer("yes", fact=CENSORED, evidence=end_pointer,
                          reason="censored: no later session seen and no observation horizon is known")
    if f.end + window <= f.horizon:
        return RuleAnswer("yes", fact=NOT_RETURNED, evidence=end_pointer,
                          reason=f"no later session within {days}, fully observed")
    return RuleAnswer("yes", fact=CENSORED, evidence=end_pointer,
                      reason="censored: window extends past horizon")


@rule(RETURN_INTERVAL_S)
def return_interval_s(conv: Conversation, ctx: RuleContext) -> RuleAnswer:
    f = following(conv, ctx)
    if isinstance(f, RuleAnswer):
        return f
    if f.next is None:
        return RuleAnswer("not_applicable", reason="censored: no later session observed before the horizon")
    gap = _gap_seconds(f)
    if gap is None:
        return RuleAnswer("uncollected", reason="this session's end or the next session's start is unknown")
    return RuleAnswer("yes", fact=gap, evidence=(_return_pointer(f.next),))


@rule(REDO)
def redo(conv: Conversation, ctx: RuleContext) -> RuleAnswer:
    f = following(conv, ctx)
    if isinstance(f, RuleAnswer):
        return f
    if f.next is None:
        return RuleAnswer("not_applicable", reason="no later session observed")
    last, first = _last_turn(conv), _first_turn(f.next)
    if last is None or first is None or last.request is None or first.request is None:
        return RuleAnswer("uncollected", reason="a request text is missing (this session's last or the next's first)")
    j = bigram_jaccard(last.request, first.request)
    threshold = ctx.pack.thresholds.redo_jaccard
    return RuleAnswer(
        "yes" if j >= threshold else "no", fact=round(j, 4),
        evidence=(text_pointer(last.id, "request", last.request), text_pointer(first.id, "request", first.request)),
        reason=f"bigram Jaccard {j:.3f} {'>=' if j >= threshold else '<'} {threshold:g}",
    )


def _feedback_value(ev: OutcomeEvent) -> float | str | None:
    v = ev.value
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, int | float):
        return float(v)
    return v


@rule(FEEDBACK)
def feedback(conv: Conversation, ctx: RuleContext) -> RuleAnswer:
    events: dict[str, OutcomeEvent] = {e.id: e for e in conv.events}
    if ctx.engagement is not None:
        events.update({e.id: e for e in ctx.engagement.engagement.events if e.conversation_id == conv.id})
    found = [e for e in events.values() if e.kind in FEEDBACK_KINDS and e.value is not None]
    if not found:
        return RuleAnswer("not_applicable", reason="no explicit feedback on this session")
    # Latest feedback wins: a user who changes their rating meant the later one.
    latest = max(found, key=lambda e: (e.time is not None, e.time.timestamp() if e.time else 0.0, e.id))
    return RuleAnswer("yes", fact=_feedback_value(latest), evidence=(field_pointer(latest.id, "value"),),
                      reason=f"{len(found)} feedback event(s); latest {latest.kind} = {latest.value!r}")
