"""A rules-only run collected by worker processes (`--workers`) writes exactly what a run in one process
writes: the same data, units and results, the same counts in its report; a model run stays in its process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from agent_factory.factory.cli.app import app
from agent_factory.factory.pipeline.parallel import MIN_USERS_FOR_WORKERS
from tests.fakes.openai_server import FakeOpenAIServer, fake_openai  # noqa: F401

_NO_MODEL = {"AGENT_FACTORY_SMALL_MODEL": "", "AGENT_FACTORY_JURY": "", "AGENT_FACTORY_CONFIG": ""}

# Every column but the run that wrote the row.
_TABLES = {
    "atomic_data": "* EXCLUDE (run_id)",
    "units": "* EXCLUDE (run_id)",
    "results": "* EXCLUDE (run_id)",
}


def _run(store: Path, *extra: str, env: dict[str, str] | None = None) -> dict:
    res = CliRunner().invoke(app, ["run", "--store", str(store), "--json", *extra], env=env or _NO_MODEL)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _differences(a: Path, b: Path) -> dict[str, tuple[int, int, int]]:
    """Per table: (rows of a, rows in a not in b, rows in b not in a), duplicates counted."""
    con = duckdb.connect()
    con.execute(f"ATTACH '{a}' AS a (READ_ONLY)")
    con.execute(f"ATTACH '{b}' AS b (READ_ONLY)")
    out = {}
    for table, cols in _TABLES.items():
        n = con.execute(f"SELECT count(*) FROM a.{table}").fetchone()[0]
        ab = con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM a.{table} EXCEPT ALL "
                         f"SELECT {cols} FROM b.{table})").fetchone()[0]
        ba = con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM b.{table} EXCEPT ALL "
                         f"SELECT {cols} FROM a.{table})").fetchone()[0]
        out[table] = (n, ab, ba)
    con.close()
    return out


def _copies(src: Path, tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of a store (each run `--full` below: every unit collected again)."""
    copies = []
    for name in ("one", "two"):
        dst = tmp_path / name / "store.duckdb"
        dst.parent.mkdir()
        shutil.copyfile(src, dst)
        copies.append(dst)
    return copies[0], copies[1]


def _same_report(one: dict, two: dict) -> None:
    for key in ("units", "items", "uncollected_reasons", "results", "model_calls", "components"):
        assert one[key] == two[key], key
    assert one["plan"]["trigger"] == two["plan"]["trigger"] == "full"


def test_workers_write_what_one_process_writes(sim_store: tuple[Path, str], tmp_path: Path) -> None:
    one, two = _copies(sim_store[0], tmp_path)
    r1, r2 = _run(one, "--full", "--workers", "1"), _run(two, "--full", "--workers", "2")
    _same_report(r1, r2)
    assert (r1["plan"]["workers"], r2["plan"]["workers"]) == (1, 2)
    assert r1["items"]["collected"] > 1_000 and r1["units"]["trace"] > 50, r1["units"]
    diff = _differences(one, two)
    assert all(n > 0 and ab == ba == 0 for n, ab, ba in diff.values()), diff
    # The stored state is a complete run's: nothing changed, nothing recomputed.
    again = _run(two)
    assert again["plan"]["trigger"] == "nothing changed" and again["items"]["collected"] == 0
    assert again["plan"]["workers"] == 0
    assert again["items"]["kept"] == diff["atomic_data"][0]


def test_workers_on_tau_bench_write_what_one_process_writes(tau_store: Path, tmp_path: Path) -> None:
    one, two = _copies(tau_store, tmp_path)
    _same_report(_run(one, "--full", "--workers", "1"), _run(two, "--full", "--workers", "2"))
    diff = _differences(one, two)
    assert all(n > 0 and ab == ba == 0 for n, ab, ba in diff.values()), diff


def test_a_small_run_or_a_model_run_stays_in_its_process(
    sim_store: tuple[Path, str], tmp_path: Path, fake_openai: FakeOpenAIServer,  # noqa: F811
) -> None:
    from agent_factory.evaluators.collect import Budget, Cascade, DatumCache, ModelConfig
    from agent_factory.factory.pipeline.engine import Runner
    from agent_factory.factory.store import Store
    from agent_factory.factory.store.inputs import read_run_inputs
    from agent_factory.factory.suite.read import load_suite

    store = tmp_path / "store.duckdb"
    shutil.copyfile(sim_store[0], store)
    with Store(store) as st:
        suite = load_suite(None, pack="business_analysis", store=st)

        def runner(cfg: ModelConfig, workers: int | None) -> Runner:
            cascade = Cascade(cfg, cache=DatumCache(None), budget=Budget(cfg.budget))
            return Runner(st, pack=suite.pack, collector=cascade, specs=suite.components, inputs=read_run_inputs(st),
                          full=True, workers=workers)

        rules = ModelConfig()
        model = ModelConfig.model_validate({"small": {"model": "openai/fake-small", "api_base": fake_openai.base_url}})
        plan = runner(rules, None).plan()
        assert plan.users_total < MIN_USERS_FOR_WORKERS
        assert runner(rules, None)._workers(plan) == 1  # 12 users: not worth forking
        assert runner(rules, 2)._workers(plan) == 2
        assert runner(model, 2)._workers(plan) == 1  # model answers are cached and budgeted in one process
        assert runner(model, 2)._analysis_workers() == 1  # a fork would copy the model client's threads


@pytest.mark.parametrize(("batch", "turns"), [(3, 1), (3, 2), (4, 50), (2000, 3)])
def test_chunks_hold_whole_users_read_as_the_rows_are(tmp_path: Path, batch: int, turns: int) -> None:
    # The workers' chunks (`iter_turn_chunks`, Arrow made rows in the worker) hold whole users, and their rows
    # are those `iter_turn_rows` reads, in its order, with its values: a user longer than a read, a turn without
    # a user, a subset of users. A user with no real traffic (u3, an internal test account) may be cut into
    # pieces of `turns` (and of a read, `batch`); one with some (u1) never is.
    from agent_factory.factory.ingest.files import ingest_paths
    from agent_factory.factory.store import Store
    from agent_factory.factory.store.turn_tables import chunk_rows, iter_turn_chunks
    from agent_factory.knowledge_packs import load_pack

    src = tmp_path / "chat.jsonl"
    convs = [("u1", 2), ("u2", 1), (None, 2), ("u1", 3), ("u3", 6), ("u4", 1)]
    with open(src, "w", encoding="utf-8") as f:
        for c, (user, n) in enumerate(convs):
            messages = [m for k in range(n) for m in ({"role": "user", "content": f"q{c}.{k}"},
                                                     {"role": "assistant", "content": f"a{c}.{k}"})]
            f.write(json.dumps({"id": f"c{c}", "messages": messages, **({"user_id": user} if user else {})}) + "\n")
    with Store(tmp_path / "s.duckdb") as st:
        ingest_paths(st, [src], pack=load_pack("default"))
        st.con.execute("UPDATE turns SET segment = 'internal_test' WHERE user_id = 'u3'")
        st.con.execute("UPDATE turns SET segment = 'internal_test' WHERE conversation_id = 'c0'")
        for users in (None, {"u1", "c2", "u3"}):
            expected = [tr for rows in st.iter_turn_rows(segment=None, order="user", users=users) for tr in rows]
            chunks = list(iter_turn_chunks(st, users=users, batch=batch, turns=turns))
            got = [chunk_rows(c) for c, _ in chunks]
            assert [tr for rows in got for tr in rows] == expected
            assert len(expected) == (15 if users is None else 13)
            keys = [[r["user_id"] or r["conversation_id"] for r, _ in rows] for rows in got]
            # Each chunk counts the users whose first turn it holds: every user once.
            assert sum(n for _, n in chunks) == len({k for ks in keys for k in ks})
            assert [n for _, n in chunks] == [
                len({k for k in ks if not any(k in earlier for earlier in keys[:i])}) for i, ks in enumerate(keys)]
            u3 = [ks.count("u3") for ks in keys if "u3" in ks]
            # Cut into pieces of a chunk (`turns`), and of a bucket (`batch`) when it is larger than one.
            assert sum(u3) == 6 and max(u3) <= min(turns, batch) and len(u3) >= -(-6 // min(turns, batch))
            assert sum(1 for ks in keys if "u1" in ks) == 1  # u1 has real turns (c3): whole, in one chunk
            if batch >= len(expected):  # one read: only the last chunk may hold fewer turns
                assert all(len(rows) >= turns for rows in got[:-1]) and len(got) > 1


def test_one_process_reads_excluded_turns_in_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The one-process reader (`--workers 1`, model runs) holds at most `EXCLUDED_PIECE_TURNS` excluded turns of a
    # user at a time; the real ones come whole, with the view, in the user's last piece, which counts once.
    from agent_factory.factory.ingest.files import ingest_paths
    from agent_factory.factory.pipeline import units
    from agent_factory.factory.store import Store
    from agent_factory.knowledge_packs import load_pack

    src = tmp_path / "chat.jsonl"
    convs = [("u1", 2), ("u3", 6), ("u1", 3), ("u4", 1)]
    with open(src, "w", encoding="utf-8") as f:
        for c, (user, n) in enumerate(convs):
            messages = [m for k in range(n) for m in ({"role": "user", "content": f"q{c}.{k}"},
                                                     {"role": "assistant", "content": f"a{c}.{k}"})]
            f.write(json.dumps({"id": f"c{c}", "user_id": user, "messages": messages}) + "\n")
    monkeypatch.setattr(units, "EXCLUDED_PIECE_TURNS", 2)
    with Store(tmp_path / "s.duckdb") as st:
        ingest_paths(st, [src], pack=load_pack("default"))
        st.con.execute("UPDATE turns SET segment = 'internal_test' WHERE user_id = 'u3' OR conversation_id = 'c0'")
        got = [(u.user_key, u.piece, len(u.excluded), u.view is not None and sum(len(c.turns) for c in
                u.view.conversations)) for u in units.iter_user_units(st, window_days=30, horizon=st.horizon())]
    assert got == [("u1", 0, 2, False), ("u1", 1, 0, 3), ("u3", 0, 2, False), ("u3", 1, 2, False),
                   ("u3", 2, 2, False), ("u4", 0, 0, 1)]


def test_one_process_in_pieces_writes_what_it_writes_whole(
    sim_store: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agent_factory.factory.pipeline import units

    one, two = _copies(sim_store[0], tmp_path)
    whole = _run(one, "--full", "--workers", "1")
    pieces: list[int] = []
    group = units.group_user_units

    def recording(*a: object, **k: object) -> object:
        for u in group(*a, **k):  # type: ignore[arg-type]
            pieces.append(u.piece)
            yield u

    monkeypatch.setattr(units, "EXCLUDED_PIECE_TURNS", 3)
    monkeypatch.setattr(units, "group_user_units", recording)
    cut = _run(two, "--full", "--workers", "1")
    assert max(pieces) >= 1 and pieces.count(0) == whole["plan"]["users_total"]
    _same_report(whole, cut)
    diff = _differences(one, two)
    assert all(n > 0 and ab == ba == 0 for n, ab, ba in diff.values()), diff


def test_tables_queued_together_keep_the_last_datum_of_a_key(tmp_path: Path) -> None:
    from agent_factory.evaluators.core.columns import DataColumns
    from agent_factory.evaluators.core.model import CollectorIdentity
    from agent_factory.factory.store import Store
    from agent_factory.factory.store.data import DataBatch, data_table

    def table(units: list[str], value: str) -> object:
        cols = DataColumns()
        cols.add_column(layer="trace", item="execution.x", item_version="1",
                        collector=CollectorIdentity(tier="rule", name="r", family=None, version="1"),
                        rater="primary", unit_ids=units, values=[value] * len(units), facts=[None] * len(units),
                        reasons=[None] * len(units), evidence=[()] * len(units))
        return data_table(cols, run_id="r1")

    with Store(tmp_path / "s.duckdb") as st:
        batch = DataBatch(st, run_id="r1")
        batch.add_table(table(["t1", "t2"], "yes"))
        batch.add_table(table(["t2", "t3"], "no"))
        batch.flush()
        rows = st.con.execute("SELECT unit_id, value FROM atomic_data ORDER BY unit_id").fetchall()
    assert rows == [("t1", "yes"), ("t2", "no"), ("t3", "no")]


def test_rows_and_tables_queued_together_keep_one_row_of_a_key(tmp_path: Path) -> None:
    # A batch of rows and of tables made elsewhere (a worker's `units`) writes one row per key, the last queued
    # for a table that replaces (`units`), the first for one that keeps (`events`), whatever came as rows.
    from agent_factory.factory.store import Batch, Store
    from agent_factory.factory.store.rows import arrow_rows

    def unit(uid: str, mode: str) -> dict[str, object]:
        return {"unit_id": uid, "layer": "trace", "user_key": "u", "user_id": "u", "conversation_id": "c", "idx": 0,
                "start_epoch": None, "end_epoch": None, "mode": mode, "analysed": True, "run_id": "r"}

    with Store(tmp_path / "s.duckdb") as st:
        batch = Batch(st, "units")
        batch.add(unit("t1", "a"))
        batch.add(unit("t2", "a"))
        batch.add_table(arrow_rows("units", [unit("t2", "b"), unit("t3", "b")]))
        batch.add(unit("t3", "c"))
        batch.add_table(arrow_rows("units", [unit("t4", "d")]))
        batch.flush()
        rows = st.con.execute("SELECT unit_id, mode FROM units ORDER BY unit_id").fetchall()
        assert rows == [("t1", "a"), ("t2", "b"), ("t3", "c"), ("t4", "d")]
        keep = Batch(st, "events")

        def event(k: str, kind: str) -> dict[str, object]:
            return {"id": k, "kind": kind, "user_id": "u", "conversation_id": "c", "time": None, "value": "1",
                    "attributes": "{}", "source_id": "s"}
        keep.add(event("e1", "first"))
        keep.add_table(arrow_rows("events", [event("e1", "second"), event("e2", "first")]))
        keep.add_table(arrow_rows("events", [event("e2", "second")]))
        keep.flush()
        assert st.con.execute("SELECT id, kind FROM events ORDER BY 1").fetchall() == [("e1", "first"),
                                                                                      ("e2", "first")]


@pytest.mark.parametrize(("fixture", "pack"), [("sim_store", "business_analysis"), ("tau_store", "airline")])
def test_analyses_in_workers_give_what_one_process_gives(request: pytest.FixtureRequest, fixture: str, pack: str,
                                                         tmp_path: Path) -> None:
    # Every group's analyses, forked over two workers (`analyse_group` with no row threshold), give the tables
    # this process gives, in the analyses' order, and so the results a run stores.
    import pyarrow as pa

    from agent_factory.evaluators import kernel
    from agent_factory.evaluators.collect import Budget, Cascade, DatumCache, ModelConfig
    from agent_factory.factory.executors.process import can_fork, default_workers
    from agent_factory.factory.pipeline.analyses import analyse_group
    from agent_factory.factory.pipeline.engine import Runner, analysis_groups
    from agent_factory.factory.store import Store
    from agent_factory.factory.store.inputs import read_run_inputs
    from agent_factory.factory.store.results import result_table
    from agent_factory.factory.store.units import load_rows
    from agent_factory.factory.suite.read import load_suite

    got = request.getfixturevalue(fixture)
    store = tmp_path / "store.duckdb"
    shutil.copyfile(got[0] if isinstance(got, tuple) else got, store)
    with Store(store) as st:
        suite = load_suite(None, pack=pack, store=st)
        cfg = ModelConfig()
        r = Runner(st, pack=suite.pack, collector=Cascade(cfg, cache=DatumCache(None), budget=Budget(cfg.budget)),
                   specs=suite.components, inputs=read_run_inputs(st))
        assert r._analysis_workers() == (default_workers() if can_fork() else 1)  # rules only: the run's workers
        names = frozenset(a.name for s in suite.components for a in s.analyses)
        groups = analysis_groups(suite.components, names=names, admitted=r.admitted, component_of=r.component_of)
        stored = st.con.execute("SELECT count(*) FROM results").fetchone()[0]
        total = several = 0
        for all_segments, items, analyses in groups:
            obs = kernel.freeze(load_rows(st, items=items, all_segments=all_segments), horizon=r.horizon)

            made_here: list[str] = []  # a table made in a worker is not listed in this process

            def to_table(results: list, made_here: list[str] = made_here) -> pa.Table:
                made_here.append("table")
                return result_table(results, run_id="r", versions={})

            here = analyse_group(obs, analyses, suite.pack, to_table=to_table, workers=1)
            assert len(made_here) == len(analyses)
            forked = analyse_group(obs, analyses, suite.pack, to_table=to_table, workers=2, min_rows=0)
            assert len(made_here) == len(analyses) * (2 if len(analyses) == 1 else 1)  # one analysis: no fork
            assert len(here) == len(forked) == len(analyses)
            several += len(analyses) > 1
            assert [t.to_pylist() for t in forked] == [t.to_pylist() for t in here]
            assert [t["analysis"][0].as_py() for t in here if t.num_rows] == [
                a.name for a, t in zip(analyses, here, strict=True) if t.num_rows]
            total += sum(t.num_rows for t in here)
    assert total == stored > 0 and several > 0
