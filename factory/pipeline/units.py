"""Build the units of all four layers from the store, one user at a time (memory bounded by one user).

Real traffic forms the conversations and engagements every component reads; turns of excluded segments are
kept aside for Provenance only, so excluded traffic is counted but never analysed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import groupby
from typing import Any

from agent_factory.adapters.model import Conversation, Engagement, OutcomeEvent, Turn
from agent_factory.digest import stable_id
from agent_factory.evaluators.core import EngagementView
from agent_factory.evaluators.kernel import UserUnits
from agent_factory.factory.store import Store

__all__ = [
    "EXCLUDED_PIECE_TURNS", "UnitContext", "build_conversations", "engagement_view", "group_user_units",
    "iter_user_units", "unit_context", "user_key",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

EXCLUDED_PIECE_TURNS = 400
"""Excluded turns of one user per `UserUnits` at most (as many as a worker's chunk holds: `CHUNK_TURNS`)."""


def user_key(turn: Turn) -> str:
    """Whose turn it is: the user id, or the conversation id when the source names no user."""
    return turn.user_id if turn.user_id is not None else turn.conversation_id


def build_conversations(
    turns: Iterable[Turn], *, events: dict[str, list[OutcomeEvent]], attributes: dict[str, dict[str, Any]],
) -> tuple[Conversation, ...]:
    """Group one user's turns into conversations, each in turn order; conversations by first start.

    The user's closing message (delivery `closing`) ends its session and is no turn of it: the conversation
    keeps its id and the pattern that recognised it in `attributes["closed_by_user"]`.
    """
    by_conv: dict[str, list[Turn]] = {}
    closing: dict[str, Turn] = {}
    for t in turns:
        if t.delivery == "closing":
            closing[t.conversation_id] = t
        else:
            by_conv.setdefault(t.conversation_id, []).append(t)
    convs = []
    for cid, ts in by_conv.items():
        attrs = attributes.get(cid, {})
        if cid in closing:
            c = closing[cid]
            attrs = {**attrs, "closed_by_user": {"turn_id": c.id, "pattern": c.attributes.get("closing_pattern")}}
        ts.sort(key=lambda t: (t.index, t.start is None, t.start or _EPOCH))
        if len({t.index for t in ts}) < len(ts):
            # The source numbered no turns (OTel instrumentation emits no turn index: every turn is 0), so start
            # order is the order; "the last turn" and "the turn before" must mean what they say.
            ts = [t if t.index == k else t.model_copy(update={"index": k}) for k, t in enumerate(ts)]
        starts = [t.start for t in ts if t.start is not None]
        ends = [e for t in ts if (e := t.end or t.start) is not None]
        convs.append(Conversation(
            id=cid, user_id=ts[0].user_id, start=min(starts) if starts else None, end=max(ends) if ends else None,
            turns=tuple(ts), events=tuple(events.get(cid, ())), attributes=attrs,
        ))
    convs.sort(key=lambda c: (c.start is None, c.start, c.id))
    return tuple(convs)


def engagement_view(
    key: str, convs: tuple[Conversation, ...], *, user_events: list[OutcomeEvent], horizon: datetime | None,
    window_days: float,
) -> EngagementView:
    """The user's engagement: sessions from the first one up to `window_days` after the last (or the horizon)."""
    start = next((c.start for c in convs if c.start is not None), None)
    last = max((c.end for c in convs if c.end is not None), default=None)
    end = None
    if last is not None:
        end = last + timedelta(days=window_days)
        if horizon is not None:
            end = min(end, horizon)
    eng = Engagement(
        id=stable_id("engagement", key, start, prefix="e"), user_id=key, window_start=start, window_end=end,
        conversation_ids=tuple(c.id for c in convs), events=tuple(user_events),
    )
    return EngagementView(engagement=eng, conversations=convs, horizon=horizon)


@dataclass(frozen=True)
class UnitContext:
    """What building users' units reads besides their turns, read from the store once per run: pure to use, so a
    worker process builds units from shipped rows exactly as the store's reader does."""

    events_by_conv: dict[str, list[OutcomeEvent]]
    events_by_user: dict[str, list[OutcomeEvent]]
    attributes: dict[str, dict[str, Any]]
    """Attributes of adapter-provided conversations (task id, trial, termination, ...)."""
    horizon: datetime | None
    window_days: float

    def user_units(self, turns: Iterable[tuple[Turn, str]]) -> Iterator[UserUnits]:
        """The units of each user of `turns` (`group_user_units`)."""
        return group_user_units(turns, events_by_conv=self.events_by_conv, events_by_user=self.events_by_user,
                                attributes=self.attributes, horizon=self.horizon, window_days=self.window_days)


def unit_context(store: Store, *, window_days: float, horizon: datetime | None) -> UnitContext:
    """The store's outcome events (by conversation and by user) and conversation attributes."""
    events_by_conv: dict[str, list[OutcomeEvent]] = {}
    events_by_user: dict[str, list[OutcomeEvent]] = {}
    for ev in store.events():
        if ev.conversation_id is not None:
            events_by_conv.setdefault(ev.conversation_id, []).append(ev)
        if ev.user_id is not None:
            events_by_user.setdefault(ev.user_id, []).append(ev)
    return UnitContext(events_by_conv=events_by_conv, events_by_user=events_by_user,
                       attributes=store.conversation_attributes(), horizon=horizon, window_days=window_days)


def iter_user_units(
    store: Store, *, window_days: float, horizon: datetime | None, users: Collection[str] | None = None,
) -> Iterator[UserUnits]:
    """Every user's units (or those of `users`, by user key), user by user, in a stable order.

    `horizon` is the end of observation (`Store.horizon()`), read once by the caller."""
    ctx = unit_context(store, window_days=window_days, horizon=horizon)
    yield from ctx.user_units(store.iter_segmented_turns(segment=None, order="user", users=users))


def group_user_units(
    turns: Iterable[tuple[Turn, str]], *, events_by_conv: dict[str, list[OutcomeEvent]],
    events_by_user: dict[str, list[OutcomeEvent]], attributes: dict[str, dict[str, Any]],
    horizon: datetime | None, window_days: float,
) -> Iterator[UserUnits]:
    """The units of each user of `turns` ((turn, traffic segment) pairs, one user's turns together, in time
    order): pure, so units held in memory are built exactly as the store's are.

    A user's excluded turns go out in pieces of `EXCLUDED_PIECE_TURNS` as they come (`UserUnits.piece`), its real
    turns whole, with the rest of its excluded ones, in its last piece: an internal test account that grows
    with the traffic (6,691 turns at 10x the default simulation) is never held whole."""
    for key, group in groupby(turns, key=lambda ts: user_key(ts[0])):
        real: list[Turn] = []
        excluded: list[Turn] = []
        piece = 0
        for t, seg in group:
            if seg == "real":
                real.append(t)
                continue
            excluded.append(t)
            if len(excluded) == EXCLUDED_PIECE_TURNS:
                yield UserUnits(user_key=key, view=None, excluded=tuple(excluded), piece=piece)
                excluded, piece = [], piece + 1
        if not real and not excluded:
            continue  # the last piece was full
        view = None
        if real:
            convs = build_conversations(real, events=events_by_conv, attributes=attributes)
            view = engagement_view(key, convs, user_events=events_by_user.get(key, []), horizon=horizon,
                                   window_days=window_days)
        yield UserUnits(user_key=key, view=view, excluded=tuple(excluded), piece=piece)
