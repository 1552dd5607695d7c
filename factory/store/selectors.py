"""Which conversations a version selector picks (`gate --baseline service.version=2.3.0`): the SQL of a selector.

A selector `key=v1,v2` picks the conversations whose own attributes, one of whose turns' attributes, or one of
whose spans' attributes (OTel resource attributes are merged into a span's) give `key` one of the values; the
key `segment` reads the turns' traffic segment. Values compare as text (a trial stored as 0 matches `0`).
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_factory.factory.store.base import Store


def _path(key: str) -> str:
    # A JSON path naming the key literally: dots belong to OTel attribute names, not to nesting.
    return '$."' + key.replace('"', '\\"') + '"'


def select_conversations(store: Store, key: str, values: Sequence[str]) -> set[str]:
    """Ids of the conversations `key` in `values` picks (empty when none does)."""
    vals = [str(v) for v in values]
    con = store.con
    if key == "segment":
        rows = con.execute("SELECT DISTINCT conversation_id FROM turns WHERE segment IN (SELECT unnest(?))",
                           [vals]).fetchall()
        return {r[0] for r in rows}
    path = _path(key)
    sql = (
        "SELECT id FROM conversations WHERE json_valid(attributes)"
        " AND json_extract_string(attributes, ?) IN (SELECT unnest(?))"
        " UNION SELECT conversation_id FROM turns WHERE json_valid(attributes)"
        " AND json_extract_string(attributes, ?) IN (SELECT unnest(?))"
        " UNION SELECT t.conversation_id FROM spans s JOIN turns t ON s.turn_id = t.id WHERE json_valid(s.attributes)"
        " AND json_extract_string(s.attributes, ?) IN (SELECT unnest(?))"
    )
    rows = con.execute(sql, [path, vals, path, vals, path, vals]).fetchall()
    return {r[0] for r in rows if r[0] is not None}


def attribute_values(store: Store, key: str, *, limit: int = 20) -> list[str]:
    """The values `key` takes in the store (for an error naming what a selector could have been)."""
    con = store.con
    if key == "segment":
        return [r[0] for r in con.execute("SELECT DISTINCT segment FROM turns WHERE segment IS NOT NULL ORDER BY 1"
                                          " LIMIT ?", [limit]).fetchall()]
    path = _path(key)
    sql = (
        "SELECT v FROM (SELECT json_extract_string(attributes, ?) v FROM conversations WHERE json_valid(attributes)"
        " UNION SELECT json_extract_string(attributes, ?) FROM turns WHERE json_valid(attributes))"
        " WHERE v IS NOT NULL ORDER BY 1 LIMIT ?"
    )
    return [r[0] for r in con.execute(sql, [path, path, limit]).fetchall()]


__all__ = ["attribute_values", "select_conversations"]
