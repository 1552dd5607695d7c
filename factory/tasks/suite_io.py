"""Reading a task suite's YAML file (`specs/tasks/*.yaml`) into a `TaskSuite`.

A bad file fails with one line naming the file, the task (by its id, when the problem is inside one) and the field:
`suite.yaml: task 'count_orders': max_steps: Input should be greater than or equal to 1 (got 0)`. The field path
and message come from the project's `describe_error`, as every loader's do.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import ValidationError

from agent_factory import yamlio
from agent_factory.errors import SpecError
from agent_factory.evaluators.tasks.suite import CriterionKind, TaskSuite
from agent_factory.validation import describe_error

_TASK_LOC = re.compile(r"^tasks\.(\d+)(?:\.(.*))?$")
_TAG = re.compile(r"^(tasks\.\d+\.criteria\.\d+)\.(?:" + "|".join(get_args(CriterionKind)) + r")\b")


def _name_task(where: str, data: Any) -> str:
    """`tasks.3.max_steps` as `task 'count_orders': max_steps` (the index when the task has no usable id)."""
    m = _TASK_LOC.match(where)
    if m is None:
        return where
    index, rest = int(m.group(1)), m.group(2)
    tasks = data.get("tasks") if isinstance(data, dict) else None
    task = tasks[index] if isinstance(tasks, list) and index < len(tasks) else None
    task_id = task.get("id") if isinstance(task, dict) else None
    name = f"task {task_id!r}" if isinstance(task_id, str) else f"task #{index + 1}"
    return f"{name}: {rest}" if rest else name


def _tagged(data: Any) -> Any:
    """The input with each criterion under its `kind`, as pydantic's error locations of the tagged union have it
    (`criteria.0.file.path`), so `describe_error` follows the location down to the field."""
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        return data
    tasks = [
        {**t, "criteria": [{c["kind"]: c} if isinstance(c, dict) and isinstance(c.get("kind"), str) else c
                           for c in t["criteria"]]}
        if isinstance(t, dict) and isinstance(t.get("criteria"), list) else t
        for t in data["tasks"]
    ]
    return {**data, "tasks": tasks}


def describe_suite_error(err: ValidationError, data: Any) -> str:
    """A suite's validation error as one line: the task by id, then the field and what is wrong."""
    line = _TAG.sub(r"\1", describe_error(err, _tagged(data)))
    where, _, message = line.partition(": ")
    if where == "(top level)" and message.startswith(("task ", "tools: ")):
        # The suite's own checks (duplicate id, undeclared tool) name the task and field themselves.
        return message
    return f"{_name_task(where, data)}: {message}"


def load_suite(path: Path) -> TaskSuite:
    """The suite in `path`; a `SpecError` of one line naming the file, the task and the field."""
    try:
        data = yamlio.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise SpecError(f"{path}: cannot read YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: (top level): a task suite is a mapping, got {type(data).__name__}")
    try:
        return TaskSuite.model_validate(data)
    except ValidationError as e:
        raise SpecError(f"{path}: {describe_suite_error(e, data)}") from None


__all__ = ["describe_suite_error", "load_suite"]
