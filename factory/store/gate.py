"""The gate's tables: stored calibrations, gate runs, sequential looks, incidents and fixes.

Everything a gate decides is recorded in the BASELINE's store (the one a team keeps), whatever store the
candidate's traffic sits in. The tables are additive (`schema.GATE_TABLES`, created by `create_tables` on every
store opened for writing): a store of this schema version written before the gate existed gains them on its next
write, and a read-only open of such a store reads them as empty. Reports are stored whole as their JSON, so a
report read back is the report recorded (`--json` of the command that made it).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from agent_factory.evaluators.gate.model import CalibrationReport, Fix, GateReport, Incident
from agent_factory.factory.store.base import Store
from agent_factory.factory.store.schema import GATE_TABLES


def _when(text: str) -> datetime:
    """An ISO 8601 time of a report; a naive one is taken as UTC (the reports write UTC)."""
    at = datetime.fromisoformat(text)
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


# ---- calibrations -------------------------------------------------------------------------------------------

def record_calibration(store: Store, report: CalibrationReport) -> None:
    """Store a calibration under its key (a digest of the baseline, the suite's measures and the gate's version);
    one of the same key is replaced: the newest check of an unchanged baseline is the one to use."""
    with store.transaction():
        store.con.execute("DELETE FROM gate_calibrations WHERE key = ?", [report.key])
        store.con.execute("INSERT INTO gate_calibrations VALUES (?, ?, ?)",
                          [report.key, _when(report.at), report.model_dump_json()])


def read_calibration(store: Store, key: str) -> CalibrationReport | None:
    """The calibration stored under `key`; None when the baseline, its suite or the gate changed since."""
    if not store.has_table("gate_calibrations"):
        return None
    row = store.con.execute("SELECT report FROM gate_calibrations WHERE key = ?", [key]).fetchone()
    return CalibrationReport.model_validate_json(row[0]) if row else None


def latest_calibration(store: Store) -> CalibrationReport | None:
    """The newest stored calibration, whatever its key (the report's); None before any."""
    if not store.has_table("gate_calibrations"):
        return None
    row = store.con.execute("SELECT report FROM gate_calibrations ORDER BY \"at\" DESC, key DESC LIMIT 1").fetchone()
    return CalibrationReport.model_validate_json(row[0]) if row else None


# ---- gate runs ----------------------------------------------------------------------------------------------

def record_gate(store: Store, report: GateReport) -> None:
    """Store one gate run (its whole report), stamped now."""
    store.con.execute("INSERT INTO gate_runs VALUES (?, ?, ?, ?, ?, ?)",
                      [uuid.uuid4().hex, datetime.now(UTC), report.baseline, report.candidate, report.verdict,
                       report.model_dump_json()])


def latest_gate(store: Store) -> GateReport | None:
    """The last gate run recorded; None before any."""
    if not store.has_table("gate_runs"):
        return None
    # rowid breaks a tie of two runs recorded within one clock tick: the later insert is the later run.
    row = store.con.execute("SELECT report FROM gate_runs ORDER BY \"at\" DESC, rowid DESC LIMIT 1").fetchone()
    return GateReport.model_validate_json(row[0]) if row else None


def gate_history(store: Store) -> list[GateReport]:
    """Every recorded gate run, oldest first."""
    if not store.has_table("gate_runs"):
        return []
    return [GateReport.model_validate_json(r) for (r,) in store.con.execute(
        "SELECT report FROM gate_runs ORDER BY \"at\", rowid").fetchall()]


# ---- sequential looks ---------------------------------------------------------------------------------------

def take_look(store: Store, pair: str, users_candidate: int) -> int:
    """Record one more look at `pair` (a baseline and candidate named together) with `users_candidate` candidate
    users so far; the look's number, 1 for the first."""
    with store.transaction():
        row = store.con.execute("SELECT coalesce(max(look), 0) FROM gate_looks WHERE pair = ?", [pair]).fetchone()
        look = (int(row[0]) if row else 0) + 1
        store.con.execute("INSERT INTO gate_looks VALUES (?, ?, ?, ?)",
                          [pair, look, datetime.now(UTC), users_candidate])
    return look


def read_looks(store: Store, pair: str) -> list[tuple[int, int]]:
    """(look, candidate users) of every look taken at `pair`, in order."""
    if not store.has_table("gate_looks"):
        return []
    return [(int(k), int(n)) for k, n in store.con.execute(
        "SELECT look, users_candidate FROM gate_looks WHERE pair = ? ORDER BY look", [pair]).fetchall()]


# ---- incidents ----------------------------------------------------------------------------------------------

def record_incidents(store: Store, incidents: Sequence[Incident]) -> int:
    """Store the incidents not stored yet (an incident's id is stable over reruns of one baseline and candidate,
    so a rerun opens nothing twice); the number of new ones."""
    fresh = {i.id: i for i in incidents}
    if not fresh:
        return 0
    with store.transaction():
        known = {r for (r,) in store.con.execute("SELECT id FROM incidents WHERE id IN (SELECT unnest(?))",
                                                 [sorted(fresh)]).fetchall()}
        new = [i for key, i in fresh.items() if key not in known]
        if new:
            store.con.executemany("INSERT INTO incidents VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                  [(i.id, _when(i.opened_at), i.component, i.clause, i.metric, i.unit_id, i.evidence,
                                    i.candidate) for i in new])
    return len(new)


def read_incidents(store: Store) -> list[Incident]:
    """Every stored incident, oldest first."""
    if not store.has_table("incidents"):
        return []
    rows = store.con.execute("SELECT id, opened_at, component, clause, metric, unit_id, evidence, candidate"
                             " FROM incidents ORDER BY opened_at, component, clause, unit_id, id").fetchall()
    return [Incident(id=i, opened_at=at.astimezone(UTC).isoformat(), component=c, clause=cl,
                     metric=m, unit_id=u, evidence=e, candidate=cand) for i, at, c, cl, m, u, e, cand in rows]


# ---- fixes --------------------------------------------------------------------------------------------------

def write_fixes(store: Store, fixes: Sequence[Fix]) -> None:
    """Store fixes, each replacing the one stored under its id (a re-check adds to its checks and may close it)."""
    latest = {f.id: f for f in fixes}
    if not latest:
        return
    with store.transaction():
        store.con.execute("DELETE FROM fixes WHERE id IN (SELECT unnest(?))", [sorted(latest)])
        store.con.executemany("INSERT INTO fixes VALUES (?, ?)", [(k, f.model_dump_json()) for k, f in latest.items()])


def read_fixes(store: Store) -> list[Fix]:
    """Every stored fix, oldest first (by when it was opened, then id)."""
    if not store.has_table("fixes"):
        return []
    fixes = [Fix.model_validate_json(r) for (r,) in store.con.execute("SELECT record FROM fixes").fetchall()]
    return sorted(fixes, key=lambda f: (_when(f.opened_at), f.id))


__all__ = [
    "GATE_TABLES", "gate_history", "latest_calibration", "latest_gate", "read_calibration", "read_fixes",
    "read_incidents", "read_looks", "record_calibration", "record_gate", "record_incidents", "take_look",
    "write_fixes",
]
