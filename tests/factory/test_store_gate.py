"""The gate's tables (`factory.store.gate`): reports stored whole and read back equal, the latest by time, looks
numbered per pair, incidents stored once, fixes upserted by id, and a store written before the tables existed read
as empty."""

from __future__ import annotations

from pathlib import Path

from agent_factory.evaluators.gate.model import FixCheck
from agent_factory.factory.store import Store
from agent_factory.factory.store.gate import (
    GATE_TABLES,
    gate_history,
    latest_calibration,
    latest_gate,
    read_calibration,
    read_fixes,
    read_incidents,
    read_looks,
    record_calibration,
    record_gate,
    record_incidents,
    take_look,
    write_fixes,
)
from tests.factory.test_views_gate import calibration_report, fix, gate_report, incident


def test_calibrations_are_read_back_by_key_and_the_newest_is_the_latest(tmp_path: Path) -> None:
    first = calibration_report()
    newer = first.model_copy(update={"key": "k2", "at": "2026-12-07T09:00:00+00:00", "seconds": 3.0})
    with Store(tmp_path / "s.duckdb") as st:
        assert latest_calibration(st) is None and read_calibration(st, "k1") is None
        record_calibration(st, newer)
        record_calibration(st, first)  # recorded later, but made earlier
        assert read_calibration(st, "k1") == first  # an infinite threshold survives the JSON
        assert read_calibration(st, "k2") == newer and read_calibration(st, "other") is None
        assert latest_calibration(st) == newer
        again = first.model_copy(update={"at": "2026-12-08T00:00:00+00:00", "seconds": 9.0})
        record_calibration(st, again)  # the same key replaces
        assert read_calibration(st, "k1") == again and latest_calibration(st) == again
        assert st.con.execute("SELECT count(*) FROM gate_calibrations").fetchone() == (2,)


def test_gate_runs_read_back_whole_the_last_recorded_first(tmp_path: Path) -> None:
    failed, incident_run = gate_report(), gate_report(incidents=(incident("t1"),), calibrated=True)
    with Store(tmp_path / "s.duckdb") as st:
        assert latest_gate(st) is None and gate_history(st) == []
        record_gate(st, failed)
        record_gate(st, incident_run)
        assert latest_gate(st) == incident_run
        assert gate_history(st) == [failed, incident_run]
        assert st.con.execute("SELECT baseline, candidate, verdict FROM gate_runs ORDER BY verdict").fetchall() == [
            ("a.duckdb", "b.duckdb", "fail"), ("a.duckdb", "b.duckdb", "incident")]


def test_looks_are_numbered_per_pair_from_one(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as st:
        assert [take_look(st, "a -> b", n) for n in (10, 25, 40)] == [1, 2, 3]
        assert take_look(st, "a -> c", 7) == 1
        assert read_looks(st, "a -> b") == [(1, 10), (2, 25), (3, 40)] and read_looks(st, "x") == []
    with Store(tmp_path / "s.duckdb") as st:  # the count survives the process
        assert take_look(st, "a -> b", 55) == 4


def test_incidents_are_stored_once_and_read_back_equal(tmp_path: Path) -> None:
    one, two, three = incident("t1"), incident("t2", clause="other"), incident("t3")
    with Store(tmp_path / "s.duckdb") as st:
        assert record_incidents(st, []) == 0 and read_incidents(st) == []
        assert record_incidents(st, [one, two]) == 2
        assert record_incidents(st, [two, three, three]) == 1  # a rerun opens nothing twice
        assert read_incidents(st) == [one, three, two]  # one time: by component, clause (no_... < other), unit


def test_fixes_are_upserted_by_id_oldest_first(tmp_path: Path) -> None:
    old = fix("latency_gm_ratio", opened_at="2026-12-01T00:00:00+00:00")
    new = fix("failure_rate")
    with Store(tmp_path / "s.duckdb") as st:
        write_fixes(st, [])
        assert read_fixes(st) == []
        write_fixes(st, [new, old])
        assert read_fixes(st) == [old, new]
        checked = old.model_copy(update={"status": "met", "checks": (
            FixCheck(at="2026-12-06T22:00:00+00:00", candidate="c.duckdb", value=1.0, status="met"),)})
        write_fixes(st, [checked])
        assert read_fixes(st) == [checked, new]


def test_a_store_from_before_the_gate_reads_as_empty_and_gains_the_tables_on_write(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    with Store(path) as st:
        for table in GATE_TABLES:
            st.con.execute(f"DROP TABLE {table}")
    with Store(path, read_only=True) as st:
        assert latest_gate(st) is None and latest_calibration(st) is None and read_calibration(st, "k") is None
        assert read_incidents(st) == [] and read_fixes(st) == [] and read_looks(st, "p") == []
        assert gate_history(st) == []
    with Store(path) as st:
        record_gate(st, gate_report())
        assert latest_gate(st) == gate_report()
