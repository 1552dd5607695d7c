"""Results' rollup: a session-layer flag seen at the user layer.

Execution's `failure_rollup` starts from turns; Results' data are about sessions, so this rolls a
conversation-layer item up one layer: the share of sessions flagged and the share of users with at least one
flagged session (by default, users who had to redo a request in a later session). Pure.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from agent_factory.evaluators.components.execution.rollup import FailureItem, Meta, cluster_of, rate_result, row_flagged
from agent_factory.evaluators.components.results.definitions import REDO
from agent_factory.evaluators.core.model import Result
from agent_factory.evaluators.core.registry import Observations

VERSION = "1"

REDO_FLAG = FailureItem(REDO, "yes")
"""A session whose next session opens by redoing its last request."""


def session_rollup(obs: Observations, items: Sequence[FailureItem], meta: Meta, *, metric: str) -> list[Result]:
    """Share of sessions flagged by any item (user-clustered) and of users with a flagged session (Wilson).

    A session counts when at least one item was decided for it; a user counts when one of their sessions does.
    """
    flagged: list[tuple[Hashable, bool]] = []
    users: dict[Hashable, bool] = {}
    undecided = 0
    for row in obs.layer("conversation"):
        flag = row_flagged(row, items)
        if flag is None:
            undecided += 1
            continue
        user = cluster_of(row)
        flagged.append((user, flag))
        users[user] = users.get(user, False) or flag
    what = " or ".join(f"{i.item} = {i.failing}" for i in items)
    return [
        rate_result(flagged, meta, layer="conversation", metric=metric,
                    note=f"flagged: {what}; {undecided} sessions without a decided item excluded"),
        rate_result(list(users.items()), meta, layer="engagement", metric=metric, method="wilson",
                    note="users with at least one flagged session"),
    ]
