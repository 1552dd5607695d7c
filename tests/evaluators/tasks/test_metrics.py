"""Process metrics of a trial (`evaluators.tasks.metrics`) on hand-made call lists whose answers are counted by
hand, and the overlap against an enumeration of every one-to-one pairing of calls with steps over many random
runs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from agent_factory.evaluators.tasks.metrics import (
    Call,
    error_recovery,
    failed_calls,
    first_deviation,
    meets,
    overlap,
    recoveries,
    redundant_calls,
    step_pass_rate,
)
from agent_factory.evaluators.tasks.suite import ExpectedStep

COUNT = ExpectedStep(tool="query_sql", args_contain={"sql": ("orders", "2025-03")})
WRITE = ExpectedStep(tool="write_file", args_match={"path": r"^reports/q1\.md$"})
EXPECTED = (COUNT, WRITE)


def q(sql: str, ok: bool = True) -> Call:
    return Call(tool="query_sql", args={"sql": sql}, ok=ok)


def w(path: str, ok: bool = True) -> Call:
    return Call(tool="write_file", args={"path": path, "content": "x"}, ok=ok)


GOOD_Q = q("SELECT count(*) FROM ORDERS WHERE order_date LIKE '2025-03-%'")


def test_meets_checks_tool_texts_and_patterns() -> None:
    assert meets(GOOD_Q, COUNT)  # case-insensitive texts
    assert not meets(q("SELECT count(*) FROM orders"), COUNT)  # a text missing
    assert not meets(Call(tool="execute_sql", args=GOOD_Q.args, ok=True), COUNT)  # another tool
    assert meets(w("reports/q1.md"), WRITE)
    assert not meets(w("reports/q1.md.bak"), WRITE)
    assert not meets(Call(tool="write_file", args={}, ok=True), WRITE)  # the argument absent


def test_first_deviation() -> None:
    assert first_deviation([GOOD_Q, w("reports/q1.md")], EXPECTED) is None
    assert first_deviation([GOOD_Q, w("reports/q1.md"), q("SELECT 1")], EXPECTED) is None  # extra calls after
    assert first_deviation([GOOD_Q, w("other.md")], EXPECTED) == 2
    assert first_deviation([GOOD_Q], EXPECTED) == 2  # stopped before the second step
    assert first_deviation([], EXPECTED) == 1
    assert first_deviation([q("SELEC x", ok=False), GOOD_Q, w("reports/q1.md")], EXPECTED) == 1
    assert first_deviation([GOOD_Q], ()) is None


def test_step_pass_rate_in_order() -> None:
    assert step_pass_rate([GOOD_Q, w("reports/q1.md")], EXPECTED) == 1.0
    # An inserted failing call does not stop the steps being met in order.
    assert step_pass_rate([q("SELEC x", ok=False), GOOD_Q, w("reports/q1.md")], EXPECTED) == 1.0
    # Out of order: the write before the query meets only one of the two in order.
    assert step_pass_rate([w("reports/q1.md"), GOOD_Q], EXPECTED) == 0.5
    assert step_pass_rate([GOOD_Q], EXPECTED) == 0.5
    assert step_pass_rate([], EXPECTED) == 0.0
    assert step_pass_rate([GOOD_Q], ()) is None


def test_error_recovery_and_failures() -> None:
    calls = [q("SELEC x", ok=False), w("/abs", ok=False), GOOD_Q, q("bad", ok=False)]
    assert failed_calls(calls) == 3
    # Only the first query failure is followed by a success of query_sql; the write and the last query are not.
    assert recoveries(calls) == 1
    assert error_recovery(calls) == pytest.approx(1 / 3)
    assert error_recovery([GOOD_Q]) is None
    assert error_recovery([q("bad", ok=False)]) == 0.0


def test_redundant_calls() -> None:
    assert redundant_calls([GOOD_Q, GOOD_Q, GOOD_Q]) == 2
    assert redundant_calls([GOOD_Q, q("SELECT 1"), w("a"), w("b")]) == 0
    # The same call that failed and is repeated is redundant too; a different argument is not.
    assert redundant_calls([q("x", ok=False), q("x", ok=False), q("y")]) == 1
    assert redundant_calls([]) == 0


def test_overlap_counts_expected_steps_met_in_any_order() -> None:
    assert overlap([GOOD_Q, w("reports/q1.md")], EXPECTED) == 1.0
    # Out of order: step_pass_rate gives 0.5, overlap both steps.
    assert overlap([w("reports/q1.md"), GOOD_Q], EXPECTED) == 1.0
    assert overlap([GOOD_Q, GOOD_Q, GOOD_Q], EXPECTED) == 0.5  # a step met three times counts once
    assert overlap([q("SELECT 1"), w("other.md")], EXPECTED) == 0.0
    assert overlap([], EXPECTED) == 0.0
    assert overlap([GOOD_Q], ()) is None


def test_overlap_gives_each_call_to_one_step() -> None:
    broad = ExpectedStep(tool="query_sql", args_contain={"sql": ("orders",)})
    # One call meets both steps: it counts for one; a second call meeting only `broad` frees it for COUNT.
    assert overlap([GOOD_Q], (broad, COUNT)) == 0.5
    assert overlap([GOOD_Q, q("SELECT * FROM orders")], (COUNT, broad)) == 1.0
    # A greedy pairing in step order would give `broad` the only call that meets COUNT, and count 1 of 2.
    assert overlap([GOOD_Q, q("SELECT * FROM orders")], (broad, COUNT)) == 1.0


def _by_enumeration(hits: np.ndarray) -> float:
    """The largest number of steps met with each call used at most once, over every pairing, as a share."""
    calls, steps = hits.shape
    best = 0
    for choice in itertools.product(range(-1, calls), repeat=steps):
        used = [c for c in choice if c >= 0]
        if len(used) == len(set(used)):
            best = max(best, sum(bool(hits[c, s]) for s, c in enumerate(choice) if c >= 0))
    return best / steps


def test_overlap_equals_the_best_pairing_over_many_seeds() -> None:
    pool = [ExpectedStep(tool="query_sql", args_contain={"sql": (t,)}) for t in ("a", "b", "c", "d")]
    for seed in range(80):
        rng = np.random.default_rng(seed)
        expected = [pool[int(i)] for i in rng.integers(0, 4, size=int(rng.integers(1, 5)))]
        calls = [q(" ".join(sorted({"x", *("abcd"[int(j)] for j in rng.integers(0, 4, size=int(rng.integers(0, 3))))})))
                 for _ in range(int(rng.integers(0, 6)))]
        hits = np.array([[meets(c, s) for s in expected] for c in calls], dtype=bool).reshape(len(calls),
                                                                                              len(expected))
        assert overlap(calls, expected) == pytest.approx(_by_enumeration(hits)), seed
