"""Findings become fixes (`evaluators/gate/fixes.py`): new fixes from failed metrics and broken invariants, their
one-line finding and acceptance, stable ids, and the re-check of every existing fix on a later run."""

from __future__ import annotations

from agent_factory.digest import stable_id
from agent_factory.evaluators.gate.fixes import fix_id, propose_fixes
from agent_factory.evaluators.gate.model import ComponentVerdict, Fix, Incident, MetricVerdict

CLAUSE = "no_unprompted_disclosure"
VIOLATION = f"violation_rate.{CLAUSE}"


def _mv(metric: str = "failure_rate", *, component: str = "execution", label: str = "delivery failure",
        baseline: float | None = 0.035, candidate: float | None = 0.081, delta: float | None = 4.6,
        z: float | None = 6.104, threshold: float | None = 2.873, verdict: str | None = "fail", unit: str = "pp",
        worse: str = "higher", rows_candidate: int = 900, bound: float | None = None,
        reason: str | None = None) -> MetricVerdict:
    return MetricVerdict.model_validate(dict(
        component=component, metric=metric, label=label, layer="trace", worse=worse, unit=unit, baseline=baseline,
        candidate=candidate, delta=delta, statistic=z, per_turn_statistic=None if z is None else 2.5 * z,
        threshold=threshold, calibrated=True, bound=bound, verdict=verdict, reason=reason, users_baseline=150,
        users_candidate=150, rows_baseline=910, rows_candidate=rows_candidate))


def _incident(unit: str, *, clause: str = CLAUSE) -> Incident:
    return Incident(id=stable_id("a", "b", clause, unit, prefix="inc-"), component="conduct", clause=clause,
                    metric=f"violation_rate.{clause}", unit_id=unit, evidence="answer: ... Acme Corp ...",
                    candidate="b.duckdb", opened_at="2026-12-01T10:00:00+00:00")


def _execution(*metrics: MetricVerdict, verdict: str | None = None) -> ComponentVerdict:
    worst = verdict or ("fail" if any(m.verdict == "fail" for m in metrics) else "pass")
    return ComponentVerdict.model_validate(dict(component="execution", verdict=worst, metrics=metrics))


def _conduct(*incidents: Incident, rows_candidate: int = 400, violation: float = 0.0) -> ComponentVerdict:
    m = _mv(VIOLATION, component="conduct", label="violations", baseline=0.0, candidate=violation,
            delta=100 * violation, z=None, threshold=2.9, verdict="fail" if violation > 0 else "pass",
            rows_candidate=rows_candidate)
    return ComponentVerdict(component="conduct", verdict="incident" if incidents else "pass", metrics=(m,),
                            incidents=incidents)


def test_a_failed_metric_becomes_a_fix_bound_to_its_acceptance_metric() -> None:
    latency = _mv("latency_gm_ratio", label="geometric-mean latency / the pack's baseline", baseline=1.02,
                  candidate=1.05, delta=2.9, z=1.1, verdict="pass", unit="%")
    fixes = propose_fixes([_execution(_mv(), latency)], existing=(), candidate="b.duckdb", at="2026-12-02T09:00:00")
    assert len(fixes) == 1  # the passing latency proposes nothing
    (f,) = fixes
    assert f.finding == "delivery failure 3.5% -> 8.1% (+4.6 pp), z 6.10 > threshold 2.87"
    assert f.acceptance == "failure_rate not significantly above 3.5% (the baseline's) on the next candidate"
    assert (f.kind, f.component, f.metric, f.target) == ("metric", "execution", "failure_rate", 0.035)
    assert (f.status, f.checks, f.opened_by, f.opened_at) == ("open", (), "b.duckdb", "2026-12-02T09:00:00")
    assert f.id == stable_id("execution", "failure_rate", prefix="fix-") == fix_id("execution", "failure_rate")


def test_findings_read_in_the_metrics_own_unit_and_direction() -> None:
    latency = _mv("latency_gm_ratio", label="geometric-mean latency / the pack's baseline", baseline=1.02,
                  candidate=1.489, delta=46.0, z=5.3, threshold=2.7, unit="%")
    depth = _mv("depth", label="mean depth", baseline=4.0, candidate=3.25, delta=-0.75, z=3.2, threshold=2.8,
                unit="abs", worse="lower")
    rare = _mv("rare_rate", label="rare failure", baseline=0.0004, candidate=0.006, delta=0.56, z=3.3)
    got = {f.metric: f for f in propose_fixes([_execution(latency, depth, rare)], existing=(), candidate="b",
                                              at="t1")}
    assert got["latency_gm_ratio"].finding == ("geometric-mean latency / the pack's baseline 1.02 -> 1.49 (+46%), "
                                               "z 5.30 > threshold 2.70")
    assert got["depth"].finding == "mean depth 4 -> 3.25 (-0.75), z 3.20 > threshold 2.80"
    assert got["depth"].acceptance == "depth not significantly below 4 (the baseline's) on the next candidate"
    assert got["rare_rate"].finding == "rare failure 0.04% -> 0.60% (+0.6 pp), z 3.30 > threshold 2.87"


def test_a_sequential_failure_names_its_bound() -> None:
    m = _mv(z=3.0, threshold=None, bound=1.2)  # in the metric's unit: points
    (f,) = propose_fixes([_execution(m)], existing=(), candidate="b", at="t1")
    assert f.finding == ("delivery failure 3.5% -> 8.1% (+4.6 pp), "
                         "always-valid bound of the worse change +1.2 pp > 0")


def test_an_incident_is_one_fix_per_clause_not_per_unit_and_takes_precedence() -> None:
    incidents = [_incident(u) for u in ("u4/t1", "u1/t2", "u9/t0", "u1/t2", "u2/t5")]
    other = [_incident("u7/t3", clause="no_pricing_promise")]
    conduct = _conduct(*incidents, *other, violation=0.01)  # the clause's own metric fails too
    fixes = propose_fixes([conduct], existing=(), candidate="b.duckdb", at="t1")
    assert [f.metric for f in fixes] == [VIOLATION, "violation_rate.no_pricing_promise"]
    f = fixes[0]
    assert f.kind == "incident" and f.target == 0.0 and f.status == "open"
    assert f.finding == f"invariant {CLAUSE} broken in 4 unit(s): u1/t2, u2/t5, u4/t1 and 1 more"
    assert f.acceptance == f"{VIOLATION} = 0 (zero tolerance)"
    assert f.id == fix_id("conduct", VIOLATION)
    assert fixes[1].finding == "invariant no_pricing_promise broken in 1 unit(s): u7/t3"


def _fix(**over: object) -> Fix:
    (f,) = propose_fixes([_execution(_mv())], existing=(), candidate="b1", at="t1")
    return f.model_copy(update=over)


def test_an_open_fix_is_met_when_its_metric_passes_and_reopens_when_it_fails_again() -> None:
    opened = _fix()
    passing = _mv(candidate=0.036, delta=0.1, z=0.2, verdict="pass")
    (met,) = propose_fixes([_execution(passing)], existing=[opened], candidate="b2", at="t2")
    assert met.id == opened.id and met.status == "met"
    assert [(c.candidate, c.at, c.status, c.value) for c in met.checks] == [("b2", "t2", "met", 0.036)]
    # The failure is back: the same fix (not a new one) reopens, its history kept.
    again = propose_fixes([_execution(_mv(candidate=0.07, verdict="fail"))], existing=[met], candidate="b3", at="t3")
    assert len(again) == 1 and again[0].id == opened.id and again[0].status == "open"
    assert [c.status for c in again[0].checks] == ["met", "not_met"]
    assert again[0].finding == opened.finding  # the finding stays what opened it


def test_an_undecided_or_missing_metric_leaves_the_fix_as_it_stood() -> None:
    met = _fix(status="met")
    undecided = _mv(verdict=None, z=None, candidate=None, delta=None, reason="the candidate has 1 user(s) with data")
    for components in ([_execution(undecided, verdict="pass")], [], [ComponentVerdict(component="execution",
                                                                                      verdict=None)]):
        (f,) = propose_fixes(components, existing=[met], candidate="b2", at="t2")
        assert f.status == "met" and [c.status for c in f.checks] == ["undecided"] and f.checks[0].value is None
    (f,) = propose_fixes([_execution(undecided)], existing=[_fix()], candidate="b2", at="t2")
    assert f.status == "open"


def test_an_incident_fix_is_met_only_when_its_clause_was_tested_and_not_broken() -> None:
    (opened,) = propose_fixes([_conduct(_incident("u1/t1"))], existing=(), candidate="b1", at="t1")
    (clean,) = propose_fixes([_conduct(rows_candidate=380)], existing=[opened], candidate="b2", at="t2")
    assert clean.status == "met" and clean.checks[-1].status == "met" and clean.checks[-1].value == 0.0
    (untested,) = propose_fixes([_conduct(rows_candidate=0)], existing=[opened], candidate="b2", at="t2")
    assert untested.status == "open" and untested.checks[-1].status == "undecided"
    (broken,) = propose_fixes([_conduct(_incident("u3/t2"))], existing=[clean], candidate="b3", at="t3")
    assert broken.status == "open" and [c.status for c in broken.checks] == ["met", "not_met"]


def test_every_existing_fix_is_returned_rechecked_and_new_ones_follow() -> None:
    old = [_fix(), propose_fixes([_conduct(_incident("u1/t1"))], existing=(), candidate="b1", at="t1")[0]]
    depth = _mv("depth", label="mean depth", baseline=4.0, candidate=3.0, delta=-1.0, z=4.0, unit="abs",
                worse="lower")
    got = propose_fixes([_execution(_mv(), depth), _conduct()], existing=old, candidate="b2", at="t2")
    assert [f.id for f in got] == [old[0].id, old[1].id, fix_id("execution", "depth")]
    assert [f.checks[-1].status for f in got[:2]] == ["not_met", "met"] and got[2].checks == ()
    ids = {fix_id(c, m) for c in ("execution", "conduct") for m in ("failure_rate", VIOLATION, "depth")}
    assert len(ids) == 6
