"""The evaluator as data (rho, pi, sigma, v), results, and the registries of rules, analyses and components."""

from agent_factory.evaluators.core.flags import FlagSpec, Meaning
from agent_factory.evaluators.core.model import (
    COMPONENTS,
    LAYERS,
    AnalysisRef,
    AtomicDatum,
    CollectorIdentity,
    Component,
    DataDefinition,
    DatumKind,
    EvaluatorSpec,
    KnowledgeRef,
    Layer,
    Projection,
    Result,
    TemplateRef,
    Tier,
    Value,
    load_yaml_model,
)
from agent_factory.evaluators.core.registry import (
    Analysis,
    ComponentSpec,
    EngagementView,
    Observations,
    RuleAnswer,
    RuleContext,
    SpanView,
    Unit,
    UnitRow,
    components,
    get_component,
    get_rule,
    register_component,
    rule,
    rule_names,
)

__all__ = [
    "COMPONENTS", "LAYERS", "Analysis", "AnalysisRef", "AtomicDatum", "CollectorIdentity", "Component",
    "ComponentSpec", "DataDefinition", "DatumKind", "EngagementView", "EvaluatorSpec", "FlagSpec", "KnowledgeRef",
    "Layer", "Meaning", "Observations",
    "Projection", "Result", "RuleAnswer", "TemplateRef", "RuleContext", "SpanView", "Tier", "Unit", "UnitRow", "Value",
    "components", "get_component", "get_rule", "load_yaml_model", "register_component", "rule", "rule_names",
]
