"""The collector's tiers: one small protocol, and the rule tier.

A tier takes the items of one unit that are still undecided and returns, for each item it handles, either a
datum (it decided) or the item again with what it learned (it abstained but has an opinion for the next tier:
a small model's unsure answer and what it cost); items it leaves out it abstains on without a word. A
collector is a composition of tiers (`Cascade(tiers=[RuleTier(), ModelTier(small), JuryTier(jury)])`), as
inspect_ai composes scorers (`multi_scorer(scorers, reducer)`): a second rater is a second composition over a
sample, not a special case, and a human tier is one more implementation of the protocol.

Each tier's data carry the cache key of its `family`: `rule` keys cover the whole unit and the pack, `model`
keys the projected evidence and the models (keys.py). The composition looks a family's keys up once, before
the first tier of that family, so tiers of one family share one key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agent_factory.adapters.model import EvidencePointer
from agent_factory.errors import SpecError
from agent_factory.evaluators.collect.keys import CollectorKeys
from agent_factory.evaluators.collect.project import ProjectedEvidence
from agent_factory.evaluators.collect.reasons import RULE_ABSTAINED, RULE_ERROR
from agent_factory.evaluators.collect.schema import ItemAnswer
from agent_factory.evaluators.core.model import PRIMARY_RATER, AtomicDatum, DataDefinition, Layer, Tier, Value
from agent_factory.evaluators.core.registry import EngagementView, RuleAnswer, RuleContext, get_rule
from agent_factory.knowledge_packs import KnowledgePack

if TYPE_CHECKING:  # caller.py imports this module (Pending, UnitJob); tiers only name its type
    from agent_factory.evaluators.collect.caller import ModelCaller

KeyFamily = Literal["rule", "model"]
"""Which cache key a tier's data carry (keys.py: `rule_key` or `model_key`)."""


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
    """Cache key of the current family ('' before the first family is entered)."""
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
    abstains. An abstention is final (uncollected) when the definition allows no model tier."""

    kind: Tier = "rule"
    family: KeyFamily = "rule"

    def accepts(self, d: DataDefinition) -> bool:
        """A definition with an applies-when rule, or a rule it lets collect."""
        return bool(d.applies_when or (d.rule and "rule" in d.tiers))

    async def decide(self, run: TierRun, items: Sequence[Pending]) -> Decisions:
        """Each item's rule answer, in order (rules are pure and cheap: no await inside)."""
        out: dict[int, AtomicDatum | Pending] = {}
        for p in items:
            datum = self.decide_one(run, p)
            if datum is not None:
                out[p.index] = datum
        return out

    def decide_one(self, run: TierRun, p: Pending) -> AtomicDatum | None:
        """The datum rules decide (not_applicable, a value, or an uncollected abstention), or None to go on."""
        d = p.definition
        ctx = RuleContext(pack=run.job.pack, definition=d, engagement=run.job.context)
        has_model_tier = any(t != "rule" for t in d.tiers)
        for name, gate in ((d.applies_when, True), (d.rule if "rule" in d.tiers else None, False)):
            if name is None:
                continue
            ident = run.keys.rule_identity(name)
            try:
                # A plain tuple is taken too: a third-party rule may return one.
                raw: RuleAnswer | tuple[Any, ...] = get_rule(name)(run.job.unit, ctx)
            except SpecError:
                raise
            except Exception as e:  # noqa: BLE001 - one unit's crash must not end the run; it is recorded
                msg = " ".join(str(e).split())[:200]
                return run.datum(p, value="uncollected", collector=ident,
                                 reason=f"{RULE_ERROR}: {name}: {type(e).__name__}: {msg}")
            answer = raw if isinstance(raw, RuleAnswer) else RuleAnswer(*raw)
            if gate:
                if answer.value in ("no", "not_applicable"):
                    return run.datum(p, value="not_applicable", collector=ident, key=p.key,
                                     evidence=tuple(answer.evidence), reason=answer.reason or f"{name}: no")
                continue
            if answer.value is not None:
                value: Value = answer.value
                reason = answer.reason or (f"{name}: uncollected" if value == "uncollected" else None)
                return run.datum(p, value=value, fact=answer.fact, evidence=tuple(answer.evidence),
                                 reason=reason, collector=ident, key=p.key)
            if not has_model_tier:
                return run.datum(p, value="uncollected", collector=ident, key=p.key,
                                 reason=RULE_ABSTAINED + (f" ({answer.reason})" if answer.reason else ""))
        return None
