"""Task suites (`evaluators.tasks.suite`, read by `factory.tasks.suite_io`): the shipped suite loads with a task of
every category, and bad suite files fail in one line naming the file, the task and the field."""

from __future__ import annotations

import copy
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_factory.errors import SpecError
from agent_factory.evaluators.tasks.suite import Category, SqlCriterion, TaskSuite
from agent_factory.factory.tasks.suite_io import load_suite

SHIPPED = Path(__file__).resolve().parents[3] / "specs" / "tasks" / "sales_report.yaml"


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    data = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_shipped_suite_loads_with_every_category() -> None:
    suite = load_suite(SHIPPED)
    assert suite.name == "sales_report"
    assert {t.category for t in suite.tasks} == set(typing.get_args(Category))
    multi = [t for t in suite.tasks if t.category == "multi_turn"]
    assert multi and all(len(t.input) >= 2 for t in multi)
    business = [t for t in suite.tasks if t.category == "business"]
    assert any(isinstance(c, SqlCriterion) for t in business for c in t.criteria)
    assert suite.task("count_march_orders").input == ("How many orders were placed in March 2025?",)


def _fails(tmp_path: Path, data: dict[str, Any]) -> str:
    path = tmp_path / "bad_suite.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_suite(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    return message.removeprefix(f"{path}: ")


def test_unknown_field_names_task_and_field(raw: dict[str, Any], tmp_path: Path) -> None:
    data = copy.deepcopy(raw)
    data["tasks"][1]["max_stpes"] = 3
    message = _fails(tmp_path, data)
    assert message.startswith("task 'region_totals_file': max_stpes: Extra inputs are not permitted")


def test_wrong_type_names_task_and_field(raw: dict[str, Any], tmp_path: Path) -> None:
    data = copy.deepcopy(raw)
    data["tasks"][0]["max_steps"] = "many"
    assert _fails(tmp_path, data).startswith("task 'count_march_orders': max_steps: Input should be a valid integer")


def test_bad_criterion_names_its_place(raw: dict[str, Any], tmp_path: Path) -> None:
    data = copy.deepcopy(raw)
    data["tasks"][0]["criteria"][0] = {"kind": "output_matches", "pattern": "(unclosed"}
    message = _fails(tmp_path, data)
    assert message.startswith("task 'count_march_orders': criteria.0")
    assert "not a valid regular expression" in message
    data["tasks"][0]["criteria"][0] = {"kind": "telepathy"}
    assert _fails(tmp_path, data).startswith("task 'count_march_orders': criteria.0")


def test_undeclared_tool_names_task_and_field(raw: dict[str, Any], tmp_path: Path) -> None:
    data = copy.deepcopy(raw)
    data["tools"] = ["query_sql", "write_file"]
    message = _fails(tmp_path, data)
    # The first task using a tool the suite no longer declares: the business task uses execute_sql.
    assert message.startswith("task 'delete_region_orders': tools: ['execute_sql'] not declared by the suite")


def test_duplicate_id_names_task_and_field(raw: dict[str, Any], tmp_path: Path) -> None:
    data = copy.deepcopy(raw)
    data["tasks"][2]["id"] = data["tasks"][0]["id"]
    assert _fails(tmp_path, data) == "task 'count_march_orders': id: duplicate task id"


def test_task_checks_name_the_task(raw: dict[str, Any], tmp_path: Path) -> None:
    data = copy.deepcopy(raw)
    data["tasks"][2]["input"] = ["only one message"]
    assert _fails(tmp_path, data) == "task 'best_product_followup': input: a multi_turn task needs at least 2 messages"
    data = copy.deepcopy(raw)
    data["tasks"][0]["expected_steps"][0]["tool"] = "write_file"
    assert _fails(tmp_path, data).startswith(
        "task 'count_march_orders': expected_steps[0].tool: 'write_file' is not among the task's tools")
    data = copy.deepcopy(raw)
    data["tasks"][6]["max_steps"] = 2
    assert _fails(tmp_path, data) == "task 'q1_region_summary': max_steps: 2 is fewer than its 5 expected steps"


def test_suite_level_errors_and_paths(raw: dict[str, Any], tmp_path: Path) -> None:
    data = copy.deepcopy(raw)
    data["tools"] = ["query_sql", "shell"]
    assert _fails(tmp_path, data).startswith("tools.1: Input should be ")
    data["tools"] = [*raw["tools"], "query_sql"]
    assert _fails(tmp_path, data) == "tools: a tool is listed twice"
    data = copy.deepcopy(raw)
    data["sandbox"]["files"]["../escape.txt"] = "x"
    assert _fails(tmp_path, data).startswith("sandbox.files: path must be relative to the sandbox")
    data = copy.deepcopy(raw)
    data["tasks"][1]["criteria"][0]["path"] = "/etc/passwd"
    assert _fails(tmp_path, data).startswith("task 'region_totals_file': criteria.0.path: path must be relative")


def test_unreadable_file_names_it(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: [unclosed\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"broken\.yaml: cannot read YAML"):
        load_suite(path)
    path.write_text("- a list\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"broken\.yaml: \(top level\): a task suite is a mapping"):
        load_suite(path)


def test_models_are_frozen(raw: dict[str, Any]) -> None:
    suite = TaskSuite.model_validate(raw)
    with pytest.raises(Exception, match="frozen"):
        suite.tasks[0].max_steps = 99  # type: ignore[misc]
    with pytest.raises(KeyError, match="no task 'nope'"):
        suite.task("nope")


def test_bad_reference_names_task_and_field(raw: dict[str, Any], tmp_path: Path) -> None:
    data = copy.deepcopy(raw)
    data["tasks"][0]["reference"] = [{"tool": "write_file", "args": {"path": "a"}}, {"answer": "5"}]
    assert _fails(tmp_path, data).startswith("task 'count_march_orders': reference[0].tool: 'write_file' is not")
    data["tasks"][0]["reference"] = [{"tool": "query_sql", "args": {"sql": "SELECT 1"}}]
    assert "needs one answer per user message (1)" in _fails(tmp_path, data)
    data["tasks"][0]["reference"] = [{"tool": "query_sql", "answer": "5"}]
    assert "either a tool call (tool) or an answer" in _fails(tmp_path, data)
