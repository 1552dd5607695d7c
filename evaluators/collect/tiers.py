"""The collector's tiers: one small protocol, and the rule tier.

A tier takes the items of one unit that are still undecided and returns, for each item it handles, either a
datum (it decided) or the item again with what it learned (it abstained but has an opinion for the next tier:
a small model's unsure answer and what it cost); items it leaves out it abstains on without a word. A
collector is a composition of tiers (`Cascade(tiers=[RuleTier(), ModelTier(small), JuryTier(jury)])`), as
inspect_ai composes scorers (`multi_scorer(scorers, reducer)`): a second rater is a second composition over a
sample, not a special case, and a human tier is one more implementation of the protocol.

A tier's `family` says what its data are keyed by. `model` data carry k = hash(v || hash(pi(x))) over the
projected evidence and the models (keys.py), looked up in the cache once before the family's first tier, so
tiers of one family share one key. `rule` data carry no key and are never cached: a rule is cheaper to
recompute than to look up, and its data live in the store with their definition's version.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agent_factory.adapters.model import EvidencePointer
from agent_factory.evaluators.collect.keys import CollectorKeys
from agent_factory.evaluators.collect.project import ProjectedEvidence
from agent_factory.evaluators.collect.reasons import RULE_ABSTAINED, RULE_ERROR
from agent_factory.evaluators.collect.schema import ItemAnswer
from agent_factory.evaluators.core.columns import VALUES, DataColumns, UnitInput, fact_value
from agent_factory.evaluators.core.model import (
    PRIMARY_RATER,
    AtomicDatum,
    CollectorIdentity,
    DataDefinition,
    Layer,
    Tier,
    Value,
)
from agent_factory.evaluators.core.registry import EngagementView, RuleContext, rule_outcomes
from agent_factory.knowledge_packs import KnowledgePack

if TYPE_CHECKING:  # caller.py imports this module (Pending, UnitJob); tiers only name its type
    from agent_factory.evaluators.collect.caller import ModelCaller

KeyFamily = Literal["rule", "model"]
"""What a tier's data are keyed by: `rule` (no key, never cached) or `model` (keys.py: `model_key`)."""


# The records below are frozen dataclasses, not pydantic models: one is built per item of every unit on the
# rules-only hot path, and a unit is whatever the adapters and views give (a Turn, a SpanView, ...).


@dataclass(frozen=True)
class UnitJob:
    """One unit being collected: what every tier may read."""

    unit_id: str
    """The span, turn, conversation or engagement id."""
    layer: Layer
    """Its layer (every definition collected on it has this layer)."""
    unit: Any
    """The unit itself, as rules and the projection read it."""
    pack: KnowledgePack
    """The knowledge pack the rules consult."""
    injection_ranges: Sequence[EvidencePointer] = ()
    """Text flagged by provenance as addressed to an evaluator: marked as such in the prompts."""
    context: EngagementView | None = None
    """The user's window, for rules (Results) that judge a session by what followed it."""


@dataclass(frozen=True)
class Opinion:
    """What an abstaining tier said about an item, for the tiers after it (and for the datum's reason)."""

    label: str
    """Who said it, as the reason shows it: `small openai/gpt-4o-mini`."""
    answer: ItemAnswer
    """Its answer (value and confidence enter the next tier's reason)."""


@dataclass(frozen=True)
class Pending:
    """One undecided item of the unit: its definition, its key in the current family, and what it carries."""

    index: int
    """Position of the definition in the collect call (data come back in that order)."""
    definition: DataDefinition
    key: str = ""
    """Cache key of the current family ('' before a model family is entered; rule data have none)."""
    evidence: ProjectedEvidence | None = None
    """The projected evidence (model family only)."""
    opinions: tuple[Opinion, ...] = ()
    """Earlier tiers' answers that were not decisive (a small model's unsure answer)."""
    tokens: int = 0
    """Tokens already spent on this item by earlier tiers (its share of their calls)."""
    cost_usd: float = 0.0
    """Their cost."""


Decisions = Mapping[int, "AtomicDatum | Pending"]
"""A tier's answer by item index: a datum decides; a `Pending` abstains and hands its opinion on."""


@dataclass(frozen=True)
class TierRun:
    """What a tier gets besides the items: the unit, the collector's keys and model caller, and its rater."""

    job: UnitJob
    """The unit."""
    keys: CollectorKeys
    """The collector's identities and cache keys."""
    caller: ModelCaller
    """The collector's one way to call a model (shared budget, bound and counters)."""
    rater: str
    """The label every datum of this collector carries."""
    onward: Callable[[DataDefinition], bool]
    """Whether a later tier of this family would take the item (so abstaining on it is not the end)."""

    def datum(self, p: Pending, **fields: Any) -> AtomicDatum:
        """A datum about `p` on this unit, labelled with this collector's rater."""
        return unit_datum(self.job, self.rater, p, **fields)


def unit_datum(job: UnitJob, rater: str, p: Pending, **fields: Any) -> AtomicDatum:
    """A datum about item `p` of the unit, from `rater`."""
    d = p.definition
    if rater != PRIMARY_RATER:  # the default is left to the model: validating it per datum costs a rules-only run
        fields["rater"] = rater
    return AtomicDatum(unit_id=job.unit_id, layer=job.layer, item=d.id, item_version=d.version, **fields)


class CollectorTier(Protocol):
    """One tier of a collector."""

    @property
    def kind(self) -> Tier:
        """The tier its data are collected by (`CollectorIdentity.tier`)."""

    @property
    def family(self) -> KeyFamily:
        """Which cache key its data carry."""

    def accepts(self, d: DataDefinition) -> bool:
        """Whether the definition lets this tier collect it."""

    async def decide(self, run: TierRun, items: Sequence[Pending]) -> Decisions:
        """Decide what it can of `items` (all accepted by it, all undecided); abstain on the rest."""


class RuleTier:
    """Registered rules: the `applies_when` gate (not_applicable), then the definition's rule, which decides or
    abstains. An abstention is final (uncollected) when the definition allows no model tier.

    Rules are evaluated a definition at a time over a batch of units (`decide_columns`), their answers appended
    to columns: no datum object, no cache (a rule is cheaper to recompute than to look up; its data live in the
    store with their definition's version)."""

    kind: Tier = "rule"
    family: KeyFamily = "rule"

    def accepts(self, d: DataDefinition) -> bool:
        """A definition with an applies-when rule, or a rule it lets collect."""
        return bool(d.applies_when or (d.rule and "rule" in d.tiers))

    async def decide(self, run: TierRun, items: Sequence[Pending]) -> Decisions:
        """Each item's rule answer on the run's unit (`decide_columns` over a batch of one)."""
        out: dict[int, AtomicDatum | Pending] = {}
        one = (UnitInput(run.job.unit_id, run.job.unit),)
        for p in items:
            cols = DataColumns()
            if not self.decide_columns(p.definition, one, keys=run.keys, rater=run.rater, layer=run.job.layer,
                                       pack=run.job.pack, context=run.job.context, out=cols):
                out[p.index] = next(cols.iter_data())
        return out

    def decide_columns(
        self, d: DataDefinition, units: Sequence[UnitInput], *, keys: CollectorKeys, rater: str, layer: Layer,
        pack: KnowledgePack, context: EngagementView | None, out: DataColumns,
    ) -> list[int]:
        """Decide `d` over `units` (one layer, one user's `context`): the data rules decide (not_applicable, a
        value, or an uncollected abstention or crash) are appended to `out`; the positions of the units left
        undecided, for the model tiers, are returned."""
        ctx = RuleContext(pack=pack, definition=d, engagement=context)
        has_model_tier = any(t != "rule" for t in d.tiers)
        todo = list(range(len(units)))
        for name, gate in ((d.applies_when, True), (d.rule if "rule" in d.tiers else None, False)):
            if name is None or not todo:
                continue
            col = _Column(d, keys.rule_identity(name), layer=layer, rater=rater)
            left: list[int] = []
            outcomes = rule_outcomes(name, [units[k].unit for k in todo], ctx)
            for k, o in zip(todo, outcomes, strict=True):
                uid = units[k].unit_id
                if isinstance(o, Exception):
                    col.crashed(uid, name, o)
                elif gate:
                    if o.value in ("no", "not_applicable"):
                        col.add(uid, name, "not_applicable", None, o.evidence, o.reason or f"{name}: no")
                    else:
                        left.append(k)
                elif o.value is not None:
                    col.add(uid, name, o.value, o.fact, o.evidence,
                            o.reason or (f"{name}: uncollected" if o.value == "uncollected" else None))
                elif has_model_tier:
                    left.append(k)
                else:
                    col.add(uid, name, "uncollected", None, (),
                            RULE_ABSTAINED + (f" ({o.reason})" if o.reason else ""))
            col.write(out)
            todo = left
        return todo


class _Column:
    """One definition's data from one rule over a batch, checked as `AtomicDatum` would check them."""

    def __init__(self, d: DataDefinition, ident: CollectorIdentity, *, layer: Layer, rater: str) -> None:
        self.d, self.ident, self.layer, self.rater = d, ident, layer, rater
        self.unit_ids: list[str] = []
        self.values: list[Value] = []
        self.facts: list[float | str | None] = []
        self.reasons: list[str | None] = []
        self.evidence: list[tuple[EvidencePointer, ...]] = []

    def crashed(self, unit_id: str, name: str, e: BaseException) -> None:
        msg = " ".join(str(e).split())[:200]
        self._append(unit_id, "uncollected", None, (), f"{RULE_ERROR}: {name}: {type(e).__name__}: {msg}")

    def add(self, unit_id: str, name: str, value: Any, fact: Any, evidence: Any, reason: str | None) -> None:
        try:
            if value not in VALUES:
                raise ValueError(f"returned value {value!r}; valid: {', '.join(sorted(VALUES))}")
            ev = tuple(evidence)
            if not all(type(p) is EvidencePointer for p in ev):
                ev = tuple(EvidencePointer.model_validate(p) for p in ev)
            self._append(unit_id, value, fact_value(fact), ev, reason)
        except (ValueError, TypeError) as e:  # pydantic's ValidationError is a ValueError
            self.crashed(unit_id, name, e)

    def _append(self, unit_id: str, value: Value, fact: float | str | None, evidence: tuple[EvidencePointer, ...],
                reason: str | None) -> None:
        self.unit_ids.append(unit_id)
        self.values.append(value)
        self.facts.append(fact)
        self.evidence.append(evidence)
        self.reasons.append(reason)

    def write(self, out: DataColumns) -> None:
        out.add_column(layer=self.layer, item=self.d.id, item_version=self.d.version, collector=self.ident,
                       rater=self.rater, unit_ids=self.unit_ids, values=self.values, facts=self.facts,
                       reasons=self.reasons, evidence=self.evidence)
