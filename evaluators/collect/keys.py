"""Who may collect a definition in this cascade, under which collector identity, and the cache key k of each
datum (docs/method.md section 5: k = hash(v || hash(pi(x)))).

v is computed once per definition (and pack), not once per unit: rule items' v covers the definition digest,
the rule and applies-when rule (name, version, source digest) and the pack's knowledge digest (the pack
without its clauses: a clause's content is in the versions of the definitions made from it, so editing one
clause changes the keys of that clause's items only); model items' v covers the
definition digest (version and projection included), the model strings and families that may answer, the
template digests, the escalation threshold and the redactor; for a second rater its label, and for a jury
reducing otherwise than by majority the reducer. Only model items are keyed per datum (pi(x): the projected
evidence, with the injection ranges inside it); rule data are never cached, so their v enters only the
definition's version, which the pipeline compares between runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent_factory.adapters.model import EvidencePointer
from agent_factory.evaluators.collect.cache import cache_key, rule_identity, sha256, version_digest
from agent_factory.evaluators.collect.config import ModelConfig, ModelSpec
from agent_factory.evaluators.collect.project import ProjectedEvidence
from agent_factory.evaluators.collect.prompt import template_digest
from agent_factory.evaluators.collect.redact import Redactor
from agent_factory.evaluators.core.model import PRIMARY_RATER, CollectorIdentity, DataDefinition, Tier
from agent_factory.knowledge_packs import KnowledgePack


class CollectorKeys:
    """Identities and keys for one cascade's models, templates and redactor."""

    def __init__(
        self, config: ModelConfig, redactor: Redactor, *, templates: Path | None = None,
        rater: str = PRIMARY_RATER, reducer: str = "majority",
    ) -> None:
        self.config = config
        # Only what differs from the suite's own cascade enters v, so the primary's keys never move.
        self._extra: dict[str, str] = {}
        if rater != PRIMARY_RATER:
            self._extra["rater"] = rater
        self._jury_extra = {"reducer": reducer} if reducer != "majority" else {}
        self.templates = {"checklist": template_digest("checklist", templates),
                          "jury": template_digest("jury", templates)}
        kind = f"{type(redactor).__module__}.{type(redactor).__qualname__}"
        self.redactor_id = f"{kind}@{getattr(redactor, 'version', '?')}"
        self._identities: dict[str, CollectorIdentity] = {}
        self._versions: dict[tuple[str, int, int], tuple[DataDefinition, KnowledgePack | None, str]] = {}

    def small_for(self, d: DataDefinition) -> ModelSpec | None:
        """The small model, if one is configured and the definition allows the tier."""
        return self.config.small if "small_model" in d.tiers else None

    def jury_for(self, d: DataDefinition) -> tuple[ModelSpec, ...]:
        """The jury, if one is configured and the definition allows the tier."""
        return self.config.jury if "jury" in d.tiers else ()

    def _v(self, what: str, d: DataDefinition, pack: KnowledgePack | None, make: Callable[[], dict[str, Any]]) -> str:
        slot = (what, id(d), id(pack))
        hit = self._versions.get(slot)
        if hit is None or hit[0] is not d or hit[1] is not pack:  # ids are reused only after objects die
            hit = (d, pack, version_digest(make()))
            self._versions[slot] = hit
        return hit[2]

    def _model_parts(self, d: DataDefinition) -> dict[str, Any]:
        small, jury = self.small_for(d), self.jury_for(d)
        return {
            "stage": "model",
            "definition": d.digest(),
            "small": [small.name, small.family, self.templates["checklist"]] if small else None,
            "jury": [[m.name, m.family] for m in jury],
            "jury_template": self.templates["jury"] if jury else None,
            "escalate_below": self.config.escalate_below if small and jury else None,
            "redactor": self.redactor_id,
            **self._extra,
            **(self._jury_extra if jury else {}),
        }

    def _rule_parts(self, d: DataDefinition, pack: KnowledgePack) -> dict[str, Any]:
        return {
            "stage": "rule",
            "definition": d.digest(),
            "applies_when": [d.applies_when, *rule_identity(d.applies_when)] if d.applies_when else None,
            "rule": [d.rule, *rule_identity(d.rule)] if d.rule and "rule" in d.tiers else None,
            "pack": pack.knowledge_digest(),
            **self._extra,
        }

    def model_key(self, d: DataDefinition, evidence: ProjectedEvidence, ranges: Sequence[EvidencePointer]) -> str:
        """Cache key of a model-tier datum: v with the shown evidence and its flagged ranges."""
        shown = {(f.unit_id, f.field) for f in evidence.fields}
        flags = sorted((p.unit_id, p.field, p.start, p.end) for p in ranges if (p.unit_id, p.field) in shown)
        v = self._v("model", d, None, lambda: self._model_parts(d))
        return cache_key(v, sha256(evidence.digest() + repr(flags)))

    def definition_version(self, d: DataDefinition, pack: KnowledgePack) -> str:
        """v of a definition in this cascade: every key of its data changes exactly when this does (the
        pipeline compares it between runs to find the definitions whose data must be recollected)."""
        parts: dict[str, Any] = {}
        if d.applies_when or (d.rule and "rule" in d.tiers):
            parts["rule"] = self._v("rule", d, pack, lambda: self._rule_parts(d, pack))
        if any(t != "rule" for t in d.tiers):
            parts["model"] = self._v("model", d, None, lambda: self._model_parts(d))
        return version_digest(parts)

    def model_identity(self, tier: Tier) -> CollectorIdentity:
        """The small model or the whole jury (model strings joined by `+`, families by `,`), with the
        template digest as version; `none` when no model serves the tier."""
        ident = self._identities.get(tier)
        if ident is None:
            small, jury = self.config.small, self.config.jury
            if tier == "jury" and jury:
                ident = CollectorIdentity(tier="jury", name="+".join(m.name for m in jury),
                                          family=",".join(m.family for m in jury), version=self.templates["jury"])
            elif tier == "small_model" and small is not None:
                ident = CollectorIdentity(tier="small_model", name=small.name, family=small.family,
                                          version=self.templates["checklist"])
            else:
                ident = CollectorIdentity(tier=tier, name="none")
            self._identities[tier] = ident
        return ident

    def rule_identity(self, name: str) -> CollectorIdentity:
        """The collector identity of rule `name` (its version from the rule's source)."""
        ident = self._identities.get(f"rule:{name}")
        if ident is None:
            ident = CollectorIdentity(tier="rule", name=name, version=rule_identity(name)[0])
            self._identities[f"rule:{name}"] = ident
        return ident
