"""The collector as a composition of tiers: the default cascade is RuleTier + ModelTier + JuryTier, a jury takes
a reducer, a tier outside the package follows the same protocol, and a second rater is a second collector over
a sample whose data carry its rater while the primary's keys do not move."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agent_factory.errors import SpecError
from agent_factory.evaluators.collect import (
    Cascade,
    DatumCache,
    JuryTier,
    ModelConfig,
    ModelSpec,
    ModelTier,
    RetryPolicy,
    RuleTier,
    audit_rater,
    unanimous,
)
from agent_factory.evaluators.collect.model_tiers import model_datum
from agent_factory.evaluators.collect.tiers import Decisions, KeyFamily, Pending, TierRun
from agent_factory.evaluators.core import AtomicDatum, DataDefinition
from agent_factory.evaluators.core.model import Tier, Value
from tests.evaluators.test_collect_support import (
    ANSWERS,
    CONSISTENT,
    DEFINITIONS,
    MODEL_ITEMS,
    PACK,
    RULE_ITEM,
    SPECIFIC,
    answer,
    collect_units,
    make_turn,
    scripted,
)

FAST = RetryPolicy(attempts=2, initial_wait_s=0, max_wait_s=0)
MODEL_DEFINITIONS = tuple(d for d in DEFINITIONS if d.id in MODEL_ITEMS)


def spec(value: str, confidence: float, name: str, family: str, calls: list[str] | None = None) -> ModelSpec:
    return ModelSpec(model=scripted(lambda i, p: answer(value, confidence, "", name), name=name, calls=calls),
                     family=family)


def unsure_on_specific(item: str, prompt: str) -> dict[str, Any]:
    return answer("yes", 0.3 if item == SPECIFIC.id else 0.95, "", "small")


SMALL = ModelSpec(model=scripted(unsure_on_specific, name="small"), family="alpha")
JURY = (spec("no", 0.8, "judge-a", "beta"), spec("no", 0.8, "judge-b", "gamma"))


def dumped(data: list[list[AtomicDatum]]) -> list[list[dict[str, Any]]]:
    return [[d.model_dump(mode="json") for d in unit] for unit in data]


def test_an_explicit_composition_is_the_configured_cascade() -> None:
    turns = [make_turn(i) for i in range(3)]
    configured = Cascade(ModelConfig(small=SMALL, jury=JURY, retry=FAST))
    composed = Cascade(ModelConfig(retry=FAST), tiers=[RuleTier(), ModelTier(SMALL), JuryTier(JURY)])
    expected = dumped(collect_units(configured, turns))
    assert dumped(collect_units(composed, turns)) == expected
    assert composed.model_calls == configured.model_calls == 9  # per unit: one small call, one per juror
    assert {d["collector"]["tier"] for unit in expected for d in unit} == {"rule", "small_model", "jury"}
    assert all(d["rater"] == "primary" for unit in expected for d in unit)
    assert all(composed.definition_version(d, PACK) == configured.definition_version(d, PACK)
               for d in DEFINITIONS)


def test_a_second_rater_is_a_second_collector_over_a_sample(tmp_path: Path) -> None:
    turns = [make_turn(i) for i in range(6)]
    sample = turns[::2]
    with DatumCache(tmp_path / "with-audit") as cache:
        primary = Cascade(ModelConfig(small=SMALL, jury=JURY, retry=FAST), cache=cache)
        first = collect_units(primary, turns)
        other_calls: list[str] = []
        other = spec("no", 0.9, "other", "delta", other_calls)
        audit = Cascade(tiers=[ModelTier(other)], rater=audit_rater(other), cache=cache)
        second = collect_units(audit, sample, MODEL_DEFINITIONS)
        assert len(other_calls) == len(sample) == audit.model_calls  # one call per sampled unit
        for turn, unit in zip(sample, second, strict=True):
            assert [d.item for d in unit] == list(MODEL_ITEMS)
            for d in unit:
                assert (d.unit_id, d.rater, d.value) == (turn.id, "audit:function:other", "no")
                assert (d.collector.tier, d.collector.name, d.collector.family) == ("small_model", "function:other",
                                                                                    "delta")
        primary_keys = {d.key for unit in first for d in unit}
        assert primary_keys.isdisjoint(d.key for unit in second for d in unit)
        # the primary, rerun over the cache the audit wrote into: every model answer reused (rules recomputed),
        # nothing asked, same data
        rerun = Cascade(ModelConfig(small=SMALL, jury=JURY, retry=FAST), cache=cache)
        assert collect_units(rerun, turns) == first and rerun.model_calls == 0 and rerun.reused == 18
    # and a primary that never met an audit has the same keys
    with DatumCache(tmp_path / "alone") as cache:
        alone = collect_units(Cascade(ModelConfig(small=SMALL, jury=JURY, retry=FAST), cache=cache), turns)
    assert alone == first and all(d.rater == "primary" for unit in first for d in unit)


def test_an_audit_with_the_primary_model_reuses_answers_never_data(tmp_path: Path) -> None:
    turns = [make_turn(i) for i in range(3)]
    with DatumCache(tmp_path / "c") as cache:
        primary = Cascade(ModelConfig(small=SMALL, retry=FAST), cache=cache)
        first = collect_units(primary, turns, MODEL_DEFINITIONS)
        audit = Cascade(tiers=[ModelTier(SMALL)], rater="audit:again", cache=cache)
        second = collect_units(audit, turns, MODEL_DEFINITIONS)
        # the same model on the same prompt: its stored answer, so no call; but the data are the audit's own
        assert audit.model_calls == 0 and audit.reused == 0 and audit.collected == {"small_model": 9}
        for a, b in zip(first, second, strict=True):
            assert [x.value for x in a] == [x.value for x in b]
            assert all(x.rater == "primary" for x in a) and all(x.rater == "audit:again" for x in b)
            assert all(x.key != y.key for x, y in zip(a, b, strict=True))


def test_a_rater_label_is_primary_or_audit() -> None:
    with pytest.raises(SpecError, match="primary` or `audit:<model-id>"):
        Cascade(rater="second")
    with pytest.raises(SpecError, match="at most one tier of each kind; got several: small_model"):
        Cascade(tiers=[ModelTier(SMALL), ModelTier(JURY[0])])


def test_the_jury_reducer_decides_and_enters_the_key() -> None:
    jury = (spec("yes", 0.8, "j1", "f1"), spec("yes", 0.8, "j2", "f2"), spec("no", 0.8, "j3", "f3"))
    turn = make_turn(0)
    by_majority = collect_units(Cascade(tiers=[JuryTier(jury)]), [turn], MODEL_DEFINITIONS)[0]
    by_all = collect_units(Cascade(tiers=[JuryTier(jury, reducer="unanimous")]), [turn], MODEL_DEFINITIONS)[0]
    assert all(d.value == "yes" and (d.reason or "").startswith("jury 2/3") for d in by_majority)
    assert all(d.value == "uncollected" and (d.reason or "").startswith("jury split") for d in by_all)
    assert all(a.key != b.key for a, b in zip(by_majority, by_all, strict=True))
    assert unanimous(["yes", "yes"], 3) is None  # a failed juror's seat blocks unanimity

    def at_least_one_no(votes: Sequence[Value], seats: int) -> Value | None:
        return "no" if "no" in votes else ("yes" if len(votes) == seats else None)

    custom = collect_units(Cascade(tiers=[JuryTier(jury, reducer=at_least_one_no)]), [turn], MODEL_DEFINITIONS)[0]
    assert all(d.value == "no" and (d.reason or "").startswith("jury 1/3") for d in custom)
    with pytest.raises(SpecError, match="unknown jury reducer 'mean'"):
        JuryTier(jury, reducer="mean")


class OnlySpecific:
    """A tier from outside the package (as a human tier will be): decides one item, abstains on the rest."""

    kind: Tier = "small_model"
    family: KeyFamily = "model"

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def accepts(self, d: DataDefinition) -> bool:
        return "small_model" in d.tiers

    async def decide(self, run: TierRun, items: Sequence[Pending]) -> Decisions:
        self.seen.append([p.definition.id for p in items])
        return {p.index: model_datum(run, p, value="yes", tier="small_model", reason="looked")
                for p in items if p.definition.id == SPECIFIC.id}


def test_a_tier_that_abstains_hands_the_items_to_the_next() -> None:
    juror_calls: list[str] = []
    jury = (spec("no", 0.8, "ja", "fa", juror_calls), spec("no", 0.8, "jb", "fb", juror_calls))
    outside = OnlySpecific()
    (data,) = collect_units(Cascade(tiers=[RuleTier(), outside, JuryTier(jury)]), [make_turn(1)])
    got = {d.item: d for d in data}
    assert outside.seen == [[ANSWERS.id, SPECIFIC.id, CONSISTENT.id]]
    assert (got[SPECIFIC.id].value, got[SPECIFIC.id].reason) == ("yes", "looked")
    assert got[RULE_ITEM.id].collector.tier == "rule"
    assert {got[i].collector.tier for i in (ANSWERS.id, CONSISTENT.id)} == {"jury"}
    assert len(juror_calls) == 2 and all(SPECIFIC.id not in c and ANSWERS.id in c for c in juror_calls)
