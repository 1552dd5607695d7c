"""The per-unit flag table: every component's flags read off the stored rows, rolled up to sessions and users.

Pure: the caller (factory.views.findings) reads the rows from the store. A flag's value on a unit is 1, 0 or None
(`FlagSpec.value_of`); a unit of the flag's layer without its row gets None, never 0. Rolling up to a
coarser level takes every unit below it (a conversation's turns and their spans, a user's sessions and
turns): 1 when any unit raised the flag, 0 when every unit was checked and none did, None otherwise (an
undecided unit could have raised it). A component with nothing collected on a unit is undecided there: when none
of its flags was raised or judged (each undecided, or 0 only because its item was `not_applicable`: nothing to
judge), those zeros read None too (`FlagSpec.vacuous`), so counts and the layer table say undecided, never 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Literal, NamedTuple

from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.core.model import Layer

VERSION = "1"

Level = Literal["span", "turn", "conversation", "user"]
"""The levels a flag table (and an export) is drawn at: the four layers in people's words."""
LEVELS: tuple[Level, ...] = ("span", "turn", "conversation", "user")
LAYER_OF: dict[Level, Layer] = {"span": "span", "turn": "trace", "conversation": "conversation", "user": "engagement"}
_RANK: dict[Layer, int] = {"span": 0, "trace": 1, "conversation": 2, "engagement": 3}


class UnitKey(NamedTuple):
    """A unit and where it sits: its conversation, its user and its turn's index (spans and turns)."""

    unit_id: str
    layer: Layer
    conversation_id: str | None
    user_id: str | None
    position: int = 0
    """The turn's index in its conversation (a span carries its turn's)."""


class DatumRow(NamedTuple):
    """What a flag reads of one atomic datum (fact decoded from its JSON)."""

    unit_id: str
    item: str
    value: str
    fact: float | str | None = None


class ResultRow(NamedTuple):
    """What a flag reads of one per-unit result (value decoded from its JSON)."""

    unit_id: str
    component: str
    metric: str
    value: float | str | None


class FlagRow(NamedTuple):
    """One flag on one unit."""

    unit_id: str
    layer: Layer
    conversation_id: str | None
    user_id: str | None
    component: str
    flag: str
    value: int | None
    """1 raised, 0 checked and not raised, None undecided (uncollected: never a pass)."""


def read_items(specs: Iterable[FlagSpec]) -> tuple[set[str], set[tuple[str, str]]]:
    """The data ids (items and gates) and the (component, metric) results the flags read: what to load."""
    items: set[str] = set()
    metrics: set[tuple[str, str]] = set()
    for s in specs:
        if s.source == "datum":
            items.add(s.item)
            if s.gate is not None:
                items.add(s.gate)
        else:
            metrics.add((s.component, s.item))
    return items, metrics


def flag_table(specs: Sequence[FlagSpec], units: Sequence[UnitKey], data: Iterable[DatumRow],
               results: Iterable[ResultRow]) -> list[FlagRow]:
    """Every flag on every unit of its layer, in spec order then unit order."""
    by_item: dict[str, dict[str, tuple[str, float | str | None]]] = defaultdict(dict)
    for d in data:
        by_item[d.item][d.unit_id] = (d.value, d.fact)
    by_metric: dict[tuple[str, str], dict[str, str | None]] = defaultdict(dict)
    for r in results:
        by_metric[(r.component, r.metric)][r.unit_id] = None if r.value is None else str(r.value)
    per_layer: dict[Layer, list[UnitKey]] = defaultdict(list)
    for u in units:
        per_layer[u.layer].append(u)
    out: list[FlagRow] = []
    vacuous: set[int] = set()  # indices into `out` of zeros read from a `not_applicable` item
    for s in specs:
        if s.source == "datum":
            rows = by_item.get(s.item, {})
            gates = by_item.get(s.gate, {}) if s.gate is not None else {}
            for u in per_layer.get(s.layer, ()):
                value, fact = rows.get(u.unit_id, (None, None))
                gate = gates.get(u.unit_id, (None, None))[0] if s.gate is not None else None
                flag = s.value_of(value, fact, gate=gate)
                if flag == 0 and s.vacuous(value):
                    vacuous.add(len(out))
                out.append(FlagRow(u.unit_id, u.layer, u.conversation_id, u.user_id, s.component, s.id, flag))
        else:
            labels = by_metric.get((s.component, s.item), {})
            for u in per_layer.get(s.layer, ()):
                out.append(FlagRow(u.unit_id, u.layer, u.conversation_id, u.user_id, s.component, s.id,
                                   s.value_of(labels.get(u.unit_id))))
    return _undecided_components(out, vacuous)


def _undecided_components(rows: list[FlagRow], vacuous: Collection[int]) -> list[FlagRow]:
    """A component none of whose flags on a unit was raised or judged (each undecided, or 0 only because its
    item did not apply) has nothing collected there: its vacuous zeros become None, so the unit reads undecided
    for that component, never 0 (a substance checklist no model scored, or an answer never delivered)."""
    judged = {(r.unit_id, r.component) for i, r in enumerate(rows) if r.value is not None and i not in vacuous}
    open_ = {(r.unit_id, r.component) for r in rows} - judged
    return [r._replace(value=None) if i in vacuous and (r.unit_id, r.component) in open_ else r
            for i, r in enumerate(rows)]


def level_units(units: Sequence[UnitKey], level: Level) -> list[UnitKey]:
    """The units of a level; a user is a unit whose id is the user id (the store keeps no engagement rows)."""
    if level != "user":
        layer = LAYER_OF[level]
        return [u for u in units if u.layer == layer]
    users = sorted({u.user_id for u in units if u.user_id is not None})
    return [UnitKey(uid, "engagement", None, uid) for uid in users]


def _parent(row: FlagRow, level: Level, turn_of_span: Mapping[str, str]) -> str | None:
    if level == "user":
        return row.user_id
    if level == "conversation":
        return row.conversation_id
    if level == "turn":
        return turn_of_span.get(row.unit_id) if row.layer == "span" else row.unit_id
    return row.unit_id


def turns_of_spans(units: Sequence[UnitKey]) -> dict[str, str]:
    """Span unit id -> its turn's unit id (same conversation and turn index)."""
    turns = {(u.conversation_id, u.position): u.unit_id for u in units if u.layer == "trace"}
    return {u.unit_id: t for u in units if u.layer == "span"
            if (t := turns.get((u.conversation_id, u.position))) is not None}


def roll_up(rows: Sequence[FlagRow], units: Sequence[UnitKey], *, level: Level) -> list[FlagRow]:
    """The flags of each unit of `level`: its own and those of every unit below it, combined (module docstring).
    Units of the level with none of a flag's rows below them get no row for that flag."""
    target = LAYER_OF[level]
    keys = {u.unit_id: u for u in level_units(units, level)}
    spans = turns_of_spans(units) if level == "turn" else {}
    combined: dict[tuple[str, str], tuple[str, list[int | None]]] = {}
    for r in rows:
        if _RANK[r.layer] > _RANK[target]:
            continue
        parent = _parent(r, level, spans)
        if parent is None or parent not in keys:
            continue
        combined.setdefault((parent, r.flag), (r.component, []))[1].append(r.value)
    out: list[FlagRow] = []
    for (uid, flag), (component, values) in combined.items():
        u = keys[uid]
        value = 1 if 1 in values else (0 if all(v == 0 for v in values) else None)
        out.append(FlagRow(uid, target, u.conversation_id, u.user_id, component, flag, value))
    return out


def flag_counts(rows: Iterable[FlagRow], *, counted: Collection[str]) -> dict[str, dict[str, int]]:
    """unit id -> component -> number of the `counted` flags raised on it (components with none left out).
    Callers count the flags meaning `bad` (`bad_flags`): a hand-off or an instrument problem is no failure."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        if r.value == 1 and r.flag in counted:
            out[r.unit_id][r.component] += 1
    return {u: dict(c) for u, c in out.items()}


def bad_flags(specs: Iterable[FlagSpec]) -> frozenset[str]:
    """The ids of the flags that mean a problem of the agent (`meaning == "bad"`)."""
    return frozenset(s.id for s in specs if s.meaning == "bad")
