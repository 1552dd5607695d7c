"""The gate's power against a seeded defect: how often each metric fails when a share of the candidate's units
are defected, and the smallest effect the gate catches (docs/method.md section 7).

The rules ran once over every unit with the defect applied to every eligible one (`factory.loops.gate.defects`),
so each measure row has a clean (y0, x0) and a defected (y1, x1) contribution. A draw is a random half of the
users as the candidate; in it each row is defected with probability p (the strength), independently: its
contribution is (y1, x1) then, else (y0, x0); the other half is the clean baseline. A latency defect scales
every candidate row instead (`scale_from`: strengths are factors, a row at factor f moves log(f) / log(reference)
of the way to its defected value, exact for log measures). The per-user sums of the candidate half are the clean
sums plus the defected rows' changes, gathered for a block of draws at once by sparse matrix products (changed
rows -> measure x user; only the changed rows and their measures are touched); the rest's are the clean totals
minus the candidate's clean sums. The test is the gate's own (`stats.change`, user-clustered), each metric
against its threshold; an undefined statistic is no alarm. The same candidate halves and row draws serve every
strength (common random numbers), so power grows with the strength draw by draw, not only on average.

Pure numpy and scipy.sparse.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from agent_factory.evaluators.core.gate import GateMeasure
from agent_factory.evaluators.gate.columns import (
    CLUSTERS,
    CXX,
    CXY,
    CYY,
    F64,
    I64,
    ROWS,
    RXX,
    RXY,
    RYY,
    USER_FIELDS,
    GateColumns,
    MeasureRows,
    X,
    Y,
)
from agent_factory.evaluators.gate.model import DefectPower, PowerPoint, Unit
from agent_factory.evaluators.gate.stats import change, ratio

TARGET_POWER = 0.95
"""The target's power the strengths are extended to reach (cross-talk is read there)."""
MDE_POWER = 0.80
"""The power an effect must be caught with to be detectable (the MDE's)."""
MAX_EXTRA = 6
"""Strengths added at most beyond those given, on each side (the target not yet at 95%, or at 80% already)."""
REFINE = 2
"""Strengths added between the two that bracket the target's 80% power (each halving the bracket)."""
_BLOCK_CELLS = 4_000_000
"""Draws x rows held at once: bounds memory (one float array of this size is 32 MB)."""


def unit_of(measure: GateMeasure) -> Unit:
    """How a measure's change reads: pp for a rate, % for a log measure (a ratio of geometric means), else its
    own units."""
    if measure.scale == "rate":
        return "pp"
    return "%" if measure.scale == "log" else "abs"


def in_unit(delta: F64, unit: Unit) -> F64:
    """A change in a measure's own scale (a share, a mean log) as it reads: pp, %, or as is."""
    if unit == "pp":
        return delta * 100.0
    if unit == "%":
        return np.expm1(delta) * 100.0
    return delta


def align(clean: GateColumns, defected: GateColumns) -> tuple[GateColumns, GateColumns]:
    """Both sides' rows of every measure over the union of their units, aligned: the clean rows in their
    order, then the rows only the defected side has, in its order; a row absent on one side is (0, 0) there."""
    if clean.users != defected.users or clean.keys != defected.keys:
        raise ValueError("align: the clean and defected columns must have the same users and measures, in order "
                         f"({len(clean.users)} vs {len(defected.users)} users; measures {clean.keys} vs "
                         f"{defected.keys})")
    out0: list[MeasureRows] = []
    out1: list[MeasureRows] = []
    for r0, r1 in zip(clean.rows, defected.rows, strict=True):
        ids0 = np.asarray(r0.unit_ids, dtype=str)
        ids1 = np.asarray(r1.unit_ids, dtype=str)
        extra = ~np.isin(ids1, ids0) if len(ids0) else np.ones(len(ids1), dtype=bool)
        union = np.concatenate([ids0, ids1[extra]])
        pos1 = _positions(union, ids1)
        n = len(union)
        user = np.concatenate([r0.user, r1.user[extra]]).astype(np.int64)
        y1, x1 = np.zeros(n), np.zeros(n)
        y1[pos1], x1[pos1] = r1.y, r1.x
        y0, x0 = np.zeros(n), np.zeros(n)
        y0[: len(ids0)], x0[: len(ids0)] = r0.y, r0.x
        ids = tuple(str(i) for i in union)
        out0.append(MeasureRows(unit_ids=ids, user=user, y=y0, x=x0))
        out1.append(MeasureRows(unit_ids=ids, user=user, y=y1, x=x1))
    return (GateColumns(users=clean.users, measures=clean.measures, rows=tuple(out0)),
            GateColumns(users=clean.users, measures=clean.measures, rows=tuple(out1)))


def _positions(union: npt.NDArray[np.str_], ids: npt.NDArray[np.str_]) -> I64:
    """Where each of `ids` (all in `union`) sits in `union`."""
    if not len(ids):
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(union, kind="stable")
    out: I64 = order[np.searchsorted(union, ids, sorter=order)]
    return out


@dataclass(frozen=True)
class _Rows:
    """Every measure's aligned rows on one axis (clean values), and the rows the defect changes, with what it
    changes and the sparse maps that sum them per (changed measure, user) and per changed measure."""

    cell: I64
    """measure * users + user, every row."""
    y0: F64
    x0: F64
    n_measures: int
    n_users: int
    changed: I64
    """Indices (on the rows' axis) of the rows the defect changes."""
    moved: I64
    """The measures with a changed row (the others' candidate sums are their clean sums)."""
    user: I64
    """The changed rows' users."""
    cy0: F64
    cx0: F64
    dy: F64
    dx: F64
    dpresent: F64
    """+1 a row the defect makes, -1 one it removes, 0 one it changes."""
    to_cell: sp.csr_matrix
    """(changed rows, moved measures * users): 1 where a row sums."""
    to_measure: sp.csr_matrix
    """(changed rows, moved measures)."""


def _rows(clean: GateColumns, defected: GateColumns) -> _Rows:
    c, d = align(clean, defected)
    u, m = len(clean.users), len(c.rows)

    def cat(rows: Sequence[MeasureRows], field: str, dtype: type = np.float64) -> npt.NDArray[Any]:
        return np.concatenate([np.asarray(getattr(r, field), dtype=dtype) for r in rows] or [np.zeros(0, dtype)])

    user = cat(c.rows, "user", np.int64)
    measure = np.concatenate([np.full(len(r.y), i, dtype=np.int64) for i, r in enumerate(c.rows)]
                             or [np.zeros(0, np.int64)])
    y0, x0, y1, x1 = cat(c.rows, "y"), cat(c.rows, "x"), cat(d.rows, "y"), cat(d.rows, "x")
    dpresent = (x1 != 0).astype(np.float64) - (x0 != 0)
    hit = (y1 != y0) | (x1 != x0) | (dpresent != 0)
    moved = np.unique(measure[hit])
    compact = np.full(m, -1, dtype=np.int64)
    compact[moved] = np.arange(len(moved))
    mc, uc, n = compact[measure[hit]], user[hit], int(hit.sum())
    ones = np.ones(n)
    return _Rows(cell=measure * u + user, y0=y0, x0=x0, n_measures=m, n_users=u, changed=np.flatnonzero(hit),
                 moved=moved, user=uc,
                 cy0=y0[hit], cx0=x0[hit], dy=(y1 - y0)[hit], dx=(x1 - x0)[hit], dpresent=dpresent[hit],
                 to_cell=sp.csr_matrix((ones, (np.arange(n), mc * u + uc)), shape=(n, len(moved) * u)),
                 to_measure=sp.csr_matrix((ones, (np.arange(n), mc)), shape=(n, len(moved))))


def _clean_stats(r: _Rows) -> F64:
    """(M, U, F): the clean per-user sums (a row counts where its weight is nonzero)."""
    size = r.n_measures * r.n_users
    out = np.zeros((size, len(USER_FIELDS)))
    present = (r.x0 != 0).astype(np.float64)
    for f, w in ((Y, r.y0), (X, r.x0), (RYY, r.y0 * r.y0), (RXY, r.x0 * r.y0), (RXX, r.x0 * r.x0), (ROWS, present)):
        out[:, f] = np.bincount(r.cell, weights=w, minlength=size)
    return _complete(out.reshape(r.n_measures, r.n_users, len(USER_FIELDS)))


def _complete(s: F64) -> F64:
    """Fill the cluster-level fields from Y, X and ROWS."""
    s[..., CYY] = s[..., Y] ** 2
    s[..., CXY] = s[..., X] * s[..., Y]
    s[..., CXX] = s[..., X] ** 2
    s[..., CLUSTERS] = (s[..., ROWS] > 0).astype(np.float64)
    return s


@dataclass(frozen=True)
class _Point:
    """One strength, per metric: power, mean z, mean realised effect (own scale); and the family rate."""

    strength: float
    power: F64
    z: F64
    effect: F64
    family: float


def _sums(r: _Rows, s0: F64, cand: F64, u_rows: F64 | None, strength: float,
          scale_from: float | None) -> tuple[F64, F64, F64]:
    """Group sums (D, M, F) of each draw: the rest (a), the candidate half clean, and defected (b). `cand` (D, U)
    the candidate halves as 0/1, `u_rows` (D, changed rows) the changed rows' uniforms (a mixture's)."""
    d, u, mc = cand.shape[0], r.n_users, len(r.moved)
    hit = cand[:, r.user]
    if scale_from is None:
        assert u_rows is not None, "a mixture needs its rows' uniforms"
        hit = hit * (u_rows < strength)
        t = 1.0
    else:
        t = float(np.log(strength) / np.log(scale_from))
    clean_b = np.einsum("du,muf->dmf", cand, s0, optimize=True)
    b = clean_b.copy()
    if mc:
        # A defected row contributes y0 + t dy, x0 + t dx (t = 1 for a mixture, hit^2 = hit): what it adds.
        dy, dx = t * r.dy, t * r.dx

        def per_user(w: F64) -> F64:  # (D, moved, U): the defected rows' added weight per measure and user
            out: F64 = np.asarray(r.to_cell.T @ (hit * w).T).T.reshape(d, mc, u)
            return out

        def per_measure(w: F64) -> F64:  # (D, moved)
            out: F64 = np.asarray(r.to_measure.T @ (hit * w).T).T
            return out

        s0m = s0[r.moved]
        yu = cand[:, None, :] * s0m[None, :, :, Y] + per_user(dy)
        xu = cand[:, None, :] * s0m[None, :, :, X] + per_user(dx)
        rows_u = cand[:, None, :] * s0m[None, :, :, ROWS] + per_user(t * r.dpresent)
        bm = b[:, r.moved]
        bm[..., Y], bm[..., X], bm[..., ROWS] = yu.sum(-1), xu.sum(-1), rows_u.sum(-1)
        bm[..., CYY], bm[..., CXY], bm[..., CXX] = (yu * yu).sum(-1), (xu * yu).sum(-1), (xu * xu).sum(-1)
        bm[..., CLUSTERS] = (rows_u > 1e-12).sum(-1)
        for f, w in ((RYY, 2 * r.cy0 * dy + dy * dy), (RXY, r.cx0 * dy + r.cy0 * dx + dx * dy),
                     (RXX, 2 * r.cx0 * dx + dx * dx)):
            bm[..., f] += per_measure(w)
        b[:, r.moved] = bm
    return s0.sum(axis=1)[None, :, :] - clean_b, clean_b, b


def mixture_sums(clean: GateColumns, defected: GateColumns, cand: F64, uniforms: F64, strength: float, *,
                 scale_from: float | None = None) -> tuple[F64, F64]:
    """The group sums (D, M, F) of the rest (a) and of the candidate half (b) for given draws: `cand` (D, U) the
    candidate halves as 0/1, `uniforms` (D, aligned rows, every measure's in order) each row's uniform: a
    candidate's row is defected where it is below `strength` (with `scale_from`, every candidate row is, at
    factor `strength`). What `power` computes per draw, for checking."""
    r = _rows(clean, defected)
    u_rows = None if scale_from is not None else uniforms[:, r.changed]
    a, _clean_b, b = _sums(r, _clean_stats(r), cand, u_rows, strength, scale_from)
    return a, b


def _block(r: _Rows, s0: F64, cand: F64, u_rows: F64 | None, strength: float, sign: F64, thr: F64,
           scale_from: float | None) -> tuple[F64, F64, F64]:
    """One block of draws at one strength -> (fail (D, M) as 0/1, z (D, M), effect (D, M) in each metric's own
    scale: the candidate half's metric defected minus clean)."""
    a, clean_b, b = _sums(r, s0, cand, u_rows, strength, scale_from)
    got = change(a, b, sign)
    fail = (np.nan_to_num(got.z, nan=-np.inf) > thr[None, :]).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return fail, got.z, ratio(b) - ratio(clean_b)


def _point(r: _Rows, s0: F64, strength: float, sign: F64, thr: F64, *, draws: int, seed: int,
           scale_from: float | None) -> _Point:
    """Every draw at one strength, a block of draws at a time (memory bounded by `_BLOCK_CELLS`)."""
    width = max(len(r.user), len(r.moved) * r.n_users, r.n_measures * r.n_users, 1)
    block = max(1, min(draws, _BLOCK_CELLS // width))
    fails, zs, effects = [], [], []
    for k, start in enumerate(range(0, draws, block)):
        d = min(block, draws - start)
        rng = np.random.default_rng([seed, k])  # the same halves and row draws at every strength
        order = np.argsort(rng.random((d, r.n_users)), axis=1)
        cand = np.zeros((d, r.n_users))
        np.put_along_axis(cand, order[:, : r.n_users // 2], 1.0, axis=1)
        u_rows = rng.random((d, len(r.user))) if scale_from is None else None
        fail, z, effect = _block(r, s0, cand, u_rows, strength, sign, thr, scale_from)
        fails.append(fail)
        zs.append(z)
        effects.append(effect)
    fail_all, z_all, eff_all = np.concatenate(fails), np.concatenate(zs), np.concatenate(effects)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a metric with no row in any draw: NaN, as it should
        z_mean = np.nanmean(np.where(np.isfinite(z_all), z_all, np.nan), axis=0)
        eff_mean = np.nanmean(eff_all, axis=0)
    return _Point(strength=strength, power=fail_all.mean(axis=0), z=z_mean, effect=eff_mean,
                  family=float(fail_all.max(axis=1).mean()) if fail_all.size else 0.0)


def _target(p: _Point) -> int:
    """The metric with the highest power, ties broken by the largest mean z (NaN lowest)."""
    z = np.nan_to_num(p.z, nan=-np.inf)
    return int(np.lexsort((-z, -p.power))[0])


def _stronger(s: float, scale: bool) -> float | None:
    if scale:
        return 1.0 + 2.0 * (s - 1.0)
    return None if s >= 1.0 else min(1.0, 2.0 * s)


def _weaker(s: float, scale: bool) -> float:
    return 1.0 + (s - 1.0) / 2.0 if scale else s / 2.0


def _at_power(points: Sequence[_Point], j: int, unit: Unit, level: float) -> float | None:
    """Metric j's realised effect (in `unit`) where its power first reaches `level`, linear between strengths;
    the weakest strength's effect when it is reached there already (an upper bound); None when never, or when
    the effect is undefined there (no row on a side)."""
    effects = [float(in_unit(np.asarray(p.effect[j]), unit)) for p in points]
    for i, p in enumerate(points):
        if p.power[j] >= level:
            if i == 0:
                got = effects[0]
            else:
                p0, p1 = float(points[i - 1].power[j]), float(p.power[j])
                got = effects[i - 1] + (level - p0) * (effects[i] - effects[i - 1]) / (p1 - p0)
            return got if np.isfinite(got) else None
    return None


def power(clean: GateColumns, defected: GateColumns, sign: F64, thresholds: Mapping[str, float], *,
          strengths: Sequence[float], draws: int = 300, seed: int = 0, scale_from: float | None = None) -> DefectPower:
    """What the gate catches of one defect: `clean` and `defected` the side's columns without and with the
    defect on every eligible unit (same users and measures; rows aligned by unit id, `align`), `sign` (M,) +1
    where higher is worse, `thresholds` each measure's worse-direction z threshold by key. `strengths`: shares
    of a candidate's rows defected (or, with `scale_from`, factors, the defected columns being at factor
    `scale_from`), extended (doubling, or halving) until the target reaches 95% power and down while it is at
    80% already (`MAX_EXTRA` each way). The target is the metric with the highest power at the strongest
    strength; its MDE the realised effect at 80% power, interpolated between the strengths that bracket it
    (the bracket halved `REFINE` times)."""
    keys = clean.keys
    if not keys:
        raise ValueError("power: no gated measure (the suite's components gate none)")
    missing = [k for k in keys if k not in thresholds]
    if missing:
        raise ValueError(f"power: no threshold for measure(s) {', '.join(missing)}")
    if not strengths:
        raise ValueError("power: no strength to try")
    if scale_from is not None and (scale_from <= 0 or scale_from == 1.0):
        raise ValueError(f"power: scale_from {scale_from} must be a factor > 0 other than 1")
    r = _rows(clean, defected)
    s0 = _clean_stats(r)
    thr = np.array([thresholds[k] for k in keys], dtype=np.float64)
    sgn = np.asarray(sign, dtype=np.float64)
    scale = scale_from is not None

    def run(s: float) -> _Point:
        return _point(r, s0, s, sgn, thr, draws=draws, seed=seed, scale_from=scale_from)

    points = {s: run(s) for s in sorted(set(strengths))}
    for _ in range(MAX_EXTRA):
        top = points[max(points)]
        nxt = _stronger(max(points), scale)
        if top.power[_target(top)] >= TARGET_POWER or nxt is None:
            break
        points[nxt] = run(nxt)
    j = _target(points[max(points)])
    for _ in range(MAX_EXTRA):
        low = min(points)
        if points[low].power[j] < MDE_POWER:
            break
        points[_weaker(low, scale)] = run(_weaker(low, scale))
    for _ in range(REFINE):
        # Halve the bracket where the target crosses 80%: the MDE is read off a line between two strengths.
        ordered = sorted(points)
        i = next((k for k, s in enumerate(ordered) if points[s].power[j] >= MDE_POWER), 0)
        if i == 0:
            break
        points[(ordered[i - 1] + ordered[i]) / 2.0] = run((ordered[i - 1] + ordered[i]) / 2.0)
    curve = [points[s] for s in sorted(points)]
    j = _target(curve[-1])
    measures = clean.measures
    unit = unit_of(measures[j])
    caught = next((p for p in curve if p.power[j] >= TARGET_POWER), curve[-1])
    return DefectPower(
        metric=keys[j], unit=unit, mde=_at_power(curve, j, unit, MDE_POWER),
        per_metric_mde={keys[i]: _at_power(curve, i, unit_of(measures[i]), MDE_POWER)
                        for i in range(len(keys)) if max(float(p.power[i]) for p in curve) >= MDE_POWER},
        cross_talk={keys[i]: float(caught.power[i]) for i in range(len(keys)) if i != j},
        curve=tuple(PowerPoint(strength=p.strength, effect=float(in_unit(np.asarray(p.effect[j]), unit)),
                               power=float(p.power[j]), family=p.family) for p in curve),
        draws=draws)


__all__ = ["MAX_EXTRA", "MDE_POWER", "REFINE", "TARGET_POWER", "align", "in_unit", "mixture_sums", "power", "unit_of"]
