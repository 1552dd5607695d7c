"""Provenance analysis (f): what share of traffic is excluded, how complete the evidence is, what is isolated.

Reads the trace rows of *all* segments (the runner must feed Provenance every turn):

- `excluded_share`: turns outside the real segment (Wilson; `.clustered`: user-clustered), and
  `segment_share.<name>` for every segment seen (real included);
- `coverage.<field>` for request, answer, span_inputs, span_outputs and `evidence_complete`: share of turns
  with that field complete, over all turns (stratum `all`) and over real turns (`segment=real`);
- `incomplete_evidence` and `injection_flagged`: rates over all turns, and one per-unit result per turn
  (value `incomplete` / `flagged`, note: the incomplete field labels / the pattern ids);
- `clean.turns`, `clean.sessions`, `clean.users`: the set analyses may use (real traffic, checked for injections
  and not flagged: a turn whose injection datum is uncollected - the rules could not decide it and no model did - is
  not counted clean).

Uncollected values are left out of every rate and counted in `uncollected`. Pure and versioned.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from agent_factory.evaluators.components.provenance.definitions import (
    EVIDENCE_COMPLETE,
    FIELD_ITEMS,
    INJECTION_FLAGGED,
    SEGMENT,
)
from agent_factory.evaluators.components.provenance.metrics import (
    CLEAN,
    COVERAGE,
    EXCLUDED,
    INCOMPLETE,
    INJECTION,
    SEGMENT_SHARE,
    UNCOLLECTED,
)
from agent_factory.evaluators.core.model import Result
from agent_factory.evaluators.core.present import Metric
from agent_factory.evaluators.core.registry import Observations, UnitRow
from agent_factory.evaluators.stats import Estimate, cluster_proportion_ci, proportion_ci
from agent_factory.knowledge_packs import REAL_SEGMENT, KnowledgePack

VERSION = "2"
NAME = "provenance.evidence"

COVERAGE_ITEMS: dict[str, str] = {**FIELD_ITEMS, "evidence_complete": EVIDENCE_COMPLETE}
"""Metric suffix -> data id of the coverage results."""


def _cluster(row: UnitRow) -> str:
    return row.user_id or row.conversation_id or row.unit_id


def _result(metric: str, value: float | str | None, *, n: int, note: str, stratum: str = "all",
            low: float | None = None, high: float | None = None, unit_id: str | None = None) -> Result:
    return Result(
        component="provenance", layer="trace", metric=metric, stratum=stratum, unit_id=unit_id, value=value,
        low=low, high=high, n=n, note=note, analysis=NAME, analysis_version=VERSION,
    )


def _from(metric: str, est: Estimate, note: str, stratum: str) -> Result:
    caveat = f"; {est.note}" if est.note else ""
    return _result(metric, est.value, n=est.n, note=note + caveat, stratum=stratum, low=est.low, high=est.high)


def rate_results(metric: Metric, clusters: npt.NDArray[np.int64], hits: npt.NDArray[np.bool_], *, what: str,
                 stratum: str = "all", params: Mapping[str, str] | None = None) -> list[Result]:
    """A rate over observations given as columns (each one's cluster code, whether it is a hit): Wilson, then
    user-clustered as `<metric>.clustered`, the clusters in the order they first appear among these; `params`
    fill the metric's name (`coverage.{field}`)."""
    given = dict(params or {})
    out = [_from(metric.of(**given), proportion_ci(int(hits.sum()), len(hits)), f"wilson; {what}", stratum)]
    if len(hits):
        codes, first = np.unique(clusters, return_index=True)
        seen = codes[np.argsort(first, kind="stable")]
        trials = np.bincount(clusters, minlength=int(codes[-1]) + 1)[seen]
        successes = np.bincount(clusters[hits], minlength=int(codes[-1]) + 1)[seen]
        est = cluster_proportion_ci(successes.tolist(), trials.tolist())
        out.append(_from(metric.variant(".clustered", **given), est,
                         f"user-clustered over {est.n_clusters} user(s); {what}", stratum))
    return out


def _segment(row: UnitRow) -> str | None:
    if row.values.get(SEGMENT) != "yes":
        return None
    fact = row.facts.get(SEGMENT)
    return fact if isinstance(fact, str) and fact else None


_CODE = {"yes": 1, "no": 2, "uncollected": 3}
"""How the pass below holds a value (anything else: 0)."""


def provenance_analysis(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Every provenance result from the trace rows (all segments)."""
    rows = obs.layer("trace")
    items = (SEGMENT, *COVERAGE_ITEMS.values(), INJECTION_FLAGGED)
    # One pass, keeping numeric columns of what the rates need, not the rows: at 10x the default simulation
    # the 102k turns held as rows were the run's peak.
    cluster_code: dict[str, int] = {}
    clusters = array("q")
    segments: list[str | None] = []
    values = {i: array("b") for i in items}
    bad_units: dict[str, list[tuple[str, float | str | None]]] = {EVIDENCE_COMPLETE: [], INJECTION_FLAGGED: []}
    clean_turns = 0
    sessions: set[str] = set()
    users: set[str] = set()
    for r in rows:
        clusters.append(cluster_code.setdefault(_cluster(r), len(cluster_code)))
        segment = _segment(r)
        segments.append(segment)
        got = r.values
        for i in items:
            values[i].append(_CODE.get(got.get(i) or "", 0))
        if got.get(EVIDENCE_COMPLETE) == "no":
            bad_units[EVIDENCE_COMPLETE].append((r.unit_id, r.facts.get(EVIDENCE_COMPLETE)))
        if got.get(INJECTION_FLAGGED) == "yes":
            bad_units[INJECTION_FLAGGED].append((r.unit_id, r.facts.get(INJECTION_FLAGGED)))
        elif segment == REAL_SEGMENT and got.get(INJECTION_FLAGGED) == "no":
            clean_turns += 1
            if r.conversation_id:
                sessions.add(r.conversation_id)
            if r.user_id:
                users.add(r.user_id)
    cl = np.frombuffer(clusters, dtype=np.int64)
    code = {i: np.frombuffer(values[i], dtype=np.int8) for i in items}

    out: list[Result] = []
    known = np.array([s is not None for s in segments], dtype=bool)
    real = np.array([s == REAL_SEGMENT for s in segments], dtype=bool)
    out += rate_results(EXCLUDED, cl[known], ~real[known], what="turns outside the real segment")
    counts = Counter(s for s in segments if s is not None)
    for name in sorted(counts):
        share = proportion_ci(counts[name], int(known.sum()))
        out.append(_from(SEGMENT_SHARE.of(segment=name), share, "wilson", "all"))

    for suffix, item in COVERAGE_ITEMS.items():
        checked, ok = (code[item] == 1) | (code[item] == 2), code[item] == 1
        what = f"turns whose {suffix.replace('_', ' ')} is complete"
        field = {"field": suffix}
        out += rate_results(COVERAGE, cl[checked], ok[checked], what=what, params=field)
        out += rate_results(COVERAGE, cl[checked & real], ok[checked & real], what=what, params=field,
                            stratum=f"segment={REAL_SEGMENT}")

    for metric, item, bad_when, label in (
        (INCOMPLETE, EVIDENCE_COMPLETE, False, "incomplete"),
        (INJECTION, INJECTION_FLAGGED, True, "flagged"),
    ):
        checked, ok = (code[item] == 1) | (code[item] == 2), code[item] == 1
        out += rate_results(metric, cl[checked], ok[checked] == bad_when, what=f"{label} turns")
        for unit_id, fact in bad_units[item]:
            note = str(fact) if fact else f"see atomic datum {item}"
            out.append(_result(metric.name, label, n=1, note=note, unit_id=unit_id))

    note = "real segment, checked for injections and not flagged"
    out.append(_result(CLEAN.of(unit="turns"), float(clean_turns), n=len(rows), note=note))
    out.append(_result(CLEAN.of(unit="sessions"), float(len(sessions)), n=clean_turns, note=note))
    out.append(_result(CLEAN.of(unit="users"), float(len(users)), n=clean_turns, note=note))

    missing = {i: int((code[i] == 3).sum()) for i in items}
    detail = ", ".join(f"{i} {missing[i]}" for i in items if missing[i]) or "none"
    out.append(_result(UNCOLLECTED.name, float(sum(missing.values())), n=len(rows),
                       note=f"left out of every rate: {detail}"))
    return out
