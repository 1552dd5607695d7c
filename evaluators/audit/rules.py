"""Rules against models (issue 33, point 5; docs/method.md section 6): for a rule-collected item, the suite's
rule (rater `primary`) and a model rater collect the same item on the audit's sample; the rule's precision and
recall against the model, with user-bootstrap intervals, decide whether a model must collect the item instead.

The decision (`RuleCheck.collect_by_model`): the rule's recall is below `MIN_RULE_RECALL` either clearly (the
upper end of its 95% interval is below it, whatever the number of detections) or on enough evidence (the point
recall is below it and the model made at least `MIN_REFERENCE_DETECTIONS` detections). With fewer detections
and an interval reaching the line, nothing is decided and the note says so: like admission, a point decision
on enough data, but a clear interval decides on less.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from agent_factory.evaluators.audit.agreement import MISSING_VALUE
from agent_factory.evaluators.audit.model import Rating, RuleCheck
from agent_factory.evaluators.stats.detection import detection_rates

VERSION = "1"

MIN_RULE_RECALL = 0.5
"""Below this recall the rule misses more occurrences than it finds, so the item's rate describes the rule more
than the agent: a model should collect it. (The study's execution rule, recall 0.33, and replay rule, 0.46,
fell under it; both had high precision, which is why precision alone does not decide.)"""

MIN_REFERENCE_DETECTIONS = 20
"""Model detections needed before a point recall below the line decides: with fewer, one user's units move the
recall by tens of points (a recall over 20 detections has a standard error near 0.11 at 0.5)."""

APPLICABLE = ("yes", "no")
"""The values compared: a unit counts when both raters found the item applicable."""


def _decide(n_reference: int, recall: float | None, high: float | None) -> tuple[bool, str | None]:
    if recall is None:
        return False, "the model found no occurrence: recall undefined, nothing decided"
    if high is not None and high < MIN_RULE_RECALL:
        return True, f"recall's interval lies below {MIN_RULE_RECALL} (upper end {high:.2f})"
    if recall < MIN_RULE_RECALL:
        if n_reference >= MIN_REFERENCE_DETECTIONS:
            return True, f"recall {recall:.2f} < {MIN_RULE_RECALL} on {n_reference} model detections"
        return False, (
            f"recall {recall:.2f} < {MIN_RULE_RECALL} on only {n_reference} model detections "
            f"(< {MIN_REFERENCE_DETECTIONS}) and its interval reaches the line: not decided"
        )
    return False, None


def rule_check(
    ratings: Sequence[Rating],
    item: str,
    reference: str,
    *,
    rule_rater: str = "primary",
    positive: str = "yes",
    seed: int = 0,
    n_boot: int = 1000,
) -> RuleCheck:
    """The rule's precision and recall on `item` against `reference` on the units both found applicable."""
    mine: dict[str, Rating] = {}
    theirs: dict[str, Rating] = {}
    for r in ratings:
        if r.item != item or r.value == MISSING_VALUE or r.rater not in (rule_rater, reference):
            continue
        side = mine if r.rater == rule_rater else theirs
        if r.unit_id in side:
            raise ValueError(f"rater {r.rater!r} rated item {item!r} on unit {r.unit_id!r} more than once")
        side[r.unit_id] = r
    units = sorted(u for u in mine if u in theirs and mine[u].value in APPLICABLE and theirs[u].value in APPLICABLE)
    found = detection_rates(
        [mine[u].value == positive for u in units], [theirs[u].value == positive for u in units],
        [mine[u].user for u in units], seed=seed, n_boot=n_boot,
    )
    decided, why = _decide(found.reference, found.recall, found.recall_high)
    note = "; ".join(x for x in (found.note, why) if x) or None
    return RuleCheck(
        item=item, rater=reference, positive=positive, n=found.n, precision=found.precision,
        precision_low=found.precision_low, precision_high=found.precision_high, recall=found.recall,
        recall_low=found.recall_low, recall_high=found.recall_high, collect_by_model=decided, note=note,
    )


def rule_checks(
    ratings: Sequence[Rating],
    rule_items: Collection[str],
    *,
    rule_rater: str = "primary",
    references: Collection[str] | None = None,
    seed: int = 0,
    n_boot: int = 1000,
) -> list[RuleCheck]:
    """`rule_check` of every rule-collected item against every reference rater that rated it (by default the
    model raters, `audit:*`), sorted by item and rater."""
    wanted = set(rule_items)
    pairs = sorted({
        (r.item, r.rater) for r in ratings
        if r.item in wanted and r.rater != rule_rater
        and (r.rater in references if references is not None else r.rater.startswith("audit:"))
    })
    by_item: dict[str, list[Rating]] = {}
    for r in ratings:
        if r.item in wanted:
            by_item.setdefault(r.item, []).append(r)
    return [
        rule_check(by_item[item], item, rater, rule_rater=rule_rater, seed=seed, n_boot=n_boot)
        for item, rater in pairs
    ]
