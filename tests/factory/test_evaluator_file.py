"""Evaluator files (`evaluators/<component>.yaml`): what `build` writes is what runs, hand edits included."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from agent_factory.errors import SpecError
from agent_factory.evaluators.core import EvaluatorSpec, get_component, load_yaml_model
from agent_factory.factory.suite.evaluator_file import derive, load_evaluator, make_evaluator
from agent_factory.factory.suite.read import load_suite
from agent_factory.factory.suite.review import approve_suite
from agent_factory.factory.suite.write import build_suite
from agent_factory.knowledge_packs import load_pack
from tests.conftest import REPO

AIRLINE_EN = REPO / "specs" / "airline_en.md"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ev") / "airline"
    build_suite(AIRLINE_EN, pack="airline", out=out)
    return out


@pytest.fixture
def suite(built: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(built, tmp_path / "airline"))


def _edit(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


def test_written_files_are_evaluator_specs_with_their_derived_fields(built: Path) -> None:
    pack = load_pack(built / "pack.yaml")
    for component in ("execution", "substance", "conduct"):
        ev = load_yaml_model(EvaluatorSpec, built / "evaluators" / f"{component}.yaml")
        assert ev == derive(ev) == make_evaluator(component, pack)
        assert ev.version == ev.computed_version()


def test_a_hand_edited_question_is_what_runs(suite: Path) -> None:
    path = suite / "evaluators" / "substance.yaml"
    target = yaml.safe_load(path.read_text(encoding="utf-8"))["definitions"][0]["id"]

    def change(data: dict) -> None:
        data["definitions"][0]["question"] = "Does the answer state the metric's exact definition?"
        for field in ("version", "output_schema"):  # derived: recomputed on load
            data.pop(field)

    _edit(path, change)
    approve_suite(suite, by="ana")
    loaded = load_suite(suite, pack=None)
    [substance] = [c for c in loaded.components if c.name == "substance"]
    [d] = [d for d in substance.definitions if d.id == target]
    assert d.question == "Does the answer state the metric's exact definition?"
    assert d != next(x for x in get_component("substance").definitions if x.id == target)


def test_a_stated_version_that_no_longer_matches_is_refused(suite: Path) -> None:
    path = suite / "evaluators" / "substance.yaml"
    _edit(path, lambda data: data["definitions"][0].update(question="changed, version line left as it was"))
    # The question is in sigma's descriptions, so sigma is the first derived field that no longer matches.
    with pytest.raises(SpecError, match=r"substance.yaml: output_schema: does not match the rest of the file"):
        load_suite(suite, pack=None, allow_unapproved=True)


def test_unknown_analysis_rule_and_moved_on_version_are_named(suite: Path) -> None:
    pack = load_pack(suite / "pack.yaml")
    path = suite / "evaluators" / "execution.yaml"

    def bad_analysis(data: dict) -> None:
        data["analyses"][0]["name"] = "execution.nope"
        data.pop("version")

    _edit(path, bad_analysis)
    with pytest.raises(SpecError, match=r"analyses\.0\.name: unknown analysis 'execution\.nope'; valid: .*"
                                        r"execution\.failure_rate"):
        load_evaluator(path, component="execution", pack=pack)
    _edit(path, lambda data: (data["analyses"][0].update(name="execution.failure_rate", version="0"),
                              data.pop("version", None)))
    with pytest.raises(SpecError, match=r"analyses\.0\.version: execution\.failure_rate is version .* the suite "
                                        r"was built with 0; rebuild"):
        load_evaluator(path, component="execution", pack=pack)
    _edit(path, lambda data: (data["analyses"][0].update(version=get_component("execution").analyses[0].version),
                              data["definitions"][0].update(rule="execution.no_such_rule")))
    with pytest.raises(SpecError, match=r"definitions\.0\.rule: .*no_such_rule"):
        load_evaluator(path, component="execution", pack=pack)


def test_a_hand_edited_clause_wins_and_approve_rewrites_the_conduct_file(suite: Path) -> None:
    pack_file = suite / "pack.yaml"
    pack_file.write_text(pack_file.read_text(encoding="utf-8").replace("max_passengers: 5", "max_passengers: 7"),
                         encoding="utf-8")
    unapproved = load_suite(suite, pack=None, allow_unapproved=True)
    assert "conduct.yaml lists other definitions" in (unapproved.notice or "")
    before = (suite / "evaluators" / "conduct.yaml").read_text(encoding="utf-8")
    approve_suite(suite, by="ana")
    after = (suite / "evaluators" / "conduct.yaml").read_text(encoding="utf-8")
    assert before != after
    loaded = load_suite(suite, pack=None)
    assert loaded.notice is None
    assert 7 in [c.obligation.params.get("max_passengers") for c in loaded.pack.clauses]
