"""What the spec compiler produces: compiled clauses, what it could not compile, and the build report."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent_factory.factory.compile.detect import DetectorHow
from agent_factory.factory.compile.patterns import FormKind, Polarity
from agent_factory.frozen import Frozen
from agent_factory.knowledge_packs.model import Clause, ClauseId, ClauseKind, ClauseLayer

COMPILER_VERSION = "4"
"""Version of the deterministic compiler: it enters the manifest, so a compiler change shows in every suite.
4: the `always` trigger matches each text once (`detect.ANY_TEXT`), not each of its characters."""
CheckHow = Literal["rule", "matcher", "model"]
"""How an obligation is collected: a registered rule, a built-in matcher, or the model tiers."""


class Detector(Frozen):
    """How a clause's trigger is detected."""

    how: DetectorHow
    """`tool` (named tools), `any_tool`, `regex`, `lexicon`, `attribute`, `answer` (the agent replied),
    `context` (the tools of the clause's section or label) or `always`."""
    note: str
    """What the detector looks for, in words."""


class Check(Frozen):
    """How a clause's obligation is collected."""

    how: CheckHow
    """`rule`, `matcher` or `model`."""
    note: str
    """What is checked, in words."""
    rule: str | None = None
    """The registered rule, when `how` is `rule`."""
    missing_rule: str = ""
    """A rule that would decide this but does not exist (the model tiers collect instead)."""


class CompiledClause(Frozen):
    """One rule of the spec as r = (trigger, obligation), with its detector, check and pack clause."""

    id: ClauseId
    """Stable id: a slug of the clause's words and a short hash of its normalized text."""
    kind: FormKind
    """The sentence form: must / must_not / never / only_if / should / if_then / before."""
    polarity: Polarity
    """Whether the obligation asks to do something or to avoid it."""
    trigger: str
    """The trigger as text: the condition, the behaviour an only-if restricts, or what the detector watches."""
    obligation: str
    """The obligation as text (for `only_if`, the condition the behaviour needs)."""
    sentence: str
    """The clause as it reads in the spec."""
    source_line: int = Field(ge=1)
    """1-based line of the spec where the sentence starts."""
    section: str
    """The heading the sentence sits under."""
    language: Literal["en", "zh"]
    """Language of the sentence."""
    layer: ClauseLayer
    """The unit the clause is judged on."""
    invariant: bool
    """Proposed invariant (must-not and never clauses), for a person to confirm."""
    detector: Detector
    """How the trigger is detected."""
    check: Check
    """How the obligation is collected."""
    clause: Clause
    """The clause as the knowledge pack holds it."""
    compiled_by: Literal["rules", "model"] = "rules"
    """Who compiled it: the deterministic compiler, or the model orchestrator (sentences the rules could not)."""


class Uncompiled(Frozen):
    """A normative sentence (or part) the compiler could not turn into a clause."""

    line: int = Field(ge=1)
    """1-based line of the spec."""
    sentence: str
    """The text it could not compile."""
    reason: str
    """Why."""


class CompiledSpec(Frozen):
    """A compiled role spec."""

    source: str
    """Name of the spec (its file name), as clauses cite it."""
    sha256: str
    """sha256 of the spec text (UTF-8)."""
    compiler_version: str = COMPILER_VERSION
    """Version of the compiler that produced it."""
    tools: tuple[str, ...]
    """The tool catalogue the detectors used."""
    clauses: tuple[CompiledClause, ...]
    """Compiled clauses in spec order."""
    uncompiled: tuple[Uncompiled, ...]
    """Normative sentences left for a person, in spec order."""
    sentences: int = 0
    """How many sentences of the spec state a rule (each is compiled or listed in `uncompiled`)."""

    def pack_clauses(self) -> tuple[Clause, ...]:
        """The clauses as a knowledge pack holds them."""
        return tuple(c.clause for c in self.clauses)


class ClauseSummary(Frozen):
    """One clause the suite runs, as `build --json` prints it: compiled from the spec or the base pack's."""

    id: str
    """Clause id."""
    origin: Literal["spec", "pack"]
    """`spec`: compiled from a sentence of the spec (also when it replaces a pack clause of the same check);
    `pack`: the base pack's clause, run as the pack states it."""
    kind: FormKind | ClauseKind
    """The sentence form (spec) or the pack clause's kind."""
    polarity: Polarity
    """`do` or `avoid`."""
    trigger: str
    """Trigger text."""
    obligation: str
    """Obligation text."""
    source_line: int | None
    """1-based spec line; None for a pack clause."""
    check: str
    """How the obligation is collected: `model`, `rule <name> {param: value}`, or `matcher <conditions>`."""
    layer: ClauseLayer
    """Unit judged."""
    detector: str
    """How the trigger is detected."""
    invariant: bool
    """Proposed (spec) or declared (pack) invariant."""
    matches_everything: bool = False
    """Its trigger holds in every unit with any text: the obligation is asked of every unit."""


class MergedCheck(Frozen):
    """Clauses that stated the same check, kept once in the suite."""

    kept: str
    """Id of the clause the suite runs."""
    source_line: int
    """The spec line it was compiled from: its source."""
    pack_clause: str | None = None
    """The base pack's clause it replaces (the same id, overridden), if any."""
    dropped: tuple[str, ...] = ()
    """Compiled clauses with the same check that the suite does not run."""
    lines: tuple[int, ...]
    """Spec lines of every merged compiled clause."""
    check: str
    """The check, as `ClauseSummary.check` prints it."""
    note: str = ""
    """What was merged, and where the spec's parameters differed from the pack's."""


class BuildReport(Frozen):
    """What `build_suite` wrote (the output of `agent-factory build --json`)."""

    spec: str
    """The spec's file name."""
    spec_sha256: str
    """sha256 of the spec text."""
    pack: str
    """Name of the suite's pack."""
    extends: str
    """The base pack it extends."""
    out: str
    """The suite directory."""
    files: int
    """Files written (manifest included)."""
    normative_sentences: int
    """Sentences of the spec that state a rule."""
    compiled: int
    """Clauses compiled from the spec, before merging."""
    clauses: tuple[ClauseSummary, ...]
    """Every clause the suite runs, the base pack's included, in the pack's order."""
    merged: tuple[MergedCheck, ...]
    """Checks stated twice (by the spec and the pack, or twice in the spec) and kept once."""
    always_triggers: int
    """How many of `clauses` have a trigger that matches every unit."""
    uncompiled: tuple[Uncompiled, ...]
    """What the compiler could not compile."""
    invariants: tuple[str, ...]
    """Ids of the proposed invariants (listed in invariants.yaml for a person to confirm)."""
    missing_rules: tuple[str, ...]
    """`<clause id>: <rule>` for each rule the compiler would have used but which is not registered (or cannot
    apply); those clauses go to the model tiers."""
    evaluators: dict[str, str]
    """Component -> evaluator version."""
