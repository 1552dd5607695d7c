"""`agent-factory export`: every level and format on a small simulated store (read back with pyarrow and checked
against the store's own rows), the pure flag counts and JSON decoding, bad input, and tau-bench's rewards."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.findings import FlagRow
from agent_factory.factory.cli.app import app
from agent_factory.factory.store import Store
from agent_factory.factory.views.export import decode_json, flag_columns

NO_MODEL = {"AGENT_FACTORY_SMALL_MODEL": "", "AGENT_FACTORY_JURY": ""}
LAYER = {"span": "span", "turn": "trace", "conversation": "conversation"}
# A datum each level's layer holds on every unit of the simulation, and the ids the rows start with.
KNOWN_ITEM = {"span": "execution.span_error", "turn": "execution.delivered",
              "conversation": "trajectory.frustration"}
IDS = {"span": ["unit_id", "conversation_id", "user_id", "turn_index", "turn_id", "analysed"],
       "turn": ["unit_id", "conversation_id", "user_id", "turn_index", "analysed"],
       "conversation": ["unit_id", "conversation_id", "user_id", "analysed"],
       "user": ["unit_id", "conversation_id", "user_id", "analysed"]}


@pytest.fixture
def small_store(sim_store: tuple[Path, str]) -> Path:
    """12 simulated users ingested and run with the shipped pack (rules only; the session's `sim_store`)."""
    return sim_store[0]


def _read(path: Path, fmt: str) -> pa.Table:
    if fmt == "parquet":
        return pq.read_table(path)
    if fmt == "csv":
        return pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(strings_can_be_null=True))
    return pjson.read_json(path)


def _export(store: Path, *args: str) -> dict[str, object]:
    res = CliRunner().invoke(app, ["export", "--store", str(store), "--json", *args])
    assert res.exit_code == 0, res.output
    summary: dict[str, object] = json.loads(res.stdout)
    return summary


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
@pytest.mark.parametrize("level", ["span", "turn", "conversation", "user"])
def test_every_level_and_format_round_trips(small_store: Path, tmp_path: Path, level: str, fmt: str) -> None:
    out = tmp_path / f"e.{fmt}"
    summary = _export(small_store, "--level", level, "--format", fmt, "--out", str(out))
    table = _read(out, fmt)
    with Store(small_store, read_only=True) as st:
        if level == "user":
            (n_units,) = st.con.execute("SELECT count(DISTINCT user_id) FROM units").fetchone() or (0,)
        else:
            (n_units,) = st.con.execute("SELECT count(*) FROM units WHERE layer = ?", [LAYER[level]]).fetchone() \
                or (0,)
        stored = {} if level == "user" else dict(st.con.execute(
            "SELECT unit_id, value FROM atomic_data WHERE item = ? AND rater = 'primary'",
            [KNOWN_ITEM[level]]).fetchall())
    assert n_units > 0
    assert summary == {"out": str(out), "level": level, "format": fmt, "rows": n_units,
                       "columns": table.num_columns}
    assert table.num_rows == n_units
    names = table.column_names
    assert names[:len(IDS[level])] == IDS[level]
    assert len(set(table["unit_id"].to_pylist())) == n_units
    # flags_total is the sum of the per-component counts (null only when every component's is).
    parts = [c for c in names if c.startswith("flags.")]
    assert parts and names.index("flags_total") + 1 == names.index(parts[0])
    for row in table.select(["flags_total", *parts]).to_pylist():
        counts = [row[c] for c in parts if row[c] is not None]
        assert row["flags_total"] == (sum(counts) if counts else None)
    if level == "user":
        assert not [c for c in names if c.startswith(("execution.", "trajectory.", "conduct.", "fact."))]
        return
    got = dict(zip(table["unit_id"].to_pylist(), table[KNOWN_ITEM[level]].to_pylist(), strict=True))
    # Units the run left out (synthetic and test segments) are rows too, with no data.
    assert got == {u: (None if (v := stored.get(u)) == "uncollected" else v) for u in got}
    assert {"yes", "no"} & set(got.values())
    left_out = {u for u, a in zip(table["unit_id"].to_pylist(), table["analysed"].to_pylist(), strict=True) if not a}
    assert left_out == set(got) - set(stored)


def test_uncollected_data_are_null_and_flags_tell_undecided_from_zero(small_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "turns.parquet"
    _export(small_store, "--level", "turn", "--out", str(out))  # the suffix picks parquet
    table = pq.read_table(out)
    with Store(small_store, read_only=True) as st:
        (uncollected,) = st.con.execute(
            "SELECT count(*) FROM atomic_data WHERE item = 'substance.i1_answers_task' AND value = 'uncollected'"
        ).fetchone() or (0,)
        failed = {u for (u,) in st.con.execute(
            "SELECT unit_id FROM atomic_data WHERE item = 'execution.delivered' AND value = 'no'").fetchall()}
    analysed = table.filter(table["analysed"])
    col = analysed["substance.i1_answers_task"]
    assert uncollected > 0 and col.null_count == uncollected  # no model ran: never a pass
    assert "uncollected" not in col.to_pylist()
    # A turn whose substance datum went uncollected has undecided flags: its counts are lower bounds.
    undecided = dict(zip(analysed["unit_id"].to_pylist(), analysed["flags_undecided"].to_pylist(), strict=True))
    blind = [u for u, v in zip(analysed["unit_id"].to_pylist(), col.to_pylist(), strict=True) if v is None]
    assert len(blind) == uncollected and all(undecided[u] >= 1 for u in blind)
    rows = analysed.select(["unit_id", "flags.execution", "fact.execution.latency_ms"]).to_pylist()
    assert failed and all(r["flags.execution"] >= 1 for r in rows if r["unit_id"] in failed)
    assert table.schema.field("fact.execution.latency_ms").type == pa.float64()
    assert all(r["fact.execution.latency_ms"] > 0 for r in rows)


def test_default_out_names_the_level_and_format(small_store: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    summary = _export(small_store, "--level", "conversation")
    assert summary["out"] == "export-conversation.csv" and summary["format"] == "csv"
    first = (tmp_path / "export-conversation.csv").read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith('"unit_id","conversation_id","user_id"')
    assert _export(small_store, "--level", "user", "--format", "jsonl")["out"] == "export-user.jsonl"


def test_columns_are_stable_across_runs_and_formats(small_store: Path, tmp_path: Path) -> None:
    tables = []
    for name in ("a.parquet", "b.parquet", "c.jsonl", "d.csv"):
        _export(small_store, "--level", "turn", "--out", str(tmp_path / name))
        tables.append(_read(tmp_path / name, Path(name).suffix.lstrip(".")))
    assert tables[0].equals(tables[1])
    names = tables[0].column_names
    assert tables[2].column_names == names == tables[3].column_names
    def family(c: str) -> int:  # at turn level the per-unit results are Conduct's violations
        prefixes = ("fact.", "conduct.violation.", "outcome.", "annotation.", "flags_total", "flags.", "flags_undecided",
                    "instrument_flags")
        return 0 if c in IDS["turn"] else next((i + 2 for i, p in enumerate(prefixes) if c.startswith(p)), 1)

    order = [family(c) for c in names]
    assert order == sorted(order) and {1, 2, 3, 6, 7, 8, 9} <= set(order)  # no outcomes simulated
    for f in (1, 2, 3):  # within a family, names sort
        members = [c for c in names if family(c) == f]
        assert members == sorted(members)


def _spec(fid: str, component: str, meaning: str = "bad") -> FlagSpec:
    return FlagSpec(id=fid, component=component, layer="trace", label=fid, item=fid, raised=("no",),
                    meaning=meaning)  # type: ignore[arg-type]


def test_flag_counts_null_when_undecided_and_instrument_apart() -> None:
    specs = [_spec("execution.a", "execution"), _spec("execution.b", "execution"),
             _spec("conduct.c.violated", "conduct"), _spec("provenance.p", "provenance", "instrument"),
             _spec("execution.handed", "execution", "descriptive")]

    def row(unit: str, flag: str, value: int | None) -> FlagRow:
        return FlagRow(unit, "trace", "c", "u", flag.split(".")[0], flag, value)

    rows = [row("t1", "execution.a", 1), row("t1", "execution.b", 1), row("t1", "conduct.c.violated", 0),
            row("t1", "provenance.p", 1), row("t1", "execution.handed", 1),
            row("t2", "execution.a", 0), row("t2", "execution.b", None), row("t2", "conduct.c.violated", None),
            row("t3", "execution.a", None)]
    keys = pa.array(["t1", "t2", "t3", "t4"])
    cols = {k: v.to_pylist() for k, v in flag_columns(keys, specs, rows, "turn").items()}
    assert list(cols) == ["flags_total", "flags.execution", "flags.conduct", "flags_undecided", "instrument_flags"]
    assert cols["flags.execution"] == [2, 0, None, None]  # the hand-off (descriptive) is no failure
    assert cols["flags.conduct"] == [0, None, None, None]
    assert cols["flags_total"] == [2, 0, None, None]
    assert cols["flags_undecided"] == [0, 2, 1, None]  # t4: no flag read at all
    assert cols["instrument_flags"] == [1, None, None, None]


def test_decode_json_types_a_column_by_its_values() -> None:
    assert decode_json(pa.array(["1.5", "null", None, "2"])).to_pylist() == [1.5, None, None, 2.0]
    strings = decode_json(pa.array(['"blocked"', "null", '"smooth"', '"blocked"', "3"]))
    assert strings.to_pylist() == ["blocked", None, "smooth", "blocked", "3"]
    assert strings.type == pa.string()


@pytest.mark.parametrize(("args", "code"), [(["--level", "session"], 2), (["--level", "turn", "--format", "xlsx"], 2),
                                            ([], 2)])
def test_bad_level_or_format_is_a_usage_error(small_store: Path, tmp_path: Path, args: list[str],
                                              code: int) -> None:
    res = CliRunner().invoke(app, ["export", "--store", str(small_store), "--out", str(tmp_path / "x"), *args])
    assert res.exit_code == code
    assert not (tmp_path / "x").exists()


def test_missing_store_is_one_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["export", "--store", str(tmp_path / "none.duckdb"), "--level", "turn"])
    assert res.exit_code == 1
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "none.duckdb" in lines[0] and "ingest" in lines[0]


@pytest.mark.realdata
def test_tau_conversations_carry_the_reward_and_flags(tau_store: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = tau_store
    summary = _export(store, "--level", "conversation", "--out", "tau.parquet")
    table = pq.read_table(tmp_path / "tau.parquet")
    assert summary["rows"] == table.num_rows == 128
    with Store(store, read_only=True) as st:
        rewards = {c: float(v) for c, v in st.con.execute(
            "SELECT conversation_id, value FROM events WHERE kind = 'task_reward'").fetchall()}
        violated = {u for (u,) in st.con.execute(
            "SELECT unit_id FROM results WHERE metric = 'violation.confirm_before_write'").fetchall()}
    got = dict(zip(table["conversation_id"].to_pylist(), table["outcome.task_reward"].to_pylist(), strict=True))
    assert got == rewards and set(got.values()) == {0.0, 1.0}
    assert table["flags_total"].null_count == 0
    rows = table.select(["unit_id", "flags.conduct", "conduct.violation.confirm_before_write"]).to_pylist()
    assert violated and {r["unit_id"] for r in rows if r["conduct.violation.confirm_before_write"] == "violated"} \
        == violated
    assert all(r["flags.conduct"] >= 1 for r in rows if r["unit_id"] in violated)


def test_annotations_are_exported_apart_from_outcomes() -> None:
    """A mistake step is a label on a run, no outcome: `annotation.mistake_step`, never `outcome.mistake_step`."""
    from agent_factory.adapters.model import OutcomeEvent
    from agent_factory.evaluators.findings.flags import UnitKey
    from agent_factory.factory.views.export import outcome_columns

    units = [UnitKey("c1", "conversation", "c1", "u1"), UnitKey("c2", "conversation", "c2", "u2")]
    events = [OutcomeEvent(id="e1", kind="task_reward", conversation_id="c1", user_id="u1", value=1.0),
              OutcomeEvent(id="e2", kind="mistake_step", conversation_id="c2", user_id="u2", value=7),
              OutcomeEvent(id="e3", kind="mistake_agent", conversation_id="c2", user_id="u2", value="Orchestrator")]
    keys = pa.array(["c1", "c2"], pa.string())
    cols = outcome_columns(keys, units, events, "conversation")
    assert list(cols) == ["outcome.task_reward", "annotation.mistake_step"]
    assert cols["outcome.task_reward"].to_pylist() == [1.0, None]
    assert cols["annotation.mistake_step"].to_pylist() == [None, 7.0]
