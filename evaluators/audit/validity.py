"""Validity of the suite's measures (docs/method.md section 6), pure: criterion, discriminant and Goodhart.

- **Criterion.** Each per-unit flag against each outcome the traces carry (a task reward, feedback, a task
  success: higher is better for every outcome an adapter records), at the conversation level where outcomes
  belong. Two figures, both over the units where the flag is decided and the outcome known, both with intervals
  that resample users (the cluster: tau-bench's trials of one task share their customer):
  the rank AUC of the flag for a *bad* outcome (`bad_outcome`: the lower of an outcome's two values, else below
  its median) by `stats.cluster_auc`, and the outcome's mean with the flag minus without by
  `stats.cluster_mean_difference`, withheld below `findings.outcomes.MIN_GROUP_N` units on a side as the
  summary's associations are. A flag meant as `bad` fails when it goes with good outcomes: the difference's
  interval lies wholly above 0, or the AUC's wholly below 0.5. A per-unit score with a declared direction (the
  session's friction) is read the same way, by its AUC alone (`score_criterion`).
  Against the next layer (`next_layer`): the conversation's minimum S by its trajectory outcome, and redo and
  return after a failed versus a delivered ending, read from the components' own analyses (`turn_score`,
  `results.analysis.sessions`); each outcome's good and bad side comes from the direction its component declares
  for the metric counting it (`metrics.py`: `worse`), never from a list kept here.
- **Discriminant.** The sessions each component flags (any of its `bad` flags raised), their pairwise Jaccard,
  the sessions one component alone flags, and pairs of flags whose sessions nearly coincide (Jaccard >=
  `NEAR_DUPLICATE` over at least `NEAR_DUPLICATE_MIN_N` sessions): one of the two may be redundant. A flag
  stands for the data item it reads.
- **Goodhart.** Over the snapshots of the store's audits (`AuditReport.snapshot`, oldest first): a metric that
  improved from one audit to the next while a metric of the next layer of the spine (the components whose
  presentation is placed on the spine, in registry order: execution -> substance -> trajectory -> results)
  worsened. Directions are the components' declarations (`Metric.worse`); the next layer is read by its
  headline metrics (`Presentation.headline`).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from itertools import combinations
from typing import NamedTuple

import numpy as np

from agent_factory.evaluators.audit.model import Criterion, Discriminant, GoodhartSignal, JaccardPair
from agent_factory.evaluators.components.results.analysis import sessions
from agent_factory.evaluators.components.results.definitions import NOT_RETURNED, RETURNED
from agent_factory.evaluators.components.results.metrics import REDO_RATE, RETURN_RATE
from agent_factory.evaluators.components.substance.analysis import turn_score
from agent_factory.evaluators.components.trajectory.metrics import OUTCOME_SHARE
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.core.present import Metric, Row, Worse
from agent_factory.evaluators.core.registry import ComponentSpec, Observations
from agent_factory.evaluators.findings.flags import FlagRow
from agent_factory.evaluators.findings.outcomes import MIN_GROUP_N, TOO_SMALL
from agent_factory.evaluators.stats import AUC, cluster_auc, cluster_mean_difference

VERSION = "1"

N_BOOT = 2000
"""Bootstrap resamples of users for the AUC's interval."""
SEED = 7
"""The bootstrap's seed: the same store gives the same intervals."""
NEAR_DUPLICATE = 0.9
"""Jaccard of the sessions two flags raise at or above which they are named as near-duplicates."""
NEAR_DUPLICATE_MIN_N = 5
"""Sessions (the union) two flags must cover before their overlap is read: on fewer, one shared session is
already a Jaccard of 1."""
LEVEL = "conversation"
"""Outcomes (a task's reward, a session's feedback, the next layer's states) belong to sessions."""


class Pair(NamedTuple):
    """One unit as the criterion reads it: its cluster, the flag's (or score's) value and the outcome."""

    cluster: Hashable
    score: float
    """The flag (1 raised, 0 not) or a score oriented so that higher means worse."""
    outcome: float
    """The outcome, higher better."""
    bad: bool
    """Whether the outcome counts as bad (`bad_outcome`)."""


# ---- criterion ----------------------------------------------------------------------------------------------

def bad_outcome(values: Iterable[float]) -> tuple[float | None, str]:
    """The cut under which an outcome (higher better) is bad, and how it was chosen: with two distinct values the
    lower one is bad (a failed task, a thumbs down); with more, a value below the median (at the lowest value
    when the median is the lowest); None when the outcome never varies (no bad side to tell)."""
    xs = list(values)
    distinct = sorted(set(xs))
    if len(distinct) < 2:
        return None, "the outcome takes one value: nothing to tell bad from good"
    if len(distinct) == 2:
        return distinct[1], f"bad = the lower value ({distinct[0]:g})"
    median = statistics.median(xs)
    if median <= distinct[0]:
        return distinct[1], f"bad = the lowest value ({distinct[0]:g}, the median)"
    return median, f"bad = below the median ({median:g})"


_BOOT_CELLS = 2_000_000
"""Largest block of cluster resamples (resamples x clusters, or x the counts per cluster) `_resampled` holds at
once (16 MB of int64)."""


def _resampled(g: int, n_boot: int, seed: int, aucs: Callable[[np.ndarray], np.ndarray], *,
               width: int = 0) -> np.ndarray:
    """`aucs` of each block of `n_boot` resamples of `g` clusters (resamples x clusters: how often each cluster
    was drawn), concatenated in resample order; `width`: the columns per resample `aucs` makes (blocks are sized
    so that neither exceeds `_BOOT_CELLS`). The very draws `stats.cluster_auc` makes, one `integers` call of g
    per resample: a block of resamples drawn as one call gives the same integers in the same order (a
    Generator's bounded integers are drawn one after the other, whatever the shape asked), so no Python runs per
    resample."""
    rng = np.random.default_rng(seed)
    step = max(1, _BOOT_CELLS // max(g, width, 1))
    parts: list[np.ndarray] = []
    for start in range(0, n_boot, step):
        size = min(step, n_boot - start)
        drawn = rng.integers(0, g, size=(size, g)) + (np.arange(size) * g)[:, None]
        weights = np.bincount(drawn.ravel(), minlength=size * g).reshape(size, g)
        parts.append(aucs(weights))
    return np.concatenate(parts) if parts else np.zeros(0)


def _flag_aucs(sums: np.ndarray) -> np.ndarray:
    """The AUC of each row of (raised and bad, bad, raised and good, good) sums, the rows where a class is empty
    left out: the same expression, in the same order, as `flag_auc`'s `auc_of`, so the same floats."""
    tp, b, fp, gd = sums.T
    ok = (b != 0) & (gd != 0)
    tp, b, fp, gd = tp[ok], b[ok], fp[ok], gd[ok]
    aucs: np.ndarray = (tp * (gd - fp) + 0.5 * (tp * fp + (b - tp) * (gd - fp))) / (b * gd)
    return aucs


def flag_auc(flags: Sequence[float], bad: Sequence[bool], clusters: Sequence[Hashable], *, n_boot: int = N_BOOT,
             seed: int = SEED, confidence: float = 0.95) -> AUC:
    """`stats.cluster_auc` of a 0/1 flag, computed from each cluster's four counts (raised and bad, bad, raised
    and good, good) instead of ranking every resample: the same resamples (same seed, same draws) and the same
    figures, in time linear in the clusters, so an audit of many flags over a large store stays quick. The rank
    AUC of a 0/1 score is (TP (G - FP) + (TP FP + (B - TP)(G - FP)) / 2) / (B G), ties counting one half."""
    if not (len(flags) == len(bad) == len(clusters)):
        raise ValueError("flags, outcomes and clusters must have the same length")
    keys = {c: i for i, c in enumerate(dict.fromkeys(clusters))}
    g = len(keys)
    cid = np.fromiter((keys[c] for c in clusters), dtype=np.int64, count=len(clusters))
    f = np.asarray(flags, dtype=float) > 0
    y = np.asarray(bad, dtype=bool)
    counts = np.stack([np.bincount(cid, weights=(f & y).astype(float), minlength=g),
                       np.bincount(cid, weights=y.astype(float), minlength=g),
                       np.bincount(cid, weights=(f & ~y).astype(float), minlength=g),
                       np.bincount(cid, weights=(~y).astype(float), minlength=g)], axis=1)

    def auc_of(tp: float, b: float, fp: float, gd: float) -> float | None:
        if b == 0 or gd == 0:
            return None
        return (tp * (gd - fp) + 0.5 * (tp * fp + (b - tp) * (gd - fp))) / (b * gd)

    value = auc_of(*(float(x) for x in counts.sum(axis=0)))
    n1 = int(y.sum())
    base = {"n_pos": n1, "n_neg": int(y.size) - n1, "clusters": g}
    if value is None:
        return AUC(value=None, note="one outcome class is empty", **base)
    if g < 2:
        return AUC(value=value, note="a single cluster: no interval", **base)
    # Each resample's sums are one row of a matrix product, exact (whole numbers).
    draws = _resampled(g, n_boot, seed, lambda weights: _flag_aucs(weights @ counts))
    if len(draws) < n_boot // 2:
        return AUC(value=value, note=f"only {len(draws)} of {n_boot} resamples had both classes", **base)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(draws, [alpha, 1.0 - alpha])
    return AUC(value=value, low=float(low), high=float(high),
               note=f"cluster bootstrap over {g} clusters, {len(draws)} resamples", **base)


def score_auc(scores: Sequence[float], bad: Sequence[bool], clusters: Sequence[Hashable], *, n_boot: int = N_BOOT,
              seed: int = SEED, confidence: float = 0.95) -> AUC:
    """`stats.cluster_auc` of a score, computed from the weights of bad and good units at each distinct score
    (a unit weighs as often as its cluster was drawn) instead of ranking every resample: the same draws and the
    same figures (a resample's Mann-Whitney count and its rank sum are the same number, held exactly in floats),
    with no Python per resample and no scipy.stats (1.5 s to import). A score that is not a finite number is left
    to `cluster_auc`."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(bad, dtype=bool)
    if not (s.size == y.size == len(clusters)):
        raise ValueError("scores, outcomes and clusters must have the same length")
    if not np.all(np.isfinite(s)):
        return cluster_auc(scores, bad, clusters, n_boot=n_boot, seed=seed, confidence=confidence)
    keys = {c: i for i, c in enumerate(dict.fromkeys(clusters))}
    g = len(keys)
    cid = np.fromiter((keys[c] for c in clusters), dtype=np.int64, count=len(clusters))
    # The units in score order, and where each distinct score's run of them starts.
    order = np.argsort(s, kind="stable")
    sorted_s = s[order]
    starts = np.flatnonzero(np.r_[True, sorted_s[1:] != sorted_s[:-1]]) if s.size else np.zeros(0, dtype=np.intp)
    m = len(starts)
    unit_cluster, unit_bad = cid[order], y[order]

    def sums(unit_weights: np.ndarray) -> np.ndarray:
        """Resamples x (bad units at each distinct score, then good ones), from each unit's weight."""
        if not m:
            return np.zeros((unit_weights.shape[0], 0))
        bad_w = np.add.reduceat(unit_weights * unit_bad, starts, axis=1)
        good_w = np.add.reduceat(unit_weights * ~unit_bad, starts, axis=1)
        return np.concatenate([bad_w, good_w], axis=1)

    n1 = int(y.sum())
    base = {"n_pos": n1, "n_neg": int(y.size) - n1, "clusters": g}
    value = _score_aucs(sums(np.ones((1, s.size))), m)
    if value.size == 0:
        return AUC(value=None, note="one outcome class is empty", **base)
    if g < 2:
        return AUC(value=float(value[0]), note="a single cluster: no interval", **base)
    # A unit weighs as often as its cluster was drawn.
    draws = _resampled(g, n_boot, seed, lambda weights: _score_aucs(sums(weights[:, unit_cluster].astype(float)), m),
                       width=max(s.size, 2 * m))
    if len(draws) < n_boot // 2:
        return AUC(value=float(value[0]), note=f"only {len(draws)} of {n_boot} resamples had both classes", **base)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(draws, [alpha, 1.0 - alpha])
    return AUC(value=float(value[0]), low=float(low), high=float(high),
               note=f"cluster bootstrap over {g} clusters, {len(draws)} resamples", **base)


def _score_aucs(sums: np.ndarray, m: int) -> np.ndarray:
    """The rank AUC of each row of `sums` (bad units at each of `m` distinct scores, then good ones), the rows
    where a class is empty left out: (pairs bad above good + ties / 2) / (bad x good), every term a whole or
    half number held exactly, so the quotient is `stats.rank_auc`'s to the last bit."""
    bad, good = sums[:, :m], sums[:, m:]
    nb, ng = bad.sum(axis=1), good.sum(axis=1)
    ok = (nb != 0) & (ng != 0)
    bad, good, nb, ng = bad[ok], good[ok], nb[ok], ng[ok]
    below = np.cumsum(good, axis=1) - good  # good units strictly below each score
    aucs: np.ndarray = ((bad * below).sum(axis=1) + 0.5 * (bad * good).sum(axis=1)) / (nb * ng)
    return aucs


def measure(flag: str, component: str, meaning: str, outcome: str, pairs: Sequence[Pair], *,
            level: str = LEVEL, n_boot: int = N_BOOT, seed: int = SEED, binary: bool = True,
            note: str | None = None) -> Criterion:
    """One criterion row over `pairs` (module docstring). `binary`: the score is a 0/1 flag, so the difference
    of the outcome with and without it is defined; a score (minimum S) gets the AUC only."""
    notes = [note] if note else []
    n = len(pairs)
    if not n:
        return Criterion(flag=flag, component=component, meaning=meaning, outcome=outcome, level=level, n=0,
                         auc=None, note="; ".join([*notes, "never decided on a unit with the outcome"]))
    scores = [p.score for p in pairs]
    clusters = [p.cluster for p in pairs]
    bads = [p.bad for p in pairs]
    auc = (flag_auc(scores, bads, clusters, n_boot=n_boot, seed=seed) if binary
           else score_auc(scores, bads, clusters, n_boot=n_boot, seed=seed))
    if auc.low is None:
        notes.append(f"AUC: {auc.note}")
    diff = low = high = None
    if binary:
        raised = [s > 0 for s in scores]
        if not any(raised):
            notes.append("never raised")
        elif all(raised):
            notes.append("raised on every unit: no unit without it to compare")
        else:
            md = cluster_mean_difference([p.outcome for p in pairs], raised, clusters)
            diff, low, high = md.diff, md.low, md.high
            if min(md.n_with, md.n_without) < MIN_GROUP_N:
                low, high = None, None
                notes.append(TOO_SMALL)
            elif md.note:
                notes.append(md.note)
    wrong_diff = low is not None and low > 0.0
    wrong_auc = auc.high is not None and auc.high < 0.5
    fails = meaning == "bad" and (wrong_diff or wrong_auc)
    if fails:
        why = []
        if wrong_diff:
            why.append(f"the outcome is higher with it ({diff:+.3f} [{low:+.3f}, {high:+.3f}])")
        if wrong_auc:
            why.append(f"AUC for a bad outcome {auc.value:.3f} [{auc.low:.3f}, {auc.high:.3f}] under 0.5")
        notes.insert(0, "points the wrong way: " + " and ".join(why))
    return Criterion(flag=flag, component=component, meaning=meaning, outcome=outcome, level=level, n=n,
                     auc=auc.value, low=auc.low, high=auc.high, difference=diff, difference_low=low,
                     difference_high=high, fails=fails, note="; ".join(notes) or None)


def criterion(specs: Sequence[FlagSpec], rows: Sequence[FlagRow], outcomes: Mapping[str, Mapping[str, float]], *,
              level: str = LEVEL, n_boot: int = N_BOOT, seed: int = SEED) -> list[Criterion]:
    """Every flag of `specs` against every outcome kind (`unit_outcomes`: kind -> unit id -> value, higher
    better), in spec order then outcome kind. `rows` are the flags on the units of `level` (rolled up); a flag
    never decided on a unit with the outcome still gets its row (n = 0, said in `note`). An outcome that takes one
    value gets no row (`bad_outcome`: nothing to tell bad from good)."""
    per_flag: dict[str, list[FlagRow]] = defaultdict(list)
    for r in rows:
        per_flag[r.flag].append(r)
    out: list[Criterion] = []
    for kind in sorted(outcomes):
        values = outcomes[kind]
        cut, rule = bad_outcome(values.values())
        if cut is None:
            continue  # nothing to tell bad from good: the caller says so (`bad_outcome`)
        for s in specs:
            pairs = [Pair(r.user_id if r.user_id is not None else r.unit_id, float(r.value), values[r.unit_id],
                          values[r.unit_id] < cut)
                     for r in per_flag.get(s.id, ()) if r.value is not None and r.unit_id in values]
            out.append(measure(s.id, s.component, s.meaning, kind, pairs, level=level, n_boot=n_boot, seed=seed,
                               note=rule))
    order = {s.id: i for i, s in enumerate(specs)}
    return sorted(out, key=lambda c: (order.get(c.flag, 0), c.outcome))


def score_criterion(metric: str, component: str, scores: Mapping[str, float], cluster_of: Mapping[str, Hashable],
                    outcomes: Mapping[str, Mapping[str, float]], *, worse: Worse, level: str = LEVEL,
                    n_boot: int = N_BOOT, seed: int = SEED) -> list[Criterion]:
    """A per-unit score (a result such as the session's friction) against every outcome kind: its AUC for a bad
    outcome, the score oriented by the direction its component declares worse. A score has no "with" and
    "without", so no difference; it fails when its AUC's interval lies wholly under 0.5."""
    sign = 1.0 if worse == "higher" else -1.0
    out: list[Criterion] = []
    for kind in sorted(outcomes):
        values = outcomes[kind]
        cut, rule = bad_outcome(values.values())
        if cut is None:
            continue
        pairs = [Pair(cluster_of.get(u, u), sign * x, values[u], values[u] < cut)
                 for u, x in sorted(scores.items()) if u in values]
        out.append(measure(f"{component}.{metric}", component, "bad", kind, pairs, level=level, n_boot=n_boot,
                           seed=seed, binary=False, note=f"per-unit score, {worse} is worse; {rule}"))
    return out


def wrong_way(criteria: Iterable[Criterion], specs: Sequence[FlagSpec]) -> dict[str, str]:
    """The data items behind the flags that fail their criterion (a `bad` flag going with good outcomes), each
    with one line saying which flag, against which outcome, and the figures: what the inner loop retires. A flag
    read from a per-unit result (not a datum), or a row of the next layer (no flag of `specs`), names no item."""
    spec_of = {s.id: s for s in specs}
    out: dict[str, str] = {}
    for c in criteria:
        s = spec_of.get(c.flag)
        if not c.fails or s is None or s.source != "datum" or s.item in out:
            continue
        out[s.item] = f"{c.flag} against {c.outcome} (n = {c.n}): {c.note}"
    return out


# ---- the next layer -----------------------------------------------------------------------------------------

def _good(metric: Metric) -> float | None:
    """1.0 when a unit counted by `metric` is good (a rate whose lower values are worse), 0.0 when bad, None when
    the metric is descriptive (no direction): its units are left out."""
    return None if metric.worse is None else (1.0 if metric.worse == "lower" else 0.0)


TRAJECTORY_OUTCOME = "trajectory.outcome"
"""The next layer of Execution and Substance: the session's outcome, good or bad as its share metric says
(`trajectory.metrics.OUTCOME_SHARE`: smooth is good, struggled and blocked bad, censored and undetermined out)."""
OUTCOME_GOOD: dict[str, float | None] = {label: _good(m) for label, m in OUTCOME_SHARE.items()}
"""Trajectory outcome label -> 1 good / 0 bad / None left out, from the declared direction of its share."""
def _sides(metric: Metric, counted: str, other: str) -> dict[str, float]:
    """`counted` (the value `metric`'s rate counts) and `other` as good or bad by `metric`'s direction; empty for
    a descriptive metric."""
    good = _good(metric)
    return {} if good is None else {counted: good, other: 1.0 - good}


REDO_GOOD = _sides(REDO_RATE, "yes", "no")
"""A session's `results.redo` value -> good or bad, from `redo_rate`'s declared direction (a redo is bad)."""
RETURN_GOOD = _sides(RETURN_RATE, RETURNED, NOT_RETURNED)
"""What followed a session -> good or bad, from `return_rate_within_t`'s declared direction (a return is good);
a censored session is left out."""


def spine(components: Sequence[ComponentSpec]) -> tuple[str, ...]:
    """The components on the spine, in registry order (execution -> substance -> trajectory -> results)."""
    return tuple(c.name for c in components if c.present is not None and c.present.place == "spine")


def before(component: str, layer_of: str, components: Sequence[ComponentSpec]) -> bool:
    """Whether `component`'s flags are read against `layer_of`'s outcome: a spine component below it, or one off
    the spine (Conduct across it, the instruments beside it); never the layer itself or one above it."""
    order = spine(components)
    if component not in order:
        return True
    return layer_of in order and order.index(component) < order.index(layer_of)


def trajectory_outcomes(outcome_of: Mapping[str, str | float | None]) -> dict[str, float]:
    """Conversation id -> 1 good / 0 bad of its stored trajectory outcome label (`OUTCOME_GOOD`)."""
    out: dict[str, float] = {}
    for cid, label in outcome_of.items():
        good = OUTCOME_GOOD.get(str(label)) if label is not None else None
        if good is not None:
            out[cid] = good
    return out


def next_layer(obs: Observations, outcome_of: Mapping[str, str | float | None], *, n_boot: int = N_BOOT,
               seed: int = SEED) -> tuple[list[Criterion], list[str]]:
    """Results against the layer above them, over `obs` (trace and conversation rows with Substance's items,
    Execution's delivery and Results' items) and the stored trajectory outcome of each conversation: the
    conversation's minimum S by its trajectory outcome, and redo and return after a failed versus a delivered
    ending. Also what could not be measured, and why."""
    out: list[Criterion] = []
    notes: list[str] = []
    good = trajectory_outcomes(outcome_of)
    min_s: dict[str, float] = {}
    user: dict[str, Hashable] = {}
    for row in obs.layer("trace"):
        s = turn_score(row).score
        if s is None or row.conversation_id is None:
            continue
        cid = row.conversation_id
        min_s[cid] = min(s, min_s.get(cid, s))
        user[cid] = row.user_id or cid
    pairs = [Pair(user[c], 1.0 - s, good[c], good[c] < 1.0) for c, s in sorted(min_s.items()) if c in good]
    if not min_s:
        notes.append("minimum S by trajectory outcome: S is undefined on every turn (its checklist items are "
                     "model-collected: run with a model)")
    elif len({p.bad for p in pairs}) < 2:
        notes.append(f"minimum S by trajectory outcome: the {len(pairs)} conversations with S and a graded outcome "
                     "are all on one side (smooth, or struggled and blocked): nothing to compare")
    else:
        means = {lab: statistics.fmean(min_s[c] for c in min_s if outcome_of.get(c) == lab)
                 for lab in OUTCOME_GOOD if any(outcome_of.get(c) == lab for c in min_s)}
        said = ", ".join(f"{lab} {m:.2f}" for lab, m in means.items())
        out.append(measure("substance.S.min", "substance", "bad", TRAJECTORY_OUTCOME, pairs, n_boot=n_boot,
                           seed=seed, binary=False,
                           note=f"score 1 - the conversation's minimum S (a lower S is worse); mean minimum S: {said}"))
    ss = [s for s in sessions(obs) if s.ended in ("failed", "delivered")]
    watched = [s for s in ss if s.observable]
    if not ss:
        notes.append("redo and return by ending: no session with a failed or delivered last turn")
    elif not watched:
        notes.append(f"redo and return by ending: none of {len(ss)} sessions is observable (the source's user ids "
                     "name no person who could come back)")
    else:
        redo = [Pair(s.cluster, float(s.ended == "failed"), g, g < 1.0) for s in watched
                if (g := REDO_GOOD.get(str(s.redo))) is not None]
        back = [Pair(s.cluster, float(s.ended == "failed"), g, g < 1.0) for s in watched
                if (g := RETURN_GOOD.get(str(s.returned))) is not None]
        for name, pp, what in (("results.redo", redo, "no redo = 1"),
                               ("results.returned_within_t", back, "a return = 1, censored left out")):
            out.append(measure("execution.ended_failed", "execution", "bad", name, pp, n_boot=n_boot, seed=seed,
                               note=f"the session's last turn failed vs delivered (hand-offs left out); {what}"))
    return out, notes


# ---- discriminant -------------------------------------------------------------------------------------------

def _jaccard(a: set[str], b: set[str], x: str, y: str) -> JaccardPair:
    union = len(a | b)
    return JaccardPair(a=x, b=y, jaccard=len(a & b) / union if union else 0.0, n=union)


def discriminant(specs: Sequence[FlagSpec], rows: Sequence[FlagRow], *, threshold: float = NEAR_DUPLICATE,
                 min_n: int = NEAR_DUPLICATE_MIN_N) -> Discriminant:
    """Do the components measure different things (module docstring)? `rows` are the flags rolled up to
    sessions."""
    bad = {s.id for s in specs if s.meaning == "bad"}
    components = list(dict.fromkeys(s.component for s in specs if s.meaning == "bad"))
    by_component: dict[str, set[str]] = {c: set() for c in components}
    by_flag: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        if r.value == 1:
            by_flag[r.flag].add(r.unit_id)
            if r.flag in bad:
                by_component[r.component].add(r.unit_id)
    pairs = tuple(_jaccard(by_component[a], by_component[b], a, b) for a, b in combinations(components, 2)
                  if by_component[a] or by_component[b])
    unique = {c: len(by_component[c] - set().union(*(by_component[o] for o in components if o != c)))
              for c in components}
    flags = [s.id for s in specs if by_flag.get(s.id)]
    near = tuple(p for a, b in combinations(flags, 2)
                 if (p := _jaccard(by_flag[a], by_flag[b], a, b)).n >= min_n and p.jaccard >= threshold)
    return Discriminant(component_jaccard=pairs, unique=unique, near_duplicates=near)


# ---- Goodhart -----------------------------------------------------------------------------------------------

def _presentations(components: Sequence[ComponentSpec]) -> dict[str, ComponentSpec]:
    return {c.name: c for c in components if c.present is not None}


def declared(key: str, components: Sequence[ComponentSpec]) -> Metric | None:
    """The declared metric a snapshot key (`component/metric`, maybe `@layer`) names; None when undeclared."""
    component, _, metric = key.partition("/")
    spec = _presentations(components).get(component)
    if spec is None or spec.present is None:
        return None
    return spec.present.metric_of(metric.partition("@")[0])


def directions(keys: Iterable[str], components: Sequence[ComponentSpec]) -> dict[str, Worse]:
    """Snapshot key -> the direction its component declares worse, for the keys whose metric has one and is not
    a count: a count grows with the traffic, so its change between audits says nothing of quality."""
    out: dict[str, Worse] = {}
    for k in keys:
        m = declared(k, components)
        if m is not None and m.worse is not None and m.kind != "count":
            out[k] = m.worse
    return out


def pairing(keys: Iterable[str], components: Sequence[ComponentSpec]) -> dict[str, tuple[str, ...]]:
    """Snapshot key -> the keys of its next layer: the headline metrics (with a direction) of the next component
    on the spine. Keys of the last spine component, and of components off the spine, have none."""
    order = spine(components)
    specs = _presentations(components)
    keys = list(keys)
    out: dict[str, tuple[str, ...]] = {}
    for k in keys:
        component = k.partition("/")[0]
        if component not in order or order.index(component) + 1 >= len(order):
            continue
        above = specs.get(order[order.index(component) + 1])
        if above is None or above.present is None:
            continue
        heads = {m.name for _, m in above.present.headline if m.worse is not None}
        nxt = tuple(o for o in keys if o.partition("/")[0] == above.name
                    and o.partition("/")[2].partition("@")[0] in heads)
        if nxt:
            out[k] = nxt
    return out


def _better(worse: Worse, a: float, b: float) -> float:
    """How much `b` is better than `a` (negative: worse)."""
    return a - b if worse == "higher" else b - a


def goodhart(history: Sequence[tuple[str, Mapping[str, float | None]]], *, worse: Mapping[str, Worse],
             next_layer_of: Mapping[str, Sequence[str]], tolerance: float = 0.0) -> list[GoodhartSignal]:
    """Between each two consecutive points of `history` (label, snapshot; oldest first): every metric that
    improved by more than `tolerance` (in its better direction) while a metric of its next layer worsened by more
    than `tolerance`. Undefined values on either side compare nothing."""
    out: list[GoodhartSignal] = []
    for (t0, s0), (t1, s1) in zip(history, history[1:], strict=False):
        for key, nxt in next_layer_of.items():
            a, b = s0.get(key), s1.get(key)
            if a is None or b is None or key not in worse:
                continue
            gain = _better(worse[key], a, b)
            if gain <= tolerance:
                continue
            for other in nxt:
                c, d = s0.get(other), s1.get(other)
                if c is None or d is None or other not in worse:
                    continue
                loss = -_better(worse[other], c, d)
                if loss > tolerance:
                    out.append(GoodhartSignal(metric=key, next_layer=other, before=t0, after=t1, metric_change=gain,
                                              next_change=loss))
    return out


def snapshot(rows: Iterable[Row], components: Sequence[ComponentSpec]) -> dict[str, float | None]:
    """The population metrics of a store (`component/metric` -> value): the headline estimates (no variant) over
    all units (stratum `all` or none) of every declared metric that is not a label. A metric stored at several
    layers (a rollup) is keyed `component/metric@layer` for each."""
    kept: list[tuple[str, str | None, float | None]] = []
    for r in rows:
        if r.stratum not in (None, "all"):
            continue
        m = declared(f"{r.component}/{r.metric}", components)
        if m is None or m.kind == "label" or not m.headline(r.metric):
            continue
        value = float(r.value) if isinstance(r.value, int | float) else None
        kept.append((f"{r.component}/{r.metric}", r.layer, value))
    layers: dict[str, set[str | None]] = defaultdict(set)
    for key, layer, _ in kept:
        layers[key].add(layer)
    return {(f"{key}@{layer}" if len(layers[key]) > 1 else key): v for key, layer, v in kept}


__all__ = [
    "LEVEL", "NEAR_DUPLICATE", "NEAR_DUPLICATE_MIN_N", "N_BOOT", "OUTCOME_GOOD", "REDO_GOOD", "RETURN_GOOD", "SEED",
    "TRAJECTORY_OUTCOME", "VERSION", "Pair", "bad_outcome", "before", "criterion", "declared", "directions",
    "discriminant", "flag_auc", "goodhart", "measure", "next_layer", "pairing", "score_criterion", "snapshot", "spine",
    "trajectory_outcomes", "wrong_way",
]
