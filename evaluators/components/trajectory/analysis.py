"""Trajectory's analyses (f): friction, the session outcome rule, and replay after a failed vs a delivered turn.

Friction F(x) = sum over the admitted recovery events s of a_s(x), where a_s(x) is the event's yes/no datum
(1 when it occurred in the session): the paper's sum over atomic data, which a model tier can collect as well as
a rule. Occurrence counts (the rules' facts) are reported separately as `event_count.<event>`.

The outcome rule (docs/method.md section 4): abandonment or frustration -> blocked; else F >= 1 -> struggled; else
exactly one turn and none of these -> censored, unless the source observed the session's end (a graded task:
`trajectory.session_ended`), since censored means the session may still continue; else smooth. An uncollected
datum is never read as "did not happen": when one could change the label (e.g. context repair left to a model
that is not configured, on a session with no other event) the session is `undetermined`, counted and reported,
never guessed smooth.

Pure and versioned; rates over sessions or turns of one user are user-clustered with 95% intervals.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable
from itertools import pairwise
from typing import Literal, NamedTuple

from agent_factory.evaluators.components.execution.definitions import DELIVERED
from agent_factory.evaluators.components.execution.rollup import (
    BOOTSTRAP_SEED,
    N_BOOT,
    Meta,
    cluster_of,
    count_result,
    rate_result,
    uncollected_results,
)
from agent_factory.evaluators.components.trajectory.definitions import (
    BLOCKING_EVENTS,
    RECOVERY_EVENTS,
    REPLAY_TURNS,
    SESSION_ENDED,
    TURNS,
)
from agent_factory.evaluators.components.trajectory.metrics import (
    EVENT_COUNT,
    EVENT_SHARE,
    FRICTION,
    MEAN_FRICTION,
    OUTCOME,
    OUTCOME_COUNT,
    OUTCOME_SHARE,
    REPLAY_FAILURE,
    REPLAY_SHARE,
    REPLAY_SUCCESS,
)
from agent_factory.evaluators.core.model import Result
from agent_factory.evaluators.core.registry import Analysis, Observations, UnitRow
from agent_factory.evaluators.stats import cluster_bootstrap_ci
from agent_factory.knowledge_packs import KnowledgePack

VERSION = "3"


Outcome = Literal["smooth", "struggled", "blocked", "censored", "undetermined"]
OUTCOMES: tuple[Outcome, ...] = ("smooth", "struggled", "blocked", "censored", "undetermined")

_OUTCOME = Meta("trajectory", "trajectory.outcome", VERSION)
_REPLAY = Meta("trajectory", "trajectory.replay_after_failure", VERSION)


class SessionOutcome(NamedTuple):
    """The outcome rule applied to one session's row."""

    outcome: Outcome
    friction: int | None
    """F(x); None when a recovery event is uncollected (F would only be a lower bound)."""
    events: tuple[str, ...]
    """Items that occurred (yes), recovery and blocking."""
    uncollected: tuple[str, ...]
    """Recovery or blocking items left uncollected."""


def short(item: str) -> str:
    """`trajectory.request_replay` -> `request_replay` (metric names)."""
    return item.split(".", 1)[1]


def session_outcome(row: UnitRow) -> SessionOutcome:
    """Apply the outcome rule to a conversation row. Items absent from the row are not admitted and not read."""
    values = row.values
    present = [i for i in (*RECOVERY_EVENTS, *BLOCKING_EVENTS) if i in values]
    events = tuple(i for i in present if values[i] == "yes")
    uncollected = tuple(i for i in present if values[i] == "uncollected")
    seen = sum(1 for i in RECOVERY_EVENTS if values.get(i) == "yes")
    friction = None if any(i in RECOVERY_EVENTS for i in uncollected) else seen
    turns = row.facts.get(TURNS)
    outcome: Outcome
    if any(values.get(i) == "yes" for i in BLOCKING_EVENTS):
        outcome = "blocked"
    elif any(i in BLOCKING_EVENTS for i in uncollected):
        outcome = "undetermined"  # the session may be blocked
    elif seen >= 1:
        outcome = "struggled"
    elif uncollected or not isinstance(turns, int | float):
        outcome = "undetermined"
    else:
        open_end = values.get(SESSION_ENDED) != "yes"  # no end observed: the session may still continue
        outcome = "censored" if int(turns) == 1 and open_end else "smooth"
    return SessionOutcome(outcome, friction, events, uncollected)


def _outcome_note(s: SessionOutcome, row: UnitRow) -> str:
    parts = [f"F={s.friction if s.friction is not None else '?'}", f"turns={row.facts.get(TURNS, '?')}"]
    if s.events:
        parts.append("events: " + ", ".join(short(e) for e in s.events))
    if s.uncollected:
        parts.append("uncollected: " + ", ".join(short(e) for e in s.uncollected))
    return "; ".join(parts)


def outcomes(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Per-session outcome and friction; outcome shares and counts, mean friction, per-event shares and counts."""
    rows = obs.layer("conversation")
    meta = _OUTCOME
    base = dict(component=meta.component, layer="conversation", analysis=meta.analysis,
                analysis_version=meta.version)
    per_session: list[Result] = []
    labelled: list[tuple[Hashable, SessionOutcome]] = []
    for row in rows:
        s = session_outcome(row)
        labelled.append((cluster_of(row), s))
        note = _outcome_note(s, row)
        per_session.append(Result(metric=OUTCOME.name, unit_id=row.unit_id, value=s.outcome, n=1, note=note, **base))
        per_session.append(Result(
            metric=FRICTION.name, unit_id=row.unit_id, value=None if s.friction is None else float(s.friction), n=1,
            note=note if s.friction is not None else note + "; F undefined: a recovery event is uncollected",
            **base))

    out: list[Result] = []
    for label in OUTCOMES:
        out.append(rate_result(((c, s.outcome == label) for c, s in labelled), meta, layer="conversation",
                               metric=OUTCOME_SHARE[label].name, note="share of all sessions"))
        out.append(count_result(meta, layer="conversation", metric=OUTCOME_COUNT.of(outcome=label),
                                value=sum(1 for _, s in labelled if s.outcome == label), n=len(labelled)))

    known = [(c, float(s.friction)) for c, s in labelled if s.friction is not None]
    excluded = len(labelled) - len(known)
    note = f"{excluded} sessions with an uncollected recovery event excluded"
    if known:
        est = cluster_bootstrap_ci([f for _, f in known], [c for c, _ in known], n_boot=N_BOOT, seed=BOOTSTRAP_SEED)
        out.append(Result(metric=MEAN_FRICTION.name, value=est.value, low=est.low, high=est.high, n=len(known),
                          note="; ".join(p for p in ("user-clustered bootstrap", note, est.note) if p), **base))
    else:
        out.append(Result(metric=MEAN_FRICTION.name, value=None, n=0, note=f"no session with F defined; {note}",
                          **base))

    for item in (*RECOVERY_EVENTS, *BLOCKING_EVENTS):
        decided = [(cluster_of(r), r.values[item] == "yes") for r in rows if r.values.get(item) in ("yes", "no")]
        out.append(rate_result(decided, meta, layer="conversation", metric=EVENT_SHARE.of(event=short(item)),
                               note="sessions where the event occurred, of those where it was decided"))
        counted = [f for r in rows
                   if r.values.get(item) in ("yes", "no") and isinstance(f := r.facts.get(item), int | float)]
        out.append(count_result(meta, layer="conversation", metric=EVENT_COUNT.of(event=short(item)),
                                value=int(sum(counted)), n=len(counted),
                                note="occurrences summed over sessions whose collector reported a count"))
    out.extend(uncollected_results(rows, (*RECOVERY_EVENTS, *BLOCKING_EVENTS), meta, layer="conversation"))
    return per_session + out


def replay_indices(fact: object) -> set[int] | None:
    """Turn indices from a `trajectory.replay_turns` fact ("1,3", "" or a single number); None if unreadable."""
    if isinstance(fact, bool):
        return None
    if isinstance(fact, int | float):
        return {int(fact)}
    if not isinstance(fact, str):
        return None
    try:
        return {int(p) for p in fact.split(",") if p.strip()}
    except ValueError:
        return None


def replayed_turns(row: UnitRow) -> set[int] | None:
    """The turns of a conversation row that resend the request before them; None when its
    `trajectory.replay_turns` was not collected or is unreadable."""
    return replay_indices(row.facts.get(REPLAY_TURNS)) if row.values.get(REPLAY_TURNS) == "yes" else None


def replay_counts(row: UnitRow) -> tuple[int, int] | None:
    """(next messages that resend the previous request, next messages) of one conversation row: every turn after
    the first is a next message. None when the replayed turns or the turn count are unknown, or the session has
    one turn (no next message)."""
    idx, turns = replayed_turns(row), row.facts.get(TURNS)
    if idx is None or isinstance(turns, bool) or not isinstance(turns, int | float):
        return None
    nexts = int(turns) - 1
    # More replays than next messages means the two facts disagree: no count is better than a wrong one.
    return (len(idx), nexts) if 0 < nexts and len(idx) <= nexts else None


def replay_after_failure(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Share of next messages that resend the previous request, after a failed vs after a delivered turn, and
    over every next message (`replay_per_next_message`).

    Pairs are consecutive turns of one session (trace rows by index); the previous turn's state is its
    `execution.delivered` datum. Pairs whose previous state is undecided, or whose session has no readable
    `trajectory.replay_turns`, are left out and counted in the note. The share over every next message counts
    from the conversation rows alone (`replay_counts`). User-clustered 95% intervals.
    """
    replayed: dict[str, set[int]] = {}
    every: list[tuple[Hashable, bool]] = []
    unknown = 0
    for row in obs.layer("conversation"):
        idx = replayed_turns(row)
        if idx is not None:
            replayed[row.unit_id] = idx
        counts = replay_counts(row)
        if counts is not None:
            key = cluster_of(row)
            every += [(key, True)] * counts[0] + [(key, False)] * (counts[1] - counts[0])
        elif row.facts.get(TURNS) != 1:
            unknown += 1  # a one-turn session has no next message: it is not left out, it has none
    by_conv: dict[str, list[UnitRow]] = defaultdict(list)
    for row in obs.layer("trace"):
        if row.conversation_id is not None:
            by_conv[row.conversation_id].append(row)
    after: dict[bool, list[tuple[Hashable, bool]]] = {True: [], False: []}
    undecided = unread = 0
    for conv_id, trs in by_conv.items():
        trs = sorted(trs, key=lambda r: r.position)
        idx = replayed.get(conv_id)
        for prev, cur in pairwise(trs):
            if idx is None:
                unread += 1
                continue
            state = prev.values.get(DELIVERED)
            if state not in ("yes", "no"):
                undecided += 1
                continue
            after[state == "no"].append((cluster_of(cur), cur.position in idx))
    note = (f"{undecided} pairs with the previous delivery undecided and {unread} pairs of sessions without "
            "replay data excluded")
    return [
        rate_result(after[True], _REPLAY, layer="trace", metric=REPLAY_FAILURE.name, note=note),
        rate_result(after[False], _REPLAY, layer="trace", metric=REPLAY_SUCCESS.name, note=note),
        rate_result(every, _REPLAY, layer="trace", metric=REPLAY_SHARE.name,
                    note=f"every turn after a session's first; {unknown} sessions of several or unknown turns "
                         "without readable replay data excluded"),
    ]


ANALYSES: tuple[Analysis, ...] = (
    Analysis(name=_OUTCOME.analysis, version=VERSION, fn=outcomes, reads=("execution",),
             layers=("conversation", "trace")),
    Analysis(name=_REPLAY.analysis, version=VERSION, fn=replay_after_failure, reads=("execution",),
             layers=("conversation", "trace")),
)

