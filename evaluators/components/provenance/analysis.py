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
from agent_factory.evaluators.core.model import Result
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


def _checked(rows: Sequence[UnitRow], item: str) -> list[tuple[UnitRow, bool]]:
    return [(r, r.values[item] == "yes") for r in rows if r.values.get(item) in ("yes", "no")]


def provenance_analysis(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Every provenance result from the trace rows (all segments)."""
    rows = obs.layer("trace")
    out: list[Result] = []
    segs = [(r, _segment(r)) for r in rows]
    known = [(r, s) for r, s in segs if s is not None]
    out += rate_results("excluded_share", [(_cluster(r), s != REAL_SEGMENT) for r, s in known],
                        what="turns outside the real segment")
    counts = Counter(s for _, s in known)
    for name in sorted(counts):
        out.append(_from(f"segment_share.{name}", proportion_ci(counts[name], len(known)), "wilson", "all"))
    real_ids = {r.unit_id for r, s in known if s == REAL_SEGMENT}

    for suffix, item in COVERAGE_ITEMS.items():
        checked = _checked(rows, item)
        what = f"turns whose {suffix.replace('_', ' ')} is complete"
        out += rate_results(f"coverage.{suffix}", [(_cluster(r), ok) for r, ok in checked], what=what)
        real = [(_cluster(r), ok) for r, ok in checked if r.unit_id in real_ids]
        out += rate_results(f"coverage.{suffix}", real, what=what, stratum=f"segment={REAL_SEGMENT}")

    for metric, item, bad_when, label in (
        ("incomplete_evidence", EVIDENCE_COMPLETE, False, "incomplete"),
        ("injection_flagged", INJECTION_FLAGGED, True, "flagged"),
    ):
        checked = _checked(rows, item)
        out += rate_results(metric, [(_cluster(r), ok == bad_when) for r, ok in checked], what=f"{label} turns")
        for r, ok in checked:
            if ok == bad_when:
                fact = r.facts.get(item)
                note = str(fact) if fact else f"see atomic datum {item}"
                out.append(_result(metric, label, n=1, note=note, unit_id=r.unit_id))

    flagged = {r.unit_id for r, ok in _checked(rows, INJECTION_FLAGGED) if ok}
    clean = [r for r in rows if r.unit_id in real_ids and r.unit_id not in flagged]
    note = "real segment, no injection flag"
    out.append(_result("clean.turns", float(len(clean)), n=len(rows), note=note))
    out.append(_result("clean.sessions", float(len({r.conversation_id for r in clean if r.conversation_id})),
                       n=len(clean), note=note))
    out.append(_result("clean.users", float(len({r.user_id for r in clean if r.user_id})), n=len(clean), note=note))

    items = (SEGMENT, *COVERAGE_ITEMS.values(), INJECTION_FLAGGED)
    missing = Counter(i for r in rows for i in items if r.values.get(i) == "uncollected")
    detail = ", ".join(f"{i} {missing[i]}" for i in items if missing[i]) or "none"
    out.append(_result("uncollected", float(sum(missing.values())), n=len(rows),
                       note=f"left out of every rate: {detail}"))
    return out
