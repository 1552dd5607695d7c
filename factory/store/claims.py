"""Who holds an id already: the reads behind ingest's identity checks (`factory.identity`), and the deletes of
`ingest --replace`.

A record whose id another file already stored is either the same record seen again (a file that grew, a copy)
or another record under the same id (two exports that both number from 1, a chat conversation and an OTLP
session that share an id, an edited file). Ingest asks here which, and never lets the key conflict of an append
drop a record it has counted.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from agent_factory.factory.store.base import Store
from agent_factory.factory.store.schema import SOURCE_TABLES


class Claim:
    """What the store holds under one conversation id, from files other than the one being ingested."""

    __slots__ = ("digest", "paths")

    def __init__(self) -> None:
        self.paths: list[str] = []
        """The files that stored it (first stored first)."""
        self.digest: str | None = None
        """The digest of the whole-conversation record stored under it; None when only turns of a span format
        (an OTLP session) are stored under it."""


def conversation_claims(store: Store, ids: Sequence[str], *, source_id: str) -> dict[str, Claim]:
    """The ids among `ids` that files other than `source_id` stored, as conversations or as the conversation of
    stored turns."""
    out: dict[str, Claim] = {}
    if not ids:
        return out
    args = [list(ids), source_id]
    for cid, path, dig in store.con.execute(
        "SELECT c.id, s.path, c.digest FROM conversations c JOIN sources s ON s.source_id = c.source_id"
        " WHERE c.id IN (SELECT unnest(?)) AND c.source_id <> ? ORDER BY s.ingested_at", args,
    ).fetchall():
        claim = out.setdefault(cid, Claim())
        claim.digest = dig
        if path not in claim.paths:
            claim.paths.append(path)
    for cid, path in store.con.execute(
        "SELECT DISTINCT t.conversation_id, s.path FROM turns t JOIN sources s ON s.source_id = t.source_id"
        " WHERE t.conversation_id IN (SELECT unnest(?)) AND t.source_id <> ?", args,
    ).fetchall():
        claim = out.setdefault(cid, Claim())
        if path not in claim.paths:
            claim.paths.append(path)
    return out


def event_claims(store: Store, ids: Sequence[str], *, source_id: str) -> dict[str, tuple[str, str, str | None]]:
    """Outcome events among `ids` that other files stored: id -> (path, kind, value JSON)."""
    if not ids:
        return {}
    return {eid: (path, kind, value) for eid, path, kind, value in store.con.execute(
        "SELECT e.id, s.path, e.kind, e.value FROM events e JOIN sources s ON s.source_id = e.source_id"
        " WHERE e.id IN (SELECT unnest(?)) AND e.source_id <> ?", [list(ids), source_id]).fetchall()}


def turn_claims(store: Store, ids: Sequence[str], *, source_id: str) -> dict[str, str]:
    """Turn ids among `ids` that other files stored: id -> path."""
    if not ids:
        return {}
    return dict(store.con.execute(
        "SELECT t.id, s.path FROM turns t JOIN sources s ON s.source_id = t.source_id"
        " WHERE t.id IN (SELECT unnest(?)) AND t.source_id <> ?", [list(ids), source_id]).fetchall())


def has_sources(store: Store) -> bool:
    """Whether any file is stored (when none is, no id can be claimed)."""
    return store.con.execute("SELECT 1 FROM sources LIMIT 1").fetchone() is not None


def claimed_sessions(store: Store, source_id: str) -> list[tuple[str, str, str]]:
    """Turns this file built from spans whose conversation id another file holds as a whole-conversation record
    (a chat or tau-bench conversation owns its id: turns of a span format cannot join it). (turn id, conversation
    id, the other file's path), one per turn."""
    rows = store.con.execute(
        "SELECT t.id, t.conversation_id, s.path, s.ingested_at FROM turns t"
        " JOIN conversations c ON c.id = t.conversation_id AND c.source_id <> t.source_id"
        " JOIN sources s ON s.source_id = c.source_id"
        " WHERE t.source_id = ? AND NOT EXISTS (SELECT 1 FROM conversations m WHERE m.id = t.conversation_id"
        "                                       AND m.source_id = t.source_id)"
        " ORDER BY 1, 4", [source_id]).fetchall()
    out: dict[str, tuple[str, str, str]] = {}
    for tid, cid, path, _when in rows:
        out.setdefault(str(tid), (str(tid), str(cid), str(path)))
    return list(out.values())


def refuse_turns(store: Store, turn_ids: Collection[str], *, source_id: str) -> list[tuple[str, str, str, str]]:
    """Delete this file's turns `turn_ids` with their spans and provenance; their spans as (trace id, span id,
    turn id, attributes JSON), the records refused."""
    ids = sorted(turn_ids)
    spans = [(str(t), str(s), str(u), str(a or "{}")) for t, s, u, a in store.con.execute(
        "SELECT trace_id, id, turn_id, attributes FROM spans WHERE turn_id IN (SELECT unnest(?)) AND source_id = ?"
        " ORDER BY turn_id, seq", [ids, source_id]).fetchall()]
    for table, col in (("turns", "id"), ("provenance", "turn_id"), ("spans", "turn_id")):
        store.con.execute(f"DELETE FROM {table} WHERE {col} IN (SELECT unnest(?)) AND source_id = ?", [ids, source_id])
    return spans


def earlier_versions(store: Store, path: Path, *, source_id: str) -> list[tuple[str, str]]:
    """Stored files at the path of `path` (as given, or resolved) with other content: (source id, stored path)."""
    want = {str(path), str(path.resolve())}
    out = []
    for sid, stored in store.con.execute("SELECT source_id, path FROM sources WHERE source_id <> ?",
                                         [source_id]).fetchall():
        if stored in want or str(Path(stored).resolve()) in want:
            out.append((str(sid), str(stored)))
    return out


def refused_source(store: Store, source_id: str) -> bool:
    """Whether `source_id` is stored as a source no adapter read (no format; its one quarantine says why)."""
    row = store.con.execute("SELECT format IS NULL FROM sources WHERE source_id = ?", [source_id]).fetchone()
    return bool(row and row[0])


def drop_sources(store: Store, source_ids: Collection[str]) -> None:
    """Delete every row the files `source_ids` stored, and their records of having been ingested."""
    ids = sorted(source_ids)
    for table in (*SOURCE_TABLES, "sources"):
        store.con.execute(f"DELETE FROM {table} WHERE source_id IN (SELECT unnest(?))", [ids])
