"""What a pack knows of the tools its agent calls (`KnowledgePack.tools`): the domain half of the checks that
read a tool-calling trace against itself (`evaluators.components.conduct.tooluse`).

The rules are general: "the agent looked before it refused", "a write's preconditions held in the state the
agent had read", "a value the agent states came from a tool", "the agent did what the user agreed to", "a
write's arguments were seen before". What changes between domains is declared here, once per pack:

- which tools only read (`read`) and which change the world (`write`);
- what a user request about their own records looks like (`subject_patterns`), and what a request for each write
  looks like (`intents`), in every language the agent speaks;
- identifier shapes (`id_patterns`: a reservation code, a payment id) whose values an agent can only take from a
  tool output or the user, never make up;
- amounts the policy itself sets (`constants`) and attribute vocabularies (`terms`: membership tiers) whose
  values the agent may state only when a tool showed them;
- each write's preconditions over the entity an earlier tool output showed (`preconditions`), and the time the
  policy calls now (`now`; otherwise the conversation's start).

A pack without a `tools` section declares nothing: the rules that need it are uncollected with that reason.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator, model_validator

from agent_factory.frozen import Frozen

ToolName = Annotated[str, StringConstraints(min_length=1)]
"""A tool's name as its calls carry it (glob `*` allowed where a list says so)."""
FieldPath = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_]+(\[\])?(\.[A-Za-z0-9_]+(\[\])?)*$")]
"""A dotted path into a JSON object; `name[]` steps into every element of a list (or every value of a mapping)."""
TestOp = Literal["equals", "not_equals", "in", "not_in", "within_hours_before_now", "after_now", "at_least",
                 "at_most", "count_at_most"]
"""How a field is tested:

- `equals` / `not_equals` / `in` / `not_in`: against `value` (strings compare case-insensitively);
- `within_hours_before_now`: a date-time at most `value` hours before now (and not after it);
- `after_now`: a date or date-time later than now (a date counts as its whole day);
- `at_least` / `at_most`: a number against `value`, or against the call's `argument` (a balance covers an amount);
- `count_at_most`: the number of elements the path reaches is at most `value`.
"""
Quantifier = Literal["all", "any"]


def _check_pattern(v: str) -> str:
    # The pack module compiles and checks its regexes the same way (case-insensitive, no empty match).
    from agent_factory.knowledge_packs.model import _check_regex

    return _check_regex(v)


class FieldTest(Frozen):
    """One test of an entity's field: `field` `op` `value` (or the call's `argument`)."""

    field: FieldPath
    """Where in the entity (`cabin`, `flights[].date`, `payment_methods[].balance`)."""
    op: TestOp
    value: str | int | float | bool | tuple[str | int | float | bool, ...] | None = None
    """The value compared with (a list for `in` / `not_in`; hours for `within_hours_before_now`)."""
    argument: FieldPath | None = None
    """Instead of `value`: a path into the call's arguments (`at_least` a balance against `amount`)."""
    quantifier: Quantifier = "all"
    """When `field` reaches several values (`[]`): whether all of them or any must pass."""

    @model_validator(mode="after")
    def _operand(self) -> FieldTest:
        needs_value = self.op not in ("after_now",)
        if needs_value and self.value is None and self.argument is None:
            raise ValueError(f"test {self.field} {self.op} needs a value (or an argument)")
        if self.argument is not None and self.op not in ("at_least", "at_most", "equals", "not_equals"):
            raise ValueError(f"test {self.field} {self.op} cannot compare with a call argument")
        if self.op in ("in", "not_in") and not isinstance(self.value, tuple):
            raise ValueError(f"test {self.field} {self.op} needs a list value")
        return self


class Precondition(Frozen):
    """A write is allowed only if this holds for the entity it acts on, as the agent last read it.

    The entity is the most recent object in an earlier tool output (any depth) whose `entity_key` equals the
    call's `entity_argument`. The precondition holds when every `all_of` test passes and, if `any_of` is given, at
    least one of them does. A test whose field the output lacks is undecided; the precondition is violated only
    when the observed fields decide it false, and undecided when they cannot decide it."""

    id: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
    text: str = Field(min_length=1)
    """The policy sentence, in the pack's words (shown with a violation)."""
    source: str = ""
    tools: tuple[ToolName, ...] = Field(min_length=1)
    """The write tools it constrains."""
    entity_argument: FieldPath
    """The call argument naming the entity (`reservation_id`, `payment_methods[].payment_id`)."""
    entity_key: Annotated[str, StringConstraints(min_length=1)]
    """The key of that entity's id in a tool output object (`reservation_id`, `id`)."""
    all_of: tuple[FieldTest, ...] = ()
    any_of: tuple[FieldTest, ...] = ()

    @model_validator(mode="after")
    def _has_tests(self) -> Precondition:
        if not self.all_of and not self.any_of:
            raise ValueError(f"precondition {self.id} has no test (give all_of or any_of)")
        return self


class ToolIntent(Frozen):
    """What a user request for one write looks like (regexes of every language the agent speaks)."""

    tool: ToolName
    patterns: tuple[str, ...] = Field(min_length=1)

    @field_validator("patterns")
    @classmethod
    def _regexes(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_check_pattern(p) for p in v)


class ToolPolicy(Frozen):
    """The tools of the pack's agent, for the tool-use checks (module docstring)."""

    read: tuple[ToolName, ...] = ()
    """Tools that look things up and change nothing."""
    write: tuple[ToolName, ...] = ()
    """Tools that change the world (a booking, a cancellation, a refund)."""
    subject_patterns: tuple[str, ...] = ()
    """A user request about their own records ("my reservation", "我的订单"): an agent that refuses one without a
    lookup gave up without looking."""
    intents: tuple[ToolIntent, ...] = ()
    """What a request for each write looks like: a refusal or hand-off of one is read against its preconditions."""
    id_patterns: dict[Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")], str] = Field(
        default_factory=dict)
    """Identifier shapes, by name (`reservation`: `\\b[A-Z0-9]{6}\\b`); matched case-sensitively: ids are codes."""
    constants: tuple[float, ...] = ()
    """Amounts the policy itself sets (a bag fee, a compensation per passenger): stated without a tool."""
    terms: dict[Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")], tuple[str, ...]] = Field(
        default_factory=dict)
    """Attribute vocabularies (`membership: [regular, silver, gold]`): a value the agent states of the user's
    records must have appeared in a tool output."""
    preconditions: tuple[Precondition, ...] = ()
    complete: tuple[ToolName, ...] = ()
    """Writes whose declared preconditions are all the policy asks of the state the agent can read: refusing one
    whose preconditions held (or that has none over that state) cites no rule that covers the request. A write
    whose policy also asks what no tool output shows (a covered reason) is left out: its refusal is undecided."""
    now: datetime | None = None
    """The time the agent's policy calls now (tau-bench states it in the policy); None: the conversation's start."""

    @field_validator("subject_patterns")
    @classmethod
    def _subjects(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_check_pattern(p) for p in v)

    @field_validator("id_patterns")
    @classmethod
    def _ids(cls, v: dict[str, str]) -> dict[str, str]:
        import re

        for name, p in v.items():
            try:
                rx = re.compile(p)
            except re.error as e:
                raise ValueError(f"id_patterns[{name!r}]: invalid regex {p!r}: {e}") from None
            if rx.fullmatch("") is not None:
                raise ValueError(f"id_patterns[{name!r}]: regex {p!r} matches the empty string")
        return v

    @model_validator(mode="after")
    def _known_tools(self) -> ToolPolicy:
        writes = set(self.write)
        for p in self.preconditions:
            unknown = [t for t in p.tools if t not in writes]
            if unknown:
                raise ValueError(f"precondition {p.id} names tools not in `write`: {', '.join(unknown)}")
        unknown = [t for t in self.complete if t not in writes]
        if unknown:
            raise ValueError(f"`complete` names tools not in `write`: {', '.join(unknown)}")
        for i in self.intents:
            if i.tool not in writes:
                raise ValueError(f"intent of {i.tool!r}: not a tool listed in `write`")
        overlap = writes & set(self.read)
        if overlap:
            raise ValueError(f"tools both read and write: {', '.join(sorted(overlap))}")
        ids = [p.id for p in self.preconditions]
        if len(ids) != len(set(ids)):
            raise ValueError("duplicate precondition ids")
        return self

    @property
    def declared(self) -> bool:
        """Whether the pack says anything about its tools."""
        return bool(self.read or self.write)


__all__ = ["FieldPath", "FieldTest", "Precondition", "TestOp", "ToolIntent", "ToolPolicy"]
