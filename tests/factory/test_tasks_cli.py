"""`agent-factory tasks import` and `tasks report` end to end through `Project` (`TaskJobs`): tau-bench's shared
trajectories (skipped when ../shared/data is absent) against pass^k computed here from the raw JSON, a small
file written here with a known answer, re-imports, and bad input."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import shared_data
from tests.factory.conftest import Res, cli

TASK_KEYS = {"id", "trials", "successes", "pass_hat", "dimensions", "first_deviation"}



def _traj(tools: int) -> list[dict[str, Any]]:
    """A user's request, `tools` tool calls with their results, an answer and the user's stop."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "policy"}, {"role": "user", "content": "book it"}]
    for i in range(tools):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "get_user", "arguments": "{}"}}
        msgs += [{"role": "assistant", "content": None, "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": f"c{i}", "name": "get_user", "content": "{}"}]
    return msgs + [{"role": "assistant", "content": "done"}, {"role": "user", "content": "###STOP###"}]


def _record(task: int, trial: int, reward: float | None, tools: int = 2) -> dict[str, Any]:
    return {"task_id": task, "trial": trial, "reward": reward, "info": {"source": "user"}, "traj": _traj(tools)}


# ---- tau-bench's shared trajectories ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tau(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Res]:
    """The shared airline file imported once: (file, store, the import's result)."""
    src = shared_data("tau-bench-airline-gpt4o", "gpt-4o-airline.json")
    store = tmp_path_factory.mktemp("tau") / "s.duckdb"
    return src, store, cli("tasks", "import", str(src), "--format", "tau-bench", "--store", str(store), "--json")


def _independent_pass_hat(src: Path) -> dict[str, float]:
    """pass^k from the raw file: group by task_id, count reward == 1, mean of comb(c, k)/comb(n, k)."""
    trials: dict[int, list[float]] = defaultdict(list)
    for rec in json.loads(src.read_text()):
        trials[rec["task_id"]].append(rec["reward"])
    n = {len(r) for r in trials.values()}
    assert n == {4}  # the shared file: every task run 4 times
    return {str(k): sum(math.comb(sum(r == 1 for r in rs), k) / math.comb(4, k) for rs in trials.values())
            / len(trials) for k in range(1, 5)}


@pytest.mark.realdata
def test_tau_import_gives_pass_hat_of_the_raw_file(tau: tuple[Path, Path, Res]) -> None:
    src, store, imported = tau
    assert imported.code == 0, imported.err
    assert imported.json() | {"file": ""} == {
        "file": "", "format": "tau-bench", "suite": "gpt-4o-airline", "trajectories": 128, "tasks": 32,
        "new_runs": 128, "unlabelled": 0, "conversations_stored": 128}
    res = cli("tasks", "report", "--store", str(store), "--json")
    assert res.code == 0, res.err
    report = res.json()
    expected = _independent_pass_hat(src)
    assert report["pass_hat"].keys() == expected.keys()
    for k, value in expected.items():
        assert report["pass_hat"][k] == pytest.approx(value, abs=1e-12), k
    assert report["pass_hat"]["1"] == pytest.approx(53 / 128)  # SOURCE.md: 53 of 128 with reward 1.0
    assert len(report["tasks"]) == 32
    assert all(TASK_KEYS <= set(t) for t in report["tasks"])
    assert sum(t["successes"] for t in report["tasks"]) == 53
    # The conversations entered the store as any source: every trajectory a session.
    stats = cli("stats", "--store", str(store), "--json")
    assert stats.code == 0, stats.err
    assert stats.json()["sessions"] == 128


@pytest.mark.realdata
def test_tau_reimport_adds_nothing(tau: tuple[Path, Path, Res]) -> None:
    src, store, _ = tau
    again = cli("tasks", "import", str(src), "--format", "tau-bench", "--store", str(store), "--json")
    assert again.code == 0, again.err
    assert (again.json()["new_runs"], again.json()["conversations_stored"]) == (0, 0)
    report = cli("tasks", "report", "--store", str(store), "--json").json()
    assert report["runs"] == 128
    text = cli("tasks", "report", "--store", str(store))
    assert text.code == 0, text.err
    # The screen's pass^k rows, k = 1..4, each over the 32 tasks.
    rows = [line.split() for line in text.out.splitlines()[3:7]]
    expected = _independent_pass_hat(src)
    assert rows == [[k, f"{v:.3f}", "32"] for k, v in expected.items()]


# ---- a small file with a known answer -----------------------------------------------------------------------

def test_three_trials_two_successes_and_an_unlabelled_one(tmp_path: Path) -> None:
    src = tmp_path / "mini.json"
    src.write_text(json.dumps([_record(7, 0, 1.0, tools=3), _record(7, 1, 0.0, tools=1), _record(7, 2, 1.0),
                               _record(7, 3, None)]))
    store = tmp_path / "s.duckdb"
    imported = cli("tasks", "import", str(src), "--format", "tau-bench", "--store", str(store), "--json")
    assert imported.code == 0, imported.err
    assert (imported.json()["new_runs"], imported.json()["unlabelled"]) == (4, 1)
    report = cli("tasks", "report", "--store", str(store), "--json").json()
    assert report["pass_hat"] == pytest.approx({"1": 2 / 3, "2": 1 / 3, "3": 0.0})
    assert report["unlabelled"] == 1
    (task,) = report["tasks"]
    assert (task["id"], task["trials"], task["labelled"], task["successes"]) == ("7", 4, 3, 2)
    assert task["pass_hat"] == pytest.approx({"1": 2 / 3, "2": 1 / 3, "3": 0.0})
    assert task["dimensions"]["completion"] == pytest.approx(2 / 3)
    assert task["steps"] == pytest.approx((3 + 1 + 2 + 2) / 4)  # tool calls per trial
    assert task["first_deviation"] is None
    text = cli("tasks", "report", "--store", str(store))
    assert text.code == 0, text.err
    assert "1 run(s) without a label" in text.out


# ---- bad input ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("record", "field"), [
    ({"task_id": 1, "trial": 1, "reward": "yes", "traj": []}, "reward"),
    ({"task_id": 1, "reward": 1.0, "traj": []}, "trial"),
    ({"task_id": 1, "trial": 1, "reward": 1.0}, "traj"),
])
def test_bad_record_is_one_line_naming_file_record_field(tmp_path: Path, record: dict[str, Any], field: str) -> None:
    src = tmp_path / "bad.json"
    src.write_text(json.dumps([_record(1, 0, 1.0), record]))
    store = tmp_path / "s.duckdb"
    res = cli("tasks", "import", str(src), "--format", "tau-bench", "--store", str(store))
    assert res.code == 1
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res.err
    assert str(src) in lines[0] and "record 1" in lines[0] and f": {field}:" in lines[0], lines[0]
    assert not store.exists()  # nothing stored, not even the good record


def test_missing_file_and_empty_store_say_what(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    res = cli("tasks", "import", str(tmp_path / "nope.json"), "--format", "tau-bench", "--store", str(store))
    assert res.code == 1 and "nope.json: no such file" in res.err
    res = cli("tasks", "report", "--store", str(store))
    assert res.code == 1 and "no store here yet" in res.err
    assert cli("tasks", "import", "x.json", "--format", "mast").code == 2
