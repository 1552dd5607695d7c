"""The report's Tasks section: on a store with the shipped suite run by `script:fail-midway` (pass^k, per-task
dimensions, first deviations against what the suite's references imply), on tau-bench's shared trajectories
(pass^k against the raw file; skipped when ../shared/data is absent), its absence from a store without task runs,
and the page with the section in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from agent_factory import open_project
from agent_factory.evaluators.tasks.model import DIMENSIONS, TaskRun
from agent_factory.factory.cli.app import app
from agent_factory.factory.store import Store
from agent_factory.factory.views.report import report_sections
from agent_factory.factory.views.report.html import render_html
from agent_factory.factory.views.report.model import Block, ReportData, Section
from agent_factory.factory.views.report.read import read_report
from agent_factory.factory.views.report.runtime import vega_bundle
from agent_factory.factory.views.report.tasks import NOT_COLLECTED, task_sections
from agent_factory.factory.views.results import StoreFacts
from tests.conftest import REPO, shared_data
from tests.factory.report.test_report import _chromium, rendered_dom
from tests.factory.test_tasks_cli import _independent_pass_hat

SUITE = REPO / "specs" / "tasks" / "sales_report.yaml"
TRIALS = 2
SCREENSHOT = Path("/tmp/report_tasks.png")


@pytest.fixture(scope="module")
def midway(sim_store: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the session's simulated store (the session's is read-only for tests) with the shipped suite run
    by `script:fail-midway`, two trials a task."""
    store = tmp_path_factory.mktemp("tasks-report") / "store.duckdb"
    shutil.copyfile(sim_store[0], store)
    open_project(store=store).run_tasks(SUITE, agent="script:fail-midway", trials=TRIALS)
    return store


def _sections(store: Path) -> dict[str, Section]:
    with Store(store, read_only=True) as st:
        data = read_report(st)
    return {s.key: s for s in report_sections(data)}


def _blocks(section: Section) -> dict[str, Block]:
    return {b.title: b for b in section.blocks}


def _rows(block: Block) -> list[tuple[str, ...]]:
    assert block.table is not None, block.title
    return list(block.table.rows)


def _implied_deviations() -> dict[str, int]:
    """Task -> the step where fail-midway leaves the path, from the suite file alone: it plays the first half
    (rounded down) of the reference's tool calls, which meet the expected steps in place, so the next expected step
    is missed; tasks without expected steps have none."""
    spec = yaml.safe_load(SUITE.read_text(encoding="utf-8"))
    return {t["id"]: sum("tool" in s for s in t["reference"]) // 2 + 1
            for t in spec["tasks"] if t.get("expected_steps")}


def test_fail_midway_section_shows_pass_hat_dimensions_and_first_deviations(midway: Path) -> None:
    sections = _sections(midway)
    keys = list(sections)
    assert keys.index("tasks") == keys.index("gate") + 1 and keys[keys.index("tasks") + 1] == "corrections"
    blocks = _blocks(sections["tasks"])
    implied = _implied_deviations()
    n_tasks = len(yaml.safe_load(SUITE.read_text(encoding="utf-8"))["tasks"])
    # fail-midway finishes no task: pass^1 and pass^2 are 0 over every task.
    assert _rows(blocks["pass^k by k"]) == [("1", "0.000", f"{n_tasks} of {n_tasks}"),
                                           ("2", "0.000", f"{n_tasks} of {n_tasks}")]
    assert blocks["pass^k by k"].chart is not None
    per_task = blocks["Per task"]
    assert per_task.table is not None
    columns = per_task.table.columns
    dims = [d.replace("_", " ") for d in DIMENSIONS]
    assert list(columns[3:3 + len(dims)]) == dims and "suite" not in columns  # one suite: named in the intro
    assert "from sales_report" in sections["tasks"].intro
    rows = {r[0]: dict(zip(columns, r, strict=True)) for r in _rows(per_task)}
    assert len(rows) == n_tasks
    for task, row in rows.items():
        assert row["successes / labelled"] == f"0/{TRIALS}" and row["pass^1"] == "0.00"
        assert row["completion"] == "0.00"
        assert row["first deviation"] == (f"step {implied[task]}" if task in implied else "—")
        # Final quality needs a model, and none is configured here: not collected, never 0.
        assert row["final quality"] == NOT_COLLECTED
        assert row["tokens"] == "—"  # scripted agents claim no tokens: not recorded, not 0
    # The calls it made meet the first expected steps in order, and no later one.
    expected_steps = {t["id"]: len(t["expected_steps"]) for t in yaml.safe_load(SUITE.read_text(encoding="utf-8"))[
        "tasks"] if t.get("expected_steps")}
    for task, step in implied.items():
        assert rows[task]["step pass rate"] == f"{(step - 1) / expected_steps[task]:.2f}", task
    where = blocks["Where runs first deviate"]
    by_step = Counter({f"step {s}": 0 for s in implied.values()})
    for s in implied.values():
        by_step[f"step {s}"] += TRIALS
    assert {r[0]: int(r[1]) for r in _rows(where)} == dict(by_step)
    assert ("step 1", str(TRIALS), f"count_march_orders ({TRIALS})") in _rows(where)
    deviated = TRIALS * len(implied)
    assert f"{deviated} of {TRIALS * n_tasks} runs left their expected steps" in where.note
    assert f"{TRIALS * (n_tasks - len(implied))} run(s) recorded no deviation" in where.note
    assert where.chart is not None and where.chart.key == "chart-tasks-2"


@pytest.mark.realdata
def test_tau_bench_section_gives_pass_hat_of_the_raw_file(tmp_path: Path) -> None:
    src = shared_data("tau-bench-airline-gpt4o", "gpt-4o-airline.json")
    store = tmp_path / "tau.duckdb"
    open_project(store=store).import_tasks(src)
    blocks = _blocks(_sections(store)["tasks"])
    expected = _independent_pass_hat(src)
    assert _rows(blocks["pass^k by k"]) == [(k, f"{v:.3f}", "32 of 32") for k, v in expected.items()]
    assert _rows(blocks["pass^k by k"])[0][1] == f"{53 / 128:.3f}"  # SOURCE.md: 53 of 128 with reward 1.0
    per_task = blocks["Per task"]
    assert per_task.table is not None and len(per_task.table.rows) == 32
    cols = per_task.table.columns
    # A benchmark file gives completion alone: every other dimension is not collected, never 0.
    for row in per_task.table.rows:
        cells = dict(zip(cols, row, strict=True))
        assert all(cells[d.replace("_", " ")] == NOT_COLLECTED for d in DIMENSIONS if d != "completion")
        assert cells["completion"] != NOT_COLLECTED and cells["first deviation"] == "—"
    where = blocks["Where runs first deviate"]
    assert where.table is None and where.chart is None
    assert "No run recorded a first deviation" in where.note and "128 run(s) recorded no deviation" in where.note


def _run(suite: str, task: str, trial: int, success: bool | None, deviation: int | None) -> TaskRun:
    return TaskRun(suite=suite, task_id=task, trial=str(trial), success=success, source="f.json",
                   source_digest="d", conversation_id=f"{suite}-{task}-{trial}", steps=3, first_deviation=deviation)


def test_two_suites_name_each_task_by_its_suite_and_count_deviations_by_run() -> None:
    runs = (_run("a", "t", 0, True, None), _run("a", "t", 1, False, 2), _run("a", "t", 2, True, None),
            _run("b", "t", 0, False, 2), _run("b", "t", 1, None, 1), _run("b", "u", 0, False, 2))
    facts = StoreFacts(path="s.duckdb", turns=0, sessions=0, users=0, spans=0, segments={}, quarantined=0, units={},
                       last_run=None)
    [section] = task_sections(ReportData(facts=facts, rows=(), per_unit={}, task_runs=runs))
    blocks = _blocks(section)
    # a/t: 2 of 3 (pass^1 2/3, pass^2 C(2,2)/C(3,2) = 1/3, pass^3 0); b/t: 0 of 1 labelled; b/u: 0 of 1.
    assert _rows(blocks["pass^k by k"]) == [("1", f"{(2 / 3 + 0 + 0) / 3:.3f}", "3 of 3"),
                                           ("2", f"{1 / 3:.3f}", "1 of 3"), ("3", "0.000", "1 of 3")]
    assert "1 run(s) without a success label" in blocks["pass^k by k"].note
    per_task = blocks["Per task"]
    assert per_task.table is not None and per_task.table.columns[:2] == ("task", "suite")
    assert [(r[0], r[1], r[2]) for r in per_task.table.rows] == [
        ("b/t", "b", "0/1 (+1 unlabelled)"), ("b/u", "b", "0/1"), ("a/t", "a", "2/3")]
    assert _rows(blocks["Where runs first deviate"]) == [("step 1", "1", "b/t (1)"),
                                                         ("step 2", "3", "a/t (1), b/t (1), b/u (1)")]
    assert "4 of 6 runs left" in blocks["Where runs first deviate"].note


def test_a_store_without_task_runs_has_no_task_section(sim_store: tuple[Path, str], tmp_path: Path) -> None:
    assert "tasks" not in _sections(sim_store[0])  # the table exists, empty
    older = tmp_path / "older.duckdb"
    shutil.copyfile(sim_store[0], older)
    with Store(older) as st:  # a store written before task runs existed has no such table
        st.con.execute("DROP TABLE task_runs")
    with Store(older, read_only=True) as st:
        assert not st.has_table("task_runs")
        data = read_report(st)
    assert data.task_runs == () and "tasks" not in [s.key for s in report_sections(data)]


def test_report_with_tasks_opens_in_chromium(midway: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    res = CliRunner().invoke(app, ["report", "--store", str(midway), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert "tasks" in summary["sections"] and "tasks" not in summary["absent"]
    page = out.read_text(encoding="utf-8")
    assert '<a href="#tasks">Long-horizon tasks</a>' in page
    html = rendered_dom(out, charts=summary["charts"], user_dir=tmp_path / "ud1")
    section = html[html.index('data-section="tasks"'):]
    assert "Where runs first deviate" in section and NOT_COLLECTED in section
    for key in ("chart-tasks-1", "chart-tasks-2"):
        at = html.index(f'id="{key}"')
        assert re.search(r'<svg [^>]*class="marks"', html[at:at + 2000]), key
    # The section alone, drawn with the real plotting runtime, as a picture to look at.
    with Store(midway, read_only=True) as st:
        data: ReportData = read_report(st)
    alone = tmp_path / "tasks.html"
    tasks = [s for s in report_sections(data) if s.key == "tasks"]
    alone.write_text(render_html(tasks, data.facts, runtime_js=vega_bundle(cache_dir=tmp_path / "cache"),
                                 generated="now"), encoding="utf-8")
    SCREENSHOT.unlink(missing_ok=True)
    _chromium("--window-size=1280,1500", f"--screenshot={SCREENSHOT}", alone.as_uri(), user_dir=tmp_path / "ud2")
    assert SCREENSHOT.exists() and SCREENSHOT.stat().st_size > 10_000
