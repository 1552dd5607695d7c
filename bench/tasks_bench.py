"""Task runner benchmark (issue 35): what a trial costs, against a floor measured in the same process.

On the example suite (`specs/tasks/sales_report.yaml`, or `--suite`), `--trials` trials per task:

- `floor`: per trial, what any runner pays at least: a fresh sandbox built (its SQLite tables and files), a
  snapshot of its end state taken and the task's criteria checked on it, no agent (the fastest of three passes);
- `scripted`: `run_suite` with `script:succeed` (the same sandbox work plus the decisions, the tool calls and the
  process metrics), the fastest of three passes;
- `model`: `run_suite` with a model agent (a pydantic-ai Agent over litellm, `factory/tasks/model_agent.py`)
  against the local OpenAI-compatible test server (`tests/fakes/openai_server.py`) playing each task's reference:
  its seconds per trial (HTTP on 127.0.0.1 included) and its model calls per decision (1.0: the agent asks the
  model once per response, a response's several calls asked once);
- `end_to_end`: `Project.run_tasks` with `script:succeed` into a fresh store (the runner, the OTLP/JSON document,
  its ingest and the task runs stored) per trial.

Each is given in ms per trial and as a ratio to the floor; peak RSS (VmHWM) of this process is printed last. No
provider is reached. The last line is one JSON document.

Usage:  .venv/bin/python bench/tasks_bench.py [--suite PATH] [--trials 5]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SUITE = ROOT / "specs" / "tasks" / "sales_report.yaml"


def _best(fn: Any, passes: int = 3) -> float:
    best = float("inf")
    for _ in range(passes):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", type=Path, default=SUITE)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))

    from agent_factory.evaluators.tasks.criteria import check_task, queries_of
    from agent_factory.factory.project import open_project
    from agent_factory.factory.tasks.agents import scripted_agent
    from agent_factory.factory.tasks.litellm_model import LitellmModel
    from agent_factory.factory.tasks.model_agent import ModelAgent, system_prompt
    from agent_factory.factory.tasks.runner import run_suite
    from agent_factory.factory.tasks.sandbox import Sandbox
    from agent_factory.factory.tasks.suite_io import load_suite
    from tests.fakes.openai_server import FakeOpenAIServer, Reply, ToolCallReply

    suite = load_suite(args.suite)
    n = len(suite.tasks) * args.trials

    def floor() -> None:
        for task in suite.tasks:
            for _ in range(args.trials):
                with Sandbox(suite.sandbox) as box:
                    check_task(task, box.snapshot(None, queries_of(task)))

    floor_s = _best(floor) / n
    scripted_s = _best(lambda: run_suite(suite, scripted_agent("script:succeed"), trials=args.trials)) / n

    by_input = {t.input[0]: t for t in suite.tasks}

    def reference(body: dict[str, Any]) -> Reply:
        task = by_input[next(m["content"] for m in body["messages"] if m["role"] == "user")]
        done = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if done >= len(task.reference):
            return Reply(content="Done.")
        step = task.reference[done]
        if step.tool is not None:
            return Reply(tool_calls=(ToolCallReply(step.tool, dict(step.args)),))
        return Reply(content=step.answer)

    with FakeOpenAIServer(responder=reference) as server:
        os.environ["TASKS_BENCH_KEY"] = "bench"  # the fake server takes any key; litellm wants one
        model = LitellmModel("openai/fake-agent", api_base=server.base_url, api_key_env="TASKS_BENCH_KEY")
        with ModelAgent(model, name="openai/fake-agent", instructions=system_prompt(suite.description)) as agent:
            run_suite(suite, agent, trials=1)  # warm: litellm's import and first client
            server.reset()
            t0 = time.perf_counter()
            results = run_suite(suite, agent, trials=args.trials)
            model_s = (time.perf_counter() - t0) / n
        decisions = sum(len(r.decisions) for r in results)
        calls = server.calls
        passed = sum(r.success for r in results)

    def end_to_end() -> None:
        with tempfile.TemporaryDirectory() as tmp, open_project(store=Path(tmp) / "s.duckdb") as p:
            p.run_tasks(args.suite, agent="script:succeed", trials=args.trials)

    e2e_s = _best(end_to_end) / n
    out = {
        "suite": suite.name, "tasks": len(suite.tasks), "trials_per_task": args.trials,
        "ms_per_trial": {"floor": floor_s * 1e3, "scripted": scripted_s * 1e3, "model": model_s * 1e3,
                         "end_to_end": e2e_s * 1e3},
        "ratio_to_floor": {"scripted": scripted_s / floor_s, "model": model_s / floor_s,
                           "end_to_end": e2e_s / floor_s},
        "model": {"trials": len(results), "passed": passed, "decisions": decisions, "model_calls": calls,
                  "calls_per_decision": calls / decisions if decisions else None},
        "peak_rss_mb": _peak_rss_mb(),
    }
    for key, ms in out["ms_per_trial"].items():
        ratio = out["ratio_to_floor"].get(key)
        print(f"{key:<11} {ms:8.2f} ms/trial" + (f"  x{ratio:.1f} floor" if ratio else ""))
    print(f"model agent: {passed}/{len(results)} passed, {calls} model calls for {decisions} decisions")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
