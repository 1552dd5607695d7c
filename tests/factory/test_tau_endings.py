"""tau-bench as a user runs it: hand-offs are their own delivery state, the user's ###STOP### ends the session,
simulated customer ids see no cross-session metrics, and with a model every session gets an outcome."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_factory.factory.cli.app import app
from agent_factory.factory.store import Store
from tests.conftest import shared_data
from tests.fakes.openai_server import FakeOpenAIServer, fake_openai  # noqa: F401

OUTCOMES = {"smooth", "struggled", "blocked", "censored"}


@pytest.fixture(scope="module")
def tau() -> list[dict]:
    return json.loads(shared_data("tau-bench-airline-gpt4o", "gpt-4o-airline.json").read_text())


def _transfers(record: dict) -> bool:
    return any(m.get("role") == "tool" and m.get("name") == "transfer_to_human_agents"
               and "successful" in (m.get("content") or "").lower() for m in record["traj"])


@pytest.mark.realdata
def test_hand_offs_and_closing_messages(tau: list[dict], no_model: Path) -> None:
    tmp_path = no_model
    store = tmp_path / "s.duckdb"
    runner = CliRunner()
    src = shared_data("tau-bench-airline-gpt4o", "gpt-4o-airline.json")
    assert runner.invoke(app, ["ingest", str(src), "--pack", "airline", "--store", str(store)]).exit_code == 0
    stats = json.loads(runner.invoke(app, ["stats", "--store", str(store), "--json"]).stdout)
    delivery = stats["delivery"]
    handed = sum(_transfers(r) for r in tau)
    stops = sum("###STOP###" in (r["traj"][-1].get("content") or "") for r in tau if r["traj"][-1]["role"] == "user")
    assert delivery["handed_off"] == handed >= 30
    assert delivery["closing"] == stops
    res = runner.invoke(app, ["run", "--store", str(store), "--json"])
    assert res.exit_code == 0, res.output
    with Store(store) as st:
        # No hand-off is a failed delivery or a session termination.
        failed_handoffs = st.con.execute(
            "SELECT count(*) FROM atomic_data d JOIN turns t ON d.unit_id = t.id WHERE t.delivery = 'handed_off' "
            "AND d.item = 'execution.delivered' AND d.value <> 'not_applicable'").fetchone()[0]
        assert failed_handoffs == 0
        ends = dict(st.con.execute(
            "SELECT c.id, d.value FROM atomic_data d JOIN conversations c ON d.unit_id = c.id "
            "WHERE d.item = 'trajectory.session_termination'").fetchall())
        for r in tau:
            if _transfers(r):
                assert ends[f"tau-{r['task_id']}-{r['trial']}"] == "no"
        # Closing turns are no turns of the session: no trace unit, no uncollected delivery for them.
        closing_units = st.con.execute(
            "SELECT count(*) FROM units u JOIN turns t ON u.unit_id = t.id WHERE t.delivery = 'closing'").fetchone()[0]
        assert closing_units == 0
        # Simulated customers: return and redo are not observable, with the reason, never 'not returned'.
        rows = st.con.execute("SELECT value, fact, reason FROM atomic_data WHERE item = 'results.returned_within_t'"
                              ).fetchall()
        assert len(rows) == 128
        assert all(v == "not_applicable" and json.loads(f) == "not_observable" and "not observable" in why
                   for v, f, why in rows)
        hidden = st.con.execute("SELECT value FROM results WHERE metric = 'sessions.not_observable'").fetchone()
        assert float(hidden[0]) == 128


@pytest.mark.realdata
def test_every_session_has_an_outcome_with_a_model(
    tau: list[dict], model_env: Path, fake_openai: FakeOpenAIServer,  # noqa: F811
) -> None:
    tmp_path = model_env
    # A slice with hand-offs, closed sessions and the rest, to keep the model path quick.
    picked = [r for r in tau if _transfers(r)][:6] + [r for r in tau if not _transfers(r)][:10]
    src = tmp_path / "tau_slice.json"
    src.write_text(json.dumps(picked))
    store = tmp_path / "s.duckdb"
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(src), "--pack", "airline", "--store", str(store)]).exit_code == 0
    res = runner.invoke(app, ["run", "--store", str(store), "--json"])
    assert res.exit_code == 0, res.output
    assert fake_openai.calls > 0
    with Store(store) as st:
        outcomes = st.con.execute(
            "SELECT unit_id, value, note FROM results WHERE component = 'trajectory' AND metric = 'outcome'"
        ).fetchall()
    assert len(outcomes) == len(picked)
    for unit_id, value, note in outcomes:
        assert json.loads(value) in OUTCOMES, (unit_id, value, note)
        assert note and "F=" in note, (unit_id, note)
