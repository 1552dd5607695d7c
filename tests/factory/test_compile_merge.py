"""One check once: a spec's clauses merged with the base pack's clauses of the same check (and with each other),
what `build` reports about them, the specs it refuses, and `run` / `watch` refusing another pack beside a suite."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from agent_factory.errors import SpecError
from agent_factory.factory.cli.app import app
from agent_factory.factory.compile import compile_spec
from agent_factory.factory.compile.merge import check_key, merge_checks
from agent_factory.factory.store import Store
from agent_factory.factory.suite.read import load_suite
from agent_factory.factory.suite.write import build_suite
from agent_factory.knowledge_packs import load_pack

REPO = Path(__file__).resolve().parents[2]
AIRLINE_EN = REPO / "specs" / "airline_en.md"


def _spec(tmp_path: Path, text: str, name: str = "policy.md") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def airline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("merge") / "airline"
    return out, build_suite(AIRLINE_EN, pack="airline", out=out)


def test_the_spec_and_the_pack_state_each_check_once(airline: tuple[Path, object]) -> None:
    out, report = airline
    base = load_pack("airline")
    pack = load_pack(out / "pack.yaml")
    # No check is run twice: rule, parameters, trigger and layer.
    keys = Counter(check_key(c) for c in pack.clauses)
    assert all(n == 1 for n in keys.values())
    merged = {m.pack_clause: m for m in report.merged}  # type: ignore[attr-defined]
    assert set(merged) == {"confirm_before_write", "one_tool_call_at_a_time", "no_reply_with_tool_call",
                           "booking_limits"}
    assert (merged["confirm_before_write"].source_line, merged["one_tool_call_at_a_time"].source_line) == (19, 21)
    # The pack's id stays (its copy is overridden, not run beside), the spec's sentence and section are the source.
    confirm = pack.clause("confirm_before_write")
    assert confirm is not None and confirm.text.startswith("Before you call any tool that changes")
    assert confirm.source == "§ How you work" and confirm.invariant  # the base pack's decision is kept
    # The rule reads text as the pack tuned it: the spec states no confirmation phrases of its own.
    assert confirm.obligation.params == base.clause("confirm_before_write").obligation.params  # type: ignore[union-attr]
    # The booking limits: two sentences state what the pack states in one clause; the one with most of it takes it.
    limits = {c.id: dict(c.obligation.params) for c in pack.clauses if c.obligation.rule == "conduct.booking_limits"}
    assert limits.pop("booking_limits") == {"max_certificate": 1, "max_credit_card": 1, "max_gift_card": 3}
    assert list(limits.values()) == [{"max_passengers": 5}]
    assert merged["booking_limits"].lines == (32, 33)
    assert "replaces the base pack clause booking_limits" in (out / "pack.yaml").read_text(encoding="utf-8")


def test_build_json_lists_every_clause_the_suite_runs(airline: tuple[Path, object]) -> None:
    out, report = airline
    printed = json.loads(report.model_dump_json())  # type: ignore[attr-defined]
    pack = load_pack(out / "pack.yaml")
    assert [c["id"] for c in printed["clauses"]] == [c.id for c in pack.clauses]
    assert {"origin", "kind", "polarity", "trigger", "obligation", "source_line", "check"} <= set(printed["clauses"][0])
    by_id = {c["id"]: c for c in printed["clauses"]}
    assert by_id["booking_limits"]["check"] == (
        "rule conduct.booking_limits {max_certificate: 1, max_credit_card: 1, max_gift_card: 3}")
    assert by_id["confirm_before_write"]["origin"] == "spec" and by_id["confirm_before_write"]["source_line"] == 19
    assert {c["polarity"] for c in printed["clauses"]} == {"do", "avoid"}
    assert printed["always_triggers"] == sum(c["matches_everything"] for c in printed["clauses"]) > 0
    # Every compiled sentence is a listed clause; the rest are the pack's tool-use clauses the spec does not state.
    spec_made = [c["id"] for c in printed["clauses"] if c["origin"] == "spec"]
    assert printed["normative_sentences"] == 18 and printed["compiled"] == len(spec_made)
    assert {c["id"] for c in printed["clauses"] if c["origin"] == "pack"} == {
        "write_preconditions_hold", "refusal_justified", "claims_grounded", "write_arguments_grounded",
        "looked_before_refusing", "did_what_was_agreed"}


def test_a_pack_clause_the_spec_states_in_part_keeps_the_rest(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "# Tools\n\nYou can call `book_reservation`.\n\n## Book flight\n\n"
                           "- A booking may carry at most five passengers.\n")
    report = build_suite(spec, pack="airline", out=tmp_path / "s")
    pack = load_pack(tmp_path / "s" / "pack.yaml")
    params = {c.id: dict(c.obligation.params) for c in pack.clauses if c.obligation.rule == "conduct.booking_limits"}
    assert params.pop("booking_limits") == {"max_certificate": 1, "max_credit_card": 1, "max_gift_card": 3}
    assert list(params.values()) == [{"max_passengers": 5}]
    [m] = [m for m in report.merged if m.pack_clause == "booking_limits"]
    assert "keeps max_certificate" in m.note
    # Untouched pack clauses are run as the pack states them, and listed as the pack's.
    origins = {c.id: c.origin for c in report.clauses}
    assert origins["booking_limits"] == "pack" and origins["one_tool_call_at_a_time"] == "pack"


def test_a_value_the_spec_states_otherwise_wins_and_is_reported(tmp_path: Path) -> None:
    text = AIRLINE_EN.read_text(encoding="utf-8").replace("at most five passengers", "at most six passengers")
    report = build_suite(_spec(tmp_path, text, AIRLINE_EN.name), pack="airline", out=tmp_path / "s")
    [m] = [m for m in report.merged if m.pack_clause == "booking_limits"]
    assert "max_passengers: the pack's 5, the spec's 6" in m.note
    pack = load_pack(tmp_path / "s" / "pack.yaml")
    assert sorted(c.obligation.params.get("max_passengers", 0) for c in pack.clauses) [-1] == 6
    assert 5 not in [c.obligation.params.get("max_passengers") for c in pack.clauses]


def test_a_check_stated_twice_in_the_spec_is_kept_once() -> None:
    spec = compile_spec("# R\n\n- If you make a tool call, do not reply to the user in the same message.\n"
                        "- If you reply to the user, make no tool call at the same time.\n", source="t.md")
    assert len(spec.clauses) == 2
    kept, overrides, merges = merge_checks(spec.clauses, load_pack("default"))
    [m] = merges
    assert [c.id for c in kept] == [spec.clauses[0].id] and m.dropped == (spec.clauses[1].id,)
    assert m.lines == (3, 4) and m.pack_clause is None and not overrides


def test_different_checks_are_not_merged(tmp_path: Path) -> None:
    # The same rule on other tools is another check: the pack's clause stays.
    spec = _spec(tmp_path, "# Tools\n\nYou can call `book_reservation`.\n\n## Rules\n\n"
                           "- Before you call `book_reservation`, you must get the user's explicit confirmation.\n")
    report = build_suite(spec, pack="airline", out=tmp_path / "s")
    assert not any(m.pack_clause == "confirm_before_write" for m in report.merged)
    rules = [c for c in report.clauses if c.check.startswith("rule conduct.confirmed_before_action")]
    assert sorted(c.origin for c in rules) == ["pack", "spec"]


# ---- specs build refuses ---------------------------------------------------------------------------------


def _cli(*args: str) -> object:
    return CliRunner().invoke(app, list(args))


def test_build_refuses_a_json_file_and_a_spec_without_a_rule(tmp_path: Path) -> None:
    cases = {
        "trajectories.json": '[{"messages": [{"role": "system", "content": "You must help."}]}]',
        "notes.md": "# Notes\n\nThe refund takes five days. There is no need to greet twice.\n",
        "empty.md": "",
    }
    for name, text in cases.items():
        path = _spec(tmp_path, text, name)
        res = _cli("build", "--spec", str(path), "--out", str(tmp_path / f"out_{name}"), "--no-model")
        assert res.exit_code == 1, (name, res.output)
        [line] = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
        assert str(path) in line, line
        assert not (tmp_path / f"out_{name}").exists()
    with pytest.raises(SpecError, match="no sentence states a rule"):
        build_suite(tmp_path / "notes.md", pack="default", out=tmp_path / "x")


def test_build_says_what_it_merged_and_how_many_triggers_match_everything(tmp_path: Path) -> None:
    res = _cli("build", "--spec", str(AIRLINE_EN), "--pack", "airline", "--out", str(tmp_path / "s"), "--no-model")
    assert res.exit_code == 0, res.output
    merged = [ln for ln in res.stdout.splitlines() if ln.startswith("merged:")]
    assert len(merged) == 4 and any("confirm_before_write" in ln and "line 19" in ln for ln in merged)
    report = json.loads(_cli("build", "--spec", str(AIRLINE_EN), "--pack", "airline", "--out",
                             str(tmp_path / "s"), "--no-model", "--json").stdout)
    assert f"{report['always_triggers']} clause(s) have a trigger that matches every unit" in res.stdout


# ---- run and watch take the suite's pack -------------------------------------------------------------------


def test_run_and_watch_refuse_another_pack_beside_a_suite(airline: tuple[Path, object], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    out, _ = airline
    monkeypatch.delenv("AGENT_FACTORY_PACK", raising=False)
    store = tmp_path / "store.duckdb"
    with Store(store):
        pass
    (tmp_path / "traces").mkdir()
    for cmd in (["run", "--store", str(store)], ["watch", str(tmp_path / "traces"), "--store", str(store),
                                                  "--cycles", "1", "--interval", "0"]):
        res = _cli(*cmd, "--suite", str(out), "--pack", "airline", "--unapproved")
        assert res.exit_code == 1, res.output
        [line] = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert "--pack airline" in line and str(out) in line and "pack.yaml" in line, line
    # The suite's own pack, by its name or its file, is the suite's: it loads as without --pack.
    plain = load_suite(out, pack=None, allow_unapproved=True)
    for own in ("airline_en", str(out / "pack.yaml")):
        same = load_suite(out, pack=own, allow_unapproved=True)
        assert same.pack.digest() == plain.pack.digest() and len(same.pack.clauses) == len(plain.pack.clauses)
    hand = tmp_path / "hand"
    hand.mkdir()
    (hand / "suite.yaml").write_text(yaml.safe_dump({"pack": "airline", "components": ["conduct"]}))
    assert load_suite(hand, pack="airline").pack.name == "airline"
    with pytest.raises(SpecError, match=r"--pack default would replace the pack of suite .*hand \(airline\)"):
        load_suite(hand, pack="default")


def test_a_matcher_clause_the_spec_states_is_the_pack_clause_once(tmp_path: Path) -> None:
    """The business-analysis spec's file-summary sentence and the pack's template clause are one check: the
    suite runs it once, under the pack's id and broader trigger, with the spec's line as its source."""
    res = CliRunner().invoke(app, ["build", "--spec", str(REPO / "specs" / "business_analysis_zh.md"), "--pack",
                                   "business_analysis", "--out", str(tmp_path / "suite"), "--no-model", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    pack = load_pack("business_analysis")
    template = next(c for c in pack.clauses if c.obligation.attribute_present)
    runs = [c for c in report["clauses"] if c["id"] == template.id]
    assert len(runs) == 1 and runs[0]["origin"] == "spec" and runs[0]["source_line"]
    same_obligation = [c for c in report["clauses"] if c["kind"] == "only_if" and c["check"] == runs[0]["check"]]
    assert len(same_obligation) == 1, same_obligation
    assert any(m["pack_clause"] == template.id for m in report["merged"])
    written = yaml.safe_load((tmp_path / "suite" / "pack.yaml").read_text(encoding="utf-8"))
    clause = next(c for c in written["clauses"] if c["id"] == template.id)
    assert clause["trigger"]["regex"] == template.trigger.regex
