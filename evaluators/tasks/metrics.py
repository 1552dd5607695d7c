"""Process metrics of one task trial, purely, from the tool calls it made (issue 35).

A trial's calls are compared with the task's expected steps (`ExpectedStep`: a tool and constraints on its
arguments): where the run first left them (`first_deviation`), and what share of them it met in order
(`step_pass_rate`), and what share of them it met in any order (`overlap`). Two more measures need only the calls:
error recovery (a failed call of a tool later followed by a successful call of the same tool) and redundant calls
(a call identical to an earlier one). The runner (`factory/tasks/runner.py`) records the calls; nothing here does
I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from agent_factory.evaluators.tasks.suite import ExpectedStep
from agent_factory.frozen import Frozen


class Call(Frozen):
    """One tool call as the metrics see it: the tool, its arguments, whether it succeeded."""

    tool: str
    args: dict[str, str]
    ok: bool


def meets(call: Call, step: ExpectedStep) -> bool:
    """Whether a call is the expected step: the same tool, every `args_contain` text in its argument
    (case-insensitive), every `args_match` pattern found in its argument (case-insensitive)."""
    if call.tool != step.tool:
        return False
    for name, texts in step.args_contain.items():
        value = call.args.get(name, "").lower()
        if not all(text.lower() in value for text in texts):
            return False
    return all(re.search(pattern, call.args.get(name, ""), re.IGNORECASE) is not None
               for name, pattern in step.args_match.items())


def first_deviation(calls: Sequence[Call], expected: Sequence[ExpectedStep]) -> int | None:
    """The first step index (from 1) whose call does not meet the expected step at that position (a missing call
    included); None when every expected step is met in place, or none are expected. Calls after the expected
    steps are not deviations."""
    for i, step in enumerate(expected):
        if i >= len(calls) or not meets(calls[i], step):
            return i + 1
    return None


def step_pass_rate(calls: Sequence[Call], expected: Sequence[ExpectedStep]) -> float | None:
    """The share of expected steps met in order (each by a later call than the one before it, other calls in
    between allowed); None when none are expected."""
    if not expected:
        return None
    met, position = 0, 0
    for step in expected:
        hit = next((i for i in range(position, len(calls)) if meets(calls[i], step)), None)
        if hit is not None:
            met, position = met + 1, hit + 1
    return met / len(expected)


def overlap(calls: Sequence[Call], expected: Sequence[ExpectedStep]) -> float | None:
    """The share of expected steps met anywhere in the run, in any order, each by a call of its own; None when
    none are expected.

    Seed 000 calls the expected steps a reference path the agent need not follow in order, to be used for a step
    *overlap* analysis; seed 003 scores a run's actions as |expected & actual| / |expected|. So order is left to
    `step_pass_rate` and `first_deviation`, and this is the order-free share: a maximum matching of calls to the
    steps they meet (one call meets at most one step, so a call cannot count twice), as a
    maximum-weight assignment on the call x step "meets" matrix.
    """
    if not expected:
        return None
    if not calls:
        return 0.0
    hits = np.array([[meets(c, step) for step in expected] for c in calls], dtype=float)
    rows, cols = linear_sum_assignment(hits, maximize=True)
    return float(hits[rows, cols].sum()) / len(expected)


def failed_calls(calls: Sequence[Call]) -> int:
    """How many calls failed."""
    return sum(not c.ok for c in calls)


def recoveries(calls: Sequence[Call]) -> int:
    """Failed calls followed, later, by a successful call of the same tool: each such failure counts once."""
    return sum(1 for i, c in enumerate(calls)
               if not c.ok and any(later.ok and later.tool == c.tool for later in calls[i + 1:]))


def error_recovery(calls: Sequence[Call]) -> float | None:
    """The share of failed calls recovered from (`recoveries`); None when no call failed (nothing to recover)."""
    failed = failed_calls(calls)
    return None if failed == 0 else recoveries(calls) / failed


def redundant_calls(calls: Sequence[Call]) -> int:
    """Calls identical (tool and arguments) to an earlier call."""
    seen: set[str] = set()
    count = 0
    for c in calls:
        key = json.dumps([c.tool, c.args], sort_keys=True)
        count += key in seen
        seen.add(key)
    return count


__all__ = ["Call", "error_recovery", "failed_calls", "first_deviation", "meets", "overlap", "recoveries",
           "redundant_calls", "step_pass_rate"]
