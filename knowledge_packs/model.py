"""K, the knowledge pack: the domain knowledge an evaluator needs, as validated, frozen data.

A pack holds what changes when the framework moves to another agent (docs/method.md section 9): how to tell real
traffic from tests and cached clicks, latency baselines, behaviour lexicons per language, which evidence must
be present, and thresholds. Each part is its own sub-model so later issues can add parts (policy clauses,
more lexicons) without touching the others.

Every regex in a pack is compiled case-insensitively (`compile_pattern`) and checked when the pack is loaded,
so a bad pattern fails at load time, naming its field, instead of at the first turn it meets.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from agent_factory.adapters.model import SpanKind
from agent_factory.digest import stable_id
from agent_factory.frozen import Frozen
from agent_factory.knowledge_packs.tools import ToolPolicy

T = TypeVar("T")

PackName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
"""A pack name: letters, digits, `_`, `.`, `-`; usable as a registry name."""
SegmentName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
"""A segment name: lower-case identifier such as `internal_test`."""
PatternId = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_.-]*$")]
"""A lexicon pattern id, conventionally `<language>.<what>` such as `en.ignore_instructions`."""
LanguageCode = Annotated[str, StringConstraints(pattern=r"^[a-z]{2,3}(-[A-Za-z0-9]+)?$")]
"""A language code: `zh`, `en`, `pt-BR`, ..."""
RegionCode = Annotated[str, StringConstraints(pattern=r"^[A-Z]{2}$")]
"""An ISO 3166 region code in upper case: `US`, `CN`, `GB`, ..."""
Rate = Annotated[float, Field(ge=0.0, le=1.0)]
"""A proportion in [0, 1]."""
Scalar = str | bool | int | float
"""An attribute value a segmentation rule can compare with."""

REAL_SEGMENT = "real"
"""The segment of real user traffic: the default when no rule matches; the only segment analysed."""
TurnTextField = Literal["request", "answer"]
"""Text fields of a turn."""
SpanTextField = Literal["input", "output"]
"""Text fields of a span."""


# Packs are frozen, so values derived from one are computed once per pack object, not once per turn. Packs hold
# dicts and are not hashable: the memo is keyed by identity and keeps the pack alive so the id stays unique.
_DERIVED: dict[tuple[int, str], tuple[KnowledgePack, object]] = {}


def _memo(pack: KnowledgePack, what: str, make: Callable[[], T]) -> T:
    key = (id(pack), what)
    hit = _DERIVED.get(key)
    if hit is None or hit[0] is not pack:
        if len(_DERIVED) > 256:
            _DERIVED.clear()
        hit = _DERIVED[key] = (pack, make())
    return hit[1]  # type: ignore[return-value]


def _digest(pack: KnowledgePack) -> str:
    # A clause's `invariant` flag only changes how the conduct analysis reads its data (zero tolerance), never
    # what is collected: confirming an invariant must not invalidate cached data keyed by this digest.
    return _memo(pack, "digest", lambda: stable_id(
        pack.model_dump_json(exclude={"clauses": {"__all__": {"invariant"}}}), prefix="k"))


# What rules may read of a pack apart from its clauses: a clause's content enters the versions of the data
# generated from it, and a pack's name, version and description are labels no rule reads.
_NOT_KNOWLEDGE = {"clauses", "name", "version", "description", "extends"}


def _knowledge_digest(pack: KnowledgePack) -> str:
    return _memo(pack, "knowledge", lambda: stable_id(pack.model_dump_json(exclude=_NOT_KNOWLEDGE), prefix="k"))


def _prefilter(pack: KnowledgePack) -> re.Pattern[str]:
    def make() -> re.Pattern[str]:
        parts = [f"(?:{e.pattern})" for lang in sorted(pack.lexicons) for e in pack.lexicons[lang].injection]
        return compile_pattern("|".join(parts) if parts else r"(?!)")

    return _memo(pack, "prefilter", make)


@lru_cache(maxsize=4096)
def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Compile a pack regex the one way packs use them: case-insensitive, Unicode-aware."""
    return re.compile(pattern, re.IGNORECASE)


def _check_regex(pattern: str) -> str:
    try:
        rx = compile_pattern(pattern)
    except re.error as e:
        raise ValueError(f"invalid regex {pattern!r}: {e}") from None
    # A pattern that matches nothing at all would flag every text; reject it instead of flooding results.
    if rx.fullmatch("") is not None:
        raise ValueError(f"regex {pattern!r} matches the empty string")
    return pattern


class SegmentRule(Frozen):
    """One segmentation rule: a turn meeting its conditions belongs to segment `name` (excluded from analysis)."""

    name: SegmentName
    """Segment name, e.g. `internal_test`, `suggestion_cache`, `synthetic`; never `real`."""
    description: str = ""
    """What traffic this is and why it is excluded."""
    match: Literal["any", "all"] = "any"
    """Whether one satisfied condition suffices (`any`) or every stated condition must hold (`all`)."""
    user_id_regex: str | None = None
    """Regex searched in the turn's `user_id` (case-insensitive)."""
    attribute_equals: dict[str, Scalar | tuple[Scalar, ...]] = Field(default_factory=dict)
    """Attribute key -> required value, or a list meaning any of them; each key is one condition. Keys are
    dotted (`user.account_type`) and found flat or nested, on the turn first, then on its spans. Strings
    compare case-insensitively; `true` also matches the string "true"."""
    attribute_present: tuple[str, ...] = ()
    """Attribute keys whose mere presence (non-null value) marks the segment; each key is one condition."""
    request_regex: str | None = None
    """Regex searched in the turn's request text (case-insensitive)."""

    @field_validator("name")
    @classmethod
    def _not_real(cls, v: str) -> str:
        if v == REAL_SEGMENT:
            raise ValueError(f"segment name {REAL_SEGMENT!r} is reserved for real traffic (the default)")
        return v

    @field_validator("user_id_regex", "request_regex")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        return None if v is None else _check_regex(v)

    @field_validator("attribute_equals")
    @classmethod
    def _values(cls, v: dict[str, Scalar | tuple[Scalar, ...]]) -> dict[str, Scalar | tuple[Scalar, ...]]:
        for key, value in v.items():
            if isinstance(value, tuple) and not value:
                raise ValueError(f"attribute_equals[{key!r}] is an empty list (it could never match)")
        return v

    @model_validator(mode="after")
    def _has_condition(self) -> SegmentRule:
        if not self.conditions():
            raise ValueError(
                f"segment rule {self.name!r} has no condition "
                "(give user_id_regex, attribute_equals, attribute_present or request_regex)"
            )
        return self

    def conditions(self) -> int:
        """How many conditions the rule states."""
        return (
            (self.user_id_regex is not None)
            + len(self.attribute_equals)
            + len(self.attribute_present)
            + (self.request_regex is not None)
        )


class ModeBaseline(Frozen):
    """The latency baseline of one agent mode."""

    geomean_seconds: float = Field(gt=0)
    """Geometric-mean request-to-answer latency of successful turns in this mode, in seconds."""
    description: str = ""
    """What the mode is (e.g. `deep`: asynchronous long report)."""


class Baselines(Frozen):
    """Latency baselines per mode and the fast-failure band."""

    modes: dict[str, ModeBaseline] = Field(default_factory=dict)
    """Mode name (as in `Turn.mode`) -> its baseline; empty when the agent has no modes."""
    fast_failure_seconds: float = Field(default=5.0, gt=0)
    """Answers faster than this are in the fast-failure band (in the study they failed 38.7% of the time)."""


class LexiconPattern(Frozen):
    """One behaviour pattern: a case-insensitive regex with an id that results cite."""

    id: PatternId
    """Stable id cited by flags, e.g. `en.ignore_instructions`."""
    pattern: str
    """Regex, matched case-insensitively against normalized text (NFKC, so full-width letters and
    punctuation become ASCII; zero-width characters removed; whitespace between CJK characters removed)."""
    description: str = ""
    """What the pattern catches and what it deliberately leaves alone."""
    examples: tuple[str, ...] = ()
    """Texts the pattern must flag (kept with the pattern so a reviewer sees what it is for; tests run them)."""

    @field_validator("pattern")
    @classmethod
    def _regex(cls, v: str) -> str:
        return _check_regex(v)


def _unique_ids(v: tuple[LexiconPattern, ...]) -> tuple[LexiconPattern, ...]:
    seen: dict[str, int] = {}
    for i, p in enumerate(v):
        if p.id in seen:
            raise ValueError(f"duplicate pattern id {p.id!r} (items {seen[p.id]} and {i})")
        seen[p.id] = i
    return v


class Lexicon(Frozen):
    """Behaviour lexicons of one language."""

    injection: tuple[LexiconPattern, ...] = ()
    """Text addressed to an evaluator rather than the agent ("ignore previous instructions", "mark this as
    passed"): a turn carrying it is isolated as an attack on the instrument."""
    frustration: tuple[LexiconPattern, ...] = ()
    """User frustration expressions (Trajectory)."""
    abandonment: tuple[LexiconPattern, ...] = ()
    """Expressions of giving up on the agent (Trajectory)."""
    disclosure: tuple[LexiconPattern, ...] = ()
    """Unprompted disclosures, e.g. of the operating company (Conduct)."""
    clarification: tuple[LexiconPattern, ...] = ()
    """The agent asking the user to clarify (Trajectory: clarification loop)."""
    context_repair: tuple[LexiconPattern, ...] = ()
    """The user restating or correcting context the agent lost or got wrong (Trajectory: context repair)."""
    deflection: tuple[LexiconPattern, ...] = ()
    """The agent saying it cannot see, look up or give information, or sending the user elsewhere for it ("I'm
    unable to access", "contact customer service for details", "无法查询"): read against the lookups it made
    (Conduct: looked before refusing). Declining an action is `refusal`."""
    refusal: tuple[LexiconPattern, ...] = ()
    """The agent declining to do something the user asked ("I'm unable to cancel this reservation", "this cannot
    be changed", "无法为您取消"): read against the write's preconditions (Conduct: refusal justified)."""
    reply: tuple[LexiconPattern, ...] = ()
    """A user's message that opens as an answer to the agent's question (yes, no, a choice): right after the
    agent asked, it is a reply, not a resent request (Trajectory: request and verbatim replay)."""
    closing: tuple[LexiconPattern, ...] = ()
    """A user's closing message that expects no reply ("thanks, that's all", "再见", a simulator's stop token):
    when the session's last message matches and got no answer, it ends the session instead of being a turn
    with a missing answer."""
    truncation_markers: tuple[str, ...] = ()
    """Literal strings that mark cut-off text, e.g. `[truncated]`; compared case-insensitively after the
    same normalization as patterns."""
    truncation_markers_at_end: tuple[str, ...] = ()
    """Markers that mean a cut only where the text ends: plain words such as `(truncated)` also occur inside
    complete text (a prompt's elided example), where they cut nothing of what was recorded."""

    @field_validator(
        "injection", "frustration", "abandonment", "disclosure", "clarification", "context_repair", "closing",
        "deflection", "refusal", "reply",
    )
    @classmethod
    def _ids(cls, v: tuple[LexiconPattern, ...]) -> tuple[LexiconPattern, ...]:
        return _unique_ids(v)

    @field_validator("truncation_markers", "truncation_markers_at_end")
    @classmethod
    def _markers(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for i, m in enumerate(v):
            if not m.strip():
                raise ValueError(f"truncation marker {i} is blank")
        return v


class CoveragePolicy(Frozen):
    """Which evidence a turn needs, and where sources declare the original length of a cut text."""

    required_turn_fields: tuple[TurnTextField, ...] = ("request", "answer")
    """Turn fields whose absence makes the turn's evidence incomplete."""
    required_span_fields: dict[SpanKind, tuple[SpanTextField, ...]] = Field(default_factory=dict)
    """Span kind -> fields whose absence makes the turn incomplete. Other fields are reported but not
    required (many sources do not record inputs of chain spans). An errored span's missing output is never
    required: its error is the evidence."""
    length_keys: dict[Literal["request", "answer", "input", "output"], tuple[str, ...]] = Field(
        default_factory=dict
    )
    """Field -> attribute keys declaring that field's original length in characters (first found wins);
    request and answer look in turn attributes, input and output in the span's attributes."""


class HandoffPolicy(Frozen):
    """How a turn that hands the conversation to a person is recognised: it is neither delivered nor failed.

    Names are case-insensitive shell-style globs (`transfer_to_human*`). A tool span matches by its name or its
    `tool.name` / `gen_ai.tool.name` attribute; a hand-off counts only when the call did not fail.
    """

    tool_names: tuple[str, ...] = ()
    """Tools whose successful call hands the user to a person (`transfer_to_human_agents`, `escalate_to_agent`):
    the turn is `handed_off` whatever the agent said around the call."""
    span_names: tuple[str, ...] = ()
    """Names of hand-off spans (agent frameworks' hand-off steps): the turn is `handed_off` only when no answer
    was delivered after it, since a hand-off between agents usually ends in the next agent's answer."""

    def hands_off(self, tool_name: str | None) -> bool:
        """Whether a call of `tool_name` hands the user to a person (one of `tool_names`, case-insensitive)."""
        low = (tool_name or "").strip().lower()
        return bool(low) and any(fnmatch.fnmatchcase(low, g.lower()) for g in self.tool_names)


class Thresholds(Frozen):
    """Numeric thresholds of the deterministic analyses."""

    redo_jaccard: Rate = 0.6
    """Character-bigram Jaccard similarity at or above which two adjacent requests are a redo."""
    window_days: float = Field(default=7.0, gt=0)
    """Engagement window T in days: no return within it is censored, never success."""
    max_field_chars: int = Field(default=20000, gt=0)
    """Longest text of one field shown to a model collector; longer text is projected and the projection's
    coverage recorded."""


ClauseId = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
"""A clause id: a lower-case identifier; it becomes the middle of data ids `conduct.<id>.trigger`."""
RuleName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")]
"""A registered rule collector's name, dotted and component first (`conduct.one_tool_call_per_message`)."""
ItemId = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")]
"""A data item's id, as in the evaluators' data definitions: dotted, component first (`trajectory.context_repair`)."""
ClauseKind = Literal["must", "must_not", "only_if", "before"]
"""How the obligation binds once the trigger holds: `must` (the condition must hold), `must_not` (it must not),
`only_if` (the triggering behaviour is allowed only when the condition holds), `before` (the condition must
have held earlier in the unit; order needs a rule)."""
ClauseLayer = Literal["span", "trace", "conversation"]
"""The unit a clause is judged on: one span, one turn, or one whole conversation."""
CollectorTier = Literal["rule", "small_model", "jury"]
"""Collector tiers, as in `evaluators.core.model.Tier` (packs do not import evaluators)."""
LexiconCategory = Literal[
    "injection", "frustration", "abandonment", "disclosure", "clarification", "context_repair", "deflection",
    "refusal",
]
"""The pattern lists of a `Lexicon` a clause condition may match."""
ConditionField = Literal["request", "answer", "spans.input", "spans.output"]
"""Text a lexicon or regex condition searches: the turn's request or answer, or every span's input or output."""
RuleParam = str | bool | int | float | tuple[str, ...]
"""A rule parameter value."""

_MATCHERS = ("lexicon", "regex", "tool_names", "attribute_present", "attribute_equals")


class ClauseCondition(Frozen):
    """A trigger or an obligation: a registered rule, or a built-in condition the generic conduct rule checks.

    The built-in condition holds when any of its stated matchers does: a lexicon category or a regex found in
    `fields`, a tool span whose name is listed, or an attribute present on the turn or one of its spans. With
    no rule and no matcher, the condition is left to the model tiers (obligations only).
    """

    rule: RuleName | None = None
    """A registered rule that decides the condition; it may read `params` through its clause."""
    params: dict[str, RuleParam] = Field(default_factory=dict)
    """Parameters of `rule` (documented with the rule); keys ending in `_regex` must hold valid regexes."""
    lexicon: LexiconCategory | None = None
    """A lexicon category of the pack, matched in every language (normalized text, as lexicons are)."""
    regex: str | None = None
    """A case-insensitive regex searched in `fields` (normalized text)."""
    fields: tuple[ConditionField, ...] = ("answer",)
    """Where `lexicon` and `regex` search."""
    tool_names: tuple[str, ...] = ()
    """Tool span names that satisfy the condition; `*` means any tool call."""
    attribute_present: tuple[str, ...] = ()
    """Attribute keys (dotted, flat or nested) whose non-null presence on the turn or a span satisfies it."""
    attribute_equals: dict[str, Scalar | tuple[Scalar, ...]] = Field(default_factory=dict)
    """Attribute key -> value (or a list meaning any of them) that satisfies it when a turn or span has it;
    strings compare case-insensitively. `agent.mode` reads the turn's agent mode (`Turn.mode`) first."""
    tiers: tuple[CollectorTier, ...] = ("rule",)
    """Collector tiers allowed, in cascade order; a trigger must be rule-checkable."""
    question: str = ""
    """The question model tiers answer (defaults to the clause text)."""

    @field_validator("regex")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        return None if v is None else _check_regex(v)

    @field_validator("params")
    @classmethod
    def _params(cls, v: dict[str, RuleParam]) -> dict[str, RuleParam]:
        for key, value in v.items():
            if key.endswith("_regex"):
                for p in value if isinstance(value, tuple) else (value,):
                    if not isinstance(p, str):
                        raise ValueError(f"params[{key!r}] must be a regex string, got {type(p).__name__}")
                    _check_regex(p)
        return v

    @field_validator("tiers")
    @classmethod
    def _tiers(cls, v: tuple[CollectorTier, ...]) -> tuple[CollectorTier, ...]:
        if not v:
            raise ValueError("at least one collector tier is needed")
        if len(set(v)) != len(v):
            raise ValueError(f"tiers repeat: {list(v)}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> ClauseCondition:
        matchers = self.matchers()
        if self.rule is not None and matchers:
            raise ValueError(
                f"give either rule or {'/'.join(_MATCHERS)}, not both (got rule and {', '.join(matchers)})"
            )
        if self.params and self.rule is None:
            raise ValueError("params are parameters of a rule: give rule too")
        checkable = self.rule is not None or bool(matchers)
        if "rule" in self.tiers and not checkable:
            raise ValueError(f"tier 'rule' needs a rule or a condition ({'/'.join(_MATCHERS)})")
        if "rule" not in self.tiers and checkable:
            raise ValueError("a rule or condition is given but tier 'rule' is not allowed")
        return self

    @field_validator("attribute_equals")
    @classmethod
    def _wanted(cls, v: dict[str, Scalar | tuple[Scalar, ...]]) -> dict[str, Scalar | tuple[Scalar, ...]]:
        for key, value in v.items():
            if isinstance(value, tuple) and not value:
                raise ValueError(f"attribute_equals[{key!r}] is an empty list (it could never match)")
        return v

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Unset, the field is left out: clauses written before it existed keep their digests (and data).
        data: dict[str, Any] = handler(self)
        if not self.attribute_equals:
            data.pop("attribute_equals", None)
        return data

    def matchers(self) -> list[str]:
        """Names of the built-in matchers stated."""
        return [m for m in _MATCHERS if getattr(self, m)]

    def rule_checkable(self) -> bool:
        """Whether the rule tier can decide it (a rule or a built-in condition)."""
        return "rule" in self.tiers

    def describe(self) -> str:
        """A short readable statement of a condition, for questions and reviewers."""
        if self.rule is not None:
            return f"rule {self.rule}"
        parts = []
        where = " or ".join(self.fields)
        if self.lexicon is not None:
            parts.append(f"a '{self.lexicon}' lexicon pattern in the {where}")
        if self.regex is not None:
            parts.append(f"text matching /{self.regex}/ in the {where}")
        if self.tool_names:
            parts.append("any tool call" if "*" in self.tool_names else f"a call to {', '.join(self.tool_names)}")
        if self.attribute_present:
            parts.append(f"attribute {' or '.join(self.attribute_present)} present")
        for key, values in self.attribute_equals.items():
            wanted = values if isinstance(values, tuple | list) else (values,)
            parts.append(f"{key} == {' or '.join(map(str, wanted))}")
        return " or ".join(parts) if parts else "judged by a model"


class Clause(Frozen):
    """One policy clause r = (trigger phi_t, obligation psi) from an agent's role spec (Conduct).

    Data `conduct.<id>.trigger` (did phi_t occur in the unit?) and `conduct.<id>.obligation` (did psi hold,
    given phi_t?) are generated from it; applicability A(r) = P(phi_t), compliance C(r) = P(psi | phi_t).
    """

    id: ClauseId
    """Stable id; results cite it (`C(r).<id>`)."""
    text: str = Field(min_length=1)
    """The clause as a sentence, close to the role spec's wording (in the pack's own words)."""
    source: str = ""
    """Where the sentence comes from (document and section)."""
    kind: ClauseKind
    """How the obligation binds once the trigger holds."""
    layer: ClauseLayer = "trace"
    """The unit the clause is judged on."""
    trigger: ClauseCondition
    """phi_t: when the clause applies; always rule-checkable."""
    obligation: ClauseCondition
    """psi: what must (or must not) hold when it applies."""
    invariant: bool = False
    """Zero tolerance: a single violation is a breach (the gate opens an incident)."""
    version: str = Field(default="1", min_length=1)
    """Bumped when the clause's meaning changes (its digest changes with any edit anyway)."""
    description: str = ""
    """Notes for reviewers: how the condition was chosen, known gaps."""

    @field_validator("trigger")
    @classmethod
    def _trigger(cls, v: ClauseCondition, info: ValidationInfo) -> ClauseCondition:
        if not v.rule_checkable() or v.tiers != ("rule",):
            raise ValueError("a trigger must be decided by rules alone (tiers: [rule])")
        _fields_fit_layer(v, info.data.get("layer"))
        return v

    @field_validator("obligation")
    @classmethod
    def _obligation(cls, v: ClauseCondition, info: ValidationInfo) -> ClauseCondition:
        if info.data.get("kind") == "before" and v.rule is None and v.rule_checkable():
            raise ValueError("kind 'before' is about order: the obligation needs a rule (or only model tiers)")
        _fields_fit_layer(v, info.data.get("layer"))
        return v

    def digest(self) -> str:
        """Content hash of the clause: enters the versions of the data generated from it. `invariant` is left
        out: it changes the analysis of the data, not the data, so confirming an invariant recollects nothing."""
        return stable_id(self.model_dump_json(exclude={"invariant"}), prefix="c")


def _fields_fit_layer(cond: ClauseCondition, layer: object) -> None:
    searches = cond.lexicon is not None or cond.regex is not None
    if layer == "span" and searches and any(f in ("request", "answer") for f in cond.fields):
        raise ValueError("a span-layer clause can only search spans.input / spans.output")


def _check_clauses(clauses: tuple[Clause, ...], lexicons: dict[str, Lexicon] | None) -> None:
    seen: dict[str, int] = {}
    for i, clause in enumerate(clauses):
        if clause.id in seen:
            raise ValueError(f"duplicate clause id {clause.id!r} (clauses.{seen[clause.id]} and clauses.{i})")
        seen[clause.id] = i
        for part in ("trigger", "obligation"):
            category = getattr(clause, part).lexicon
            if category is None or lexicons is None:
                continue
            if not any(getattr(lex, category) for lex in lexicons.values()):
                # An empty category would make the condition never hold: a silent 0% or 100%.
                raise ValueError(
                    f"clauses.{i}.{part}.lexicon: lexicon {category!r} has no pattern in any language"
                )


class KnowledgePack(Frozen):
    """A knowledge pack K: segmentation, baselines, lexicons, evidence coverage, thresholds and policy clauses."""

    name: PackName
    """Registry name of the pack (`default`, `business_analysis`, ...)."""
    version: Annotated[str, StringConstraints(min_length=1)]
    """Version of the pack's content; bump it on every change (it enters evaluator versions)."""
    description: str = ""
    """What agent or domain the pack is for."""
    extends: str | None = None
    """Parent pack (name or path) this one was merged onto; the child's values win."""
    segments: tuple[SegmentRule, ...] = ()
    """Segmentation rules in order, first match wins; a turn no rule matches is `real`."""
    baselines: Baselines = Field(default_factory=Baselines)
    """Latency baselines per mode and the fast-failure band."""
    lexicons: dict[LanguageCode, Lexicon] = Field(default_factory=dict)
    """Language code -> that language's lexicons."""
    coverage: CoveragePolicy = Field(default_factory=CoveragePolicy)
    """Which evidence fields are required and where original lengths are declared."""
    handoff: HandoffPolicy = Field(default_factory=HandoffPolicy)
    """Which tool calls and spans hand the conversation to a person (delivery state `handed_off`)."""
    thresholds: Thresholds = Field(default_factory=Thresholds)
    """Thresholds of the deterministic analyses."""
    tools: ToolPolicy = Field(default_factory=ToolPolicy)
    """The agent's tools: which read and which write, the identifiers and amounts it must take from them, and each
    write's preconditions (`knowledge_packs.tools`), for the tool-use checks."""
    clauses: tuple[Clause, ...] = ()
    """Policy clauses of the agent's role spec (Conduct), each a trigger and an obligation."""
    rules_decide: tuple[ItemId, ...] = ()
    """Data items whose rule, for this agent, answers "no" when it finds nothing instead of abstaining for a
    model: the rule's evidence (e.g. a lexicon) is trusted complete here. Only rules that document it honour it
    (Trajectory's context repair). Nothing the rule misses then reaches a model, so the audit loop must check
    the rule's recall on this agent's traffic. Empty by default: every such rule abstains."""
    phone_regions: tuple[RegionCode, ...] | None = None
    """ISO 3166 regions (`US`, `CN`, `GB`, ...) whose national phone numbers, written without `+`, the default
    redactor looks for in this agent's traffic (international forms are found whatever the regions). None: the
    redactor's default (US, CN, GB). Left out of the pack's content (and digests) while unset."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Unset, the field is left out: packs written before it existed keep their digests (and data).
        data: dict[str, Any] = handler(self)
        if self.phone_regions is None:
            data.pop("phone_regions", None)
        return data

    @field_validator("phone_regions")
    @classmethod
    def _known_regions(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is not None:
            import phonenumbers

            unknown = [r for r in v if r not in phonenumbers.SUPPORTED_REGIONS]
            if unknown:
                raise ValueError(f"unknown phone regions: {', '.join(unknown)} (ISO 3166 codes libphonenumber knows)")
        return v

    @field_validator("segments")
    @classmethod
    def _unique_segments(cls, v: tuple[SegmentRule, ...]) -> tuple[SegmentRule, ...]:
        seen: dict[str, int] = {}
        for i, rule in enumerate(v):
            if rule.name in seen:
                raise ValueError(
                    f"duplicate segment name {rule.name!r} (segments.{seen[rule.name]} and segments.{i})"
                )
            seen[rule.name] = i
        return v

    @field_validator("clauses")
    @classmethod
    def _valid_clauses(cls, v: tuple[Clause, ...], info: ValidationInfo) -> tuple[Clause, ...]:
        _check_clauses(v, info.data.get("lexicons"))
        return v

    @field_validator("rules_decide")
    @classmethod
    def _unique_items(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        repeated = sorted({i for i in v if v.count(i) > 1})
        if repeated:
            raise ValueError(f"items listed more than once: {', '.join(repeated)}")
        return v

    def clause(self, clause_id: str) -> Clause | None:
        """The clause with this id, or None."""
        return next((c for c in self.clauses if c.id == clause_id), None)

    def digest(self) -> str:
        """A content hash of the whole pack: enters cache keys so any change invalidates dependent results."""
        return _digest(self)

    def knowledge_digest(self) -> str:
        """A content hash of what rules read besides clauses (segments, baselines, lexicons, coverage,
        thresholds, rules_decide): enters rule items' cache keys, so editing one clause recollects only the
        data generated from that clause."""
        return _knowledge_digest(self)

    def injection_prefilter(self) -> re.Pattern[str]:
        """One regex alternating every injection pattern: a text it does not match needs no per-pattern scan."""
        return _prefilter(self)

    def truncation_markers(self, *, inside: bool = False) -> tuple[str, ...]:
        """All languages' truncation markers, in language then list order, without repeats: those that mark a
        cut at the end of a text, or with `inside`, those that also mark one inside it (a head-tail cut)."""

        def make() -> tuple[str, ...]:
            out: list[str] = []
            for lang in sorted(self.lexicons):
                lex = self.lexicons[lang]
                for m in lex.truncation_markers + (() if inside else lex.truncation_markers_at_end):
                    if m not in out:
                        out.append(m)
            return tuple(out)

        return _memo(self, f"truncation_markers.{inside}", make)
