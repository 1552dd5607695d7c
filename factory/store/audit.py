"""The audit's tables: human labels, the audit sample, audit reports, retired items and the corrections log.

Created by `create_tables` on every store opened for writing (they are additive: a store of this schema version
written before the audit existed gains them on its next write, and a read-only open of such a store reads them as
empty). `labels` holds people's (and imported benchmarks') labels as raters of items, apart from `atomic_data`,
whose rows a run owns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

import pyarrow as pa

from agent_factory.evaluators.audit.model import AuditReport, Correction, Rating
from agent_factory.evaluators.audit.sample import Candidate
from agent_factory.factory.store.base import Store
from agent_factory.factory.store.schema import AUDIT_TABLES

# ---- labels ------------------------------------------------------------------------------------------------

def write_labels(store: Store, ratings: Sequence[Rating], *, source: str) -> int:
    """Store people's labels (`Rating`s of `human:<name>` raters); a label of the same (unit, item, rater)
    replaces the one stored. The number written."""
    if not ratings:
        return 0
    now = datetime.now(UTC)
    # One Arrow table, one delete and one insert: a statement per label took 5 s for Who&When's 4,034 labels.
    # As before, every label of the batch is inserted after the stored ones sharing a key are deleted.
    batch = pa.table({"unit_id": [r.unit_id for r in ratings], "item": [r.item for r in ratings],
                      "rater": [r.rater for r in ratings], "value": [r.value for r in ratings],
                      "user_id": [r.user for r in ratings]},
                     schema=pa.schema([(c, pa.string()) for c in ("unit_id", "item", "rater", "value", "user_id")]))
    with store.transaction():
        store.con.register("labels_batch", batch)
        try:
            store.con.execute(
                "DELETE FROM labels t WHERE EXISTS (SELECT 1 FROM labels_batch b WHERE t.unit_id = b.unit_id"
                " AND t.item = b.item AND t.rater = b.rater)")
            store.con.execute("INSERT INTO labels SELECT unit_id, item, rater, value, user_id, ?, ? FROM labels_batch",
                              [source, now])
        finally:
            store.con.unregister("labels_batch")
    return len(ratings)


def read_labels(store: Store, *, items: Iterable[str] | None = None) -> list[Rating]:
    """The stored human labels (of `items` only, when given), in (item, unit, rater) order."""
    if not store.has_table("labels"):
        return []
    where, args = "", []
    if items is not None:
        where, args = " WHERE item IN (SELECT unnest(?))", [sorted(items)]
    rows = store.con.execute("SELECT unit_id, user_id, item, rater, value FROM labels" + where
                             + " ORDER BY item, unit_id, rater", args).fetchall()
    return [Rating(u, user or u, i, r, v) for u, user, i, r, v in rows]


def label_sources(store: Store) -> dict[str, int]:
    """Labels per import source."""
    if not store.has_table("labels"):
        return {}
    return {s: int(n) for s, n in store.con.execute(
        "SELECT source, count(*) FROM labels GROUP BY 1 ORDER BY 1").fetchall()}


# ---- audit data (atomic data of every rater, as ratings) ----------------------------------------------------

def read_ratings(store: Store, *, raters: Iterable[str] | None = None, units: Iterable[str] | None = None,
                 items: Iterable[str] | None = None) -> list[Rating]:
    """The stored atomic data as ratings: every rater's (or `raters`'), of `units` and `items` only when given;
    uncollected data are no ratings and are left out. The user is the unit's `units.user_id`, else its user key (the
    conversation of a source that names no user), else its own id; a unit id two layers share (a turn that is its
    own conversation) is joined on its layer, so each datum is one rating."""
    where, args = ["d.value <> 'uncollected'"], []
    if raters is not None:
        where.append("d.rater IN (SELECT unnest(?))")
        args.append(sorted(raters))
    if units is not None:
        where.append("d.unit_id IN (SELECT unnest(?))")
        args.append(sorted(units))
    if items is not None:
        where.append("d.item IN (SELECT unnest(?))")
        args.append(sorted(items))
    # Read as Arrow columns and zipped into ratings: a third of the time of fetching a tuple per row and
    # unpacking it (56k primary data of 200 simulated users: 0.1 s against 0.3).
    table = store.con.sql(
        "SELECT d.unit_id, coalesce(u.user_id, u.user_key, d.unit_id), d.item, d.rater, d.value FROM atomic_data d"
        " LEFT JOIN units u ON u.unit_id = d.unit_id AND u.layer = d.layer WHERE " + " AND ".join(where)
        + " ORDER BY d.item, d.unit_id, d.rater", params=args).to_arrow_table()
    return list(map(Rating, *(column.to_pylist() for column in table.columns)))


# ---- the sample -------------------------------------------------------------------------------------------

def sample_candidates(store: Store, *, components: Iterable[str] | None = None) -> list[Candidate]:
    """Every (unit, component) pair with primary data, as audit sample candidates: the unit's user and layer,
    its traffic segment as the stratum (the turn's, or the mode of its turns for a session or a user; `all` when
    none is known), and whether the cascade found it hard (an item answered by a model tier, or left uncollected:
    a rule that abstained with no model to ask)."""
    where, args = "", []
    if components is not None:
        where, args = " AND split_part(d.item, '.', 1) IN (SELECT unnest(?))", [sorted(components)]
    rows = store.con.execute(
        "WITH seg AS (SELECT id AS unit_id, segment FROM turns"
        " UNION ALL SELECT conversation_id, mode(segment) FROM turns GROUP BY conversation_id)"
        " SELECT d.unit_id, coalesce(u.user_id, u.user_key, d.unit_id), d.layer, split_part(d.item, '.', 1),"
        " coalesce(any_value(seg.segment), 'all'),"
        " bool_or(d.tier <> 'rule' OR d.value = 'uncollected')"
        " FROM atomic_data d LEFT JOIN units u ON u.unit_id = d.unit_id AND u.layer = d.layer"
        " LEFT JOIN seg ON seg.unit_id = d.unit_id"
        " WHERE d.rater = 'primary'" + where + " GROUP BY 1, 2, 3, 4 ORDER BY 4, 3, 1", args).fetchall()
    return [Candidate(u, user, layer, comp, str(stratum), bool(hard)) for u, user, layer, comp, stratum, hard in rows]


def write_sample(store: Store, audit_id: str, rows: Sequence[tuple[str, str, str, str, str, float]]) -> None:
    """Store an audit's sample: (unit_id, user_id, layer, component, stratum, weight) per drawn unit."""
    with store.transaction():
        store.con.execute("DELETE FROM audit_sample WHERE audit_id = ?", [audit_id])
        if rows:
            store.con.executemany("INSERT INTO audit_sample VALUES (?, ?, ?, ?, ?, ?, ?)",
                                  [(audit_id, *r) for r in rows])


def read_sample(store: Store, audit_id: str) -> list[tuple[str, str, str, str, str, float]]:
    """An audit's stored sample, as `write_sample` took it."""
    if not store.has_table("audit_sample"):
        return []
    return [tuple(r) for r in store.con.execute(
        "SELECT unit_id, user_id, layer, component, stratum, weight FROM audit_sample WHERE audit_id = ?"
        " ORDER BY component, layer, stratum, unit_id", [audit_id]).fetchall()]


# ---- audit reports ----------------------------------------------------------------------------------------

def record_audit(store: Store, report: AuditReport, *, finished: datetime) -> None:
    """Store a finished audit's report."""
    store.con.execute("INSERT OR REPLACE INTO audits VALUES (?, ?, ?, ?)",
                      [report.audit_id, datetime.fromisoformat(report.started_at), finished,
                       report.model_dump_json()])


def latest_audit(store: Store) -> AuditReport | None:
    """The last finished audit's report; None before any audit."""
    if not store.has_table("audits"):
        return None
    row = store.con.execute("SELECT report FROM audits ORDER BY finished_at DESC LIMIT 1").fetchone()
    return AuditReport.model_validate_json(row[0]) if row else None


def audit_history(store: Store) -> list[AuditReport]:
    """Every stored audit's report, oldest first."""
    if not store.has_table("audits"):
        return []
    return [AuditReport.model_validate_json(r) for (r,) in store.con.execute(
        "SELECT report FROM audits ORDER BY finished_at").fetchall()]


# ---- retired items ----------------------------------------------------------------------------------------

def retire(store: Store, *, item: str, item_version: str, audit_id: str, why: str) -> None:
    """Retire `item` at `item_version` (its data leave the analyses; a new version is audited afresh)."""
    with store.transaction():
        store.con.execute("DELETE FROM retired WHERE item = ? AND item_version = ?", [item, item_version])
        store.con.execute("INSERT INTO retired VALUES (?, ?, ?, ?, ?)",
                          [item, item_version, audit_id, why, datetime.now(UTC)])


def reinstate(store: Store, *, item: str) -> int:
    """Lift every retirement of `item`; the number lifted."""
    row = store.con.execute("DELETE FROM retired WHERE item = ?", [item]).fetchone()
    return int(row[0]) if row else 0


def retired_items(store: Store) -> dict[str, str]:
    """Retired item -> the version retired."""
    if not store.has_table("retired"):
        return {}
    return {i: v for i, v in store.con.execute("SELECT item, item_version FROM retired ORDER BY item").fetchall()}


def retired_in_force(store: Store) -> frozenset[str]:
    """The retired items whose stored primary data are of the version retired: what the views leave out (a
    rewrite approved and collected since is a new version, in force again)."""
    if not store.has_table("retired"):
        return frozenset()
    return frozenset(i for (i,) in store.con.execute(
        "SELECT DISTINCT r.item FROM retired r JOIN atomic_data d ON d.item = r.item AND d.item_version ="
        " r.item_version AND d.rater = 'primary'").fetchall())


# ---- the corrections log ----------------------------------------------------------------------------------

def log_corrections(store: Store, corrections: Sequence[Correction]) -> None:
    """Append corrections to the log."""
    if corrections:
        store.con.executemany(
            "INSERT INTO corrections VALUES (?, ?, ?, ?, ?, ?)",
            [(datetime.fromisoformat(c.at), c.audit_id, c.item, c.item_version, c.action, c.model_dump_json())
             for c in corrections])


def read_corrections(store: Store) -> list[Correction]:
    """The corrections log, oldest first."""
    if not store.has_table("corrections"):
        return []
    return [Correction.model_validate_json(r) for (r,) in store.con.execute(
        "SELECT record FROM corrections ORDER BY logged_at, item").fetchall()]


# ---- re-collection by a second rater (factory/loops/audit/collect.py) ---------------------------------------

def sampled_units(store: Store, unit_ids: Iterable[str]) -> list[tuple[str, str, str]]:
    """(unit_id, layer, user_key) of each of `unit_ids` a run collected (the `units` table): whose units a
    re-collection builds again. A unit no run has visited is left out."""
    return [(u, layer, key) for u, layer, key in store.con.execute(
        "SELECT unit_id, layer, coalesce(user_key, unit_id) FROM units WHERE unit_id IN (SELECT unnest(?))"
        " ORDER BY unit_id, layer", [sorted(set(unit_ids))]).fetchall()]


def primary_collectors(store: Store, *, units: Iterable[str], items: Iterable[str]) -> list[tuple[str, str, str]]:
    """(item, collector, family) of the model collectors of the primary data of `items` on `units`: the families
    a second rater of those data must differ from. Rule data name no family and are left out; a jury's family is
    its members' joined by commas, as stored."""
    return [(i, c, f) for i, c, f in store.con.execute(
        "SELECT DISTINCT item, collector, family FROM atomic_data WHERE rater = 'primary' AND family IS NOT NULL"
        " AND family <> '' AND unit_id IN (SELECT unnest(?)) AND item IN (SELECT unnest(?)) ORDER BY 1, 2, 3",
        [sorted(set(units)), sorted(set(items))]).fetchall()]


__all__ = [
    "AUDIT_TABLES", "audit_history", "label_sources", "latest_audit", "log_corrections", "read_corrections",
    "read_labels", "read_ratings", "read_sample", "record_audit", "reinstate", "retire", "retired_in_force",
    "retired_items", "primary_collectors", "sample_candidates", "sampled_units", "write_labels", "write_sample",
]
