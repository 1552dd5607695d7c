"""Conduct data definitions (rho), generated from the knowledge pack's policy clauses.

Each clause r = (trigger phi_t, obligation psi) yields two checks on the clause's layer:

- `conduct.<id>.trigger`: did phi_t occur in the unit? Always collected by a rule (the clause's own rule, or
  the generic `conduct.clause_trigger` for a lexicon / regex / tool / attribute condition).
- `conduct.<id>.obligation`: given phi_t, did the clause's obligation hold? `yes` means *complied* whatever
  the clause's kind (for `must_not` the rule checks that the forbidden thing is absent), `not_applicable`
  when phi_t did not occur. Its `applies_when` is the trigger's rule, so a model tier is only asked when the
  trigger fired.

The definitions depend on the pack, so the runner asks `definitions_for(pack)` (also reachable as
`get_component("conduct").generate`). Each definition's version carries the clause's content
digest: editing a clause's regex or rule invalidates exactly the data generated from it.
"""

from __future__ import annotations

from agent_factory.errors import SpecError, UnknownNameError
from agent_factory.evaluators.core.model import DataDefinition, Projection
from agent_factory.evaluators.core.registry import get_rule
from agent_factory.knowledge_packs import KnowledgePack
from agent_factory.knowledge_packs.model import Clause

TRIGGER_RULE = "conduct.clause_trigger"
"""Generic rule deciding a clause's built-in trigger condition."""
OBLIGATION_RULE = "conduct.clause_obligation"
"""Generic rule deciding a clause's built-in obligation condition."""

_PROJECTION = {
    "span": Projection(fields=("spans.input", "spans.output")),
    "trace": Projection(fields=("request", "answer")),
    "conversation": Projection(fields=("turns",)),
}


def trigger_id(clause_id: str) -> str:
    """Data id of a clause's trigger check."""
    return f"conduct.{clause_id}.trigger"


def obligation_id(clause_id: str) -> str:
    """Data id of a clause's obligation check."""
    return f"conduct.{clause_id}.obligation"


def clause_id_of(item: str) -> str | None:
    """The clause id inside a conduct data id (`conduct.<id>.trigger` -> `<id>`), else None."""
    parts = item.split(".")
    if len(parts) == 3 and parts[0] == "conduct" and parts[2] in ("trigger", "obligation"):
        return parts[1]
    return None


def trigger_rule(clause: Clause) -> str:
    """The rule that collects the clause's trigger."""
    return clause.trigger.rule or TRIGGER_RULE


def obligation_rule(clause: Clause) -> str | None:
    """The rule that collects the obligation; None when only model tiers may collect it."""
    if clause.obligation.rule is not None:
        return clause.obligation.rule
    return OBLIGATION_RULE if clause.obligation.rule_checkable() else None


def _check_rule(pack: KnowledgePack, index: int, part: str, name: str | None) -> None:
    if name is None:
        return
    try:
        get_rule(name)
    except UnknownNameError as e:
        raise SpecError(f"knowledge pack {pack.name!r}: clauses.{index}.{part}.rule: {e}") from None


def clause_definitions(clause: Clause) -> tuple[DataDefinition, DataDefinition]:
    """The trigger and obligation definitions of one clause (rule names are not checked here)."""
    version = f"{clause.version}+{clause.digest()}"
    trigger = DataDefinition(
        id=trigger_id(clause.id),
        question=f"Does this {clause.layer} unit show {clause.trigger.describe()}? (trigger of: {clause.text})",
        component="conduct",
        layer=clause.layer,
        rule=trigger_rule(clause),
        tiers=("rule",),
        version=version,
        clause=clause.id,
        description=f"Trigger of clause {clause.id} ({clause.kind}); {clause.source}".rstrip("; "),
    )
    ob = clause.obligation
    obligation = DataDefinition(
        id=obligation_id(clause.id),
        question=ob.question or (
            f"The policy says: {clause.text} Given that it applies here, did the agent comply?"
        ),
        component="conduct",
        layer=clause.layer,
        applies_when=trigger_rule(clause),
        rule=obligation_rule(clause),
        tiers=ob.tiers,
        projection=_PROJECTION[clause.layer],
        version=version,
        clause=clause.id,
        description=(
            # Not the invariant flag: it is the analysis' business, and it would change the digest of the data.
            f"Obligation of clause {clause.id} ({clause.kind}): "
            f"{ob.describe()}; yes = complied"
        ),
    )
    return trigger, obligation


def definitions_for(pack: KnowledgePack) -> tuple[DataDefinition, ...]:
    """Every clause's trigger and obligation definitions, in clause order.

    A clause naming a rule that is not registered is a `SpecError` naming the pack and the field.
    """
    out: list[DataDefinition] = []
    for i, clause in enumerate(pack.clauses):
        _check_rule(pack, i, "trigger", clause.trigger.rule)
        _check_rule(pack, i, "obligation", clause.obligation.rule)
        out.extend(clause_definitions(clause))
    return tuple(out)


GENERIC_DEFINITIONS: tuple[DataDefinition, ...] = ()
"""What the registered spec carries: conduct has no pack-independent data (every datum comes from a clause)."""
