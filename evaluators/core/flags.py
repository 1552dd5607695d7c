"""Flags: which per-unit data values and per-unit results a component raises as a problem (or reports as a
notable state), declared by the component beside its data definitions.

A flag is read from one stored row per unit: an atomic datum (`source="datum"`, `item` is the data id) or a
per-unit result (`source="result"`, `item` is the metric). Its value on a unit is 1 when the row's value is in
`raised` (and, with `fact`, the datum's fact equals it), 0 when the value is in `clear` (or raised without the
fact), and None otherwise: an uncollected datum, or no row at all, is never a pass. A `gate` datum (Conduct's
trigger) decides first: `gate_clear` values give 0 whatever the item says, any value other than `yes` or those
gives None.
A 0 read from a `not_applicable` item (`vacuous`) is no judgment: when none of a component's flags on a unit was
raised or judged, its vacuous zeros read None (a component with nothing collected is undecided, never 0).

Declaring flags changes no data definition: they are read off the stored rows, so no digest moves.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from agent_factory.evaluators.core.model import Layer
from agent_factory.frozen import Frozen

Meaning = Literal["bad", "descriptive", "instrument"]
"""What a raised flag says: `bad` a problem of the agent; `descriptive` a state worth counting that is no
failure (a hand-off to a person, a fast answer); `instrument` a problem of the evidence, not of the agent
(incomplete records, text addressed to the evaluator)."""
FlagSource = Literal["datum", "result"]
"""Where the flag is read: an atomic datum of the unit, or a per-unit result."""


class FlagSpec(Frozen):
    """One flag a component raises on a unit."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")
    """Dotted id, component first: `execution.delivery_failed`, `conduct.<clause>.violated`."""
    component: str
    """The component that raises it."""
    layer: Layer
    """The unit it is raised on (the layer of the datum or result it reads)."""
    label: str = Field(min_length=1)
    """What it says in a few words people read (`delivery failed`)."""
    description: str = ""
    """The longer text behind it (a clause's policy sentence), for reports."""
    meaning: Meaning = "bad"
    """A problem (`bad`), a notable state that is no failure (`descriptive`), or an instrument problem."""
    source: FlagSource = "datum"
    """Read from an atomic datum or from a per-unit result."""
    item: str = Field(min_length=1)
    """The data id (source `datum`) or the result metric (source `result`) it reads."""
    raised: tuple[str, ...] = Field(min_length=1)
    """Values that raise the flag (datum values `yes` / `no` / `not_applicable`, or result labels)."""
    clear: tuple[str, ...] = ()
    """Values that mean the unit was checked and the flag is not raised; any other value gives None."""
    fact: str | None = None
    """With a raised value, the datum's fact must equal this to raise (`handed_off`); else the flag is 0."""
    gate: str | None = None
    """A datum that must be `yes` for `item` to be read (a clause's trigger); None: no gate."""
    gate_clear: tuple[str, ...] = ("no", "not_applicable")
    """Gate values that give 0 (the condition did not arise); other gate values than `yes` give None."""

    @model_validator(mode="after")
    def _consistent(self) -> FlagSpec:
        if set(self.raised) & set(self.clear):
            raise ValueError(f"flag {self.id}: a value cannot both raise and clear it")
        if self.gate is not None and self.source != "datum":
            raise ValueError(f"flag {self.id}: a gate applies to datum flags only")
        return self

    def value_of(self, value: str | None, fact: object = None, *, gate: str | None = None) -> int | None:
        """The flag on one unit from its row's value (None: no row), the datum's fact, and the gate's value."""
        if self.gate is not None:
            if gate in self.gate_clear:
                return 0
            if gate != "yes":
                return None
        if value is None:
            return None
        if value in self.raised:
            if self.fact is None or fact == self.fact:
                return 1
            return 0
        return 0 if value in self.clear else None

    def vacuous(self, value: str | None) -> bool:
        """Whether a 0 from this datum value says only that the item had nothing to judge on the unit
        (`not_applicable`: a checklist item of an answer never delivered), not that it was judged and found fine:
        such zeros alone do not make a component decided on a unit (`evaluators.findings.flag_table`). A gate's
        clear value is a judgment of its own (the trigger was checked and did not arise), so it is not vacuous."""
        return self.source == "datum" and self.gate is None and value == "not_applicable"


__all__ = ["FlagSource", "FlagSpec", "Meaning"]
