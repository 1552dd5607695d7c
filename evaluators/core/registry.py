"""Registries by name: rule collectors, analyses and components. A wrong name lists the valid ones.

The boundary the design asks for is visible here: a *rule* turns one unit into one datum (no I/O, no model);
an *analysis* turns observations (data of many units) into results (pure, versioned). Only the collectors in
`evaluators.collect` call models.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar, cast

from agent_factory import plugins
from agent_factory.adapters.model import Conversation, Engagement, EvidencePointer, Span, Turn
from agent_factory.digest import stable_id
from agent_factory.errors import SpecError, UsageError
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.core.model import Component, DataDefinition, Layer, Result, Value
from agent_factory.evaluators.core.present import Presentation
from agent_factory.evaluators.core.source import closure_digest, function_digest
from agent_factory.knowledge_packs import KnowledgePack

if TYPE_CHECKING:  # gate.py reads UnitRow from here
    from agent_factory.evaluators.core.gate import GateFor, GateMeasure


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


RuleFn = Callable[[Unit, RuleContext], RuleAnswer]
"""A rule as the registry hands it out: one unit of its layer (`Unit`) and the context in, one answer out."""


class RuleColumns(NamedTuple):
    """A batch rule's answers over a batch of units: one entry per unit in each column, in the units' order.
    A `None` value abstains for that unit, as `RuleAnswer(None)` does."""

    values: Sequence[Value | None]
    facts: Sequence[float | str | None] | None = None
    """None: no unit has a fact."""
    evidence: Sequence[tuple[EvidencePointer, ...]] | None = None
    """None: no unit cites evidence."""
    reasons: Sequence[str | None] | None = None
    """None: no unit gives a reason."""


BatchRuleFn = Callable[[Sequence[Unit], RuleContext], RuleColumns]
"""A rule over a batch of units of one layer (`rule(..., batch=True)`): its answers as columns."""

RuleFnT = TypeVar("RuleFnT", bound=Callable[..., RuleAnswer | RuleColumns])
"""A function `@rule` declares, its own signature kept (a rule names the unit type of its layer)."""

RuleOutcome = RuleAnswer | Exception
"""What a rule gave for one unit: its answer, or the exception it raised on that unit."""


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


def cluster_of(row: UnitRow) -> str:
    """The independent unit a row belongs to: its user, else its conversation, else itself (Conduct's intervals
    and the gate's tests cluster by it)."""
    return row.user_id or row.conversation_id or row.unit_id


@dataclass(frozen=True)
class Observations:
    """The input of every analysis: unit rows per layer, in (user, time) order, and the observation horizon."""

    rows: Mapping[Layer, Sequence[UnitRow]]
    horizon: float | None = None
    """Epoch seconds of the end of observation (censoring)."""
    layers: frozenset[Layer] | None = None
    """The layers the analysis reading these declares (`Analysis.layers`); None: every layer. The store loads
    only the layers a group of analyses declares, so an undeclared layer would read as empty: reading one is a
    `UsageError`, here and in the kernel's in-memory path alike."""

    def layer(self, layer: Layer) -> Sequence[UnitRow]:
        """The rows of `layer`, in `row_order`."""
        if self.layers is not None and layer not in self.layers:
            raise UsageError(f"an analysis read the {layer!r} rows but declares layers={sorted(self.layers)}: add "
                             f"{layer!r} to its Analysis(layers=...)")
        return self.rows.get(layer, ())

    def only(self, layers: Collection[Layer] | None) -> Observations:
        """These observations as an analysis that declares `layers` may read them (None: every layer)."""
        return self if layers is None else replace(self, layers=frozenset(layers))


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
    layers: tuple[Layer, ...] | None = None
    """The layers whose rows it reads (`Observations.layer`); None: any. A run loads only the layers the
    analyses it reruns together declare (Provenance's one layer of 102k turns, not 518k units, at 10x the
    default simulation)."""

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


DefinitionsFor = Callable[[KnowledgePack], tuple[DataDefinition, ...]]
"""A generated component's data definitions over a pack (Conduct's, from the clauses)."""
FlagsFor = Callable[[KnowledgePack], tuple[FlagSpec, ...]]
"""A generated component's flags over a pack (Conduct's: each clause's violation)."""
Segments = Literal["real", "all"]


@dataclass(frozen=True)
class ComponentSpec:
    """A component: its data definitions (rho) and analyses (f)."""

    name: Component
    definitions: tuple[DataDefinition, ...]
    analyses: tuple[Analysis, ...]
    description: str = ""
    generate: DefinitionsFor | None = None
    """Generates the definitions from the pack (Conduct's from the clauses); None: `definitions` are fixed."""
    segments: Segments = "real"
    """The traffic whose units it reads: real traffic only, or every segment (Provenance, to count what it
    excludes)."""
    flags: tuple[FlagSpec, ...] = ()
    """The per-unit values it raises as flags (`evaluators.core.flags`); read off stored rows, no datum."""
    generate_flags: FlagsFor | None = None
    """Generates the flags from the pack (Conduct's); None: `flags` are fixed."""
    present: Presentation | None = None
    """How the views show it (`evaluators.core.present`): its metrics, headline, summary lines, report section."""
    gate: GateFor | None = None
    """The metrics it puts before the gate, as per-unit contributions over a pack (`evaluators.core.gate`); None:
    the component is not gated (the instruments, Provenance and Adjudication)."""

    @property
    def generated(self) -> bool:
        """Whether its definitions are generated from the pack (`generate`) rather than fixed."""
        return self.generate is not None

    @property
    def all_segments(self) -> bool:
        """Whether it reads the turns of every traffic segment (`segments == "all"`), not only real traffic."""
        return self.segments == "all"

    def definitions_for(self, pack: KnowledgePack) -> tuple[DataDefinition, ...]:
        """Its data definitions over `pack`."""
        return tuple(self.generate(pack)) if self.generate is not None else self.definitions

    def gate_for(self, pack: KnowledgePack) -> tuple[GateMeasure, ...]:
        """Its gated measures over `pack` (none when it is not gated)."""
        return tuple(self.gate(pack)) if self.gate is not None else ()

    def flags_for(self, pack: KnowledgePack) -> tuple[FlagSpec, ...]:
        """Its flags over `pack`."""
        return tuple(self.generate_flags(pack)) if self.generate_flags is not None else self.flags


# ---- the registry's rule and component kinds (agent_factory.plugins) -------------------------------------

RULE_KIND = plugins.KindSpec(check=callable, what="a rule function (unit, RuleContext) -> RuleAnswer")
"""The `rule` kind (`plugins.KIND_SPECS` names it): functions tagged by `@rule` in the entry points' modules."""
COMPONENT_KIND = plugins.KindSpec(check=lambda o: isinstance(o, ComponentSpec), what="a ComponentSpec")
"""The `component` kind: each entry point names one `ComponentSpec`."""


def rule(
    name: str, *, layers: Sequence[Layer] = (), params: Mapping[str, str] | None = None,
    needs_trigger_tools: bool = False, reads: Sequence[str] = (), summary: str | None = None, batch: bool = False,
) -> Callable[[RuleFnT], RuleFnT]:
    """Decorator: declare a rule collector named `name` (dotted, component or pack first). It tags the function
    (`plugins.tag`): a registry registers it when it loads the module's `agent_factory.rules` entry point, or
    when code registers it at run time (`register_rule`).

    A rule a clause's trigger or obligation may name (`rule:` in a pack, or a compiled spec) declares the
    `layers` it works on; the compiler offers exactly those rules, tells the model their layers and checks
    proposals against them. `params`: the clause parameters it reads (name -> meaning). `needs_trigger_tools`:
    it acts on the calls of the clause trigger's tools, so the trigger must name some. `reads`: the unit fields
    it reads. `summary`: its one-line description for the compiler (default: its docstring's first paragraph).
    `batch`: the function takes a batch of units of one layer and returns `RuleColumns` (vectorised over the
    batch) instead of one unit and a `RuleAnswer`; callers go through `rule_outcomes`, which takes either form.
    """
    metadata = {"layers": tuple(layers), "params": dict(params or {}), "needs_trigger_tools": needs_trigger_tools,
                "reads": tuple(reads), "summary": summary, "batch": batch}

    def deco(fn: RuleFnT) -> RuleFnT:
        return plugins.tag("rule", name, fn, metadata=metadata)

    return deco


def register_rule(fn: RuleFnT, *, replace: bool = False) -> RuleFnT:
    """Register a function tagged by `@rule` in the registry in use, under its declared name and metadata (a
    test's or an experiment's rule defined outside any entry-point module); `replace` swaps a registered one."""
    info = plugins.registry_info(fn)
    if info is None or info.kind != "rule":
        raise UsageError(f"register_rule: {getattr(fn, '__qualname__', fn)!r} is not declared as a rule; decorate "
                         "it with @rule(name, ...)")
    return plugins.register("rule", info.name, fn, version=info.version, metadata=info.metadata, replace=replace)


def is_batch_rule(name: str) -> bool:
    """Whether rule `name` is registered as a batch rule (`rule(..., batch=True)`)."""
    return bool(plugins.info("rule", name).metadata.get("batch"))


def rule_outcomes(name: str, units: Sequence[Unit], ctx: RuleContext) -> list[RuleOutcome]:
    """Rule `name` over a batch of units: each unit's answer, or the exception it raised on that unit (one unit's
    crash must not end a run; the collector records it). A batch rule that raises fails every unit of the batch.
    A `SpecError` (the rule names something the suite does not have) is the suite's fault and propagates.

    A unit rule runs once per unit: rules that do not need to see the whole batch stay one-unit functions, and
    a batch rule (`batch=True`) is one vectorised call."""
    fn: Any = get_rule(name)
    if is_batch_rule(name):
        try:
            cols: RuleColumns = fn(units, ctx)
        except SpecError:
            raise
        except Exception as e:  # noqa: BLE001 - recorded per unit by the collector
            return [e] * len(units)
        if len(cols.values) != len(units):
            err = ValueError(f"batch rule {name} returned {len(cols.values)} values for {len(units)} units")
            return [err] * len(units)
        return [RuleAnswer(v, cols.facts[k] if cols.facts is not None else None,
                           tuple(cols.evidence[k]) if cols.evidence is not None else (),
                           cols.reasons[k] if cols.reasons is not None else None)
                for k, v in enumerate(cols.values)]
    out: list[RuleOutcome] = []
    for unit in units:
        try:
            raw = fn(unit, ctx)
            # A plain tuple is taken too: a third-party rule may return one.
            out.append(raw if isinstance(raw, RuleAnswer) else RuleAnswer(*raw))
        except SpecError:
            raise
        except Exception as e:  # noqa: BLE001 - recorded per unit by the collector
            out.append(e)
    return out


def get_rule(name: str) -> RuleFn:
    """The rule registered as `name`; `UnknownNameError` listing valid names otherwise."""
    return cast(RuleFn, plugins.lookup("rule", name))


def rule_names() -> list[str]:
    """Every registered rule name, sorted."""
    return plugins.names("rule")


@dataclass(frozen=True)
class ClauseRule:
    """A rule a clause condition may name, as the compiler offers it."""

    name: str
    summary: str
    layers: tuple[Layer, ...]
    params: Mapping[str, str]
    needs_trigger_tools: bool


def clause_rules() -> list[ClauseRule]:
    """The rules that declare layers (the ones a clause may name), by name."""
    out = []
    for info, fn in plugins.items("rule"):
        layers = tuple(info.metadata.get("layers", ()))
        if not layers:
            continue
        summary = info.metadata.get("summary") or " ".join(
            (getattr(fn, "__doc__", None) or "").strip().split("\n\n")[0].split())
        out.append(ClauseRule(name=info.name, summary=summary, layers=layers, params=info.metadata.get("params", {}),
                              needs_trigger_tools=bool(info.metadata.get("needs_trigger_tools"))))
    return out


def register_component(spec: ComponentSpec, *, replace: bool = False) -> ComponentSpec:
    """Register a component under its name (the built-ins come through the `agent_factory.components` entry
    points); `replace` swaps a registered one (tests)."""
    return plugins.register("component", spec.name, spec, replace=replace)


def get_component(name: str) -> ComponentSpec:
    """The component registered as `name`; `UnknownNameError` listing valid names otherwise."""
    return cast(ComponentSpec, plugins.lookup("component", name))


def components() -> list[ComponentSpec]:
    """Registered components: the design's seven in its order, then any others by name."""
    from agent_factory.evaluators.core.model import COMPONENTS

    found = plugins.names("component")
    order = [c for c in COMPONENTS if c in found] + [c for c in found if c not in COMPONENTS]
    return [get_component(c) for c in order]
