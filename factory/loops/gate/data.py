"""The gate's data in: which side is which (a store, or a selector on a version attribute of one), and each side's
rows of every gated measure as columns (`evaluators.gate.columns.GateColumns`).

The rows are the stored atomic data of the last run (the primary rater's), read through `store.units.load_rows`
as every analysis reads them, so the gate judges exactly what `run` and `summary` report. An item an audit
retired (`store.audit.retired_in_force`) takes its measures out of the gate, as it takes its flags out of the
views.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_factory.errors import AgentFactoryError, UsageError
from agent_factory.evaluators.core.gate import GateMeasure
from agent_factory.evaluators.core.model import Layer
from agent_factory.evaluators.core.registry import ComponentSpec, UnitRow, cluster_of
from agent_factory.evaluators.gate.columns import GateColumns, gate_columns
from agent_factory.factory.store import Store
from agent_factory.factory.store.audit import retired_in_force
from agent_factory.factory.store.selectors import attribute_values, select_conversations
from agent_factory.factory.store.units import load_rows
from agent_factory.knowledge_packs import KnowledgePack


@dataclass(frozen=True)
class Side:
    """One side of a gate: a store, all of it or the conversations a selector picks (`key=v1,v2`)."""

    store: Path
    key: str | None = None
    values: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """`a.duckdb` or `a.duckdb[trial=0,1]`: how the side is named in output and in the store's records."""
        return str(self.store) if self.key is None else f"{self.store}[{self.key}={','.join(self.values)}]"

    @property
    def selector(self) -> str | None:
        """`key=v1,v2`, or None for a whole store."""
        return None if self.key is None else f"{self.key}={','.join(self.values)}"


def parse_side(text: str, *, store: Path, option: str) -> Side:
    """`text` as given to `--baseline`/`--candidate`: an existing store file, or a selector `KEY=VALUE[,VALUE]` on
    `store` (`service.version=2.3.0`, `gen_ai.agent.version=v7`, `trial=0,1`, `segment=real`)."""
    path = Path(text)
    if path.is_file():
        return Side(store=path)
    if "=" in text:
        key, _, raw = text.partition("=")
        values = tuple(v.strip() for v in raw.split(",") if v.strip())
        if key.strip() and values:
            return Side(store=store, key=key.strip(), values=values)
    raise UsageError(f"{option} {text!r}: neither a store file nor a selector; give a store path (a.duckdb) or "
                     f"KEY=VALUE[,VALUE] on --store (service.version=2.3.0, trial=0,1, segment=real)")


def gate_measures(pack: KnowledgePack, components: Sequence[ComponentSpec]) -> tuple[GateMeasure, ...]:
    """Every gated measure of the suite's components over its pack, in component order."""
    return tuple(m for spec in components for m in spec.gate_for(pack))


def retired_measures(store: Store, measures: Sequence[GateMeasure]) -> dict[str, str]:
    """Measure key -> the retired item it reads, for the measures an audit took out (their data untrusted)."""
    retired = retired_in_force(store)
    return {m.key: next(i for i in m.items if i in retired) for m in measures if any(i in retired for i in m.items)}


def _layers(measures: Sequence[GateMeasure]) -> list[Layer]:
    return sorted({m.layer for m in measures})


def side_rows(store: Store, side: Side, measures: Sequence[GateMeasure]) -> dict[Layer, Sequence[UnitRow]]:
    """The rows every measure reads, of the side's conversations (all of the store's without a selector)."""
    items = sorted({i for m in measures for i in m.items})
    rows: Mapping[Layer, Sequence[UnitRow]] = load_rows(store, items=items, layers=_layers(measures))
    if side.key is None:
        return dict(rows)
    picked = select_conversations(store, side.key, side.values)
    if not picked:
        seen = attribute_values(store, side.key)
        hint = f"values seen: {', '.join(seen)}" if seen else "no conversation or turn has that attribute"
        raise AgentFactoryError(f"{side.label}: the selector picks no conversation of {side.store} ({hint})")
    return {layer: _pick(layer_rows, picked) for layer, layer_rows in rows.items()}


def _pick(rows: Sequence[UnitRow], conversations: Collection[str]) -> list[UnitRow]:
    users = {cluster_of(r) for r in rows if r.conversation_id in conversations}
    # An engagement row has no conversation: it belongs to a side when one of its user's conversations does.
    return [r for r in rows if (r.conversation_id in conversations
                                if r.conversation_id is not None else cluster_of(r) in users)]


def load_side(store: Store, side: Side, measures: Sequence[GateMeasure]) -> GateColumns:
    """The side's rows of every measure, as columns over its users."""
    return gate_columns(measures, side_rows(store, side, measures))


__all__ = ["Side", "gate_measures", "load_side", "parse_side", "retired_measures", "side_rows"]
