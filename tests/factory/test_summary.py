"""The terminal summary: worst first, intervals and n, one screen, outcomes used; `run` prints it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from agent_factory.evaluators.findings import Association
from agent_factory.factory.cli.app import app
from agent_factory.factory.views.results import ResultRow, StoreFacts
from agent_factory.factory.views.summary import WIDTH, build_summary, render

FACTS = StoreFacts(path="s.duckdb", turns=100, sessions=40, users=10, spans=300, segments={"real": 100},
                   quarantined=0, units={}, last_run=None)
ENV = {"AGENT_FACTORY_SMALL_MODEL": "", "AGENT_FACTORY_JURY": ""}


def _row(component: str, metric: str, value: float | None, n: int, *, low: float | None = None,
         high: float | None = None, stratum: str = "all", layer: str = "trace") -> ResultRow:
    return ResultRow(component=component, layer=layer, metric=metric, stratum=stratum, value=value, low=low,
                     high=high, n=n)


def _assoc(flag: str, diff: float, low: float | None, high: float | None) -> Association:
    return Association(flag=flag, component="conduct", label=f"{flag} violated", meaning="bad",
                       outcome="task_reward", level="conversation", mean_with=0.5 + diff, mean_without=0.5,
                       overall=0.5, diff=diff, low=low, high=high, n_with=10, n_without=30, n_clusters=8,
                       undecided=0)


def test_conduct_lists_broken_clauses_by_violations_with_interval_n_and_text() -> None:
    rows = [
        _row("conduct", "C(r).a", 0.9, 100, low=0.83, high=0.94),   # 10 violations
        _row("conduct", "C(r).b", 0.0, 30, low=0.0, high=0.11),     # 30 violations: first
        _row("conduct", "C(r).c", 1.0, 50, low=0.93, high=1.0),     # held
        _row("conduct", "C(r).d", None, 0),                          # never applied
        _row("conduct", "C(r).b.clustered", 0.0, 30, low=0.0, high=0.0),  # not a clause of its own
    ]
    from agent_factory.evaluators.core.flags import FlagSpec

    flags = [FlagSpec(id="conduct.b.violated", component="conduct", layer="trace", label="b violated",
                      description="只有在用户上传文件时，才可以使用文件摘要模板" * 3, item="conduct.b.obligation",
                      raised=("no",))]
    s = build_summary(FACTS, rows, flags=flags)
    lines = [ln.text for ln in s.components["conduct"]]
    assert lines[0].startswith("30 of 30 turns broke b: C(r) 0.0% [0.0-11.0] «只有")
    assert lines[1] == "10 of 100 turns broke a: C(r) 90.0% [83.0-94.0]"
    assert lines[2] == "1 clause(s) held every time they applied; 1 never applied or need a model"
    assert all(cell_len(f"  {t}") <= WIDTH for t in lines)  # CJK counts two cells


def test_execution_modes_worst_first_and_absent_components_say_why() -> None:
    rows = [
        _row("execution", "failure_rate", 0.035, 8256, low=0.025, high=0.045),
        _row("execution", "failure_rate", 0.022, 1224, low=0.012, high=0.032, stratum="mode=simple"),
        _row("execution", "failure_rate", 0.075, 452, low=0.032, high=0.118, stratum="mode=deep"),
        _row("execution", "failure_rate.no_retrieval", 0.101, 2040, low=0.073, high=0.130),
        _row("execution", "failure_rate.retrieval", 0.013, 6216, low=0.0087, high=0.018),
        _row("substance", "no_collected_items", 7966.0, 7966),
    ]
    s = build_summary(FACTS, rows)
    ex = [ln.text for ln in s.components["execution"]]
    assert ex[0] == "delivery failure 3.5% [2.5-4.5] n=8,256 turns"
    assert ex[1].startswith("by mode, deep: 7.5% [3.2-11.8] n=452") and ex[2].startswith("by mode, simple")
    assert ex[3] == "without retrieval 10.1% [7.3-13.0] n=2,040 vs with it 1.3% [0.87-1.8] n=6,216"
    assert s.components["substance"][0].text.startswith("needs a model: no checklist item collected on 7,966")
    assert s.components["trajectory"] == () and s.absent["trajectory"] == "no results"
    assert "second rater" in s.absent["adjudication"]


def test_outcomes_with_an_interval_come_first_largest_difference_first() -> None:
    assoc = [_assoc("small", -0.05, -0.2, 0.1), _assoc("none", 0.9, None, None), _assoc("big", -0.34, -0.57, -0.11)]
    s = build_summary(FACTS, [], associations=assoc)
    assert [ln.text.split("task_reward: ")[1] for ln in s.outcomes] == ["big violated", "small violated",
                                                                      "none violated"]
    assert s.outcomes[0].text.startswith("-0.34 [-0.57, -0.11]")
    assert "(no interval)" in s.outcomes[2].text
    text = render(s)
    assert text[-4].strip().startswith("agent-factory show --worst 5")


def test_run_prints_the_summary_on_one_screen(sim_store: tuple[Path, str]) -> None:
    store, printed = sim_store
    lines = printed.splitlines()
    assert lines[0].startswith("run ")  # the run's own report first
    body = lines[lines.index(next(ln for ln in lines if "users of real traffic (" in ln)):]
    assert body[1] == "Conduct" and "Execution" in body and "next:" in body
    assert len(lines) <= 45 and max(cell_len(ln) for ln in lines) <= 100
    # The hints whole, to be pasted: a long store path moves to a continuation line, never cut (issue 31).
    hints = "\n".join(body[body.index("next:") + 1:-1]).replace(" \\\n", " ").splitlines()
    assert [" ".join(h.split()) for h in hints] == [f"agent-factory {c} --store {store}" for c in
                                                   ("show --worst 5", "report", "export --level conversation")]
    assert body[-1].startswith("  (`run --verbose` prints every table")
    assert "delivery failure" in printed and "% [" in printed  # rates with their intervals


def test_run_verbose_keeps_every_table(sim_store: tuple[Path, str]) -> None:
    store, _ = sim_store
    res = CliRunner().invoke(app, ["run", "--store", str(store), "--verbose"], env=ENV)
    assert res.exit_code == 0, res.output
    assert "next:" not in res.stdout and "failure_rate" in res.stdout  # the metric tables, not the summary


def test_summary_json_and_bad_store(sim_store: tuple[Path, str], tmp_path: Path) -> None:
    store, _ = sim_store
    res = CliRunner().invoke(app, ["summary", "--store", str(store), "--json"], env=ENV)
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert set(data) == {"store", "traffic", "components", "absent", "outcomes", "next"}
    assert list(data["components"])[:2] == ["conduct", "execution"] and data["outcomes"] == []
    line = data["components"]["execution"][0]
    assert line["n"] > 0 and line["low"] <= line["value"] <= line["high"]
    missing = CliRunner().invoke(app, ["summary", "--store", str(tmp_path / "none.duckdb")], env=ENV)
    assert missing.exit_code == 1 and "no store here yet" in missing.output
    assert len(missing.output.strip().splitlines()) == 1


@pytest.mark.realdata
def test_tau_summary_shows_each_flag_against_the_reward(tau_store: Path) -> None:
    store, runner = tau_store, CliRunner()
    res = runner.invoke(app, ["summary", "--store", str(store), "--json"], env=ENV)
    assert res.exit_code == 0, res.output
    outcomes = json.loads(res.stdout)["outcomes"]
    confirm = next(o for o in outcomes if "confirm_before_write" in o["text"])
    # 17 conversations broke "confirm before a write": mean reward 0.12 against 0.46 without
    assert confirm["text"].startswith("-0.34 [-0.57, -0.10] 0.12 (n=17) vs 0.46 (n=111)")
    assert all("task_reward" in o["text"] for o in outcomes) and len(outcomes) >= 8
    text = runner.invoke(app, ["summary", "--store", str(store)], env=ENV).stdout
    assert "Outcomes: difference" in text and "confirm_before_write violated" in text


def test_a_suggested_command_is_never_cut_and_reads_as_one_command() -> None:
    from agent_factory.factory.views.summary import command_lines

    path = "/tmp/" + "a-long-directory/" * 3 + "store.duckdb"
    cmd = f"agent-factory export --level conversation --store {path}"
    lines = command_lines(cmd)
    assert len(lines) == 2 and lines[0].endswith(" \\") and all(len(ln) <= WIDTH for ln in lines)
    assert " ".join(" ".join(lines).replace(" \\", "").split()) == cmd and path in lines[1]
    assert command_lines("agent-factory report") == ["  agent-factory report"]


def test_a_format_without_latency_says_so_once() -> None:
    rows = [_row("execution", "failure_rate", 0.0024, 828, low=0.0, high=0.0053),
            *(_row("execution", f"failure_rate.band[{b}]", None, 0) for b in ("10-120s", "5-10s", "<5s", ">120s"))]
    lines = [ln.text for ln in build_summary(FACTS, rows).components["execution"]]
    assert lines[0] == "delivery failure 0.24% [0.0-0.53] n=828 turns"
    said = " ".join(lines[1:])
    assert said.count("not recorded by this format") == 1 and "undefined" not in said
    assert "<5s, 5-10s, 10-120s, >120s" in " ".join(" ".join(lines[1:]).split())
