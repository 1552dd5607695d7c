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


# ---- tasks compare and the composites -----------------------------------------------------------------------

SALES = Path(__file__).resolve().parents[2] / "specs" / "tasks" / "sales_report.yaml"


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The shipped suite run with script:succeed and script:fail-midway (2 trials each) into one store, and with
    script:succeed into a second store: (the first store, the second)."""
    root = tmp_path_factory.mktemp("compare")
    one, two = root / "one" / "s.duckdb", root / "two" / "s.duckdb"
    for store, agent in ((one, "script:succeed"), (one, "script:fail-midway"), (two, "script:succeed")):
        res = cli("tasks", "run", str(SALES), "--agent", agent, "--trials", "2", "--store", str(store), "--json")
        assert res.code == 0, res.err
    return one, two


def test_compare_a_candidate_failing_midway_is_below_with_exit_4(compared: tuple[Path, Path]) -> None:
    one, _ = compared
    args = ("tasks", "compare", "--baseline", "agent=script:succeed", "--candidate", "agent=script:fail-midway",
            "--store", str(one))
    res = cli(*args, "--json")
    assert res.code == 4, res.err
    cmp = res.json()
    assert (cmp["baseline"]["completion"], cmp["candidate"]["completion"], cmp["mean_change"]) == (1.0, 0.0, -1.0)
    assert (cmp["baseline"]["runs"], cmp["candidate"]["runs"]) == (14, 14)
    # Seven tasks, every one lost: the most extreme of 2^7 equally likely sign patterns.
    assert cmp["test"]["p_value"] == pytest.approx(1 / 2 ** 7) and cmp["below"] is True
    assert len(cmp["tasks"]) == 7
    assert all(t["change"] == -1.0 and t["baseline"]["successes"] == 2 and t["candidate"]["successes"] == 0
               for t in cmp["tasks"])
    text = cli(*args)
    assert text.code == 4, text.err
    assert "verdict: BELOW the baseline (exit 4)" in text.out
    assert "count_march_orders" in text.out and "next:" in text.out
    assert max(len(line) for line in text.out.splitlines()) <= 100


def test_compare_succeed_against_succeed_is_not_below(compared: tuple[Path, Path]) -> None:
    one, two = compared
    for strict in ((), ("--strict",)):
        # The baseline a store file (all its runs), the candidate a selector on --store.
        res = cli("tasks", "compare", "--baseline", str(two), "--candidate", "agent=script:succeed", "--store",
                  str(one), "--json", *strict)
        assert res.code == 0, res.err
        cmp = res.json()
        assert (cmp["mean_change"], cmp["below"], cmp["test"]["method"], cmp["test"]["changed"]) == (
            0.0, False, "none", 0)
        assert cmp["baseline"]["name"] == str(two) and cmp["strict"] == bool(strict)
    text = cli("tasks", "compare", "--baseline", str(two), "--candidate", "agent=script:succeed", "--store", str(one))
    assert text.code == 0 and "not below the baseline" in text.out and "(no task changed)" in text.out


def test_compare_bad_sides_fail_in_one_line(compared: tuple[Path, Path]) -> None:
    one, _ = compared
    res = cli("tasks", "compare", "--baseline", "agent=script:succeed", "--candidate", "agent=script:nope",
              "--store", str(one))
    assert res.code == 1
    (line,) = res.err.strip().splitlines()
    assert "--candidate agent=script:nope: selects no task run" in line and "script:fail-midway" in line, line
    res = cli("tasks", "compare", "--baseline", "model=x", "--candidate", "agent=script:succeed", "--store", str(one))
    assert res.code == 1 and "one of suite, agent, source, trial" in res.err
    res = cli("tasks", "compare", "--baseline", "nowhere.duckdb", "--candidate", "agent=script:succeed",
              "--store", str(one))
    assert res.code == 1 and "neither a store file nor a selector" in res.err
    assert cli("tasks", "compare", "--baseline", "agent=script:succeed", "--store", str(one)).code == 2
    assert cli("tasks", "compare", "--baseline", "agent=script:succeed", "--candidate", "agent=script:succeed",
               "--alpha", "1.5", "--store", str(one)).code == 2


def test_report_composite_only_on_request(compared: tuple[Path, Path]) -> None:
    _, two = compared
    plain = cli("tasks", "report", "--store", str(two), "--json")
    assert plain.code == 0 and "composite" not in plain.json()
    res = cli("tasks", "report", "--store", str(two), "--json", "--composite", "gated-total")
    assert res.code == 0, res.err
    comp = res.json()["composite"]
    assert comp["name"] == "gated-total" and comp["label"].startswith("view: ")
    # No model is configured, so final quality is not collected: the composite is null, with the reason.
    assert comp["value"] is None
    assert any(m.startswith("final_quality: not collected for 7 of 7 task(s)") for m in comp["missing"])
    # script:succeed plays every reference: success, process (overlap), stability and efficiency all full.
    text = cli("tasks", "report", "--store", str(two), "--composite", "intelligence-index")
    assert text.code == 0 and "view (composite, on request)" in text.out and "intelligence-index: 100.0" in text.out
    assert max(len(line) for line in text.out.splitlines()) <= 100
    bad = cli("tasks", "report", "--store", str(two), "--composite", "overall")
    assert bad.code == 1 and "gated-total, intelligence-index" in bad.err


@pytest.mark.realdata
def test_compare_tau_trials_against_trials_of_the_same_agent(tau: tuple[Path, Path, Res]) -> None:
    """Trials 0-1 against trials 2-3 of the same gpt-4o runs: per-task completions as the raw file gives them, the
    p value as scipy's enumeration of every sign flip gives it, and no verdict of a fall."""
    from scipy.stats import PermutationMethod, wilcoxon

    src, store, imported = tau
    assert imported.code == 0, imported.err
    res = cli("tasks", "compare", "--baseline", "trial=0,1", "--candidate", "trial=2,3", "--store", str(store),
              "--json")
    assert res.code == 0, res.err
    cmp = res.json()
    wins: dict[str, list[list[bool]]] = defaultdict(lambda: [[], []])
    for rec in json.loads(src.read_text()):
        wins[str(rec["task_id"])][rec["trial"] >= 2].append(rec["reward"] == 1)
    expected = {t: sum(after) / len(after) - sum(before) / len(before) for t, (before, after) in wins.items()}
    assert {t["id"]: t["change"] for t in cmp["tasks"]} == pytest.approx(expected)
    assert cmp["test"]["tasks"] == 32 and cmp["mean_change"] == pytest.approx(sum(expected.values()) / 32)
    d = [v for v in expected.values() if v != 0]
    lib = wilcoxon(d, alternative="less", method=PermutationMethod(n_resamples=2 ** len(d)))
    assert cmp["test"]["p_value"] == pytest.approx(float(lib.pvalue), abs=1e-12)
    assert cmp["below"] is False
