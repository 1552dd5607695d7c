"""Model agents in the task runner (issue 35): a pydantic-ai Agent over litellm against the local OpenAI-compatible
test server, end to end through `agent-factory tasks run --agent openai/<name>`: every trial ends with a reason,
the run contracts (reasoning, tool calls, tokens) are spans in the store, `agent-factory run` evaluates them, and
model faults end only their trial."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_factory.evaluators.tasks.suite import Task
from agent_factory.factory.store import Store
from agent_factory.factory.tasks.suite_io import load_suite
from tests.factory.conftest import NO_MODEL, Res
from tests.fakes.openai_server import FakeOpenAIServer, FaultPlan, FaultReply, Reply, ToolCallReply

SUITE = Path(__file__).resolve().parents[2] / "specs" / "tasks" / "sales_report.yaml"
TASKS = load_suite(SUITE).tasks
MODEL = "openai/fake-agent"


def _invoke(server: FakeOpenAIServer, *args: str, config: Path | None = None) -> Res:
    """`agent-factory ARGS` with the agent served by `server` (its key in the environment), no evaluation model,
    and `config` as the model config file (None: none)."""
    from typer.testing import CliRunner

    from agent_factory.factory.cli.app import app

    env = {**NO_MODEL, "AGENT_FACTORY_AGENT_API_BASE": server.base_url,
           "AGENT_FACTORY_AGENT_API_KEY_ENV": "FAKE_AGENT_KEY", "FAKE_AGENT_KEY": "test",
           "AGENT_FACTORY_CONFIG": str(config) if config else ""}
    res = CliRunner().invoke(app, list(args), env=env)
    return Res(res.exit_code, res.stdout, res.stderr)


def _task_of(body: dict[str, Any]) -> Task:
    first = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return next(t for t in TASKS if t.input[0] == first)


def _reference_player(body: dict[str, Any]) -> Reply:
    """A model that plays the task's reference solution: its i-th response is the reference's i-th step (i: the
    assistant messages so far), with a line of reasoning before each."""
    task = _task_of(body)
    done = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if done >= len(task.reference):
        return Reply(content="Done.", usage=(50, 5))
    step = task.reference[done]
    thought = f"step {done + 1} of {task.id}"
    if step.tool is not None:
        return Reply(tool_calls=(ToolCallReply(step.tool, dict(step.args)),), reasoning=thought, usage=(100, 20))
    return Reply(content=step.answer, reasoning=thought, usage=(100, 20))


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Res, FakeOpenAIServer]:
    store = tmp_path_factory.mktemp("agent") / "s.duckdb"
    with FakeOpenAIServer(responder=_reference_player) as server:
        res = _invoke(server, "tasks", "run", str(SUITE), "--agent", MODEL, "--trials", "2", "--store", str(store),
                      "--json")
    return store, res, server


def test_a_model_agent_through_litellm_runs_every_trial_to_an_end_with_a_reason(
        played: tuple[Path, Res, FakeOpenAIServer]) -> None:
    store, res, server = played
    assert res.code == 0, res.err
    out = res.json()
    assert out["agent"] == MODEL and out["trials"] == 2
    # The model plays each task's reference: every trial answered and passed its criteria, as script:succeed.
    assert out["ended_by"] == {"answered": 2 * len(TASKS)}
    assert out["pass_hat"] == {"1": 1.0, "2": 1.0}
    # One request per reference step per trial: the agent asked the model once per decision, no more.
    assert server.calls == 2 * sum(len(t.reference) for t in TASKS)
    assert all(r.body["model"] == "fake-agent" and r.body.get("tools") for r in server.records)
    # The tools the model was offered are the task's, with their descriptions.
    first = server.requests[0]
    offered = {t["function"]["name"] for t in first["tools"]}
    assert offered == set(_task_of(first).tools)


def test_the_run_contracts_are_spans_in_the_store_with_reasoning_calls_and_tokens(
        played: tuple[Path, Res, FakeOpenAIServer]) -> None:
    store, res, _ = played
    with Store(store, read_only=True) as st:
        turns = list(st.iter_turns(segment=None))
    assert len({t.conversation_id for t in turns}) == 2 * len(TASKS)
    spans = [s for t in turns for s in t.spans]
    chats = [s for s in spans if s.kind == "llm"]
    tools = [s for s in spans if s.kind == "tool"]
    assert len(chats) == 2 * sum(len(t.reference) for t in TASKS)
    assert len(tools) == 2 * sum(len(t.reference_calls) for t in TASKS)
    # Every model call carries its reasoning text and the tokens the server reported (100 in, 20 out).
    assert all("step " in (s.output or "") for s in chats)
    assert {(s.tokens.input, s.tokens.output) for s in chats if s.tokens} == {(100, 20)}
    assert all(s.model == "fake-agent" for s in chats)
    # Each trial's outcome is its conversation's `task_success` event (its root span says it), so Trajectory and
    # Results see how the task went.
    with Store(store, read_only=True) as st:
        outcomes = {e.conversation_id: e.value for e in st.events() if e.kind == "task_success"}
    assert outcomes == {t.conversation_id: True for t in turns}


def test_agent_factory_run_evaluates_the_model_agents_runs(played: tuple[Path, Res, FakeOpenAIServer]) -> None:
    from tests.factory.conftest import cli

    store, _, _ = played
    ran = cli("run", "--store", str(store), "--json")
    assert ran.code == 0, ran.err
    report = ran.json()
    assert report["units"]["conversation"] == 2 * len(TASKS)


def _quick_retries(tmp_path: Path) -> Path:
    config = tmp_path / "agent-factory.toml"
    config.write_text("[collect]\nretries = 4\nretry_initial_wait_s = 0.01\nretry_max_wait_s = 0.02\n")
    return config


def test_model_faults_end_only_their_trial_with_a_reason(tmp_path: Path) -> None:
    broken = TASKS[0]

    def responder(body: dict[str, Any]) -> Reply | FaultReply:
        # One task's every request fails (retries included); the others are played as usual.
        return FaultReply("500") if _task_of(body).id == broken.id else _reference_player(body)

    with FakeOpenAIServer(responder=responder) as server:
        res = _invoke(server, "tasks", "run", str(SUITE), "--agent", MODEL, "--trials", "1", "--store",
                      str(tmp_path / "s.duckdb"), "--json", config=_quick_retries(tmp_path))
    assert res.code == 0, res.err
    out = res.json()
    assert out["ended_by"] == {"agent_error": 1, "answered": len(TASKS) - 1}
    failed = next(t for t in out["tasks"] if t["id"] == broken.id)
    assert failed["successes"] == 0 and failed["trials"] == 1
    # A transient fault is retried under the collectors' policy (4 attempts) before the trial ends.
    assert sum(1 for r in server.records if r.fault == "500") == 4
    # The report says why, once per distinct reason, naming the task.
    [reason] = out["reasons"]
    assert (reason["ended_by"], reason["trials"], reason["tasks"]) == ("agent_error", 1, [broken.id])
    assert reason["reason"].startswith(f"{MODEL}: ") and "server_error" in reason["reason"]


def test_a_transient_fault_is_retried_and_the_trial_goes_on(tmp_path: Path) -> None:
    with FakeOpenAIServer(responder=_reference_player) as server:
        server.faults = FaultPlan(script=["429", "500"])
        res = _invoke(server, "tasks", "run", str(SUITE), "--agent", MODEL, "--trials", "1", "--store",
                      str(tmp_path / "s.duckdb"), "--json", config=_quick_retries(tmp_path))
    assert res.code == 0, res.err
    assert res.json()["ended_by"] == {"answered": len(TASKS)}
    assert server.faults_served[:2] == ["429", "500"]


def test_a_model_that_loops_or_spends_too_much_is_ended_by_the_limits(tmp_path: Path) -> None:
    task = TASKS[0]

    def same_call(body: dict[str, Any]) -> ToolCallReply:
        # The same call of the first tool the task offers, every time (arguments: the tool's parameter names).
        tool = body["tools"][0]["function"]
        return ToolCallReply(tool["name"], {p: "x" for p in tool["parameters"]["properties"]})

    def loops(body: dict[str, Any]) -> Reply:
        return Reply(tool_calls=(same_call(body),), usage=(10, 5))

    def spends(body: dict[str, Any]) -> Reply:
        return Reply(tool_calls=(same_call(body),), usage=(task.token_limit, 1))

    ended = {}
    for name, responder in (("loops", loops), ("spends", spends)):
        with FakeOpenAIServer(responder=responder) as server:
            res = _invoke(server, "tasks", "run", str(SUITE), "--agent", MODEL, "--trials", "1", "--store",
                          str(tmp_path / f"{name}.duckdb"), "--json")
        assert res.code == 0, res.err
        ended[name] = res.json()["ended_by"]
    assert ended["loops"] == {"step_limit": len(TASKS)}
    assert ended["spends"] == {"token_limit": len(TASKS)}


def test_an_unknown_model_string_is_one_line_naming_the_valid_forms(tmp_path: Path) -> None:
    with FakeOpenAIServer() as server:
        res = _invoke(server, "tasks", "run", str(SUITE), "--agent", "nosuchprovider:x", "--store",
                      str(tmp_path / "s.duckdb"))
    assert res.code == 1
    lines = [ln for ln in res.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--agent 'nosuchprovider:x'" in lines[0] and "provider/model" in lines[0], res.err
    assert server.calls == 0


# ---- the agent over a scripted pydantic-ai model (FunctionModel): one decision at a time ----------------------

def test_one_response_of_two_calls_is_two_decisions_and_their_results_go_back_together() -> None:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from agent_factory.factory.tasks.model_agent import ModelAgent, system_prompt
    from agent_factory.factory.tasks.runner import run_suite

    suite = load_suite(SUITE)
    seen: list[list[object]] = []

    def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        seen.append([p for m in messages if isinstance(m, ModelRequest) for p in m.parts])
        if len(seen) == 1:
            return ModelResponse(parts=[ToolCallPart("query_sql", {"sql": "SELEC nothing"}, tool_call_id="a"),
                                        ToolCallPart("query_sql", {"sql": "SELECT count(*) FROM orders WHERE "
                                                                          "order_date LIKE '2025-03-%'"},
                                                     tool_call_id="b")])
        return ModelResponse(parts=[TextPart("5 orders")])

    with ModelAgent(FunctionModel(model), name="function:two", instructions=system_prompt(suite.description)) as a:
        [trial] = run_suite(suite, a, trials=1, tasks=["count_march_orders"])
    assert trial.ended_by == "answered" and trial.success
    # Two calls from one model request, then the answer: two requests in all, three decisions.
    assert len(seen) == 2 and [d.action.kind for d in trial.decisions] == ["tool_call", "tool_call", "answer"]
    assert trial.decisions[0].action.cost is not None and trial.decisions[1].action.cost is None
    assert [c.ok for c in trial.calls] == [False, True]
    returned = {p.tool_call_id: p.content for p in seen[1] if isinstance(p, ToolReturnPart | RetryPromptPart)}
    assert set(returned) == {"a", "b"}
    assert str(returned["a"]).startswith("ERROR: ") and '"rows": [[5]]' in str(returned["b"])


def test_each_user_message_of_a_multi_turn_task_reaches_the_model_in_turn() -> None:
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from agent_factory.factory.tasks.model_agent import ModelAgent, system_prompt
    from agent_factory.factory.tasks.runner import run_suite

    suite = load_suite(SUITE)
    task = suite.task("best_product_followup")
    prompts: list[str] = []

    def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        last = [p for p in messages[-1].parts if isinstance(p, UserPromptPart)] if isinstance(
            messages[-1], ModelRequest) else []
        prompts.extend(str(p.content) for p in last)
        return ModelResponse(parts=[TextPart(f"answer {len(prompts)}")])

    with ModelAgent(FunctionModel(model), name="function:turns", instructions=system_prompt(suite.description)) as a:
        [trial] = run_suite(suite, a, trials=1, tasks=[task.id])
    assert len(task.input) > 1
    assert prompts == list(task.input)
    assert trial.answers == tuple(f"answer {i + 1}" for i in range(len(task.input)))


def test_an_otlp_export_of_the_model_agents_runs_is_read_back_identically(
        played: tuple[Path, Res, FakeOpenAIServer], tmp_path: Path) -> None:
    from agent_factory.factory.ingest.files import ingest_paths
    from agent_factory.factory.pipeline.units import build_conversations
    from agent_factory.knowledge_packs import load_pack
    from tests.factory.conftest import cli

    def stored(path: Path) -> tuple[object, ...]:
        with Store(path, read_only=True) as st:
            events: dict[str, list[Any]] = {}
            for e in st.events():
                events.setdefault(e.conversation_id or "", []).append(e)
            return tuple(build_conversations(list(st.iter_turns(segment=None)), events=events,
                                             attributes=st.conversation_attributes()))

    store, _, _ = played
    doc, fresh = tmp_path / "runs.otlp.json", tmp_path / "b.duckdb"
    exported = cli("export", "--format", "otlp-json", "--store", str(store), "--out", str(doc), "--json")
    assert exported.code == 0, exported.err
    assert exported.json()["conversations"] == 2 * len(TASKS) and exported.json()["not_carried"] == {}
    with Store(fresh) as st:
        ingest_paths(st, [doc], pack=load_pack("default"))
    before = stored(store)
    assert len(before) == 2 * len(TASKS) and stored(fresh) == before


def _judged(body: dict[str, Any]) -> Reply | dict[str, str]:
    """The agent's requests play the references; the judge's (a structured answer) say yes, yes, no, n/a."""
    if body.get("response_format"):
        return {"addresses": "yes", "complete": "yes", "specific": "no", "clear": "not_applicable",
                "reason": "answers the question"}
    return _reference_player(body)


@pytest.mark.parametrize(("judge", "expected"), [("openai/qwen-judge", 2 / 3), ("openai/fake-judge", None)],
                         ids=["other-family", "agents-family"])
def test_final_quality_is_judged_by_a_model_of_another_family_than_the_agents(
        tmp_path: Path, judge: str, expected: float | None) -> None:
    from typer.testing import CliRunner

    from agent_factory.factory.cli.app import app

    with FakeOpenAIServer(responder=_judged) as server:
        env = {**NO_MODEL, "AGENT_FACTORY_AGENT_API_BASE": server.base_url, "AGENT_FACTORY_AGENT_API_KEY_ENV":
               "FAKE_AGENT_KEY", "FAKE_AGENT_KEY": "test", "AGENT_FACTORY_SMALL_MODEL": judge,
               "AGENT_FACTORY_API_BASE": server.base_url, "OPENAI_API_KEY": "test"}
        res = CliRunner().invoke(app, ["tasks", "run", str(SUITE), "--agent", MODEL, "--trials", "1", "--store",
                                       str(tmp_path / "s.duckdb"), "--json"], env=env)
        judged = sum(1 for r in server.requests if r.get("response_format"))
    assert res.exit_code == 0, res.output
    tasks = json.loads(res.stdout)["tasks"]
    assert {t["dimensions"]["final_quality"] for t in tasks} == {expected}
    if expected is None:
        # The agent is an openai model and so is every configured model: no judge, and the reason says why.
        assert judged == 0
        assert all("agent's family (openai)" in t["not_collected"]["final_quality"] for t in tasks)
    else:
        assert judged == len(TASKS) and all("final_quality" not in t["not_collected"] for t in tasks)
