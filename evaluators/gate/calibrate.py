"""The gate checked on the baseline alone (A/A, docs/method.md section 7): split its users into random halves many
times, test each half against the other, and calibrate the thresholds so that the family false-alarm rate (any
metric of any component over its threshold) is `alpha`, then measure it on splits the calibration never saw.

- **Splits.** Each split puts an exact half of the users (floor(U/2), drawn without replacement) in group b, the
  rest in a: the study's "random halves". Exact halves rather than a fair coin per user because the gate compares
  two groups of given sizes, and every split should be a draw of the same balanced design: with a coin, group sizes
  wander by about sqrt(U)/2 (a 30-user baseline gives 11 against 19 in one split in ten), mixing designs of unequal
  precision into the thresholds. The masks come from `numpy.random.default_rng(seed)`, made in chunks of at most
  `CHUNK_CELLS` users x splits, so memory stays bounded whatever the number of splits.
- **Statistic.** Per split and metric, the worse-direction user-clustered z (`stats.split_change`); NaN (no row,
  or no variance, on a side) is no alarm, and such splits are counted per metric.
- **One tail level.** On the first half of the splits, one per-metric tail level q: each metric's threshold is the
  (1 - q) empirical quantile of its z over the calibration splits where it is defined (`inverted_cdf`: at most a
  share q of them is above it), and q is the largest level (bisection) at which the family rate is at most
  `alpha`. One q for all metrics rather than one per metric: it spends the family's rate evenly, and correlated
  metrics (a failure moves several) get the room their correlation frees.
  The family rate q must hold is the one a *fresh* split meets, not the calibration splits' own: a threshold read
  from the splits it is then applied to is exceeded less often by them than by a new split (the k-th largest of n
  values is exceeded by a new one with probability (k+1)/(n+1), not k/n), and the calibration splits are
  themselves a sample: with 2,000 of them the family rate they show wanders by +-0.5 points. A gate whose
  "5%" is 5% only on average over calibrations would exceed it in nearly half of them. So the rule certifies the
  rate with confidence, as split conformal prediction's training-conditional guarantee does (Vovk 2012, "Conditional
  validity of inductive conformal predictors"): B, the calibration splits at or above some threshold, is a
  binomial count whose rate bounds a fresh split's family rate; its one-sided `CONFIDENCE` (95%) Clopper-Pearson
  upper bound must be at most `alpha` (`certified_rate`), and q is the largest level that keeps it there. The
  gate's false alarms are then at most 5% with 95% confidence over the calibration's own randomness (q is chosen
  on those same splits, a selection the bound ignores; it is small beside the binomial margin).
  Splits tied at a threshold count in B, so discrete statistics (few users, rare events) are held conservatively;
  and each metric's largest z counts at any q > 0, so with M testable metrics fewer than about (M + 1)/alpha
  calibration splits certify nothing: q = 0, every threshold +inf (the report's level says so).
  A metric with no defined split (no variance anywhere) gets threshold +inf and never alarms; its
  `undefined_splits` equals the splits.
- **Held out.** The thresholds applied to the other half of the splits: the family rate and each metric's own.
- **Per-turn contrast.** The same splits tested as if rows were independent (`test="per_turn"`), |z| >= 2
  two-sided as in the study, over all splits: its family and per-metric rates, never used to decide.

Pure numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from agent_factory.evaluators.gate.columns import F64
from agent_factory.evaluators.gate.model import FAMILY_ALPHA, AAReport, MetricAA
from agent_factory.evaluators.gate.stats import change, group_sums, totals

CHUNK_CELLS = 2_000_000
"""Splits x users per chunk of masks (16 MB of float64): bounds the memory of any number of splits."""
PER_TURN_Z = 2.0
"""The per-turn contrast's two-sided |z| cut, as in the study."""
CONFIDENCE = 0.95
"""The confidence with which the calibrated family rate is at most `alpha` (`certified_rate`)."""
_BISECTIONS = 60
"""Halvings of the tail level's bracket: far below the resolution of 2,000 calibration splits."""

B = npt.NDArray[np.bool_]


def half_masks(rng: np.random.Generator, splits: int, users: int) -> F64:
    """(splits, users) of 0/1: in each row an exact half of the users (floor(users/2)), drawn without
    replacement, is group b."""
    row = np.zeros(users)
    row[: users // 2] = 1.0
    out: F64 = rng.permuted(np.broadcast_to(row, (splits, users)), axis=1)
    return out


@dataclass(frozen=True)
class SplitZ:
    """Every split's worse-direction statistics, (splits, M): the clustered z (NaN where undefined) and whether the
    per-turn test fired."""

    z: F64
    per_turn_alarm: B


def split_statistics(user_stats: F64, sign: F64, *, splits: int, seed: int) -> SplitZ:
    """The clustered z and the per-turn alarms of `splits` random half splits of the users, in chunks."""
    n_users = user_stats.shape[1]
    rng = np.random.default_rng(seed)
    total = totals(user_stats)[None, :, :]
    chunk = max(1, CHUNK_CELLS // max(n_users, 1))
    zs: list[F64] = []
    alarms: list[B] = []
    for start in range(0, splits, chunk):
        b = group_sums(user_stats, half_masks(rng, min(chunk, splits - start), n_users))
        a = total - b
        zs.append(change(a, b, sign, test="clustered").z)
        with np.errstate(invalid="ignore"):
            alarms.append(np.abs(change(a, b, sign, test="per_turn").z) >= PER_TURN_Z)  # NaN >= 2 is False
    m = user_stats.shape[0]
    return SplitZ(z=np.concatenate(zs) if zs else np.zeros((0, m)),
                  per_turn_alarm=np.concatenate(alarms) if alarms else np.zeros((0, m), dtype=bool))


def thresholds_at(z: F64, q: float) -> F64:
    """(M,): each metric's (1 - q) empirical quantile over the splits where its z is defined (at most a share q of
    them lies above it); +inf for a metric never defined, or at q = 0."""
    out = np.full(z.shape[1], np.inf)
    if q <= 0.0:
        return out
    for m in range(z.shape[1]):
        defined = z[:, m][~np.isnan(z[:, m])]
        if len(defined):
            out[m] = float(np.quantile(defined, 1.0 - min(q, 1.0), method="inverted_cdf"))
    return out


def alarms(z: F64, thresholds: F64) -> B:
    """(splits, M): z above its metric's threshold; NaN is no alarm."""
    with np.errstate(invalid="ignore"):
        out: B = z > thresholds[None, :]
    return out


def family_rate(z: F64, thresholds: F64) -> float:
    """Share of splits where any metric is above its threshold."""
    return float(alarms(z, thresholds).any(axis=1).mean()) if len(z) else 0.0


def certified_rate(z: F64, thresholds: F64, *, confidence: float = CONFIDENCE) -> float:
    """What a fresh split's family false-alarm rate is bounded by with `confidence`, from calibration splits `z`
    (module docstring): the one-sided Clopper-Pearson upper bound of B of n, B the splits where some metric's z
    is at or above its threshold."""
    from scipy.stats import beta

    with np.errstate(invalid="ignore"):
        b = int((z >= thresholds[None, :]).any(axis=1).sum())
    n = len(z)
    return 1.0 if b >= n else float(beta.ppf(confidence, b + 1, n - b))


def tail_level(z: F64, alpha: float) -> float:
    """The largest per-metric tail level q whose thresholds over `z`'s splits certify a family rate <= `alpha`
    (`certified_rate`; bisection: it only grows with q). 0 (no alarm ever) when even that cannot be certified:
    too few splits for the bound to reach `alpha`."""
    lo, hi = 0.0, 1.0
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if certified_rate(z, thresholds_at(z, mid)) <= alpha:
            lo = mid
        else:
            hi = mid
    return lo


def calibrate(
    user_stats: F64, sign: F64, *, keys: Sequence[str], splits: int = 4000, seed: int = 0,
    alpha: float = FAMILY_ALPHA,
) -> tuple[dict[str, float], AAReport]:
    """A/A calibration of the baseline's `user_stats` (M, U, F) (module docstring): the thresholds by measure key
    (`keys`, M of them, `sign` (M,) +1 where higher is worse) and the report of their false alarms."""
    if user_stats.ndim != 3 or sign.shape != (user_stats.shape[0],) or len(keys) != user_stats.shape[0]:
        raise ValueError(f"calibrate: user_stats {user_stats.shape}, sign {sign.shape} and {len(keys)} keys do not "
                         f"agree on the number of measures")
    if splits < 2:
        raise ValueError(f"calibrate: {splits} split(s); at least 2 are needed (one to calibrate, one held out)")
    if user_stats.shape[1] < 2:
        raise ValueError(f"calibrate: {user_stats.shape[1]} user(s); an A/A split needs at least 2")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"calibrate: alpha {alpha} is not a rate in (0, 1)")
    stats = split_statistics(user_stats, sign, splits=splits, seed=seed)
    n_cal = splits // 2
    cal, held = stats.z[:n_cal], stats.z[n_cal:]
    q = tail_level(cal, alpha)
    thr = thresholds_at(cal, q)
    held_alarms = alarms(held, thr)
    undefined = np.isnan(stats.z).sum(axis=0)
    per_metric = {
        key: MetricAA(threshold=float(thr[m]), false_alarm_heldout=float(held_alarms[:, m].mean()),
                      per_turn_false_alarm=float(stats.per_turn_alarm[:, m].mean()),
                      undefined_splits=int(undefined[m]))
        for m, key in enumerate(keys)
    }
    report = AAReport(splits=splits, level=q, family_false_alarm_calibration=family_rate(cal, thr),
                      family_false_alarm_heldout=float(held_alarms.any(axis=1).mean()),
                      per_turn_family_false_alarm=float(stats.per_turn_alarm.any(axis=1).mean()),
                      per_metric=per_metric)
    return {key: float(thr[m]) for m, key in enumerate(keys)}, report


__all__ = ["CHUNK_CELLS", "CONFIDENCE", "PER_TURN_Z", "SplitZ", "alarms", "calibrate", "certified_rate",
           "family_rate", "half_masks", "split_statistics", "tail_level", "thresholds_at"]
