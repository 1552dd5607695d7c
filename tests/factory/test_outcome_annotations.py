"""Only outcomes are outcomes: a benchmark's labels (Who&When's mistake step, agent, reason) stay stored but are
compared with no flag, a task's reward is; and a benchmark's finished tasks are not censored sessions. On a small
store of Who&When records and tau-bench trials written here, ingested and run with rules only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_factory import open_project
from agent_factory.evaluators.collect import ModelConfig
from agent_factory.factory.store import Store
from agent_factory.factory.views.findings import read_findings
from agent_factory.factory.views.results import read_facts

LABELS = {"mistake_agent", "mistake_step", "mistake_reason"}


def _who_when(question: str, exit_code: int) -> dict[str, Any]:
    return {
        "is_correct": False, "question": question, "question_ID": question, "ground_truth": "8",
        "history": [
            {"content": "Plan: load the sheet and count.", "role": "assistant", "name": "Excel_Expert"},
            {"content": f"exitcode: {exit_code} (execution)\nCode output: 4\n", "role": "user",
             "name": "Computer_terminal"},
            {"content": "The answer is 4.", "role": "user", "name": "DataVerification_Expert"},
            {"content": "TERMINATE", "role": "user", "name": "DataVerification_Expert"},
        ],
        "mistake_agent": "Excel_Expert", "mistake_step": str(exit_code * 2), "mistake_reason": "Miscounted.",
    }


def _trial(task: int, trial: int, reward: float, requests: list[str]) -> dict[str, Any]:
    traj: list[dict[str, Any]] = [{"role": "system", "content": "You are an airline agent."}]
    for r in requests:
        traj += [{"role": "user", "content": r}, {"role": "assistant", "content": "Your booking is confirmed."}]
    return {"task_id": task, "trial": trial, "reward": reward, "info": {"task": {"user_id": f"user_{task}"}},
            "traj": traj}


def _store(root: Path) -> Path:
    src = root / "src"
    src.mkdir()
    # Two runs that differ in a failed code step (`span_error` raised on one, cleared on the other).
    for i, code in enumerate((0, 1)):
        (src / f"ww{i}.json").write_text(json.dumps(_who_when(f"question {i}", code)), encoding="utf-8")
    ask = "Please change my flight ABC123 to tomorrow morning."
    trials = [_trial(1, 0, 1.0, [ask]), _trial(2, 0, 1.0, [ask]), _trial(3, 0, 0.0, [ask, ask]),
              _trial(4, 0, 0.0, [ask, ask])]
    (src / "tau.json").write_text(json.dumps(trials), encoding="utf-8")
    store = root / "s.duckdb"
    with open_project(store=store, pack="default", config=ModelConfig()) as p:
        assert p.ingest([src]).accepted == 6
        p.run()
    return store


def test_only_outcomes_are_joined_to_flags_and_labels_stay_stored(no_model: Path) -> None:
    store = _store(no_model)
    with open_project(store=store, config=ModelConfig()) as p:
        flags = p.flags
    with Store(store, read_only=True) as st:
        kinds = {e.kind for e in st.events()}
        assert kinds == {"task_reward", *LABELS}  # the labels are kept
        assert read_facts(st).outcome_kinds == ("task_reward",)
        assoc = read_findings(st, flags).associations
    assert assoc and {a.outcome for a in assoc} == {"task_reward"}
    # The replayed request (trials 3 and 4, reward 0) is compared with the reward, nothing with a step index.
    replay = next(a for a in assoc if a.flag == "trajectory.verbatim_replay")
    assert (replay.mean_with, replay.n_with, replay.mean_without, replay.n_without) == (0.0, 2, 1.0, 2)


def test_a_graded_task_is_not_a_censored_session(no_model: Path) -> None:
    store = _store(no_model)
    with Store(store, read_only=True) as st:
        rows = st.con.execute(
            "SELECT unit_id, value FROM results WHERE metric = 'outcome' AND component = 'trajectory'").fetchall()
    outcome = {uid: json.loads(v) if isinstance(v, str) and v.startswith('"') else v for uid, v in rows}
    # Each one-turn session here was graded (a reward, the benchmark's verdict): its end was observed.
    assert outcome["tau-1-0"] == outcome["tau-2-0"] == "smooth"
    assert {outcome["tau-3-0"], outcome["tau-4-0"]} == {"struggled"}
    who_when = {uid: o for uid, o in outcome.items() if uid.startswith("whowhen-")}
    assert len(who_when) == 2 and "censored" not in who_when.values()
