"""Atomic data as columns: what one collection over many units hands on, one list per field of `AtomicDatum`.

A rules-only run decides hundreds of thousands of data; building, validating and serialising an `AtomicDatum`
per datum cost more than the rules themselves. Rules are evaluated one definition at a time over a batch of
units (`evaluators.collect.tiers.RuleTier.decide_columns`), and their answers are appended here a column at a
time: the store writes the columns as one Arrow table. `AtomicDatum` objects are built only where a reader asks
for them (`DataColumns.data`), and the model tiers, whose answers are few and costly, still produce them.

The checks `AtomicDatum` makes on a rule's answer are made by the rule tier as it appends (a value outside the
four, an uncollected datum without a reason, a fact of the wrong type: `VALUES`, `fact_value`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from agent_factory.adapters.model import EvidencePointer
from agent_factory.evaluators.core.model import AtomicDatum, CollectorIdentity, Layer, Value

if TYPE_CHECKING:  # the registry module defines the unit views and imports this one's users
    from agent_factory.evaluators.core.registry import Unit

VALUES: frozenset[str] = frozenset(("yes", "no", "not_applicable", "uncollected"))
"""The values a datum may take (`Value`)."""

FIELDS: tuple[str, ...] = (
    "unit_id", "layer", "item", "item_version", "value", "fact", "reason", "evidence", "tier", "collector",
    "family", "collector_version", "tokens", "cost_usd", "coverage", "key", "rater",
)
"""The columns, in the order of the store's `atomic_data` table (its `run_id` aside)."""


class UnitInput(NamedTuple):
    """One unit of a batch: its id, the unit itself (what rules and projections read) and its flagged text."""

    unit_id: str
    unit: Unit
    """A span (with its turn), a turn, a conversation or an engagement view: what a rule of its layer reads."""
    injection_ranges: Sequence[EvidencePointer] = ()


def fact_value(fact: Any) -> float | str | None:
    """A rule's fact as `AtomicDatum.fact` holds it (numbers as floats, labels as strings); ValueError otherwise."""
    if fact is None or isinstance(fact, str):
        return fact
    if isinstance(fact, int | float):  # bool is an int: pydantic's lax float takes it as 0.0 / 1.0 too
        return float(fact)
    raise ValueError(f"a fact is a number, a string or None; got {type(fact).__name__}")


@dataclass
class DataColumns:
    """Atomic data of many units, one list per field (`FIELDS`); row i of every list is one datum."""

    unit_id: list[str] = field(default_factory=list)
    layer: list[str] = field(default_factory=list)
    item: list[str] = field(default_factory=list)
    item_version: list[str] = field(default_factory=list)
    value: list[str] = field(default_factory=list)
    fact: list[float | str | None] = field(default_factory=list)
    reason: list[str | None] = field(default_factory=list)
    evidence: list[tuple[EvidencePointer, ...]] = field(default_factory=list)
    tier: list[str] = field(default_factory=list)
    collector: list[str] = field(default_factory=list)
    family: list[str | None] = field(default_factory=list)
    collector_version: list[str] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    cost_usd: list[float] = field(default_factory=list)
    coverage: list[float | None] = field(default_factory=list)
    key: list[str] = field(default_factory=list)
    rater: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.unit_id)

    def columns(self) -> dict[str, list[Any]]:
        """Field name -> its list (the lists themselves, not copies)."""
        return {f: getattr(self, f) for f in FIELDS}

    def add_column(
        self, *, layer: Layer, item: str, item_version: str, collector: CollectorIdentity, rater: str,
        unit_ids: Sequence[str], values: Sequence[Value], facts: Sequence[float | str | None],
        reasons: Sequence[str | None], evidence: Sequence[tuple[EvidencePointer, ...]],
    ) -> None:
        """Data of one definition by one collector over `unit_ids` (no tokens, cost, coverage or key: rules)."""
        n = len(unit_ids)
        if not n:
            return
        self.unit_id.extend(unit_ids)
        self.layer.extend([layer] * n)
        self.item.extend([item] * n)
        self.item_version.extend([item_version] * n)
        self.value.extend(values)
        self.fact.extend(facts)
        self.reason.extend(reasons)
        self.evidence.extend(evidence)
        self.tier.extend([collector.tier] * n)
        self.collector.extend([collector.name] * n)
        self.family.extend([collector.family] * n)
        self.collector_version.extend([collector.version] * n)
        self.tokens.extend([0] * n)
        self.cost_usd.extend([0.0] * n)
        self.coverage.extend([None] * n)
        self.key.extend([""] * n)
        self.rater.extend([rater] * n)

    def add_data(self, data: Iterable[AtomicDatum]) -> None:
        """Append data collected one by one (the model tiers')."""
        for d in data:
            c = d.collector
            self.unit_id.append(d.unit_id)
            self.layer.append(d.layer)
            self.item.append(d.item)
            self.item_version.append(d.item_version)
            self.value.append(d.value)
            self.fact.append(d.fact)
            self.reason.append(d.reason)
            self.evidence.append(d.evidence)
            self.tier.append(c.tier)
            self.collector.append(c.name)
            self.family.append(c.family)
            self.collector_version.append(c.version)
            self.tokens.append(d.tokens)
            self.cost_usd.append(d.cost_usd)
            self.coverage.append(d.coverage)
            self.key.append(d.key)
            self.rater.append(d.rater)

    def extend(self, other: DataColumns) -> None:
        """Append every datum of `other`."""
        for f in FIELDS:
            getattr(self, f).extend(getattr(other, f))

    def data(self) -> tuple[AtomicDatum, ...]:
        """The data as `AtomicDatum` objects (validated), in column order."""
        return tuple(self.iter_data())

    def iter_data(self) -> Iterator[AtomicDatum]:
        """The data one `AtomicDatum` at a time."""
        for i in range(len(self)):
            yield AtomicDatum(
                unit_id=self.unit_id[i], layer=self.layer[i], item=self.item[i],
                item_version=self.item_version[i], value=self.value[i],
                fact=self.fact[i], reason=self.reason[i], evidence=self.evidence[i],
                collector=CollectorIdentity(tier=self.tier[i], name=self.collector[i],
                                            family=self.family[i], version=self.collector_version[i]),
                tokens=self.tokens[i], cost_usd=self.cost_usd[i], coverage=self.coverage[i], key=self.key[i],
                rater=self.rater[i],
            )

    @classmethod
    def of(cls, data: Iterable[AtomicDatum]) -> DataColumns:
        """Columns holding `data`."""
        out = cls()
        out.add_data(data)
        return out

