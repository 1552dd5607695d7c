"""The task runner (`factory.tasks.runner`) with the scripted agents (`factory.tasks.agents`) on the shipped suite:
each script gives the outcomes it implies, and limits and faults end a trial with their reason, never the run."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import Result
from typer.testing import CliRunner

from agent_factory.evaluators.tasks.passk import pass_hat
from agent_factory.evaluators.tasks.suite import SandboxSpec, SqliteSpec, TaskSuite
from agent_factory.factory.cli.app import app
from agent_factory.factory.store.base import Store
from agent_factory.factory.store.tasks import read_task_runs
from agent_factory.factory.tasks.agents import REFUSAL, Answer, History, ToolCall, scripted_agent
from agent_factory.factory.tasks.runner import TrialResult, run_suite, run_trial
from agent_factory.factory.tasks.sandbox import Sandbox, ToolResult
from agent_factory.factory.tasks.spans import otlp_document
from agent_factory.factory.tasks.suite_io import load_suite
from tests.factory.conftest import NO_MODEL

SHIPPED = Path(__file__).resolve().parents[2] / "specs" / "tasks" / "sales_report.yaml"
TRIALS = 2


@pytest.fixture(scope="module")
def suite() -> TaskSuite:
    return load_suite(SHIPPED)


@pytest.fixture(scope="module")
def runs(suite: TaskSuite) -> dict[str, list[TrialResult]]:
    return {name: run_suite(suite, scripted_agent(name), trials=TRIALS)
            for name in ("succeed", "fail-midway", "recover", "loop", "refuse")}


def _pass_hat(results: list[TrialResult]) -> dict[int, float]:
    by_task: dict[str, list[bool]] = defaultdict(list)
    for r in results:
        by_task[r.task_id].append(r.success)
    return pass_hat([(len(v), sum(v)) for v in by_task.values()])[0]


def test_every_task_and_trial_runs_from_a_fresh_sandbox(suite: TaskSuite, runs: dict[str, list[TrialResult]]
                                                        ) -> None:
    for results in runs.values():
        assert [(r.task_id, r.trial) for r in results] == [(t.id, i) for t in suite.tasks for i in range(TRIALS)]
    # The business task creates a table: its second trial would fail on a shared database.
    q1 = [r for r in runs["succeed"] if r.task_id == "q1_region_summary"]
    assert all(r.success for r in q1) and all("region_summary" not in r.tables_before for r in q1)
    assert all("region_summary" in r.tables_after for r in q1)


def test_succeed_passes_every_task(runs: dict[str, list[TrialResult]]) -> None:
    results = runs["succeed"]
    assert all(r.ended_by == "answered" and r.success for r in results), [r for r in results if not r.success]
    assert _pass_hat(results) == {k: 1.0 for k in range(1, TRIALS + 1)}
    assert all(r.first_deviation is None and r.step_pass_rate in (None, 1.0) for r in results)
    assert sum(r.redundant_calls for r in results) == 0


def test_succeed_records_every_call(suite: TaskSuite, runs: dict[str, list[TrialResult]]) -> None:
    for r in runs["succeed"]:
        reference = suite.task(r.task_id).reference_calls
        assert [(c.tool, c.args, c.ok) for c in r.calls] == [(s.tool, s.args, not s.fails) for s in reference]
        assert [c.step for c in r.calls] == list(range(1, len(reference) + 1))
        assert all(r.start_ns <= c.start_ns <= c.end_ns <= r.end_ns for c in r.calls)
        assert all(c.error for c in r.calls if not c.ok) and all(c.output for c in r.calls if c.ok)
        assert len(r.answers) == len(suite.task(r.task_id).input) and r.tokens is None
    renamed = next(r for r in runs["succeed"] if r.task_id == "renamed_sales_table")
    assert renamed.calls[0].error is not None and "no such table: sales" in renamed.calls[0].error
    assert renamed.recoveries == 1 and renamed.error_recovery == 1.0


def test_fail_midway_fails_and_deviates_where_it_stopped(suite: TaskSuite, runs: dict[str, list[TrialResult]]
                                                         ) -> None:
    results = runs["fail-midway"]
    assert not any(r.success for r in results)
    assert set(_pass_hat(results).values()) == {0.0}
    for r in results:
        task = suite.task(r.task_id)
        stopped = len(task.reference_calls) // 2
        assert r.ended_by == "answered" and r.steps == stopped
        # It followed the expected steps up to where it stopped: the next one is the first deviation.
        assert r.first_deviation == (stopped + 1 if task.expected_steps else None)


def test_recover_counts_the_recovery_and_still_passes(suite: TaskSuite, runs: dict[str, list[TrialResult]]
                                                      ) -> None:
    results = runs["recover"]
    assert all(r.success for r in results)
    sql_tasks = [r for r in results if any(t in suite.task(r.task_id).tools for t in ("query_sql", "execute_sql"))]
    assert len(sql_tasks) == 2 * (len(suite.tasks) - 1)  # all but the file-only task
    for r in sql_tasks:
        assert not r.calls[0].ok and r.calls[0].error is not None and "syntax error" in r.calls[0].error
        assert r.recoveries >= 1 and r.error_recovery == 1.0
        assert r.steps == len(suite.task(r.task_id).reference_calls) + 1


def test_loop_is_ended_by_the_step_limit(suite: TaskSuite, runs: dict[str, list[TrialResult]]) -> None:
    for r in runs["loop"]:
        max_steps = suite.task(r.task_id).max_steps
        assert r.ended_by == "step_limit" and not r.success and r.reason and "max_steps" in r.reason
        assert r.steps == max_steps and r.redundant_calls == max_steps - 1


def test_refuse_passes_the_safety_tasks_only(suite: TaskSuite, runs: dict[str, list[TrialResult]]) -> None:
    for r in runs["refuse"]:
        assert r.steps == 0 and r.answers[-1] == REFUSAL
        assert r.success == (suite.task(r.task_id).category == "safety"), r.task_id


def test_unknown_script_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown scripted agent 'script:win'.*script:succeed.*script:refuse"):
        scripted_agent("script:win")


class _Spender:
    """Claims 1000 tokens per decision while calling a tool over and over."""

    name = "fake:spender"

    def act(self, history: History) -> ToolCall | Answer:
        return ToolCall(tool="list_files", tokens=1000)


class _Crasher:
    """Answers the first message, then fails."""

    name = "fake:crasher"

    def act(self, history: History) -> ToolCall | Answer:
        if history.actions:
            raise RuntimeError("model endpoint unreachable")
        return ToolCall(tool="query_sql", args={"sql": "SELECT 1"})


class _RaisingSandbox(Sandbox):
    def list_files(self) -> ToolResult:
        raise OSError("disk gone")


def test_token_limit_ends_the_trial(suite: TaskSuite) -> None:
    task = suite.task("reveal_api_key")  # token_limit 4000: the fifth decision crosses it
    r = run_trial(suite, task, _Spender(), 0)
    assert r.ended_by == "token_limit" and r.tokens == 5000 and r.steps == 4 and not r.success
    assert r.reason is not None and "token_limit 4000" in r.reason


def test_faults_end_the_trial_not_the_run(suite: TaskSuite) -> None:
    crashed = run_suite(suite, _Crasher(), trials=1, tasks=["count_march_orders"])
    assert [(r.ended_by, r.steps, r.success) for r in crashed] == [("agent_error", 1, False)]
    assert crashed[0].reason == "fake:crasher: RuntimeError: model endpoint unreachable"
    raised = run_trial(suite, suite.task("reveal_api_key"), scripted_agent("succeed"), 0, sandbox=_RaisingSandbox)
    assert raised.ended_by == "sandbox_error" and raised.reason == "list_files: OSError: disk gone"
    assert raised.verdict is not None and not raised.success

    def broken(spec: SandboxSpec) -> Sandbox:
        return Sandbox(SandboxSpec(sqlite=SqliteSpec(tables=("CREATE TABLE broken (",))))

    unbuilt = run_trial(suite, suite.task("count_march_orders"), scripted_agent("succeed"), 0, sandbox=broken)
    assert unbuilt.ended_by == "sandbox_error" and unbuilt.verdict is None and not unbuilt.success
    assert unbuilt.reason is not None and unbuilt.reason.startswith("sandbox: OperationalError")


def test_a_call_the_tool_cannot_take_is_an_error_the_agent_sees(suite: TaskSuite) -> None:
    class Clumsy:
        name = "fake:clumsy"

        def act(self, history: History) -> ToolCall | Answer:
            if history.actions == 0:
                return ToolCall(tool="query_sql", args={"query": "SELECT 1"})
            if history.actions == 1:
                return ToolCall(tool="shell", args={"cmd": "ls"})
            return Answer(text="There were 5 orders in March 2025.")

    r = run_trial(suite, suite.task("count_march_orders"), Clumsy(), 0)
    assert r.ended_by == "answered" and r.success and r.failed_calls == 2
    assert r.calls[0].error is not None and "bad arguments" in r.calls[0].error
    assert r.calls[1].error is not None and "no such tool" in r.calls[1].error


# ---- `agent-factory tasks run`: the trials' spans in the store, their task runs reported ---------------------------



def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env=NO_MODEL)


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """`tasks run` with `script:recover`, 2 trials: (the store, its --json)."""
    store = tmp_path_factory.mktemp("task-run") / "runs.duckdb"
    res = cli("tasks", "run", str(SHIPPED), "--agent", "script:recover", "--trials", str(TRIALS), "--store",
              str(store), "--json")
    assert res.exit_code == 0, res.stderr
    return store, json.loads(res.stdout)


def test_run_prints_the_report_shape(suite: TaskSuite, ran: tuple[Path, Any]) -> None:
    _, out = ran
    assert out["pass_hat"] == {str(k): 1.0 for k in range(1, TRIALS + 1)}
    assert out["ended_by"] == {"answered": TRIALS * len(suite.tasks)} and out["new_runs"] == TRIALS * len(suite.tasks)
    assert {t["id"] for t in out["tasks"]} == {t.id for t in suite.tasks}
    assert all({"id", "trials", "successes", "pass_hat", "dimensions", "first_deviation"} <= set(t)
               for t in out["tasks"])
    count = next(t for t in out["tasks"] if t["id"] == "count_march_orders")
    # The inserted bad query is the first step: recovered from, off the expected steps at step 1, all met later.
    assert count["dimensions"]["error_recovery"] == 1.0 and count["first_deviation"] == 1
    assert count["dimensions"]["step_pass_rate"] == 1.0 and count["steps"] == 2.0


def test_run_stores_one_conversation_per_trial(suite: TaskSuite, ran: tuple[Path, Any]) -> None:
    store, out = ran
    con = duckdb.connect(str(store), read_only=True)
    try:
        conversations = {r[0] for r in con.execute("SELECT DISTINCT conversation_id FROM turns").fetchall()}
        tool_spans = con.execute("SELECT count(*) FROM spans WHERE name LIKE 'execute_tool %'").fetchone()
    finally:
        con.close()
    with Store(store, read_only=True) as st:
        runs = read_task_runs(st)
    assert len(conversations) == TRIALS * len(suite.tasks) == len(runs)
    assert {r.conversation_id for r in runs} == conversations
    # Every tool call is an execute_tool span: the reference's calls, plus the bad query where SQL is offered.
    assert tool_spans == (sum(r.steps for r in runs),)
    assert Path(out["file"]).is_file()


def test_run_spans_are_evaluated_and_reported(suite: TaskSuite, ran: tuple[Path, Any]) -> None:
    store, _ = ran
    evaluated = cli("run", "--store", str(store))
    assert evaluated.exit_code == 0, evaluated.stderr
    report = cli("tasks", "report", "--store", str(store), "--json")
    assert report.exit_code == 0 and json.loads(report.stdout)["runs"] == TRIALS * len(suite.tasks)


def test_run_refuses_an_unknown_agent(tmp_path: Path) -> None:
    res = cli("tasks", "run", str(SHIPPED), "--agent", "script:win", "--store", str(tmp_path / "s.duckdb"))
    assert res.exit_code == 1 and "valid: script:succeed, script:fail-midway" in res.stderr
    assert not (tmp_path / "s.duckdb").exists()


def test_spans_carry_the_run_contract(suite: TaskSuite, runs: dict[str, list[TrialResult]]) -> None:
    """One trace per trial: the root with the task and the sandbox before/after, a chat span per decision (the
    script as the model), an execute_tool span per call with its arguments, result or error status."""
    r = next(r for r in runs["recover"] if r.task_id == "q1_region_summary")
    doc = otlp_document([r], {t.id: t.input for t in suite.tasks})
    [block] = doc["resourceSpans"]
    spans = block["scopeSpans"][0]["spans"]

    def attrs(span: dict[str, Any]) -> dict[str, Any]:
        return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}

    root, rest = spans[0], spans[1:]
    assert root["name"] == "invoke_agent sales_report" and root["parentSpanId"] == ""
    assert {s["traceId"] for s in spans} == {root["traceId"]} and all(s["parentSpanId"] == root["spanId"] for s in rest)
    top = attrs(root)
    assert (top["gen_ai.operation.name"], top["gen_ai.agent.name"], top["task.id"], top["task.trial"]) == (
        "invoke_agent", "script:recover", "q1_region_summary", "0")
    assert "region_summary" not in json.loads(top["sandbox.state.before"])
    assert json.loads(top["sandbox.state.after"])["region_summary"] == [["North", 4, 332.0], ["South", 4, 554.0],
                                                                        ["West", 4, 400.0]]
    chats = [attrs(s) for s in rest if s["name"] == "chat script:recover"]
    assert len(chats) == len(r.decisions) and all(c["gen_ai.request.model"] == "script:recover" for c in chats)
    assert json.loads(chats[0]["gen_ai.output.messages"])[0]["parts"][0]["type"] == "tool_call"
    tools = [s for s in rest if s["name"].startswith("execute_tool ")]
    assert [attrs(s)["gen_ai.tool.name"] for s in tools] == [c.tool for c in r.calls]
    assert json.loads(attrs(tools[1])["gen_ai.tool.call.arguments"]) == r.calls[1].args
    assert tools[0]["status"]["code"] == "STATUS_CODE_ERROR" and "syntax error" in tools[0]["status"]["message"]
    assert all(s["status"]["code"] == "STATUS_CODE_OK" for s in tools[1:])
    assert all(int(s["startTimeUnixNano"]) <= int(s["endTimeUnixNano"]) for s in spans)


def test_why_trials_ended_without_an_answer_is_said_once_per_reason(suite: TaskSuite,
                                                                     runs: dict[str, list[TrialResult]]) -> None:
    from agent_factory.factory.tasks.runner import ending_reasons
    from agent_factory.factory.views.tasks import ending_lines

    loop = runs["loop"]
    found = ending_reasons(loop)
    # One reason per task's step limit (each names its own max_steps), covering every looping trial.
    assert sum(e.trials for e in found) == len(loop) and {e.ended_by for e in found} == {"step_limit"}
    assert {t for e in found for t in e.tasks} == {r.task_id for r in loop}
    assert ending_reasons(runs["succeed"]) == []
    lines = ending_lines(found)
    text = " ".join(line.strip() for line in lines[1:])
    assert lines[0].startswith("ended without an answer") and "step_limit (" in lines[1] and "max_steps" in text
    assert max(len(line) for line in lines) <= 100
