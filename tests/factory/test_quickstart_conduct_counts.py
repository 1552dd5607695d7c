"""The quick start's conduct findings count what their clauses say (issue 32).

The README's main job, in process and smaller (the simulator with fewer users): simulate, ingest with the
business-analysis pack, build the Chinese spec's suite without a model, approve it, run. Then every conduct
finding is checked against the stored answers and the simulator's truth:

- the deep-report sentence ("报告必须包含「方法」「细分结果」「风险」「结论」四个部分", extended to English answers by the
  spec's last sentence) counts, per section, exactly the delivered deep-mode answers that lack that section in both
  languages (recounted here from the stored answers, with the test's own section names); a failed turn is
  Execution's, never also a violation of what its answer should contain;
- the operator's name in an answer is counted under one clause (the pack's `no_unprompted_disclosure`), not also
  under the spec's line 20 or 21, and as often as the simulator planted it;
- the file-summary template counts the answers that use it (the simulator never uploads a file);
- no two clauses of different sentences count the same set of turns.
"""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

from agent_factory.adapters.model import FAILED_STATES, Turn
from agent_factory.evaluators.collect import ModelConfig
from agent_factory.factory.project import open_project
from agent_factory.factory.simulate import SimConfig, simulate
from agent_factory.factory.store.lookup import unit_results
from tests.conftest import REPO

SPEC = REPO / "specs" / "business_analysis_zh.md"
# The report's sections as a reader names them, in both languages (the test's own list, not the compiler's).
SECTIONS = {
    "method": re.compile(r"方法|\bmethod", re.I),
    "segment_results": re.compile(r"细分结果|\bbreakdown|\bsegment", re.I),
    "risk": re.compile(r"风险|\brisk", re.I),
    "conclusion": re.compile(r"结论|\bconclusion", re.I),
}
BROKE = re.compile(r"^([\d,]+) of ([\d,]+) turns broke (\w+):")
OPERATOR = re.compile(r"锐思|RuiSi", re.I)


class Quickstart:
    """What one in-process quick start leaves: the stored turns, each clause's violating turns, the summary."""

    def __init__(self, turns: list[Turn], violations: dict[str, set[str]], lines: list[str],
                 truth: list[dict[str, object]], clauses: dict[str, int]) -> None:
        self.turns, self.violations, self.lines, self.truth, self.clauses = turns, violations, lines, truth, clauses


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Quickstart:
    import json

    root = tmp_path_factory.mktemp("quickstart")
    sim = root / "sim"
    simulate(SimConfig(users=160, seed=3), sim)
    store = root / "store.duckdb"
    suite = root / "suites" / "business_analysis"
    with open_project(store=store, pack="business_analysis", config=ModelConfig()) as project:
        assert project.ingest([sim]).accepted > 0
        built = project.build(SPEC, out=suite, model=False)
        project.approve(suite, by="test")
    with open_project(store=store, suite=suite, config=ModelConfig()) as project:  # rules only, as --no-model
        project.run()
        summary = project.summary()
        turns = list(project.store().iter_turns())
        violations: dict[str, set[str]] = defaultdict(set)
        for r in unit_results(project.store(), [t.id for t in turns]):
            if r.component == "conduct" and r.metric.startswith("violation."):
                violations[r.metric.removeprefix("violation.")].add(r.unit_id)
    clauses = {c.id: c.source_line or 0 for c in built.clauses}
    truth = [json.loads(line) for line in (sim / "truth.jsonl").read_text(encoding="utf-8").splitlines()]
    lines = [line.text for line in summary.components.get("conduct", ())]
    return Quickstart(turns, dict(violations), lines, truth, clauses)


def _delivered_deep(q: Quickstart) -> list[Turn]:
    return [t for t in q.turns if t.mode == "deep" and t.delivery not in FAILED_STATES]


def test_each_required_section_counts_the_deep_reports_that_lack_it_in_either_language(quickstart: Quickstart) -> None:
    q = quickstart
    deep = _delivered_deep(q)
    english = [t for t in deep if t.answer and not re.search(r"[\u4e00-\u9fff]", t.answer)]
    assert deep and english, "the simulation has delivered deep reports in English"
    parts = {name: [cid for cid in q.clauses if cid.endswith(f"_{name}")] for name in SECTIONS}
    assert all(len(ids) == 1 for ids in parts.values()), parts
    for name, rx in SECTIONS.items():
        [cid] = parts[name]
        lacking = {t.id for t in deep if not rx.search(t.answer or "")}
        assert q.violations.get(cid, set()) == lacking, (name, len(q.violations.get(cid, ())), len(lacking))
    # An English report with all four sections breaks none of them; a failed deep turn breaks none either.
    complete = [t for t in english if all(rx.search(t.answer or "") for rx in SECTIONS.values())]
    failed = [t for t in q.turns if t.mode == "deep" and t.delivery in FAILED_STATES]
    assert complete and failed
    broken = set().union(*(q.violations.get(ids[0], set()) for ids in parts.values()))
    assert not broken & {t.id for t in complete} and not broken & {t.id for t in failed}


def test_the_operator_named_in_an_answer_is_counted_once_under_the_packs_clause(quickstart: Quickstart) -> None:
    q = quickstart
    named = {t.id for t in q.turns if OPERATOR.search(t.answer or "")}
    planted = sum(1 for t in q.truth if t["segment"] == "real" and t["disclosure"])
    assert named and len(named) == planted
    # Nobody in the simulation asks who provides the service: every naming is unprompted.
    assert q.violations["no_unprompted_disclosure"] == named
    # The spec's lines 20 ("不得主动提及") and 21 ("只有当用户询问…才可以说明") state that clause's behaviour: they run as it.
    assert [cid for cid, line in q.clauses.items() if line in (20, 21)] == ["no_unprompted_disclosure"]
    assert [cid for cid, v in q.violations.items() if v and v <= named] == ["no_unprompted_disclosure"]


def test_the_file_summary_template_counts_the_answers_that_use_it(quickstart: Quickstart) -> None:
    q = quickstart
    used = {t.id for t in q.turns if re.search(r"【\s*文件摘要\s*】|\[\s*file\s+summary\s*\]", t.answer or "", re.I)}
    planted = sum(1 for t in q.truth if t["segment"] == "real" and t["template"])
    assert used and len(used) == planted and q.violations["file_summary_needs_upload"] == used


def test_every_conduct_line_of_the_summary_is_its_clause_count_and_no_behaviour_is_counted_twice(
        quickstart: Quickstart) -> None:
    q = quickstart
    shown = [m for m in map(BROKE.match, q.lines) if m is not None]
    assert shown, q.lines
    for m in shown:
        count, clause = int(m.group(1).replace(",", "")), m.group(3)
        assert clause in q.clauses and count == len(q.violations[clause]), m.group(0)
    # Clauses of different sentences never count the same turns (one behaviour, one clause); the parts of one
    # conjunction may, when an answer lacks several sections.
    by_set: dict[frozenset[str], set[int]] = defaultdict(set)
    for cid, units in q.violations.items():
        by_set[frozenset(units)].add(q.clauses[cid])
    assert all(len(lines) == 1 for lines in by_set.values()), by_set.values()
