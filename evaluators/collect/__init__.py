"""phi: the collection cascade (composable tiers: rules, a small model, a cross-family jury), with the
projection pi, the output schema sigma, privacy redaction, the cache and the per-run budget. The only code of
the project that calls models.

    config = load_model_config()                      # agent-factory.toml and AGENT_FACTORY_* variables
    cascade = Cascade(config, cache=DatumCache(dir), budget=Budget(config.budget), redactor=DefaultRedactor())
    data = await cascade.collect(unit_id=turn.id, layer="trace", unit=turn, definitions=defs, pack=pack)
    audit = Cascade(tiers=[ModelTier(other)], rater=audit_rater(other), cache=cache)  # a second rater
"""

from agent_factory.evaluators.collect.backends import (
    Backend,
    FatalModelError,
    LitellmBackend,
    PydanticAIBackend,
    Reply,
    TransientModelError,
    backend_for,
    call_model,
)
from agent_factory.evaluators.collect.budget import BUDGET_EXHAUSTED, Budget, BudgetExhausted
from agent_factory.evaluators.collect.cache import (
    DatumCache,
    cache_key,
    call_key,
    rule_identity,
    unit_digest,
    version_digest,
)
from agent_factory.evaluators.collect.cascade import Cascade, audit_rater, default_tiers
from agent_factory.evaluators.collect.config import (
    BudgetLimits,
    ModelConfig,
    ModelSpec,
    RetryPolicy,
    check_jury,
    derive_family,
    load_model_config,
)
from agent_factory.evaluators.collect.keys import CollectorKeys
from agent_factory.evaluators.collect.model_tiers import REDUCERS, JuryTier, ModelTier, majority, unanimous
from agent_factory.evaluators.collect.project import ProjectedEvidence, ShownField, project
from agent_factory.evaluators.collect.prompt import render_prompt, template_digest
from agent_factory.evaluators.collect.reasons import (
    JURY_SPLIT,
    MODEL_ERROR,
    NO_JURY,
    NO_MODEL,
    SCHEMA_INVALID,
    CascadeCounters,
    is_transient,
    reason_category,
)
from agent_factory.evaluators.collect.redact import DefaultRedactor, Redaction, Redactor, load_redactor, redact_text
from agent_factory.evaluators.collect.schema import ItemAnswer, build_sigma, locate_quote
from agent_factory.evaluators.collect.tiers import CollectorTier, Pending, RuleTier, TierRun, UnitJob

__all__ = [
    "BUDGET_EXHAUSTED", "JURY_SPLIT", "MODEL_ERROR", "NO_JURY", "NO_MODEL", "REDUCERS", "SCHEMA_INVALID",
    "Backend", "Budget", "BudgetExhausted", "BudgetLimits", "Cascade", "CascadeCounters", "CollectorKeys",
    "CollectorTier", "DatumCache", "DefaultRedactor",
    "FatalModelError", "ItemAnswer", "JuryTier", "LitellmBackend", "ModelConfig", "ModelSpec", "ModelTier",
    "Pending", "ProjectedEvidence",
    "PydanticAIBackend", "Redaction", "Redactor", "Reply", "RetryPolicy", "RuleTier", "ShownField", "TierRun",
    "TransientModelError", "UnitJob",
    "audit_rater", "backend_for", "build_sigma", "cache_key", "call_key", "call_model", "check_jury",
    "default_tiers", "derive_family",
    "is_transient", "load_model_config", "load_redactor", "locate_quote", "majority", "project",
    "reason_category", "redact_text", "render_prompt", "rule_identity", "template_digest", "unanimous",
    "unit_digest", "version_digest",
]
