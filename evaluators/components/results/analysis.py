"""Results' analyses (f): return within T, return interval, redo after failed vs delivered session ends,
single-turn sessions and what followed them, explicit feedback. Pure and versioned.

How a session ended comes from Execution's `execution.delivered` on its last turn, read from the same
observations' trace rows. Censored sessions (window past the horizon, no return seen) are never a return and
never a non-return: they leave the denominator of every return rate and are counted. Rates over sessions are
user-clustered; medians carry a user-clustered bootstrap interval.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from typing import NamedTuple

from agent_factory.evaluators.components.execution.analysis import failed, handed_off
from agent_factory.evaluators.components.execution.definitions import DELIVERED
from agent_factory.evaluators.components.execution.rollup import (
    BOOTSTRAP_SEED,
    N_BOOT,
    Meta,
    cluster_of,
    count_result,
    median_result,
    rate_result,
    uncollected_results,
)
from agent_factory.evaluators.components.results.definitions import (
    CENSORED,
    FEEDBACK,
    NOT_RETURNED,
    REDO,
    RETURN_INTERVAL_S,
    RETURNED,
    RETURNED_WITHIN_T,
)
from agent_factory.evaluators.components.results.metrics import (
    FEEDBACK_COUNT,
    FEEDBACK_MEAN,
    MEDIAN_RETURN,
    REDO_RATE,
    REDO_ROLLUP,
    RETURN_RATE,
    SESSIONS,
    SINGLE_COUNT,
    SINGLE_RETURN_RATE,
    SINGLE_RETURNED,
    SINGLE_SHARE,
)
from agent_factory.evaluators.components.results.rollup import REDO_FLAG, session_rollup
from agent_factory.evaluators.components.results.rollup import VERSION as ROLLUP_VERSION
from agent_factory.evaluators.components.results.rules import NOT_OBSERVABLE
from agent_factory.evaluators.core.model import Result, Value
from agent_factory.evaluators.core.registry import Analysis, Observations, UnitRow
from agent_factory.evaluators.stats import cluster_bootstrap_ci
from agent_factory.knowledge_packs import KnowledgePack

VERSION = "2"

END_STATES = ("failed", "delivered", "handed_off")
"""How a session ended: its last turn's `execution.delivered` is no / yes / a hand-off to a person."""


class Session(NamedTuple):
    """One session's Results data joined with how it ended."""

    id: str
    cluster: Hashable
    turns: int
    """Turns of the session among the trace rows (0: none observed)."""
    ended: str | None
    """`failed` / `delivered` / `handed_off`, None when the last turn's delivery was not decided (or no turn is
    known)."""
    observable: bool
    """False when the source's user ids name no person: return, interval and redo cannot be observed."""
    returned: str | None
    """`returned` / `not_returned` / `censored`, None when uncollected."""
    interval_s: float | None
    redo: Value | None
    feedback: float | str | None


ROLLUP = f"{VERSION}/rollup-{ROLLUP_VERSION}"
"""Version of the rollup analysis: this module's and the rollup module's."""


def _meta(name: str) -> Meta:
    return Meta("results", name, ROLLUP if name == "results.rollup" else VERSION)


def _fact(row: UnitRow, item: str) -> float | str | None:
    return row.facts.get(item) if row.values.get(item) == "yes" else None


def sessions(obs: Observations) -> list[Session]:
    """Conversation rows joined with their turns: count, and the delivery of the last turn."""
    turns: dict[str, list[UnitRow]] = defaultdict(list)
    for r in obs.layer("trace"):
        if r.conversation_id is not None:
            turns[r.conversation_id].append(r)
    out = []
    for row in obs.layer("conversation"):
        sid = row.conversation_id or row.unit_id
        own = turns.get(sid, [])
        last = max(own, key=lambda t: (t.position, t.start or 0.0), default=None)
        end = None if last is None else failed(last)
        ended = None if end is None else ("failed" if end else "delivered")
        if last is not None and handed_off(last):
            ended = "handed_off"
        returned = _fact(row, RETURNED_WITHIN_T)
        interval = _fact(row, RETURN_INTERVAL_S)
        out.append(Session(
            id=sid, cluster=cluster_of(row), turns=len(own),
            ended=ended, observable=row.facts.get(RETURNED_WITHIN_T) != NOT_OBSERVABLE,
            returned=returned if returned in (RETURNED, NOT_RETURNED, CENSORED) else None,
            interval_s=float(interval) if isinstance(interval, int | float) else None,
            redo=row.values.get(REDO), feedback=_fact(row, FEEDBACK),
        ))
    return out


def _strata(ss: Sequence[Session]) -> list[tuple[str, list[Session]]]:
    return [("all", list(ss)), *((f"after={e}", [s for s in ss if s.ended == e]) for e in END_STATES)]


def _hidden_note(ss: Sequence[Session]) -> str:
    k = sum(not s.observable for s in ss)
    return (f"; not observable for {k} sessions: the source's user ids name no person, so no later session of "
            "the same person can be seen") if k else ""


def _unknown_end_note(ss: Sequence[Session]) -> str:
    k = sum(s.ended is None for s in ss)
    return f"{k} sessions whose last turn's {DELIVERED} is undecided are in 'all' only"


def return_rate(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Share of sessions followed by another within T; censored sessions excluded and counted."""
    meta = _meta("results.return_rate")
    ss = sessions(obs)
    days = f"{pack.thresholds.window_days:g} d"
    out: list[Result] = []
    for stratum, group in _strata(ss):
        decided = [(s.cluster, s.returned == RETURNED) for s in group if s.returned in (RETURNED, NOT_RETURNED)]
        censored = sum(s.returned == CENSORED for s in group)
        out.append(rate_result(decided, meta, layer="engagement", metric=RETURN_RATE.name, stratum=stratum,
                               note=f"T = {days}; {censored} censored sessions excluded from the denominator"
                                    + _hidden_note(group)))
    for label in (RETURNED, NOT_RETURNED, CENSORED):
        out.append(count_result(meta, layer="engagement", metric=SESSIONS.of(state=label), n=len(ss),
                                value=sum(s.returned == label for s in ss)))
    out.append(count_result(meta, layer="engagement", metric=SESSIONS.of(state=NOT_OBSERVABLE), n=len(ss),
                            value=sum(not s.observable for s in ss),
                            note="sessions whose user id names no person: return, interval and redo unobservable"))
    return out + uncollected_results(obs.layer("conversation"), (RETURNED_WITHIN_T,), meta, layer="conversation")


def return_interval(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Median seconds to the next session, after failed and after delivered session ends."""
    meta = _meta("results.return_interval")
    ss = sessions(obs)
    note = "observed returns only (any length); sessions with no later session seen are censored and left out"
    out = [median_result(meta, [(s.cluster, s.interval_s) for s in group if s.interval_s is not None],
                         layer="engagement", metric=MEDIAN_RETURN.name, stratum=stratum,
                         note=note + _hidden_note(group))
           for stratum, group in _strata(ss)]
    return out + uncollected_results(obs.layer("conversation"), (RETURN_INTERVAL_S,), meta, layer="conversation")


def redo_rate(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Share of next sessions that open by redoing the last request, after failed vs delivered session ends."""
    meta = _meta("results.redo_rate")
    ss = sessions(obs)
    note = f"bigram Jaccard >= {pack.thresholds.redo_jaccard:g}; sessions with a later session only"
    out = [rate_result([(s.cluster, s.redo == "yes") for s in group if s.redo in ("yes", "no")], meta,
                       layer="engagement", metric=REDO_RATE.name, stratum=stratum,
                       note=note + ("; " + _unknown_end_note(ss) if stratum == "all" else "") + _hidden_note(group))
           for stratum, group in _strata(ss)]
    return out + uncollected_results(obs.layer("conversation"), (REDO,), meta, layer="conversation")


def single_turn(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Share of single-turn sessions, and how many of those see a return, are not followed, or stay censored."""
    meta = _meta("results.single_turn")
    ss = [s for s in sessions(obs) if s.turns > 0]
    out = [rate_result([(s.cluster, s.turns == 1) for s in ss], meta, layer="conversation",
                       metric=SINGLE_SHARE.name, note="sessions with at least one observed turn")]
    single = [s for s in ss if s.turns == 1 and s.returned is not None]
    out.append(rate_result([(s.cluster, s.returned == RETURNED) for s in single], meta, layer="engagement",
                           metric=SINGLE_RETURNED.name,
                           note="of all single-turn sessions; the rest see no return (their outcome stays censored)"))
    decided = [(s.cluster, s.returned == RETURNED) for s in single if s.returned != CENSORED]
    out.append(rate_result(decided, meta, layer="engagement", metric=SINGLE_RETURN_RATE.name,
                           note="sessions censored by the horizon excluded"))
    for label in (RETURNED, NOT_RETURNED, CENSORED):
        out.append(count_result(meta, layer="engagement", metric=SINGLE_COUNT.of(state=label), n=len(single),
                                value=sum(s.returned == label for s in single)))
    return out


def feedback(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """How many sessions carry explicit feedback, and the mean of numeric feedback (user-clustered bootstrap)."""
    meta = _meta("results.feedback")
    ss = sessions(obs)
    given = [s for s in ss if s.feedback is not None]
    out = [count_result(meta, layer="engagement", metric=FEEDBACK_COUNT.name, value=len(given), n=len(ss))]
    numeric = [(s.cluster, float(s.feedback)) for s in given if isinstance(s.feedback, int | float)]
    if numeric:
        est = cluster_bootstrap_ci([v for _, v in numeric], [c for c, _ in numeric], n_boot=N_BOOT,
                                   seed=BOOTSTRAP_SEED)
        out.append(Result(component="results", layer="engagement", metric=FEEDBACK_MEAN.name, value=est.value,
                          low=est.low, high=est.high, n=len(numeric),
                          note="; ".join(p for p in ("user-clustered bootstrap", est.note) if p),
                          analysis=meta.analysis, analysis_version=meta.version))
    return out


def rollup(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Sessions followed by a redo, and users with at least one such session."""
    return session_rollup(obs, (REDO_FLAG,), _meta("results.rollup"), metric=REDO_ROLLUP.name)


_FNS: tuple[tuple[str, Callable[[Observations, KnowledgePack], list[Result]]], ...] = (
    ("results.return_rate", return_rate),
    ("results.return_interval", return_interval),
    ("results.redo_rate", redo_rate),
    ("results.single_turn", single_turn),
    ("results.feedback", feedback),
    ("results.rollup", rollup),
)
ANALYSES: tuple[Analysis, ...] = tuple(
    Analysis(name, _meta(name).version, fn, reads=("execution",), layers=("trace", "conversation"))
    for name, fn in _FNS
)
"""Results' analyses, registered with the component."""
