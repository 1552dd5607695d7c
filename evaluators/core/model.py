"""The evaluator as data: e = <K, H, phi, f, rho, pi, sigma, v> (docs/method.md section 5).

rho is `DataDefinition`, pi is `Projection`, a collected datum is `AtomicDatum`, f's output is `Result`, and
`EvaluatorSpec` bundles them with the knowledge pack, the analyses and the templates; its version `v` is a
content hash that changes whenever any part changes. All models are frozen, forbid extra fields and load from YAML.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from agent_factory import yamlio
from agent_factory.adapters.model import EvidencePointer
from agent_factory.digest import stable_id
from agent_factory.errors import SpecError
from agent_factory.frozen import Frozen
from agent_factory.validation import describe_error

Component = Literal["execution", "substance", "trajectory", "results", "conduct", "provenance", "adjudication"]
"""The seven components: a spine (execution -> substance -> trajectory -> results), conduct across it, and
provenance and adjudication beside it."""
COMPONENTS: tuple[Component, ...] = (
    "execution", "substance", "trajectory", "results", "conduct", "provenance", "adjudication",
)
Layer = Literal["span", "trace", "conversation", "engagement"]
"""The unit a datum or result is about: a span, a turn (trace), a session, or a user's window."""
LAYERS: tuple[Layer, ...] = ("span", "trace", "conversation", "engagement")
Tier = Literal["rule", "small_model", "jury"]
"""Collector tiers of the cascade, cheapest first."""
Value = Literal["yes", "no", "not_applicable", "uncollected"]
"""A datum's value. `uncollected` is never a pass: it carries a reason and is left out of every rate."""
DatumKind = Literal["check", "fact"]
"""A check is a yes/no judgment; a fact is an observed quantity or label (latency, mode, progress)."""


class Projection(Frozen):
    """pi: which evidence a datum's collector may see, and how much of it."""

    fields: tuple[str, ...] = ("request", "answer")
    """Unit fields exposed (`request`, `answer`, `spans.input`, `spans.output`, `turns`, ...)."""
    max_chars: int | None = Field(default=None, gt=0)
    """Characters per field; None means full text (the default: truncation must be declared)."""
    strategy: Literal["full", "head", "head_tail"] = "full"
    """How text beyond `max_chars` is cut; the coverage actually shown is stored with the datum."""


class DataDefinition(Frozen):
    """rho: what one atomic datum means, when it applies, who may collect it, and whether it is admitted."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")
    """Dotted id, component first: `execution.delivered`, `substance.i1_answers_task`, `conduct.clause_3`."""
    question: str = Field(min_length=1)
    """The question a collector answers, in words a person can check."""
    component: Component
    """The component the datum belongs to."""
    layer: Layer
    """The unit the datum is about."""
    kind: DatumKind = "check"
    """yes/no check or observed fact."""
    applies_when: str | None = None
    """Registered rule name deciding applicability (not_applicable otherwise); None: always applies."""
    rule: str | None = None
    """Registered rule collector name; it may abstain, passing the item to the model tiers."""
    tiers: tuple[Tier, ...] = ("rule",)
    """Tiers allowed to collect this datum, in cascade order."""
    demands_jury: bool = False
    """Send to the cross-family jury even when the small model is sure."""
    projection: Projection = Field(default_factory=Projection)
    """Evidence the model tiers see."""
    version: str = "1"
    """Bumped by hand or by the audit loop when the meaning changes."""
    admitted: bool = True
    """Whether analyses may use it (the audit retires items whose kappa is below 0.60)."""
    description: str = ""
    """Notes for reviewers: sources, edge cases."""
    clause: str | None = None
    """The pack clause it was generated from (Conduct's), so the pipeline graph and the suite diff follow
    clauses from data, not from ids; None for a fixed definition. Left out of `digest`: the id already names
    the clause and `version` carries its content, so adding the field changed no cache key."""

    @model_validator(mode="after")
    def _collectable(self) -> DataDefinition:
        if "rule" in self.tiers and self.rule is None:
            raise ValueError(f"{self.id}: tier 'rule' needs a rule name")
        if not self.tiers:
            raise ValueError(f"{self.id}: at least one collector tier is needed")
        return self

    def digest(self) -> str:
        """Content hash: part of every cache key of this datum."""
        return stable_id(self.model_dump_json(exclude={"clause"}), prefix="d")


class CollectorIdentity(Frozen):
    """Who collected a datum."""

    tier: Tier
    """Cascade tier."""
    name: str
    """Rule name, or the model string (litellm form) for model tiers."""
    family: str | None = None
    """Model family (openai, anthropic, ...) for model tiers; juries need distinct families."""
    version: str = "1"
    """Rule version, or the prompt template's digest for model tiers."""


PRIMARY_RATER = "primary"
"""The rater of the data a suite's own cascade collects; analyses read these unless asked otherwise."""


class AtomicDatum(Frozen):
    """One collected datum: a checkable judgment or fact about one unit, with evidence and no score."""

    unit_id: str
    """The span, turn, conversation or engagement id."""
    layer: Layer
    """Layer of the unit."""
    item: str
    """The `DataDefinition.id`."""
    item_version: str
    """The definition's version when collected."""
    value: Value
    """yes / no / not_applicable / uncollected. For a fact: `yes` when observed."""
    fact: float | str | None = None
    """The observed quantity or label for fact definitions (latency ms, mode, progress)."""
    reason: str | None = None
    """Why: required when uncollected; the collector's short rationale otherwise."""
    evidence: tuple[EvidencePointer, ...] = ()
    """Where the judgment can be checked."""
    collector: CollectorIdentity
    """Who collected it."""
    tokens: int = Field(default=0, ge=0)
    """Model tokens spent on this datum (its share of the unit's call)."""
    cost_usd: float = Field(default=0.0, ge=0)
    """Its share of the call's cost from litellm's local cost map."""
    coverage: float | None = Field(default=None, ge=0, le=1)
    """Share of the projected evidence's characters the collector actually saw (1.0 = full text)."""
    key: str = ""
    """Cache key k = hash(v || hash(pi(x))) it was stored under."""
    rater: str = Field(default=PRIMARY_RATER, pattern=r"^(primary|audit:.+)$")
    """Which rater collected it: `primary` (the suite's cascade) or `audit:<model-id>` (a second collector over a
    sample, for the audit's agreement). Part of the stored datum's key, so a second rater never overwrites the
    first."""

    @model_validator(mode="after")
    def _reasoned(self) -> AtomicDatum:
        if self.value == "uncollected" and not self.reason:
            raise ValueError(f"{self.item} on {self.unit_id}: an uncollected datum needs a reason")
        return self


class Result(Frozen):
    """One output of a deterministic analysis: a rate, score, count or label, with its uncertainty."""

    component: Component
    """Component that produced it."""
    layer: Layer
    """Layer it is about."""
    metric: str
    """Metric name, e.g. `failure_rate`, `S`, `outcome_share.blocked`, `C(r).clause_1`."""
    stratum: str = "all"
    """Subgroup (`mode=deep`, `language=zh`, ...); `all` for the whole population."""
    unit_id: str | None = None
    """Set for per-unit results (a session's outcome); None for population results."""
    value: float | str | None
    """The result; None when undefined (n = 0), with `note` saying why."""
    low: float | None = None
    """Lower bound of the 95% interval, when one applies."""
    high: float | None = None
    """Upper bound of the 95% interval."""
    n: int = Field(default=0, ge=0)
    """Units in the denominator."""
    note: str | None = None
    """Method or caveat (`wilson`, `user-clustered`, `censored excluded`, ...)."""
    analysis: str
    """Name of the analysis function."""
    analysis_version: str
    """Version of the analysis as it labels itself. A stored result carries its analysis's content version
    instead (`Analysis.content_version`: the label + a digest of its code and declared fields): the code that
    first produced the row (a rerun that reproduces a row leaves it, as it leaves its run id)."""


class AnalysisRef(Frozen):
    """f by registered name and the version it had when the suite was built."""

    name: str
    """Registered analysis name (`execution.failure_rate`, `conduct.clauses`, ...)."""
    version: str
    """Its version at build time: a run refuses a suite whose analysis has moved on (rebuild and approve)."""


class TemplateRef(Frozen):
    """A prompt template the model tiers render."""

    file: str
    """Path of the template in the suite directory."""
    digest: str
    """Content digest at build time."""


class KnowledgeRef(Frozen):
    """K: the suite's knowledge pack."""

    file: str
    """The pack file in the suite directory (its clauses enter the conduct definitions)."""
    knowledge_digest: str
    """`KnowledgePack.knowledge_digest()` at build time: the pack without its clauses, what rules read."""


class EvaluatorSpec(Frozen):
    """e = <K, H, phi, f, rho, pi, sigma, v> for one component: the reviewable `evaluators/<component>.yaml` of
    a suite, which a run reads (so a hand edit a person approved is what runs).

    H (adapters) is the store's normalized units, whatever format they came from; phi's models are deployment
    configuration (`agent-factory.toml`), recorded in every datum's collector identity and cache key rather
    than in v. `rules`, `output_schema` and `version` are derived from the rest: a file may leave them out,
    and a value it states must equal the derived one.
    """

    component: Component
    """The component this evaluator serves (also the file's name)."""
    version: str | None = None
    """v: a content hash of everything below; changes whenever any part changes."""
    description: str = ""
    """What the component measures."""
    knowledge_pack: KnowledgeRef
    """K."""
    analyses: tuple[AnalysisRef, ...]
    """f: the analyses, in order."""
    rules: tuple[str, ...] = ()
    """Rules the definitions name (`rule`, `applies_when`), sorted: derived from rho."""
    templates: dict[str, TemplateRef] = Field(default_factory=dict)
    """Prompt templates by kind (`checklist`, `jury`), when some definition has a model tier."""
    definitions: tuple[DataDefinition, ...]
    """rho, each with its projection pi."""
    output_schema: dict[str, Any] | None = None
    """sigma: the JSON schema model tiers answer in (built from the model-tier definitions); None when every
    definition is rule-only."""

    def computed_version(self) -> str:
        """v over K, f, rho (with pi), sigma and the templates."""
        parts = {
            "component": self.component, "knowledge": self.knowledge_pack.knowledge_digest,
            "definitions": [d.digest() for d in self.definitions],
            "analyses": [a.model_dump() for a in self.analyses], "sigma": self.output_schema,
            "templates": {k: t.model_dump() for k, t in self.templates.items()},
        }
        return stable_id(json.dumps(parts, sort_keys=True, ensure_ascii=False), prefix="v")


M = TypeVar("M", bound=BaseModel)


def load_yaml_model(model: type[M], path: Path) -> M:
    """Load a frozen model from YAML; a `SpecError` naming the file and dotted field on failure."""
    try:
        data = yamlio.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise SpecError(f"{path}: cannot read YAML: {str(e).splitlines()[0]}") from None
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise SpecError(f"{path}: {describe_error(e, data)}") from None
