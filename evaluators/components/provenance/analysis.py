"""Provenance analysis (f): what share of traffic is excluded, how complete the evidence is, what is isolated.

Reads the trace rows of *all* segments (the runner must feed Provenance every turn):

- `excluded_share`: turns outside the real segment (Wilson; `.clustered`: user-clustered), and
  `segment_share.<name>` for every segment seen (real included);
- `coverage.<field>` for request, answer, span_inputs, span_outputs and `evidence_complete`: share of turns
  with that field complete, over all turns (stratum `all`) and over real turns (`segment=real`);
- `incomplete_evidence` and `injection_flagged`: rates over all turns, and one per-unit result per turn
  (value `incomplete` / `flagged`, note: the incomplete field labels / the pattern ids);
- `clean.turns`, `clean.sessions`, `clean.users`: the set analyses may use (real traffic, no injection flag).

Uncollected values are left out of every rate and counted in `uncollected`. Pure and versioned.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from agent_factory.evaluators.components.provenance.definitions import (
    EVIDENCE_COMPLETE,
    FIELD_ITEMS,
    INJECTION_FLAGGED,
    SEGMENT,
)
from agent_factory.evaluators.core.model import Result, Value
from agent_factory.evaluators.core.registry import Observations, UnitRow
from agent_factory.evaluators.stats import Estimate, cluster_proportion_ci, proportion_ci
from agent_factory.knowledge_packs import REAL_SEGMENT, KnowledgePack

VERSION = "1"
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


def rate_results(metric: str, hits: Sequence[tuple[str, bool]], *, what: str, stratum: str = "all") -> list[Result]:
    """A rate over (cluster, hit) observations: Wilson, then user-clustered as `<metric>.clustered`."""
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for key, hit in hits:
        per[key][0] += hit
        per[key][1] += 1
    k = sum(s for s, _ in per.values())
    out = [_from(metric, proportion_ci(k, len(hits)), f"wilson; {what}", stratum)]
    if per:
        est = cluster_proportion_ci([s for s, _ in per.values()], [t for _, t in per.values()])
        out.append(_from(f"{metric}.clustered", est, f"user-clustered over {est.n_clusters} user(s); {what}", stratum))
    return out


def _segment(row: UnitRow) -> str | None:
    if row.values.get(SEGMENT) != "yes":
        return None
    fact = row.facts.get(SEGMENT)
    return fact if isinstance(fact, str) and fact else None


def provenance_analysis(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Every provenance result from the trace rows (all segments)."""
    rows = obs.layer("trace")
    items = (SEGMENT, *COVERAGE_ITEMS.values(), INJECTION_FLAGGED)
    # One pass, keeping columns of what the rates need and not the rows: at 10x the default simulation the
    # 102k turns held as rows were this process's peak.
    clusters: list[str] = []
    segments: list[str | None] = []
    people: list[tuple[str | None, str | None]] = []
    values: dict[str, list[Value | None]] = {i: [] for i in items}
    bad_units: dict[str, list[tuple[str, float | str | None]]] = {EVIDENCE_COMPLETE: [], INJECTION_FLAGGED: []}
    for r in rows:
        clusters.append(_cluster(r))
        segments.append(_segment(r))
        people.append((r.conversation_id, r.user_id))
        for i in items:
            values[i].append(r.values.get(i))
        if r.values.get(EVIDENCE_COMPLETE) == "no":
            bad_units[EVIDENCE_COMPLETE].append((r.unit_id, r.facts.get(EVIDENCE_COMPLETE)))
        if r.values.get(INJECTION_FLAGGED) == "yes":
            bad_units[INJECTION_FLAGGED].append((r.unit_id, r.facts.get(INJECTION_FLAGGED)))

    out: list[Result] = []
    known = [k for k, s in enumerate(segments) if s is not None]
    out += rate_results("excluded_share", [(clusters[k], segments[k] != REAL_SEGMENT) for k in known],
                        what="turns outside the real segment")
    counts = Counter(segments[k] for k in known)
    for name in sorted(counts):
        out.append(_from(f"segment_share.{name}", proportion_ci(counts[name], len(known)), "wilson", "all"))
    real = [s == REAL_SEGMENT for s in segments]

    def checked(item: str) -> list[tuple[int, bool]]:
        return [(k, v == "yes") for k, v in enumerate(values[item]) if v in ("yes", "no")]

    for suffix, item in COVERAGE_ITEMS.items():
        ok_at = checked(item)
        what = f"turns whose {suffix.replace('_', ' ')} is complete"
        out += rate_results(f"coverage.{suffix}", [(clusters[k], ok) for k, ok in ok_at], what=what)
        out += rate_results(f"coverage.{suffix}", [(clusters[k], ok) for k, ok in ok_at if real[k]], what=what,
                            stratum=f"segment={REAL_SEGMENT}")

    for metric, item, bad_when, label in (
        ("incomplete_evidence", EVIDENCE_COMPLETE, False, "incomplete"),
        ("injection_flagged", INJECTION_FLAGGED, True, "flagged"),
    ):
        out += rate_results(metric, [(clusters[k], ok == bad_when) for k, ok in checked(item)],
                            what=f"{label} turns")
        for unit_id, fact in bad_units[item]:
            note = str(fact) if fact else f"see atomic datum {item}"
            out.append(_result(metric, label, n=1, note=note, unit_id=unit_id))

    clean = [people[k] for k, v in enumerate(values[INJECTION_FLAGGED]) if real[k] and v != "yes"]
    note = "real segment, no injection flag"
    out.append(_result("clean.turns", float(len(clean)), n=len(rows), note=note))
    out.append(_result("clean.sessions", float(len({c for c, _ in clean if c})), n=len(clean), note=note))
    out.append(_result("clean.users", float(len({u for _, u in clean if u})), n=len(clean), note=note))

    missing = Counter({i: sum(v == "uncollected" for v in values[i]) for i in items})
    detail = ", ".join(f"{i} {missing[i]}" for i in items if missing[i]) or "none"
    out.append(_result("uncollected", float(sum(missing.values())), n=len(rows),
                       note=f"left out of every rate: {detail}"))
    return out
