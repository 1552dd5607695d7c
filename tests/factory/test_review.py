"""Reviewing and approving suites: `diff` shows what a spec change does, `approve` snapshots a suite, runs read
the snapshot (and say when the working files moved on), and invariants are the ones a person confirmed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from agent_factory.errors import SpecError
from agent_factory.evaluators.components.conduct.definitions import definitions_for
from agent_factory.factory.cli.app import app
from agent_factory.factory.suite.read import APPROVED_DIR, load_suite
from agent_factory.factory.suite.review import approval_status, approve_suite, suite_diff
from agent_factory.factory.suite.write import build_suite

REPO = Path(__file__).resolve().parents[2]
AIRLINE_EN = REPO / "specs" / "airline_en.md"
FIVE, SIX = "at most five passengers", "at most six passengers"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("built") / "airline"
    build_suite(AIRLINE_EN, pack="airline", out=out)
    return out


@pytest.fixture
def suite(built: Path, tmp_path: Path) -> Path:
    """A fresh copy of the built airline suite (tests change it)."""
    return Path(shutil.copytree(built, tmp_path / "suites" / "airline"))


def _edited_spec(tmp_path: Path, old: str = FIVE, new: str = SIX) -> Path:
    # Same file name as the original: clauses cite it, so a rename would change every clause's source.
    text = AIRLINE_EN.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "edited" / AIRLINE_EN.name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


def _conduct_defs(directory: Path) -> list[dict[str, object]]:
    return yaml.safe_load((directory / "evaluators" / "conduct.yaml").read_text(encoding="utf-8"))["definitions"]


def _confirm(directory: Path, index: int, value: object = True) -> str:
    path = directory / "invariants.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["invariants"][index]["confirmed"] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return str(data["invariants"][index]["clause"])


# ---- diff --------------------------------------------------------------------------------------------


def test_editing_one_clause_sentence_changes_that_clause_and_its_two_definitions(built: Path,
                                                                                 tmp_path: Path) -> None:
    d = suite_diff(built, _edited_spec(tmp_path), pack="airline")
    [changed] = d.clauses_changed
    assert changed.old_id != changed.id and changed.old_id.startswith("booking_carry_most_five_")
    assert changed.source_line == 32
    fields = {f.field: (f.old, f.new) for f in changed.fields}
    assert fields["obligation.params.max_passengers"] == (5, 6)
    assert fields["text"] == ("A booking may carry " + FIVE, "A booking may carry " + SIX)
    assert fields["id"] == (changed.old_id, changed.id)
    assert not d.clauses_added and not d.clauses_removed
    assert {(c.old_id, c.id) for c in d.definitions_changed} == {
        (f"conduct.{changed.old_id}.{part}", f"conduct.{changed.id}.{part}") for part in ("trigger", "obligation")}
    assert all(c.old_version != c.new_version for c in d.definitions_changed)
    assert not d.definitions_added and not d.definitions_removed
    assert [e.component for e in d.evaluators_changed] == ["conduct"]
    assert not (d.invariants_added or d.invariants_removed or d.invariants_confirmation)
    assert not (d.uncompiled_added or d.uncompiled_removed)
    total = sum(len(yaml.safe_load(p.read_text())["definitions"]) for p in (built / "evaluators").glob("*.yaml"))
    assert (d.recollect, d.reused) == (2, total - 2)
    assert "recollects 2 data definition(s)" in d.summary and f"reuses {total - 2}" in d.summary


def test_a_suite_against_its_own_spec_differs_in_nothing(built: Path) -> None:
    d = suite_diff(built, AIRLINE_EN, pack="airline")
    assert d.recollect == 0 and not d.knowledge_changed
    assert not (d.clauses_changed or d.clauses_added or d.clauses_removed or d.evaluators_changed)


def test_added_and_removed_clauses_invariants_and_uncompiled_sentences(built: Path, tmp_path: Path) -> None:
    text = AIRLINE_EN.read_text(encoding="utf-8")
    # A sentence replaced on its own line would be one changed clause: delete one, add one further down.
    edited = (text.replace("- You should keep your replies short and in plain language.\n", "")
              .replace("- That is final.\n", "- You must not share internal notes with the customer.\n")
              .replace("add checked bags but never remove them", "add checked bags but never remove checked bags"))
    path = tmp_path / "edited" / AIRLINE_EN.name
    path.parent.mkdir()
    path.write_text(edited, encoding="utf-8")
    d = suite_diff(built, path, pack="airline")
    [removed] = d.clauses_removed
    [added] = [c for c in d.clauses_added if "internal notes" in c.text]
    assert {c.source_line for c in d.clauses_added} == {42, 50}  # the bags sentence now compiles too
    assert "replies short" in removed.text and not d.clauses_changed
    assert added.id in d.invariants_added and not d.invariants_removed
    assert [u.sentence for u in d.uncompiled_removed] == ["The customer may add checked bags but never remove them"]
    assert not d.uncompiled_added
    assert {r.id for r in d.definitions_added} == {f"conduct.{c.id}.{part}" for c in d.clauses_added
                                                   for part in ("trigger", "obligation")}
    assert {r.id for r in d.definitions_removed} == {f"conduct.{removed.id}.trigger",
                                                     f"conduct.{removed.id}.obligation"}
    assert d.recollect == len(d.definitions_added) and not d.definitions_changed


def test_diff_errors_name_the_path(tmp_path: Path, built: Path) -> None:
    with pytest.raises(SpecError, match="no such file or directory"):
        suite_diff(tmp_path / "missing", built)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecError, match=r"empty: not a suite directory \(no suite.yaml\)"):
        suite_diff(built, tmp_path / "empty")


# ---- approval ----------------------------------------------------------------------------------------


def test_unapproved_built_suite_is_refused_unless_allowed(suite: Path) -> None:
    with pytest.raises(SpecError, match=r"no approved version; review it, then `agent-factory approve .*airline` "
                                        r"\(or pass --unapproved"):
        load_suite(suite, pack=None)
    tried = load_suite(suite, pack=None, allow_unapproved=True)
    assert tried.files == suite and tried.notice is not None and "is not approved" in tried.notice
    status = approval_status(suite)
    assert status.required and not status.approved and not status.newer_unapproved


def test_approve_then_runs_use_the_snapshot(suite: Path) -> None:
    approval = approve_suite(suite, by="ana", note="first review")
    snapshot = suite / APPROVED_DIR
    recorded = json.loads((snapshot / "approval.json").read_text(encoding="utf-8"))
    assert recorded["by"] == "ana" and recorded["note"] == "first review" and recorded["at"].endswith("Z")
    assert recorded["suite_digest"] == approval.suite_digest and recorded["invariants"] == []
    assert set(recorded["files"]) >= {"suite.yaml", "pack.yaml", "invariants.yaml", "manifest.json",
                                      "evaluators/conduct.yaml", "templates/checklist.j2", "uncompiled.yaml"}
    assert all((snapshot / rel).read_bytes() == (suite / rel).read_bytes() for rel in recorded["files"])
    assert approval.unconfirmed and approval.inherited == ("confirm_before_write",)
    loaded = load_suite(suite, pack=None)
    assert loaded.files == snapshot and loaded.notice is None and loaded.source == suite
    status = approval_status(suite)
    assert status.approved and not status.newer_unapproved and status.current_digest == approval.suite_digest
    # Approving the same files again changes nothing.
    assert approve_suite(suite, by="bo") == approval
    assert not list(suite.glob(".approved*"))  # no temporary directory left behind


def test_a_hand_edit_after_approval_runs_the_approved_version_with_a_notice(suite: Path) -> None:
    approve_suite(suite, by="ana", note=None)
    pack = suite / "pack.yaml"
    pack.write_text(pack.read_text(encoding="utf-8").replace("max_passengers: 5", "max_passengers: 7"),
                    encoding="utf-8")
    loaded = load_suite(suite, pack=None)
    limits = [c.obligation.params.get("max_passengers") for c in loaded.pack.clauses]
    assert 5 in limits and 7 not in limits
    assert loaded.notice == (
        f"{suite} has unapproved changes since the approval of "
        f"{json.loads((suite / APPROVED_DIR / 'approval.json').read_text())['at'][:16]}Z by ana; "
        f"`agent-factory diff {suite / APPROVED_DIR} {suite}` shows them, `agent-factory approve {suite}` approves them")
    assert approval_status(suite).newer_unapproved
    d = suite_diff(suite / APPROVED_DIR, suite)
    [changed] = d.clauses_changed
    assert [(f.field, f.old, f.new) for f in changed.fields] == [("obligation.params.max_passengers", 5, 7)]
    approve_suite(suite, by="ana", note="seven is fine")
    again = load_suite(suite, pack=None)
    assert again.notice is None and 7 in [c.obligation.params.get("max_passengers") for c in again.pack.clauses]


def test_an_edited_snapshot_is_not_approved(suite: Path) -> None:
    approve_suite(suite, by="ana", note=None)
    copied = suite / APPROVED_DIR / "suite.yaml"
    copied.write_text(copied.read_text(encoding="utf-8") + "# touched\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"approved: its files differ from approval.json"):
        load_suite(suite, pack=None)
    approve_suite(suite, by="ana", note=None)  # approving again repairs it
    assert load_suite(suite, pack=None).notice is None


def test_a_suite_that_does_not_load_is_not_approved(suite: Path) -> None:
    (suite / "suite.yaml").write_text("pack: pack.yaml\ncomponents: [conduct, nonsense]\n", encoding="utf-8")
    with pytest.raises(SpecError, match="suite.yaml: components.1"):
        approve_suite(suite, by="ana", note=None)
    assert not (suite / APPROVED_DIR).exists() and not list(suite.glob(".approved*"))


def test_a_base_pack_given_by_path_still_resolves_from_the_snapshot(tmp_path: Path) -> None:
    out = tmp_path / "a" / "s"
    build_suite(AIRLINE_EN, pack=str(REPO / "knowledge_packs" / "airline" / "pack.yaml"), out=out)
    approve_suite(out, by="ana", note=None)
    loaded = load_suite(out, pack=None)
    assert loaded.files == out / APPROVED_DIR and loaded.pack.clause("confirm_before_write") is not None


def test_a_hand_written_suite_needs_no_approval(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text("pack: airline\ncomponents: [conduct]\n", encoding="utf-8")
    loaded = load_suite(tmp_path, pack=None)
    assert loaded.notice is None and loaded.pack.name == "airline" and not approval_status(tmp_path).required
    assert loaded.pack.clause("confirm_before_write").invariant  # type: ignore[union-attr]


# ---- invariants --------------------------------------------------------------------------------------


def test_confirming_an_invariant_changes_the_clause_but_no_definition(suite: Path) -> None:
    before = load_suite(suite, pack=None, allow_unapproved=True)
    proposed = yaml.safe_load((suite / "invariants.yaml").read_text(encoding="utf-8"))["invariants"]
    assert proposed and not any(before.pack.clause(i["clause"]).invariant for i in proposed)  # type: ignore[union-attr]
    assert before.pack.clause("confirm_before_write").invariant  # type: ignore[union-attr]  # the base pack's
    clause_id = _confirm(suite, 0)
    after = load_suite(suite, pack=None, allow_unapproved=True)
    assert after.pack.clause(clause_id).invariant  # type: ignore[union-attr]
    assert [c.id for c in after.pack.clauses if c.invariant] == ["confirm_before_write", clause_id]
    old, new = definitions_for(before.pack), definitions_for(after.pack)
    assert [(d.id, d.version, d.digest()) for d in old] == [(d.id, d.version, d.digest()) for d in new]
    assert before.pack.digest() == after.pack.digest()  # rule data are keyed by it: nothing is recollected
    # The definitions the build wrote match the run's, so the suite's files still describe the run.
    written = {d["id"]: d["version"] for d in _conduct_defs(suite)}
    assert all(written[d.id] == d.version for d in new)
    d = suite_diff(_fresh(suite), suite)
    assert [(c.clause, c.old, c.new) for c in d.invariants_confirmation] == [(clause_id, False, True)]
    assert d.recollect == 0 and not d.clauses_changed and not d.knowledge_changed
    approval = approve_suite(suite, by="ana", note="one invariant")
    assert approval.invariants == (clause_id,) and clause_id not in approval.unconfirmed
    assert load_suite(suite, pack=None).pack.clause(clause_id).invariant  # type: ignore[union-attr]


def _fresh(suite: Path) -> Path:
    other = suite.parent / "fresh"
    shutil.copytree(suite, other)
    path = other / "invariants.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    for entry in data["invariants"]:
        entry["confirmed"] = False
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return other


@pytest.mark.parametrize(("entry", "field", "message"), [
    ({"clause": "no_such_clause", "confirmed": True}, "clause", "no clause 'no_such_clause'"),
    ({"clause": "x", "confirmed": "perhaps"}, "confirmed", "valid boolean"),
    ({"clause": "x", "confirm": True}, "confirm", "Extra inputs"),
    ({"confirmed": True}, "clause", "Field required"),
])
def test_a_bad_invariants_entry_names_file_entry_and_field(suite: Path, entry: dict[str, object], field: str,
                                                           message: str) -> None:
    path = suite / "invariants.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["invariants"].append(entry)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    index = len(data["invariants"]) - 1
    with pytest.raises(SpecError, match=rf"invariants.yaml: invariants.{index}.{field}: .*{message}"):
        load_suite(suite, pack=None, allow_unapproved=True)
    with pytest.raises(SpecError, match=rf"invariants.{index}.{field}"):
        approve_suite(suite, by="ana", note=None)


def test_an_invariant_listed_twice_is_an_error(suite: Path) -> None:
    path = suite / "invariants.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["invariants"].append(dict(data["invariants"][0], confirmed=True))
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(SpecError, match=rf"invariants.{len(data['invariants']) - 1}.clause: .*first at invariants.0"):
        load_suite(suite, pack=None, allow_unapproved=True)


# ---- the command line --------------------------------------------------------------------------------


def test_cli_diff_and_approve(suite: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["diff", str(suite), str(_edited_spec(tmp_path)), "--pack", "airline", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert len(data["clauses_changed"]) == 1 and data["recollect"] == 2 and len(data["definitions_changed"]) == 2
    text = runner.invoke(app, ["diff", str(suite), str(_edited_spec(tmp_path)), "--pack", "airline"])
    assert text.exit_code == 0 and "recollects 2 data definition(s)" in " ".join(text.stdout.split())

    result = runner.invoke(app, ["approve", str(suite), "--by", "ana", "--note", "looks right", "--json"])
    assert result.exit_code == 0, result.output
    approved = json.loads(result.stdout)
    assert approved["already_approved"] is False and approved["by"] == "ana" and approved["note"] == "looks right"
    assert approved["invariants"] == [] and approved["unconfirmed"] and len(approved["suite_digest"]) == 64
    again = runner.invoke(app, ["approve", str(suite), "--json"])
    assert again.exit_code == 0 and json.loads(again.stdout)["already_approved"] is True
    human = runner.invoke(app, ["approve", str(suite)])
    assert human.exit_code == 0 and "already approved" in human.stdout


def test_cli_errors_are_one_line(tmp_path: Path, built: Path) -> None:
    runner = CliRunner()
    for args, message in (
        (["diff", str(tmp_path / "nope"), str(built)], "nope: no such file or directory"),
        (["approve", str(tmp_path / "nope")], "nope: no such file or directory"),
        (["approve", str(tmp_path)], "not a suite directory (no suite.yaml)"),
        (["diff", str(built), str(tmp_path)], "not a suite directory (no suite.yaml)"),
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, (args, result.output)
        assert message in " ".join(result.stderr.split()) and "Traceback" not in result.output


def test_a_rebuild_keeps_the_confirmed_invariants_it_still_proposes(suite: Path) -> None:
    confirmed = _confirm(suite, 0)
    build_suite(AIRLINE_EN, pack="airline", out=suite)
    entries = yaml.safe_load((suite / "invariants.yaml").read_text(encoding="utf-8"))["invariants"]
    assert [e["clause"] for e in entries if e["confirmed"]] == [confirmed]
    assert sum(1 for e in entries if not e["confirmed"]) == len(entries) - 1
