"""`agent-factory show`: one unit (turn, conversation, span, user) with its data, pointers and cited text; the
units most flagged (`--worst`); bad input; trace text printed literally. On a small simulated store, and on the
tau-bench airline conversations when the shared data are present."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner, Result

from agent_factory.evaluators.collect.redact import DefaultRedactor
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.findings import FlagRow, all_flags, bad_flags, flag_counts
from agent_factory.factory.cli.app import app
from agent_factory.factory.store import Store
from agent_factory.factory.suite.read import load_suite
from agent_factory.factory.views.findings import read_findings
from agent_factory.factory.views.show.unit import pointer_parts, rank_units

NO_MODEL = {"AGENT_FACTORY_SMALL_MODEL": "", "AGENT_FACTORY_JURY": "", "AGENT_FACTORY_CONFIG": ""}
UNIT_KEYS = {"unit_id", "kind", "conversation_id", "user_id", "span", "turn", "turns", "conversations", "data",
             "results", "flags"}
WORST_KEYS = {"level", "component", "clause", "flags_counted", "units_total", "units_flagged", "units"}


def suite_flags(st: Store) -> tuple[FlagSpec, ...]:
    """Every flag of the suite the store's runs use (the pack used at ingest), as `Project.flags` gives them."""
    chosen = load_suite(None, pack=None, store=st, allow_unapproved=True)
    return all_flags(chosen.pack, chosen.components)


def _show(*args: str) -> Result:
    return CliRunner().invoke(app, ["show", *args], env=NO_MODEL)


def _json(*args: str) -> Any:
    res = _show(*args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.fixture
def small_store(sim_store: tuple[Path, str]) -> Path:
    """12 simulated users ingested and run with the shipped pack, rules only (the session's; copy to write)."""
    return sim_store[0]


def _one(store: Path, sql: str, *args: object) -> tuple[Any, ...]:
    with Store(store, read_only=True) as st:
        row = st.con.execute(sql, list(args)).fetchone()
    assert row is not None, sql
    return tuple(row)


def _pointers(shown: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for g in shown["data"] for d in g["data"] for p in d["evidence"]]


def _cited_matches_store(store: Path, p: dict[str, Any]) -> None:
    """A pointer's cited text is the stored field's range (no secret in the simulated traffic to redact)."""
    column = {"answer": "answer", "request": "request"}.get(p["field"])
    table = "turns"
    if column is None:
        column, table = p["field"], "spans"
    (text,) = _one(store, f"SELECT {column} FROM {table} WHERE id = ?", p["unit_id"])
    assert p["cited"] == text[p["start"]:p["end"]][:300]
    assert p["before"].lstrip("…") == text[max(0, p["start"] - 80):p["start"]]


def test_show_turn_lists_its_spans_data_pointers_and_cited_text(small_store: Path) -> None:
    # A turn whose answer failed: its execution.delivered datum is `no` and raises `delivery failed`.
    (turn_id, n_data, n_spans) = _one(
        small_store, "SELECT d.unit_id, (SELECT count(*) FROM atomic_data a WHERE a.unit_id = d.unit_id),"
        " (SELECT count(*) FROM spans s WHERE s.turn_id = d.unit_id) FROM atomic_data d"
        " WHERE d.item = 'execution.delivered' AND d.value = 'no' ORDER BY d.unit_id LIMIT 1")
    shown = _json(turn_id, "--store", str(small_store))
    assert set(shown) == UNIT_KEYS and shown["kind"] == "turn"
    (request,) = _one(small_store, "SELECT request FROM turns WHERE id = ?", turn_id)
    assert shown["turn"]["request"] == request and len(shown["turn"]["spans"]) == n_spans > 0
    assert all(s["name"] and s["kind"] and s["status"] in ("ok", "error") for s in shown["turn"]["spans"])
    assert [g["unit_id"] for g in shown["data"]] == [turn_id] and len(shown["data"][0]["data"]) == n_data
    delivered = next(d for d in shown["data"][0]["data"] if d["item"] == "execution.delivered")
    assert delivered["value"] == "no" and delivered["raises"] == ["execution.delivery_failed"]
    assert delivered["tier"] == "rule" and delivered["reason"]
    assert "execution.delivery_failed" in {f["id"] for f in shown["flags"]}
    pointers = _pointers(shown)
    assert pointers and all({"start", "end", "before", "cited", "after"} <= set(p) for p in pointers)
    for p in pointers:
        if p["field"] in ("answer", "request", "input", "output", "error") and p["end"] > p["start"]:
            _cited_matches_store(small_store, p)
    text = _show(turn_id, "--store", str(small_store))
    assert text.exit_code == 0, text.output
    cited = next(p for p in pointers if p["cited"] and len(p["cited"]) < 60)
    assert f"«{cited['cited']}»" in text.stdout
    assert "! execution.delivered = no" in text.stdout and "raises execution.delivery_failed" in text.stdout


def test_show_conversation_lists_turns_in_order_and_their_data_grouped(small_store: Path) -> None:
    (conv, n_turns) = _one(small_store, "SELECT conversation_id, count(*) FROM turns GROUP BY 1"
                                        " HAVING count(*) >= 3 ORDER BY 1 LIMIT 1")
    shown = _json(conv, "--store", str(small_store))
    assert shown["kind"] == "conversation" and len(shown["turns"]) == n_turns
    assert [t["index"] for t in shown["turns"]] == sorted(t["index"] for t in shown["turns"])
    assert [g["unit_id"] for g in shown["data"]] == [conv] + [t["id"] for t in shown["turns"]]
    assert {d["item"] for d in shown["data"][0]["data"]} >= {"trajectory.turns", "trajectory.request_replay"}
    (n_data,) = _one(small_store, "SELECT count(*) FROM atomic_data WHERE unit_id = ? OR unit_id IN"
                                  " (SELECT id FROM turns WHERE conversation_id = ?)", conv, conv)
    assert sum(len(g["data"]) for g in shown["data"]) == n_data
    assert {(r["unit_id"], r["metric"]) for r in shown["results"]} >= {(conv, "outcome")}
    text = _show(conv, "--store", str(small_store)).stdout
    assert f"data of conversation {conv}" in text and f"turns ({n_turns})" in text
    assert text.index("turn 0 ") < text.index("turn 1 ") < text.index("turn 2 ")


def test_show_span_with_an_error_cites_it(small_store: Path) -> None:
    (span_id, error) = _one(small_store, "SELECT id, error FROM spans WHERE status = 'error' ORDER BY id LIMIT 1")
    shown = _json(span_id, "--store", str(small_store))
    assert shown["kind"] == "span" and shown["span"]["error"] == error and shown["turn"] is not None
    (datum,) = shown["data"][0]["data"]
    assert datum["item"] == "execution.span_error" and datum["value"] == "yes"
    assert datum["evidence"][0]["field"] == "error" and datum["evidence"][0]["cited"] == error
    assert [f["id"] for f in shown["flags"]] == ["execution.span_error"]
    text = _show(span_id, "--store", str(small_store)).stdout
    assert f"{span_id} error[0:{len(error)}]: «{error}»" in text


def test_show_user_lists_conversations(small_store: Path) -> None:
    (user, n_conv) = _one(small_store, "SELECT user_id, count(DISTINCT conversation_id) FROM turns GROUP BY 1"
                                       " ORDER BY 1 LIMIT 1")
    shown = _json(user, "--store", str(small_store))
    assert shown["kind"] == "user" and len(shown["conversations"]) == n_conv and shown["data"] == []


def test_unknown_id_and_bad_options_are_one_line_exit_1(small_store: Path, tmp_path: Path) -> None:
    res = _show("no-such-unit", "--store", str(small_store))
    assert res.exit_code == 1 and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1
    assert "'no-such-unit'" in res.stderr and "show --worst" in res.stderr
    res = _show("--worst", "3", "--component", "nonsense", "--store", str(small_store))
    assert res.exit_code == 1 and len(res.stderr.strip().splitlines()) == 1
    assert "'nonsense'" in res.stderr
    assert all(c in res.stderr for c in ("execution", "trajectory", "conduct", "provenance"))
    res = _show("--worst", "3", "--clause", "nonsense", "--store", str(small_store))
    assert res.exit_code == 1 and "file_summary_needs_upload" in res.stderr
    res = _show("--worst", "3", "--level", "span", "--store", str(small_store))
    assert res.exit_code == 1 and "conversation, turn, user" in res.stderr
    for args in ([], ["x", "--worst", "2"]):
        res = _show(*args, "--store", str(small_store))
        assert res.exit_code == 1 and "UNIT_ID or --worst" in res.stderr
    res = _show("x", "--store", str(tmp_path / "none.duckdb"))
    assert res.exit_code == 1 and "no store here" in res.stderr


def _expected(store: Path, level: str, keep: Any = None) -> list[tuple[str, int]]:
    """The ranking as the contract states it: flags meaning bad, rolled up with Findings.at(level)."""
    with Store(store, read_only=True) as st:
        specs = suite_flags(st)
        rows: list[FlagRow] = read_findings(st, specs, with_associations=False).at(level)  # type: ignore[arg-type]
    counted = {f for f in bad_flags(specs) if keep is None or keep(f)}
    counts = {u: sum(c.values()) for u, c in flag_counts(rows, counted=counted).items()}
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def test_worst_lists_units_by_flag_count_each_with_a_quote(small_store: Path) -> None:
    worst = _json("--worst", "3", "--store", str(small_store))
    assert set(worst) == WORST_KEYS and worst["level"] == "conversation"
    units = worst["units"]
    assert [(u["unit_id"], u["flags_raised"]) for u in units] == _expected(small_store, "conversation")[:3]
    assert len(units) == 3 and units[0]["flags_raised"] >= units[1]["flags_raised"] >= units[2]["flags_raised"]
    for u in units:
        assert sum(u["by_component"].values()) == u["flags_raised"] == len(u["labels"])
        assert u["quote"] is not None and "«" in u["quote"]["text"] and "\n" not in u["quote"]["text"]
    text = _show("--worst", "3", "--store", str(small_store)).stdout
    lines = text.splitlines()
    assert lines[1].startswith(f"  1. {units[0]['unit_id']}  {units[0]['flags_raised']} flags")
    assert units[0]["quote"]["text"] in text and f"agent-factory show {units[0]['unit_id']}" in lines[-1]
    turns = _json("--worst", "2", "--level", "turn", "--store", str(small_store))
    assert [(u["unit_id"], u["flags_raised"]) for u in turns["units"]] == _expected(small_store, "turn")[:2]
    users = _json("--worst", "20", "--level", "user", "--store", str(small_store))
    (n_users,) = _one(small_store, "SELECT count(DISTINCT user_id) FROM units")  # 12 users and 3 staff accounts
    assert users["units_total"] == n_users == 15 and [(u["unit_id"], u["flags_raised"]) for u in users["units"]] == \
        _expected(small_store, "user")
    assert users["units"][0]["flags_raised"] >= units[0]["flags_raised"]  # a user holds its conversations' flags


def test_worst_component_and_clause_filters(small_store: Path) -> None:
    worst = _json("--worst", "5", "--component", "conduct", "--store", str(small_store))
    expected = _expected(small_store, "conversation", lambda f: f.startswith("conduct."))
    assert [(u["unit_id"], u["flags_raised"]) for u in worst["units"]] == expected[:5]
    assert worst["units"] and all(set(u["by_component"]) == {"conduct"} for u in worst["units"])
    assert all(label.endswith("violated") for u in worst["units"] for label in u["labels"])
    assert all(u["quote"]["flag"].startswith("conduct.") for u in worst["units"])
    clause = worst["units"][0]["labels"][0].removesuffix(" violated")
    one = _json("--worst", "50", "--clause", clause, "--store", str(small_store))
    assert one["flags_counted"] == 1 and one["clause"] == clause
    assert one["units_flagged"] == len(_expected(small_store, "conversation",
                                                 lambda f: f == f"conduct.{clause}.violated"))
    assert all(u["labels"] == [f"{clause} violated"] for u in one["units"])


def test_trace_text_with_markup_is_printed_literally_and_redacted(small_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "copy.duckdb"
    shutil.copy(small_store, store)
    evil = "[bold]BOLD[/bold] :smile: [link=http://x]y[/link] mail alice@example.com \x1b[31mred"
    con = duckdb.connect(str(store))
    (turn_id,) = con.execute("SELECT unit_id FROM atomic_data WHERE item = 'execution.delivered' AND value = 'yes'"
                             " ORDER BY unit_id LIMIT 1").fetchone()  # type: ignore[misc]
    con.execute("UPDATE turns SET answer = ? WHERE id = ?", [evil, turn_id])
    pointer = [{"unit_id": turn_id, "field": "answer", "start": 0, "end": len(evil)}]
    con.execute("UPDATE atomic_data SET evidence = ? WHERE unit_id = ? AND item = 'execution.delivered'",
                [json.dumps(pointer), turn_id])
    con.close()
    res = _show(turn_id, "--store", str(store))
    assert res.exit_code == 0, res.output
    assert "[bold]BOLD[/bold] :smile: [link=http://x]y[/link]" in res.stdout
    assert "alice@example.com" not in res.stdout and "mail [EMAIL]" in res.stdout
    assert "\x1b" not in res.stdout and "\\x1b[31mred" in res.stdout
    assert "«[bold]BOLD[/bold]" in res.stdout
    shown = _json(turn_id, "--store", str(store))
    assert "alice@example.com" not in json.dumps(shown) and shown["turn"]["answer"].startswith("[bold]BOLD")


def test_pointer_into_flat_attributes_cites_the_value(small_store: Path, tmp_path: Path) -> None:
    # The simulator's attributes are stored flat (`{"agent.mode": "deep"}`); a pointer names `attributes.agent.mode`.
    store = tmp_path / "copy.duckdb"
    shutil.copy(small_store, store)
    con = duckdb.connect(str(store))
    (turn_id, mode) = con.execute("SELECT id, json_extract_string(attributes, '$.\"agent.mode\"') FROM turns"
                                  " WHERE json_extract_string(attributes, '$.\"agent.mode\"') IS NOT NULL"
                                  " ORDER BY id LIMIT 1").fetchone()  # type: ignore[misc]
    pointer = [{"unit_id": turn_id, "field": "attributes.agent.mode", "start": 0, "end": len(mode)}]
    con.execute("UPDATE atomic_data SET evidence = ? WHERE unit_id = ? AND item = 'execution.mode'",
                [json.dumps(pointer), turn_id])
    con.close()
    shown = _json(turn_id, "--store", str(store))
    (p,) = [p for p in _pointers(shown) if p["field"] == "attributes.agent.mode"]
    assert p["missing"] is None and p["cited"] == mode and mode in ("simple", "normal", "deep")


def test_pointer_parts_redacts_across_the_window_and_cites_tool_calls() -> None:
    text = "x" * 200 + " write to alice@example.com now " + "y" * 200
    start = text.index("alice") + 3
    before, cited, after, cut = pointer_parts(text, start, start + 5, DefaultRedactor())
    assert "alice" not in before + cited + after and "[EMAIL]" in before + cited + after
    assert before.startswith("…") and after.endswith("…") and not cut
    before, cited, after, cut = pointer_parts("a" * 1000, 10, 900, DefaultRedactor(), cited_max=300)
    assert len(cited) == 300 and cut and after == "a" * 80 + "…"
    calls = [{"id": "1", "name": "get_user"}, {"id": "2", "name": "book"}, {"id": "3", "name": "cancel"}]
    assert pointer_parts(calls, 1, 2, DefaultRedactor()) == ("get_user", "book", "cancel", False)


def test_rank_units_breaks_ties_by_unit_id() -> None:
    rows = [FlagRow(u, "conversation", u, "p", c, f, v) for u, c, f, v in [
        ("b", "x", "x.one", 1), ("b", "y", "y.two", 1), ("a", "x", "x.one", 1), ("a", "y", "y.two", 1),
        ("c", "x", "x.one", 1), ("c", "y", "y.two", 0), ("d", "x", "x.one", None)]]
    assert rank_units(rows, {"x.one", "y.two"}) == [("a", 2, {"x": 1, "y": 1}), ("b", 2, {"x": 1, "y": 1}),
                                                    ("c", 1, {"x": 1})]


@pytest.mark.realdata
def test_tau_worst_five_conversations_and_the_first_shown(tau_store: Path) -> None:
    worst = _json("--worst", "5", "--store", str(tau_store))
    units = worst["units"]
    assert worst["units_total"] == 128 and len(units) == 5
    assert [(u["unit_id"], u["flags_raised"]) for u in units] == _expected(tau_store, "conversation")[:5]
    assert all(u["unit_id"].startswith("tau-") and u["quote"] and "«" in u["quote"]["text"] for u in units)
    text = _show("--worst", "5", "--store", str(tau_store)).stdout
    assert all(u["quote"]["text"] in text for u in units)
    first = units[0]["unit_id"]
    shown = _json(first, "--store", str(tau_store))
    assert shown["kind"] == "conversation" and shown["turns"] and len(shown["data"]) == 1 + len(shown["turns"])
    raised = [d for g in shown["data"] for d in g["data"] if d["raises"]]
    assert raised and any(p["cited"] for d in raised for p in d["evidence"])
    assert {f["id"] for f in shown["flags"] if f["meaning"] == "bad"} >= {
        f for d in raised for f in d["raises"] if f.startswith(("conduct.", "trajectory."))}
    calls = [p for p in _pointers(shown) if p["field"] == "attributes.tool_calls"]
    with Store(tau_store, read_only=True) as st:
        tools = {n for (n,) in st.con.execute("SELECT DISTINCT name FROM spans WHERE kind = 'tool'").fetchall()}
    assert calls and all(p["missing"] is None and set(p["cited"].split(", ")) <= tools for p in calls)
    out = _show(first, "--store", str(tau_store)).stdout
    assert f"data of conversation {first}" in out and "«" in out


def test_worst_quotes_the_request_when_the_datum_points_at_nothing(small_store: Path, tmp_path: Path) -> None:
    # A violation that is an absence (no retrieval before answering) has no pointer: the turn's request is quoted.
    store = tmp_path / "copy.duckdb"
    shutil.copy(small_store, store)
    con = duckdb.connect(str(store))
    (item, turn_id) = con.execute(
        "SELECT item, unit_id FROM atomic_data WHERE item LIKE 'conduct.%.obligation' AND value = 'no'"
        " AND layer = 'trace' ORDER BY item, unit_id LIMIT 1").fetchone()  # type: ignore[misc]
    con.execute("UPDATE atomic_data SET evidence = '[]' WHERE item = ?", [item])
    (conv,) = con.execute("SELECT conversation_id FROM turns WHERE id = ?", [turn_id]).fetchone()  # type: ignore[misc]
    (request,) = con.execute(  # the conversation's first turn that broke the clause
        "SELECT t.request FROM turns t JOIN atomic_data d ON d.unit_id = t.id AND d.item = ? AND d.value = 'no'"
        " WHERE t.conversation_id = ? ORDER BY t.idx LIMIT 1", [item, conv]).fetchone()  # type: ignore[misc]
    con.close()
    clause = item.removeprefix("conduct.").removesuffix(".obligation")
    worst = _json("--worst", "50", "--clause", clause, "--store", str(store))
    unit = next(u for u in worst["units"] if u["unit_id"] == conv)
    quote = unit["quote"]
    assert quote["cites"] == "request" and quote["field"] == "request" and quote["flag"] == f"conduct.{clause}.violated"
    assert quote["text"].startswith("«" + " ".join(request.split())[:40])
    assert all(u["quote"]["cites"] == "request" for u in worst["units"])
