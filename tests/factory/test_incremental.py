"""The build -> run -> edit one clause -> run cycle, offline, with the model behind a local OpenAI-compatible server.

What the issue asks: after a one-clause edit only that clause's items are recollected (model calls counted at
the server), every other stored datum and result is byte-identical, the report says how much was reused; a
run on unchanged inputs calls no model and recomputes nothing; new traces compute only the new users' units.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_factory.factory.cli.app import app
from agent_factory.factory.simulate import SimConfig, simulate
from agent_factory.factory.store import Store
from tests.conftest import REPO
from tests.fakes.openai_server import FakeOpenAIServer, fake_openai  # noqa: F401

SPEC = REPO / "specs" / "business_analysis_zh.md"
OLD_LINE = "简洁模式下，回答最多三句话"
NEW_LINE = "简洁模式下，回答最多两句话"


def _cli(*args: str) -> dict:
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _build(spec: Path, suite: Path) -> dict:
    # The deterministic compiler: the model configured for the runs would otherwise compile the one sentence
    # the rules cannot (and its call would be counted with the run's).
    report = _cli("build", "--spec", str(spec), "--pack", "business_analysis", "--out", str(suite), "--no-model")
    _cli("approve", str(suite), "--by", "test")
    return report


def _rows(store: Path, table: str) -> list[tuple]:
    with Store(store, read_only=True) as st:
        return sorted(st.con.execute(f"SELECT * FROM {table}").fetchall(), key=repr)


def _one_row_per_key(store: Path) -> None:
    """No write left two rows of one key (a run that emptied what it writes skips the search for stored keys)."""
    with Store(store, read_only=True) as st:
        for table, key in (("atomic_data", "unit_id, item, rater"), ("units", "unit_id, layer")):
            dup = st.con.execute(f"SELECT count(*) FROM (SELECT {key} FROM {table} GROUP BY ALL"
                                 " HAVING count(*) > 1)").fetchone()[0]
            assert dup == 0, table


def _clause_of(report: dict, words: str) -> str:
    return next(c["id"] for c in report["clauses"] if words in c["obligation"] or words in c["trigger"])


def _mentions(row: tuple, ids: set[str]) -> bool:
    return any(isinstance(v, str) and any(i in v for i in ids) for v in row)


@pytest.fixture
def env(model_env: Path) -> Path:
    """The shared fake-model environment (tests/factory/conftest.py)."""
    return model_env


def test_edit_one_clause_recollects_only_that_clause(env: Path, fake_openai: FakeOpenAIServer) -> None:  # noqa: F811
    simulate(SimConfig(users=25, seed=11), env / "sim")
    store = env / "store.duckdb"
    _cli("ingest", str(env / "sim"), "--store", str(store), "--pack", "business_analysis")
    spec = env / "spec.md"
    shutil.copy(SPEC, spec)
    suite = env / "suite"
    built = _build(spec, suite)
    old_id = _clause_of(built, "三句话")

    first = _cli("run", "--store", str(store), "--suite", str(suite))
    calls1 = fake_openai.calls
    assert first["plan"]["trigger"] == "first run"
    assert calls1 == first["model_calls"] > 0
    data1, results1 = _rows(store, "atomic_data"), _rows(store, "results")

    # Unchanged inputs: no model call, nothing collected or analysed, every row as it was.
    same = _cli("run", "--store", str(store), "--suite", str(suite))
    assert fake_openai.calls == calls1 and same["model_calls"] == 0
    assert same["plan"]["trigger"] == "nothing changed" and same["units"] == {}
    assert same["plan"]["analyses_rerun"] == 0 and same["items"]["collected"] == 0
    assert same["items"]["kept"] == len(data1)
    assert _rows(store, "atomic_data") == data1 and _rows(store, "results") == results1

    # Edit one clause of the spec, rebuild, approve, rerun.
    text = spec.read_text(encoding="utf-8")
    assert OLD_LINE in text
    spec.write_text(text.replace(OLD_LINE, NEW_LINE), encoding="utf-8")
    rebuilt = _build(spec, suite)
    new_id = _clause_of(rebuilt, "两句话")
    assert new_id != old_id
    assert {c["id"] for c in rebuilt["clauses"]} - {new_id} == {c["id"] for c in built["clauses"]} - {old_id}

    second = _cli("run", "--store", str(store), "--suite", str(suite))
    calls2 = fake_openai.calls - calls1
    assert second["model_calls"] == calls2
    assert second["plan"]["definitions_recollected"] == 2  # the new clause's trigger and obligation
    assert second["plan"]["analyses_rerun"] >= 1
    data2, results2 = _rows(store, "atomic_data"), _rows(store, "results")
    _one_row_per_key(store)
    ids = {old_id, new_id}
    # Only the new clause's items were collected: one datum per trace unit for each of its two items.
    new_rows = [r for r in data2 if _mentions(r[:2], {new_id})]
    assert second["items"]["collected"] + second["items"]["uncollected"] + second["items"]["reused"] == len(new_rows)
    with Store(store, read_only=True) as st:
        real_turns = st.con.execute("SELECT count(*) FROM units WHERE layer = 'trace' AND analysed").fetchone()[0]
    assert len(new_rows) == 2 * real_turns  # type: ignore[operator]
    assert second["items"]["kept"] == len(data2) - len(new_rows)
    # Model calls: exactly one per conversation whose turns' new obligation went to the small model (the default
    # batch = "conversation" asks about all of a conversation's turns at once), nothing else asked.
    asked = {r[0] for r in new_rows if r[1].endswith(".obligation") and r[8] == "small_model"}
    with Store(store, read_only=True) as st:
        conversation = dict(st.con.execute("SELECT unit_id, conversation_id FROM units WHERE layer = 'trace'"
                                           ).fetchall())
    assert calls2 == len({conversation[u] for u in asked}) > 0
    assert not any(r[:2] for r in data2 if _mentions(r[:2], {old_id}))
    # Every other datum and result is byte-identical, run ids included.
    assert [r for r in data2 if not _mentions(r[:2], ids)] == [r for r in data1 if not _mentions(r[:2], ids)]
    assert [r for r in results2 if not _mentions(r, ids)] == [r for r in results1 if not _mentions(r, ids)]
    assert any(_mentions(r, {new_id}) for r in results2)
    assert second["results"]["unchanged"] == sum(1 for r in results1 if not _mentions(r, ids))
    assert second["results"]["added"] == sum(1 for r in results2 if _mentions(r, ids))

    again = _cli("run", "--store", str(store), "--suite", str(suite))
    assert again["model_calls"] == 0 and fake_openai.calls == calls1 + calls2
    assert again["plan"]["trigger"] == "nothing changed"


def test_new_traces_compute_only_new_users(env: Path, fake_openai: FakeOpenAIServer) -> None:  # noqa: F811
    simulate(SimConfig(users=15, seed=21), env / "a")
    simulate(SimConfig(users=10, seed=22), env / "b")
    store = env / "store.duckdb"
    _cli("ingest", str(env / "a"), "--store", str(store), "--pack", "business_analysis")
    first = _cli("run", "--store", str(store), "--pack", "business_analysis")
    calls1 = fake_openai.calls
    data1 = _rows(store, "atomic_data")
    with Store(store, read_only=True) as st:
        old_users = {r[0] for r in st.con.execute("SELECT DISTINCT user_key FROM units").fetchall()}

    _cli("ingest", str(env / "b"), "--store", str(store), "--pack", "business_analysis")
    with Store(store, read_only=True) as st:
        all_users = {r[0] for r in st.con.execute(
            "SELECT DISTINCT coalesce(user_id, conversation_id) FROM turns").fetchall()}
    new_users = all_users - old_users
    assert new_users and first["plan"]["users_total"] == len(old_users)

    second = _cli("run", "--store", str(store), "--pack", "business_analysis")
    assert second["plan"]["trigger"].startswith("1 new trace file")
    assert second["plan"]["users_rebuilt"] == second["plan"]["users_visited"]
    # The old users' units are rebuilt only if the new files moved the horizon past their window.
    with Store(store, read_only=True) as st:
        rebuilt = {r[0] for r in st.con.execute(
            "SELECT DISTINCT user_key FROM units WHERE run_id = ?", [second["run_id"]]).fetchall()}
    assert rebuilt >= new_users and second["plan"]["users_visited"] == len(rebuilt)
    assert second["model_calls"] == fake_openai.calls - calls1 > 0
    # Data of users not rebuilt are byte-identical.
    data2 = _rows(store, "atomic_data")
    _one_row_per_key(store)
    with Store(store, read_only=True) as st:
        untouched = {r[0] for r in st.con.execute(
            "SELECT unit_id FROM units WHERE user_key NOT IN (SELECT unnest(?))", [sorted(rebuilt)]).fetchall()}
    assert untouched
    assert [r for r in data2 if r[0] in untouched] == [r for r in data1 if r[0] in untouched]
    assert second["items"]["kept"] == sum(1 for r in data2 if r[0] in untouched)


def test_items_a_provider_failed_are_asked_again_by_the_next_run(tmp_path: Path, fake_openai: FakeOpenAIServer,  # noqa: F811
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fakes.openai_server import FaultPlan

    monkeypatch.chdir(tmp_path)
    for var in ("AGENT_FACTORY_SMALL_MODEL", "AGENT_FACTORY_JURY", "AGENT_FACTORY_CONFIG", "AGENT_FACTORY_API_BASE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    config = tmp_path / "agent-factory.toml"
    config.write_text(f'[models]\nsmall = {{ model = "openai/fake-small", api_base = "{fake_openai.base_url}" }}\n'
                      "[collect]\nretries = 2\nretry_initial_wait_s = 0\nretry_max_wait_s = 0\n", encoding="utf-8")
    simulate(SimConfig(users=6, seed=41), tmp_path / "sim")
    store = tmp_path / "store.duckdb"
    _cli("ingest", str(tmp_path / "sim"), "--store", str(store), "--pack", "business_analysis")

    fake_openai.faults = FaultPlan(rate=1.0, kinds=("500",))
    failed = _cli("run", "--store", str(store), "--pack", "business_analysis", "--config", str(config))
    assert failed["model_calls"] > 0 and failed["uncollected_reasons"].get("model error after retries", 0) > 0
    assert failed["plan"]["retry_next_run"]  # those definitions stay dirty; nothing was counted as a pass
    assert failed["components"]["substance"]["data"].get("yes", 0) == 0

    fake_openai.faults = FaultPlan()
    before = fake_openai.calls
    healed = _cli("run", "--store", str(store), "--pack", "business_analysis", "--config", str(config))
    assert healed["plan"]["definitions_recollected"] == len(failed["plan"]["retry_next_run"])
    assert healed["model_calls"] == fake_openai.calls - before > 0
    assert healed["uncollected_reasons"].get("model error after retries", 0) == 0 and not healed["plan"][
        "retry_next_run"]
    assert healed["components"]["substance"]["data"].get("yes", 0) > 0
    still = _cli("run", "--store", str(store), "--pack", "business_analysis", "--config", str(config))
    assert still["plan"]["trigger"] == "nothing changed" and still["model_calls"] == 0
