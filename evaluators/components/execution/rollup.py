"""Layer rollups: a turn-level failure seen at the session and the user layer (docs/method.md section 3).

Small turn rates compound upward: in the study the same failures touched 3.6% of turns, 5.6% of sessions and
10.3% of users. `failure_rollup` is generic over the trace-layer items that mark a failure, so every component
can roll its own failure-type data up the layers. The rate helpers here (`rate_result`, `uncollected_results`)
are the one way Execution and Results turn yes/no outcomes into `Result`s with 95% intervals.

Pure: same observations, same results.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from typing import Literal, NamedTuple

import numpy as np

from agent_factory.evaluators.core.model import Component, Layer, Result, Value
from agent_factory.evaluators.core.present import UNCOLLECTED
from agent_factory.evaluators.core.registry import Observations, UnitRow
from agent_factory.evaluators.stats import cluster_bootstrap_ci, cluster_proportion_ci, proportion_ci

VERSION = "1"

BOOTSTRAP_SEED = 0
"""Fixed seed of the cluster bootstraps, so an analysis gives the same interval on the same data."""
N_BOOT = 2000
"""Bootstrap replicates."""

RateMethod = Literal["wilson", "clustered"]
"""`wilson`: units independent; `clustered`: user-clustered normal interval (turns or sessions of one user)."""

_DECIDED: frozenset[Value] = frozenset({"yes", "no"})


class FailureItem(NamedTuple):
    """A trace-layer item and the value of it that marks the turn as failed."""

    item: str
    failing: Value = "no"


class Meta(NamedTuple):
    """Who produced a result: component, analysis name and version."""

    component: Component
    analysis: str
    version: str


def cluster_of(row: UnitRow) -> Hashable:
    """The independent unit a row belongs to: its user, or the row itself when the user is unknown."""
    return row.user_id if row.user_id is not None else ("unit", row.unit_id)


def rate_result(
    outcomes: Iterable[tuple[Hashable, bool]],
    meta: Meta,
    *,
    layer: Layer,
    metric: str,
    stratum: str = "all",
    method: RateMethod = "clustered",
    note: str | None = None,
) -> Result:
    """The share of True outcomes with a 95% interval; outcomes are (cluster, event) pairs.

    `clustered` pools units per cluster and uses `cluster_proportion_ci`; `wilson` treats every outcome as
    independent. An empty denominator gives value None with a note, never a division by zero.
    """
    pairs = list(outcomes)
    if method == "wilson":
        est = proportion_ci(sum(e for _, e in pairs), len(pairs))
        label = "wilson"
    else:
        hits: dict[Hashable, int] = defaultdict(int)
        trials: dict[Hashable, int] = defaultdict(int)
        for c, e in pairs:
            trials[c] += 1
            hits[c] += e
        keys = list(trials)
        est = cluster_proportion_ci([hits[k] for k in keys], [trials[k] for k in keys])
        label = f"user-clustered ({len(keys)} clusters)"
        if est.value is not None and (est.low is None or est.low == est.high):
            # No between-cluster variation (e.g. no event at all) or one cluster: a point interval would claim
            # certainty the data do not give; the independent-trials interval is the narrowest honest one.
            wilson = proportion_ci(sum(hits.values()), len(pairs))
            est = est.model_copy(update={"low": wilson.low, "high": wilson.high,
                                         "note": f"{est.note}; Wilson interval instead"})
    parts = [label, note, est.note]
    return Result(
        component=meta.component, layer=layer, metric=metric, stratum=stratum, value=est.value, low=est.low,
        high=est.high, n=len(pairs), note="; ".join(p for p in parts if p), analysis=meta.analysis,
        analysis_version=meta.version,
    )


def count_result(meta: Meta, *, layer: Layer, metric: str, value: int, n: int, stratum: str = "all",
                 note: str | None = None) -> Result:
    """A plain count (no interval): `value` of `n` units."""
    return Result(component=meta.component, layer=layer, metric=metric, stratum=stratum, value=float(value), n=n,
                  note=note, analysis=meta.analysis, analysis_version=meta.version)


def _median(values: np.ndarray) -> float:
    return float(np.median(values))


def median_result(meta: Meta, pairs: Sequence[tuple[Hashable, float]], *, layer: Layer, metric: str,
                  stratum: str = "all", note: str = "") -> Result:
    """Median of (cluster, value) pairs with a user-clustered bootstrap 95% interval (None when empty)."""
    base = dict(component=meta.component, layer=layer, metric=metric, stratum=stratum, analysis=meta.analysis,
                analysis_version=meta.version)
    if not pairs:
        return Result(value=None, n=0, note=(note + "; " if note else "") + "no observations", **base)
    est = cluster_bootstrap_ci([v for _, v in pairs], [c for c, _ in pairs], stat=_median, n_boot=N_BOOT,
                               seed=BOOTSTRAP_SEED)
    parts = [note, "user-clustered bootstrap of the median", est.note]
    return Result(value=est.value, low=est.low, high=est.high, n=len(pairs),
                  note="; ".join(p for p in parts if p), **base)


def uncollected_results(rows: Sequence[UnitRow], items: Iterable[str], meta: Meta, *, layer: Layer) -> list[Result]:
    """How many rows left each item uncollected (left out of every rate above, never counted as a pass)."""
    out = []
    for item in items:
        k = sum(1 for r in rows if r.values.get(item, "uncollected") == "uncollected")
        out.append(count_result(meta, layer=layer, metric=UNCOLLECTED.name, stratum=f"item={item}", value=k,
                                n=len(rows), note="units whose datum is uncollected or missing; excluded from rates"))
    return out


def row_flagged(row: UnitRow, items: Sequence[FailureItem]) -> bool | None:
    """True if any item flags the row, False if some item was decided and none does, None otherwise."""
    decided = False
    for it in items:
        v = row.values.get(it.item)
        if v == it.failing:
            return True
        decided |= v in _DECIDED
    return False if decided else None


def failure_rollup(
    obs: Observations,
    items: Sequence[FailureItem],
    meta: Meta,
    *,
    metric: str = "failure_share",
) -> list[Result]:
    """Share of turns, sessions and users with at least one failed turn, each with a 95% interval.

    A turn counts when at least one item was decided for it; a session (user) counts when at least one of its
    turns does, and is failed when any of its counted turns failed. Turn and session shares use user-clustered
    intervals; users are independent, so the user share uses Wilson. The number of turns with no decided item
    is reported in the turn result's note.
    """
    turns: list[tuple[Hashable, bool]] = []
    sessions: dict[Hashable, bool] = {}
    session_user: dict[Hashable, Hashable] = {}
    users: dict[Hashable, bool] = {}
    undecided = 0
    for row in obs.layer("trace"):
        failed = row_flagged(row, items)
        if failed is None:
            undecided += 1
            continue
        user = cluster_of(row)
        session = row.conversation_id if row.conversation_id is not None else ("unit", row.unit_id)
        turns.append((user, failed))
        sessions[session] = sessions.get(session, False) or failed
        session_user.setdefault(session, user)
        users[user] = users.get(user, False) or failed
    what = " or ".join(f"{i.item} = {i.failing}" for i in items)
    return [
        rate_result(turns, meta, layer="trace", metric=metric,
                    note=f"failed: {what}; {undecided} turns without a decided item excluded"),
        rate_result(((session_user[s], f) for s, f in sessions.items()), meta, layer="conversation", metric=metric,
                    note="sessions with at least one failed turn"),
        rate_result(((u, f) for u, f in users.items()), meta, layer="engagement", metric=metric, method="wilson",
                    note="users with at least one failed turn"),
    ]
