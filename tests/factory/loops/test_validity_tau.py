"""The audit's validity checks on the real tau-bench airline set, rules only (`tau_store`: the 128 gpt-4o
conversations ingested with the airline pack and run): every per-conversation flag against the task reward with
real `n` and user-clustered intervals, the same difference and interval the summary's associations give, an AUC
that is scikit-learn's on the same conversations, and `fails` exactly where a bad flag's interval points the wrong
way. `pytest -s` prints the table."""

from __future__ import annotations

from pathlib import Path

import pytest
from sklearn import metrics as sklearn_metrics

from agent_factory import open_project
from agent_factory.evaluators.audit.model import Criterion
from agent_factory.evaluators.findings import unit_outcomes
from agent_factory.factory.loops.audit.validity import Validity, validity
from agent_factory.factory.views.findings import read_associations, read_findings

REWARD = "task_reward"


def _f(x: float | None, sign: bool = False) -> str:
    return "    -" if x is None else (f"{x:+.2f}" if sign else f"{x:.3f}")


def _table(rows: list[Criterion]) -> list[str]:
    lines = [f"{'flag':44} {'meaning':11} {'outcome':18} {'n':>4} {'AUC':>5} {'interval':>13} {'diff':>5} "
             f"{'interval':>13}"]
    for c in rows:
        lines.append(f"{c.flag[:44]:44} {c.meaning:11} {c.outcome[:18]:18} {c.n:>4} {_f(c.auc)} "
                     f"[{_f(c.low)},{_f(c.high)}] {_f(c.difference, True)} "
                     f"[{_f(c.difference_low, True)},{_f(c.difference_high, True)}]{'  FAILS' if c.fails else ''}")
    return lines


@pytest.fixture(scope="module")
def tau_validity(tau_store: Path) -> tuple[Validity, list[str]]:
    with open_project(store=tau_store) as project:
        specs = project.flags
        found = validity(project.store(), specs)
    return found, [s.id for s in specs]


@pytest.mark.realdata
def test_every_per_conversation_flag_against_the_reward(tau_store: Path,
                                                        tau_validity: tuple[Validity, list[str]]) -> None:
    found, flag_ids = tau_validity
    rows = [c for c in found.criterion if c.outcome == REWARD]
    print("\n" + "\n".join(_table(list(found.criterion))))
    print("failing:", [(c.flag, c.outcome, c.auc, c.low, c.high, c.difference, c.difference_low)
                       for c in found.criterion if c.fails] or "none")
    print("notes:", *found.notes, sep="\n  ")
    print("discriminant:", found.discriminant.model_dump())
    assert [c.flag for c in rows if c.flag in flag_ids] == flag_ids  # every flag, in the suite's order
    # A per-unit score: defined only where every recovery event was collected (context repair needs a model).
    [friction] = [c for c in rows if c.flag == "trajectory.friction"]
    assert friction.n <= 128 and friction.difference is None
    rows = [c for c in rows if c.flag in flag_ids]
    with open_project(store=tau_store) as project:
        st = project.store()
        specs = project.flags
        findings = read_findings(st, specs, with_associations=False)
        conv = findings.at("conversation")
        reward = unit_outcomes([e for e in st.events() if e.is_outcome], findings.units,
                               level="conversation")[REWARD]
        assoc = {a.flag: a for a in read_associations(st, specs, findings.units, findings.rows)
                 if a.outcome == REWARD}
    assert len(reward) == 128
    by_flag: dict[str, dict[str, int]] = {}
    for r in conv:
        if r.value is not None and r.unit_id in reward:
            by_flag.setdefault(r.flag, {})[r.unit_id] = r.value
    for c in rows:
        values = by_flag.get(c.flag, {})
        assert c.n == len(values) <= 128, c.flag
        if c.auc is not None:
            ids = sorted(values)
            bad = [reward[u] < 1.0 for u in ids]
            assert c.auc == pytest.approx(sklearn_metrics.roc_auc_score(bad, [values[u] for u in ids])), c.flag
        if c.low is not None and c.high is not None and c.auc is not None:
            assert c.low <= c.auc <= c.high, c.flag
        a = assoc.get(c.flag)
        if a is not None:  # raised and clear on some conversation: the summary's own figure
            assert c.difference == pytest.approx(a.diff) and c.difference_low == a.low, c.flag
            assert c.difference_high == a.high, c.flag
        wrong = (c.difference_low is not None and c.difference_low > 0) or (c.high is not None and c.high < 0.5)
        assert c.fails == (c.meaning == "bad" and wrong), c.flag
    # Rule-collected flags are decided on every conversation; most carry both an interval and a difference.
    ruled = [c for c in rows if c.n == 128 and c.difference_low is not None]
    assert len(ruled) >= 3 and all(c.low is not None for c in ruled)


@pytest.mark.realdata
def test_next_layer_notes_snapshot_and_no_goodhart_without_history(tau_validity: tuple[Validity, list[str]]) -> None:
    found, _ = tau_validity
    # tau-bench's customers are simulated: nobody comes back, so redo and return cannot be compared by ending.
    assert any("redo and return by ending" in n and "observable" in n for n in found.notes)
    assert found.snapshot["execution/failure_rate"] is not None
    assert found.goodhart == ()  # one point of history: nothing to compare
    pairs = {(p.a, p.b) for p in found.discriminant.component_jaccard}
    assert ("execution", "conduct") in pairs


def test_goodhart_reads_the_stored_audits_oldest_first(tmp_path: Path) -> None:
    """Two stored audits and the current point: the execution failure rate fell at each step while S fell from
    the first audit to the second (a signal); from the second to now both improved (none)."""
    from datetime import UTC, datetime, timedelta

    from agent_factory.evaluators.audit.model import AuditReport
    from agent_factory.factory.loops.audit.validity import goodhart
    from agent_factory.factory.store import Store
    from agent_factory.factory.store.audit import record_audit

    start = datetime(2026, 1, 1, tzinfo=UTC)
    points = [("a1", {"execution/failure_rate": 0.10, "substance/S": 0.80}),
              ("a2", {"execution/failure_rate": 0.05, "substance/S": 0.70})]
    with Store(tmp_path / "s.duckdb") as st:
        # Stored newest first: the read orders them by when they finished.
        for k, (audit_id, snap) in reversed(list(enumerate(points))):
            at = start + timedelta(days=k)
            record_audit(st, AuditReport(audit_id=audit_id, started_at=at.isoformat(), seconds=1.0, model_calls=0,
                                         snapshot=snap), finished=at + timedelta(hours=1))
        signals = goodhart(st, {"execution/failure_rate": 0.04, "substance/S": 0.75}, label="a3")
    assert [(s.metric, s.next_layer, s.before, s.after) for s in signals] == [
        ("execution/failure_rate", "substance/S", "a1", "a2")]
    assert signals[0].metric_change == pytest.approx(0.05) and signals[0].next_change == pytest.approx(0.10)
