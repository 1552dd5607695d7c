"""Registries by name: rule collectors, analyses and components. A wrong name lists the valid ones.

The boundary the design asks for is visible here: a *rule* turns one unit into one datum (no I/O, no model);
an *analysis* turns observations (data of many units) into results (pure, versioned). Only the collectors in
`evaluators.collect` call models.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from functools import cached_property
from typing import Any, NamedTuple

from agent_factory.adapters.model import Conversation, Engagement, EvidencePointer, Span, Turn
from agent_factory.digest import stable_id
from agent_factory.errors import UnknownNameError
from agent_factory.evaluators.core.model import Component, DataDefinition, Layer, Result, Value
from agent_factory.evaluators.core.source import closure_digest, function_digest
from agent_factory.knowledge_packs import KnowledgePack


@dataclass(frozen=True)
class EngagementView:
    """The engagement unit as rules see it: the user's window with its sessions (turns and spans inside)."""

    engagement: Engagement
    conversations: tuple[Conversation, ...]
    horizon: datetime | None
    """End of observation: outcomes that could only happen after it are censored, never assumed."""


@dataclass(frozen=True)
class SpanView:
    """The span unit as rules see it: the span and the turn it belongs to."""

    span: Span
    turn: Turn


Unit = SpanView | Turn | Conversation | EngagementView
"""What a rule receives, by layer: span, trace, conversation, engagement."""


@dataclass(frozen=True)
class RuleContext:
    """Everything a rule may read besides its unit."""

    pack: KnowledgePack
    definition: DataDefinition
    engagement: EngagementView | None = None
    """The user's window holding the unit, for conversation-layer rules about what followed a session
    (Results: return, redo); None when the runner did not build it."""


class RuleAnswer(NamedTuple):
    """A rule's answer. `value=None` abstains: the item goes to the model tiers (or stays uncollected)."""

    value: Value | None
    fact: float | str | None = None
    evidence: tuple[EvidencePointer, ...] = ()
    reason: str | None = None


RuleFn = Callable[[Any, RuleContext], RuleAnswer]


class UnitRow(NamedTuple):
    """One unit's collected data in the compact form analyses read (millions of these must fit in memory)."""

    unit_id: str
    layer: Layer
    user_id: str | None
    conversation_id: str | None
    position: int
    """The turn's index in its conversation (0 for other layers); named so as not to shadow `tuple.index`."""
    start: float | None
    """Epoch seconds."""
    end: float | None
    mode: str | None
    values: Mapping[str, Value]
    """item id -> value, admitted items only."""
    facts: Mapping[str, float | str | None]
    """item id -> fact, for fact items."""


@dataclass(frozen=True)
class Observations:
    """The input of every analysis: unit rows per layer, in (user, time) order, and the observation horizon."""

    rows: Mapping[Layer, Sequence[UnitRow]]
    horizon: float | None = None
    """Epoch seconds of the end of observation (censoring)."""

    def layer(self, layer: Layer) -> Sequence[UnitRow]:
        return self.rows.get(layer, ())


AnalysisFn = Callable[[Observations, KnowledgePack], Sequence[Result]]


@dataclass(frozen=True)
class Analysis:
    """f: a named, versioned pure function from observations to results."""

    name: str
    version: str
    """The label people read and bump for a change of meaning (approved suites record it); what decides a
    rerun is `content_version`."""
    fn: AnalysisFn
    reads: tuple[str, ...] = ()
    """Other components whose data it reads (`*`: every component); its own component's data always. The
    pipeline graph draws its edges from this, so a data change reruns exactly the analyses that read it."""
    reads_clauses: bool = False
    """Whether it reads the pack's clauses (editing a clause reruns it)."""

    @cached_property
    def content_version(self) -> str:
        """`<version>+<12 hex>`: the label and a digest of every declared field (name, version, reads, ...),
        of which function `fn` is, and of the source of its module and of the project modules that module
        imports, transitively (`evaluators.core.source`). Editing the analysis or a helper it calls, in its
        module or another, changes it with or without a bump; so do edits elsewhere in those modules, so the
        analyses defined in (or importing) one module rerun together. Computed once per process, when the
        pipeline first asks; the stored results' `analysis_version` is this."""
        declared = tuple((f.name, repr(getattr(self, f.name))) for f in fields(self) if f.name != "fn")
        digest = stable_id(declared, function_digest(self.fn), closure_digest(self.fn))
        return f"{self.version}+{digest[:12]}"


@dataclass(frozen=True)
class ComponentSpec:
    """A component: its data definitions (rho) and analyses (f)."""

    name: Component
    definitions: tuple[DataDefinition, ...]
    analyses: tuple[Analysis, ...]
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def generated(self) -> bool:
        """Whether its definitions are generated from the pack (`extra["definitions_for"]`, as Conduct's from
        the clauses) rather than fixed."""
        return callable(self.extra.get("definitions_for"))

    @property
    def all_segments(self) -> bool:
        """Whether it reads the turns of every traffic segment (`extra["segments"] == "all"`, as Provenance
        does to count what it excludes), not only real traffic."""
        return self.extra.get("segments") == "all"

    def definitions_for(self, pack: KnowledgePack) -> tuple[DataDefinition, ...]:
        """Its data definitions over `pack`."""
        return tuple(self.extra["definitions_for"](pack)) if self.generated else self.definitions


_RULES: dict[str, RuleFn] = {}
_COMPONENTS: dict[str, ComponentSpec] = {}


def rule(name: str) -> Callable[[RuleFn], RuleFn]:
    """Decorator: register a rule collector under `name` (dotted, component first)."""

    def deco(fn: RuleFn) -> RuleFn:
        if name in _RULES and _RULES[name] is not fn:
            raise ValueError(f"rule {name!r} registered twice")
        _RULES[name] = fn
        return fn

    return deco


def get_rule(name: str) -> RuleFn:
    """The rule registered as `name`; `UnknownNameError` listing valid names otherwise."""
    _load_builtins()
    try:
        return _RULES[name]
    except KeyError:
        raise UnknownNameError("rule", name, _RULES) from None


def rule_names() -> list[str]:
    _load_builtins()
    return sorted(_RULES)


def register_component(spec: ComponentSpec) -> ComponentSpec:
    _COMPONENTS[spec.name] = spec
    return spec


def get_component(name: str) -> ComponentSpec:
    _load_builtins()
    try:
        return _COMPONENTS[name]
    except KeyError:
        raise UnknownNameError("component", name, _COMPONENTS) from None


def components() -> list[ComponentSpec]:
    """Registered components in the design's order."""
    from agent_factory.evaluators.core.model import COMPONENTS

    _load_builtins()
    return [_COMPONENTS[c] for c in COMPONENTS if c in _COMPONENTS]


def _load_builtins() -> None:
    import agent_factory.evaluators.components  # noqa: F401  (registers the built-in components and their rules)
