"""What the views look up by id: what an id names, the text a pointer's field holds, a datum's evidence, and the
stored rows of one unit (its turns, spans, data and per-unit results) that `show` draws.

Every read returns stored values as they are (JSON as text, nothing redacted): the views decode and redact.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

from agent_factory.evaluators.provenance.segments import lookup
from agent_factory.factory.store.base import Store

UnitKind = Literal["span", "turn", "conversation", "user"]
_SPAN_FIELDS = ("input", "output", "error")
_TURN_FIELDS = ("request", "answer")
_TURN_COLUMNS = ("request", "answer", "mode", "delivery", "segment")
_SPAN_COLUMNS = ("input", "output", "error", "name", "kind", "status", "model")
_ATTRIBUTE_TABLES = ("turns", "spans", "conversations")
"""Where an `attributes.<key>` field is looked up, in this order (the same id names one of them)."""


class Located(NamedTuple):
    """What an id names in the store."""

    kind: UnitKind
    conversation_id: str | None
    user_id: str | None
    turn_id: str | None = None


def locate(store: Store, unit_id: str) -> Located | None:
    """What `unit_id` is: a turn, a conversation, a span or a user (looked up in that order); None: nothing."""
    con = store.con
    row = con.execute("SELECT conversation_id, user_id FROM turns WHERE id = ?", [unit_id]).fetchone()
    if row is not None:
        return Located("turn", row[0], row[1], unit_id)
    row = con.execute("SELECT user_id FROM turns WHERE conversation_id = ? LIMIT 1", [unit_id]).fetchone() \
        or con.execute("SELECT user_id FROM conversations WHERE id = ?", [unit_id]).fetchone()
    if row is not None:
        return Located("conversation", unit_id, row[0])
    row = con.execute("SELECT s.turn_id, t.conversation_id, t.user_id FROM spans s LEFT JOIN turns t"
                      " ON t.id = s.turn_id WHERE s.id = ? LIMIT 1", [unit_id]).fetchone()
    if row is not None:
        return Located("span", row[1], row[2], row[0])
    if con.execute("SELECT 1 FROM turns WHERE user_id = ? LIMIT 1", [unit_id]).fetchone() is not None:
        return Located("user", None, unit_id)
    return None


def _attribute(store: Store, table: str, unit_id: str, key: str) -> tuple[bool, Any]:
    """(whether `unit_id`'s row of `table` has attributes, the value at `key` in them)."""
    row = store.con.execute(f"SELECT attributes FROM {table} WHERE id = ? LIMIT 1", [unit_id]).fetchone()
    if row is None or not row[0]:
        return False, None
    # Stored flat (`{"gen_ai.prompt": ..}`, as OTel exporters write them), nested or mixed: read as the rules did.
    return True, lookup(json.loads(row[0]), key)


def field_text(store: Store, unit_id: str, field: str) -> str | None:
    """The text an evidence pointer's `field` of `unit_id` holds (a turn's request or answer, a span's input,
    output or error, a text attribute); None when it is not stored or is no text."""
    if field in _TURN_FIELDS:
        row = store.con.execute(f"SELECT {field} FROM turns WHERE id = ?", [unit_id]).fetchone()
        if row is not None:
            return row[0] if isinstance(row[0], str) else None
    if field in _SPAN_FIELDS:
        row = store.con.execute(f"SELECT {field} FROM spans WHERE id = ? LIMIT 1", [unit_id]).fetchone()
        return row[0] if row is not None and isinstance(row[0], str) else None
    if field.startswith("attributes."):
        for table in _ATTRIBUTE_TABLES:
            found, value = _attribute(store, table, unit_id, field.removeprefix("attributes."))
            if found:
                return value if isinstance(value, str) else None
    return None


def field_value(store: Store, unit_id: str, field: str) -> str | list[Any] | None:
    """The text (for `attributes.tool_calls`, the list) a pointer's field holds; None when not stored.
    `field_text` reads the text fields; the other turn and span columns, attributes stored flat and
    non-text attributes are read here."""
    text = field_text(store, unit_id, field)
    if text is not None:
        return text
    con = store.con
    if field in _TURN_COLUMNS:
        row = con.execute(f"SELECT {field} FROM turns WHERE id = ?", [unit_id]).fetchone()
        if row is not None and row[0] is not None:
            return str(row[0])
    if field in _SPAN_COLUMNS:
        row = con.execute(f"SELECT {field} FROM spans WHERE id = ? LIMIT 1", [unit_id]).fetchone()
        if row is not None and row[0] is not None:
            return str(row[0])
    if field.startswith("attributes."):
        for table in _ATTRIBUTE_TABLES:
            found, value = _attribute(store, table, unit_id, field.removeprefix("attributes."))
            if not found:
                continue
            if isinstance(value, str | list):
                return value
            if isinstance(value, int | float | bool):
                return json.dumps(value)
    return None


def evidence(store: Store, unit_id: str, item: str) -> str | None:
    """The evidence pointers (JSON text) of the primary rater's datum `item` on `unit_id`; None: no datum."""
    row = store.con.execute("SELECT evidence FROM atomic_data WHERE unit_id = ? AND item = ? AND rater = 'primary'",
                            [unit_id, item]).fetchone()
    return row[0] if row else None


class DatumRecord(NamedTuple):
    """One stored atomic datum (fact and evidence as JSON text)."""

    unit_id: str
    item: str
    value: str | None
    fact: str | None
    reason: str | None
    evidence: str | None
    tier: str | None
    collector: str | None
    rater: str


class UnitResult(NamedTuple):
    """One stored per-unit result (its value as JSON text)."""

    unit_id: str
    component: str
    metric: str
    value: str | None
    note: str | None


class SpanRecord(NamedTuple):
    """What `show` draws of a stored span (attributes as JSON text)."""

    id: str
    name: str | None
    kind: str | None
    status: str | None
    input: str | None
    output: str | None
    error: str | None
    attributes: str | None


class TurnRecord(NamedTuple):
    """What `show` draws of a stored turn."""

    id: str
    idx: int | None
    request: str | None
    answer: str | None
    delivery: str | None
    mode: str | None
    n_spans: int | None


def unit_data(store: Store, unit_ids: Sequence[str]) -> list[DatumRecord]:
    """Every rater's data on `unit_ids`, by unit and item, the primary rater first."""
    rows = store.con.execute(
        "SELECT unit_id, item, value, fact, reason, evidence, tier, collector, rater FROM atomic_data"
        " WHERE unit_id IN (SELECT unnest(?)) ORDER BY unit_id, item, rater != 'primary', rater",
        [list(unit_ids)]).fetchall()
    return [DatumRecord._make(r) for r in rows]


def unit_results(store: Store, unit_ids: Sequence[str]) -> list[UnitResult]:
    """The per-unit results on `unit_ids`, in (component, metric, stratum) order."""
    rows = store.con.execute(
        "SELECT unit_id, component, metric, value, note FROM results WHERE unit_id IN (SELECT unnest(?))"
        " ORDER BY component, metric, stratum", [list(unit_ids)]).fetchall()
    return [UnitResult._make(r) for r in rows]


def spans_of(store: Store, *, turn_id: str | None = None, span_id: str | None = None) -> list[SpanRecord]:
    """The spans of a turn in time order (`turn_id`), or the one span `span_id`."""
    where, args = ("id = ?", [span_id]) if span_id is not None else ("turn_id = ?", [turn_id])
    rows = store.con.execute(
        f"SELECT id, name, kind, status, input, output, error, attributes FROM spans WHERE {where}"
        " ORDER BY start_time NULLS LAST, trace_id, seq, id", args).fetchall()
    return [SpanRecord._make(r) for r in rows]


def turns_of(store: Store, *, conversation_id: str | None = None, turn_id: str | None = None) -> list[TurnRecord]:
    """A conversation's turns in order (`conversation_id`), or the one turn `turn_id`."""
    where, args = ("conversation_id = ?", [conversation_id]) if turn_id is None else ("id = ?", [turn_id])
    rows = store.con.execute(
        f"SELECT id, idx, request, answer, delivery, mode, n_spans FROM turns WHERE {where}"
        " ORDER BY idx NULLS LAST, start_time NULLS LAST, id", args).fetchall()
    return [TurnRecord._make(r) for r in rows]


def user_conversations(store: Store, user_id: str) -> list[tuple[str, int]]:
    """(conversation id, its number of turns) of a user's conversations, the first begun first."""
    rows = store.con.execute("SELECT conversation_id, count(*) FROM turns WHERE user_id = ? GROUP BY 1"
                             " ORDER BY min(start_time) NULLS LAST, 1", [user_id]).fetchall()
    return [(c, int(n)) for c, n in rows]
