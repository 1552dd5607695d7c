"""The gate's data, columnar: each measure's contributing rows, and per-user sufficient statistics.

Every gated metric is a ratio `sum(y) / sum(x)` over unit rows (`evaluators.core.gate`). Over any set of users it
and its two variances (user-clustered, and rows-as-independent for contrast) follow from ten sums per user
(`USER_FIELDS`), so the gate never revisits a row once these are made: a split of the users is a 0/1 mask, and
its sums are a matrix product (`evaluators.gate.stats`).

Pure: rows in, arrays out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from agent_factory.evaluators.core.gate import GateMeasure
from agent_factory.evaluators.core.model import Layer
from agent_factory.evaluators.core.registry import UnitRow, cluster_of

USER_FIELDS = ("y", "x", "cyy", "cxy", "cxx", "ryy", "rxy", "rxx", "rows", "clusters")
"""Per-user sums: Y, X; the cluster-level products Y^2, XY, X^2 (clustered variance); the row-level sums of
y^2, xy, x^2 (rows-as-independent variance); the count of rows; 1 when the user has a row (counts clusters)."""
Y, X, CYY, CXY, CXX, RYY, RXY, RXX, ROWS, CLUSTERS = range(len(USER_FIELDS))

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class MeasureRows:
    """One measure's contributing rows, columnar and aligned: row i is unit `unit_ids[i]` of user `user[i]`."""

    unit_ids: tuple[str, ...]
    user: I64
    """Index into `GateColumns.users`."""
    y: F64
    x: F64


@dataclass(frozen=True)
class GateColumns:
    """One side's (a store's, or a selection's) rows of every gated measure, over one list of users."""

    users: tuple[str, ...]
    """Cluster keys (users), in a fixed order: the masks of `evaluators.gate.stats` index them."""
    measures: tuple[GateMeasure, ...]
    rows: tuple[MeasureRows, ...]
    """Per measure, in `measures` order."""

    @property
    def keys(self) -> tuple[str, ...]:
        """The measures' keys (`component:metric`)."""
        return tuple(m.key for m in self.measures)

    def user_stats(self) -> F64:
        """(measures, users, len(USER_FIELDS)): each user's sums per measure."""
        return np.stack([user_stats(r, len(self.users)) for r in self.rows]) if self.rows else \
            np.zeros((0, len(self.users), len(USER_FIELDS)))

    def select(self, users: Sequence[str]) -> GateColumns:
        """These columns restricted to `users` (in that order; a user absent here contributes nothing)."""
        index = {u: i for i, u in enumerate(users)}
        remap = np.array([index.get(u, -1) for u in self.users], dtype=np.int64)
        out = []
        for r in self.rows:
            new = remap[r.user] if len(r.user) else r.user
            keep = new >= 0
            out.append(MeasureRows(unit_ids=tuple(u for u, k in zip(r.unit_ids, keep, strict=True) if k),
                                   user=new[keep], y=r.y[keep], x=r.x[keep]))
        return GateColumns(users=tuple(users), measures=self.measures, rows=tuple(out))


def user_stats(rows: MeasureRows, n_users: int) -> F64:
    """(users, len(USER_FIELDS)): the per-user sums of one measure's rows."""
    out = np.zeros((n_users, len(USER_FIELDS)))
    u, y, x = rows.user, rows.y, rows.x
    for field, w in ((Y, y), (X, x), (RYY, y * y), (RXY, x * y), (RXX, x * x), (ROWS, np.ones_like(y))):
        out[:, field] = np.bincount(u, weights=w, minlength=n_users)
    out[:, CYY] = out[:, Y] ** 2
    out[:, CXY] = out[:, X] * out[:, Y]
    out[:, CXX] = out[:, X] ** 2
    out[:, CLUSTERS] = (out[:, ROWS] > 0).astype(np.float64)
    return out


def measure_rows(measure: GateMeasure, rows: Sequence[UnitRow], users: Mapping[str, int]) -> MeasureRows:
    """`measure`'s contributions over `rows` (its layer's), users indexed by `users` (rows of other users skipped)."""
    ids: list[str] = []
    uix: list[int] = []
    ys: list[float] = []
    xs: list[float] = []
    for row in rows:
        got = measure.contribution(row)
        if got is None:
            continue
        i = users.get(cluster_of(row))
        if i is None:
            continue
        ids.append(row.unit_id)
        uix.append(i)
        ys.append(got[0])
        xs.append(got[1])
    return MeasureRows(unit_ids=tuple(ids), user=np.asarray(uix, dtype=np.int64), y=np.asarray(ys, dtype=np.float64),
                       x=np.asarray(xs, dtype=np.float64))


def gate_columns(measures: Sequence[GateMeasure], rows: Mapping[Layer, Sequence[UnitRow]],
                 users: Sequence[str] | None = None) -> GateColumns:
    """Every measure's rows; `users`: the cluster keys to keep, in order (None: every user with a row, sorted)."""
    if users is None:
        users = sorted({cluster_of(r) for m in measures for r in rows.get(m.layer, ())})
    index = {u: i for i, u in enumerate(users)}
    return GateColumns(users=tuple(users), measures=tuple(measures),
                       rows=tuple(measure_rows(m, rows.get(m.layer, ()), index) for m in measures))


__all__ = ["CLUSTERS", "CXX", "CXY", "CYY", "ROWS", "RXX", "RXY", "RYY", "USER_FIELDS", "X", "Y", "GateColumns",
           "MeasureRows", "gate_columns", "measure_rows", "user_stats"]
