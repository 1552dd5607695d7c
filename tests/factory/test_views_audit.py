"""The audit in the views: what `audit` and `agreement` print (one screen, worst first, commands to paste), the
report's Adjudication and Corrections log sections from the latest stored audit, and the summary's corrected
rates. The reports are built by hand from real figures: MAST's human-human agreement (Fleiss' kappa and
Krippendorff's alpha of three annotators, computed with statsmodels and `krippendorff`, percentile bootstrap over
traces), the tau-bench shared set's criterion validity (docs/tau-bench.md, rules only) and the issue's
prediction-powered example (judge-only 0.838 against a truth of 0.714, corrected with 600 labels)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from rich.cells import cell_len

from agent_factory.evaluators.audit.model import (
    AgreementReport,
    AuditReport,
    Corrected,
    Correction,
    Criterion,
    Discriminant,
    ItemAgreement,
    JaccardPair,
    OverallAgreement,
    RuleCheck,
    SampleSummary,
    ScoreReliability,
    Stratum,
)
from agent_factory.factory.views.audit import WIDTH, agreement_view, audit_next, audit_view, plain, worst_items
from agent_factory.factory.views.report import build_html, report_sections
from agent_factory.factory.views.report.model import ReportData, Section
from agent_factory.factory.views.results import StoreFacts
from agent_factory.factory.views.summary import WIDTH as SUMMARY_WIDTH

HUMANS = ("human:annotator_1", "human:annotator_2", "human:annotator_3")

# MAST (MAD human-labelled), three annotators per failure mode, 10 traces of rounds 2 and 3.
CLARIFICATION = ItemAgreement(
    item="mast.2_2", component="mast", raters=HUMANS, n=10, labels=30, kappa=0.728506787330317, kappa_low=0.318,
    kappa_high=1.0, kappa_method="fleiss", alpha=0.7375565610859729, alpha_low=0.341, alpha_high=1.0,
    admitted=True, near_line=True)
REPETITION = ItemAgreement(
    item="mast.1_5", component="mast", raters=HUMANS, n=10, labels=30, kappa=-0.11111111111111124, kappa_low=-0.25,
    kappa_high=-0.034, kappa_method="fleiss", alpha=-0.07407407407407396, alpha_low=-0.208, alpha_high=0.0,
    admitted=False)
BACKTRACKING = ItemAgreement(
    item="mast.1_6", component="mast", raters=HUMANS, n=10, labels=30, kappa=1.0, kappa_low=1.0, kappa_high=1.0,
    kappa_method="fleiss", alpha=1.0, alpha_low=1.0, alpha_high=1.0, admitted=True)
STOPPING = ItemAgreement(
    item="mast.1_3", component="mast", raters=HUMANS, n=10, labels=30, kappa=None, kappa_method="fleiss",
    admitted=None, reason="every label is `no`: chance agreement is 1")

# tau-bench airline shared set, rules only (docs/tau-bench.md): AUC for a failed task, difference in reward.
WRITE_ARGS = Criterion(
    flag="conduct.write_arguments_grounded.violated", component="conduct", meaning="bad", outcome="task_reward",
    level="conversation", n=128, auc=0.462, low=0.405, high=0.500, difference=0.60, difference_low=0.11,
    difference_high=0.73, fails=True, note="meant as bad, goes with a higher reward")
CONFIRM = Criterion(
    flag="conduct.confirm_before_write.violated", component="conduct", meaning="bad", outcome="task_reward",
    level="conversation", n=128, auc=0.581, low=0.518, high=0.638, difference=-0.34, difference_low=-0.57,
    difference_high=-0.11)
HANDED_OFF = Criterion(
    flag="execution.handed_off", component="execution", meaning="descriptive", outcome="task_reward",
    level="conversation", n=128, auc=0.299, low=0.211, high=0.402, difference=0.49, difference_low=0.30,
    difference_high=0.68)

PPI = Corrected(metric="rate.conduct.confirm_before_write.obligation", item="conduct.confirm_before_write.obligation",
                reference="human:*", judge=0.838, judge_low=0.827, judge_high=0.849, corrected=0.715, low=0.684,
                high=0.746, labels=600, units=5000, lam=0.82)
RETIREMENT = Correction(
    at="2026-12-06T19:40:00+00:00", audit_id="a-20261206-1940", item="mast.1_5", item_version="1",
    action="retired", why="kappa -0.11 [-0.25, -0.03] < 0.60 at two decimals", before={"kappa": -0.111})


def _audit(**changes: object) -> AuditReport:
    base = AuditReport(
        audit_id="a-20261206-1940", started_at="2026-12-06T19:40:00+00:00", seconds=4.2,
        raters=("audit:openai/gpt-4o-mini", *HUMANS), model_calls=0,
        sample=SampleSummary(seed=7, size=240, strata=(Stratum(component="conduct", layer="trace", stratum="real",
                                                               population=864, sampled=240, weight=3.6),)),
        items=(CLARIFICATION, REPETITION, BACKTRACKING, STOPPING), retired=("mast.1_5",), corrections=(RETIREMENT,),
        rules=(RuleCheck(item="conduct.confirm_before_write.obligation", rater="audit:openai/gpt-4o-mini", n=120,
                         precision=0.882, precision_low=0.70, precision_high=1.0, recall=0.20, recall_low=0.11,
                         recall_high=0.31, collect_by_model=True),),
        criterion=(CONFIRM, HANDED_OFF, WRITE_ARGS),
        discriminant=Discriminant(component_jaccard=(JaccardPair(a="conduct", b="execution", jaccard=0.31, n=95),)),
        reliability=(ScoreReliability(score="S(x)", n_units=120, raters=("primary", "audit:openai/gpt-4o-mini"),
                                      unit=0.71, rater=0.04, residual=0.25, icc1_single=0.70, icc1_k=0.82),),
        corrected=(PPI,), notes=("no feedback events in the traces: criterion validity against task reward only",))
    return base.model_copy(update=changes)


def _lines(text: str) -> list[str]:
    return text.rstrip("\n").split("\n")


def _flat(text: str) -> str:
    """The text with its wrapping undone (a long line wraps at the width)."""
    return " ".join(text.split())


def test_items_read_worst_first_below_the_line_then_undecided_then_near_it() -> None:
    assert [i.item for i in worst_items(_audit().items)] == ["mast.1_5", "mast.1_3", "mast.2_2", "mast.1_6"]


def test_audit_prints_one_screen_with_figures_intervals_and_what_points_the_wrong_way() -> None:
    printed = plain(audit_view(_audit(), options="--store tau.duckdb"))
    lines, text = _lines(printed), _flat(printed)
    assert len(lines) <= 45 and all(cell_len(line) <= WIDTH for line in lines)
    assert lines[0].startswith("audit a-20261206-1940 at 2026-12-06T19:40:00+00:00 (4.2 s): 0 model call(s), "
                               "sample 240 units")
    assert "4 item(s), 2 admitted, 1 below the 0.60 line, 1 undecided, 1 near the line" in text
    row = next(line for line in lines if line.startswith("mast.1_5"))
    assert row.split() == ["mast.1_5", "3", "10", "-0.111", "[-0.25,", "-0.03]", "-0.074", "below", "the", "line"]
    assert "admitted, near the line" in next(line for line in lines if line.startswith("mast.2_2"))
    assert "undecided (1): every label is `no`: chance agreement is 1 (mast.1_3)" in text
    wrong = [line for line in lines if "wrong way:" in line]
    assert len(wrong) == 1 and "conduct.write_arguments_grounded.violated vs task_reward: AUC 0.462" in wrong[0]
    assert "wrong way: conduct.write_arguments_grounded.violated vs task_reward: AUC 0.462 [0.405, 0.500], " \
           "difference +0.60 [+0.11, +0.73] (n=128)" in text
    assert "execution.handed_off (descriptive) vs task_reward: AUC 0.299" in text
    assert "3 flag-outcome pair(s), 1 pointing the wrong way" in text
    assert ("judge 0.838 [0.827, 0.849] -> corrected 0.715 [0.684, 0.746], 600 labels" in text)
    assert "collect by model: conduct.confirm_before_write.obligation: precision 0.88 [0.70, 1.00]" in text
    assert "Retired (out of the analyses): mast.1_5" in text
    assert "retired mast.1_5 (v 1): kappa -0.11" in text
    assert "S(x) ICC(1) 0.70 one rater, 0.82 2 raters (n=120)" in text
    assert "note: no feedback events" in text
    nxt = lines[lines.index("next:") + 1:]
    assert "  agent-factory run --store tau.duckdb" in nxt and "  agent-factory report --store tau.duckdb" in nxt


def test_a_proposed_rewrite_suggests_its_diff_and_approval_and_labels_when_no_person_rated() -> None:
    proposed = RETIREMENT.model_copy(update={"action": "rewrite_proposed", "item_version": "2"})
    report = _audit(corrections=(proposed,), raters=("audit:openai/gpt-4o-mini",))
    cmds = audit_next(report, options="--store s.duckdb", suite="suites/airline")
    assert cmds[:2] == ["agent-factory diff suites/airline/approved suites/airline",
                        "agent-factory approve suites/airline"]
    assert "agent-factory review export --store s.duckdb" in cmds
    assert "agent-factory run --store s.duckdb" not in cmds  # nothing retired: nothing to rerun


def test_text_from_a_label_file_is_printed_as_it_is_never_as_markup() -> None:
    odd = CLARIFICATION.model_copy(update={"item": "mast.[bold]x[/bold]", "raters": ("human:[red]a", "human:b")})
    text = plain(agreement_view(AgreementReport(overall=OverallAgreement(
        krippendorff_alpha=None, fleiss_kappa=None, units=10, labels=20, raters=2), items=(odd,))))
    assert "mast.[bold]x[/bold]" in text


def test_agreement_prints_overall_then_items_and_a_long_list_stays_on_one_screen() -> None:
    many = tuple(BACKTRACKING.model_copy(update={"item": f"mast.{i}"}) for i in range(60))
    report = AgreementReport(overall=OverallAgreement(krippendorff_alpha=0.8012, fleiss_kappa=0.7987, units=316,
                                                      labels=946, raters=3), items=(REPETITION, *many))
    printed = plain(agreement_view(report, options="--store mast.duckdb"))
    lines = _lines(printed)
    assert _flat(printed).startswith("Agreement over every item: Krippendorff's alpha 0.801, Fleiss' kappa 0.799; "
                                     "316 (unit, item) pairs, 946 labels, 3 raters")
    assert len(lines) <= 45 and all(cell_len(line) <= WIDTH for line in lines)
    assert any(line.startswith("mast.1_5") for line in lines[:7])  # the failing item first
    assert "  31 more in --json" in lines
    assert lines[-2:] == ["  agent-factory agreement --store mast.duckdb --json", "  agent-factory audit --store "
                          "mast.duckdb"]


# ---- the report -------------------------------------------------------------------------------------------

FACTS = StoreFacts(path="tau.duckdb", turns=864, sessions=128, users=21, spans=2272, segments={"real": 864},
                   quarantined=0, units={"trace": 864}, last_run="2026-12-06T19:30:00+00:00",
                   outcome_kinds=("task_reward",))


def _sections(**extra: object) -> dict[str, Section]:
    data = ReportData(facts=FACTS, rows=(), per_unit={}, **extra)  # type: ignore[arg-type]
    return {s.key: s for s in report_sections(data)}


def test_without_an_audit_adjudication_says_how_to_run_one_and_the_log_stays_empty() -> None:
    sections = _sections()
    adjudication = sections["adjudication"]
    assert adjudication.absent is not None and "second rater" in adjudication.absent
    assert "agent-factory audit --rater MODEL" in adjudication.absent and not adjudication.blocks
    assert sections["corrections"].absent is not None and "no audit yet" in sections["corrections"].absent


def test_adjudication_shows_the_latest_audit_worst_first_with_its_charts() -> None:
    sections = _sections(audit=_audit(), corrections_log=(RETIREMENT,))
    s = sections["adjudication"]
    assert s.absent is None and "a-20261206-1940" in s.intro
    blocks = {b.title: b for b in s.blocks}
    items = blocks["Agreement per data item"]
    assert items.table is not None and [r[0] for r in items.table.rows] == ["mast.1_5", "mast.1_3", "mast.2_2",
                                                                           "mast.1_6"]
    assert items.table.columns == ("item", "raters", "units", "kappa [95% CI]", "alpha [95% CI]", "decision", "note")
    assert [cell.replace("\u00a0", " ") for cell in items.table.rows[0][3:6]] == [
        "-0.111 [-0.250, -0.034] (fleiss)", "-0.074 [-0.208, 0.000]", "below the line"]
    assert items.table.rows[2][5] == "admitted, near the line"
    # The undecided item is in the table, not in the plot; the admission line is drawn.
    assert items.chart is not None and "0.60" in str(items.chart.spec)
    plotted = [p["label"] for layer in items.chart.spec["layer"][:1] for p in layer["data"]["values"]]
    assert plotted == ["mast.1_5", "mast.2_2", "mast.1_6"]
    decided = {r[0]: r[2] for r in blocks["Admitted, retired, near the line"].table.rows}  # type: ignore[union-attr]
    assert decided["retired (out of the analyses)"] == "mast.1_5" and decided["admitted"] == "mast.2_2, mast.1_6"
    criterion = blocks["Criterion validity"]
    assert criterion.note.startswith("Pointing the wrong way: conduct.write_arguments_grounded.violated.")
    assert criterion.table is not None and criterion.table.rows[0][-2] == "points the wrong way"
    assert criterion.table.rows[0][6] == "+0.60\u00a0[+0.11,\u00a0+0.73]"  # one cell, never broken inside
    corrected = blocks["Corrected estimates"].table
    assert corrected is not None and [cell.replace("\u00a0", " ") for cell in corrected.rows[0][:4]] == [
        "rate.conduct.confirm_before_write.obligation", "0.838 [0.827, 0.849]", "0.715 [0.684, 0.746]", "600"]
    assert blocks["Rules against models"].table.rows[0][5] == "collect by model"  # type: ignore[union-attr]
    keys = [b.chart.key for b in s.blocks if b.chart is not None]
    assert keys == ["chart-adjudication-1", "chart-adjudication-2", "chart-adjudication-3"]
    log = sections["corrections"]
    assert log.absent is None and log.blocks[0].table is not None
    assert log.blocks[0].table.rows[0][2:6] == ("mast.1_5", "1", "retired", RETIREMENT.why)


def test_the_audit_is_escaped_in_the_page() -> None:
    odd = REPETITION.model_copy(update={"item": '<img src=x onerror=alert(1)>'})
    page = build_html(ReportData(facts=FACTS, rows=(), per_unit={}, audit=_audit(items=(odd,))),
                      runtime_js="", generated="now")
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_report_reads_the_latest_stored_audit_and_the_log(tmp_path: Path) -> None:
    from agent_factory.factory.store import Store
    from agent_factory.factory.store.audit import log_corrections, record_audit
    from agent_factory.factory.views.report.read import read_report

    with Store(tmp_path / "s.duckdb") as st:
        assert read_report(st).audit is None and read_report(st).corrections_log == ()
        older = _audit(audit_id="a-older", started_at="2026-12-05T10:00:00+00:00")
        record_audit(st, older, finished=datetime(2026, 12, 5, 10, 1, tzinfo=UTC))
        record_audit(st, _audit(), finished=datetime(2026, 12, 6, 19, 41, tzinfo=UTC))
        log_corrections(st, [RETIREMENT])
        data = read_report(st)
    assert data.audit == _audit() and data.corrections_log == (RETIREMENT,)


# ---- the summary ------------------------------------------------------------------------------------------

def test_summary_puts_the_corrected_rate_beside_the_judge_and_names_what_was_retired_and_wrong() -> None:
    from agent_factory.factory.views.summary import build_summary, render

    plain_summary = build_summary(FACTS, [])
    assert plain_summary.audit == () and "audit" not in plain_summary.model_dump(mode="json")
    assert "Audit" not in render(plain_summary)
    s = build_summary(FACTS, [], audit=_audit())
    texts = [line.text for line in s.audit]
    assert texts[0] == ("audit a-20261206-1940 (2026-12-06T19:40:00+00:00): 2 of 4 audited item(s) admitted, 1 "
                        "retired, 1 of 3 flag-outcome pair(s) pointing the wrong way")
    assert texts[1] == ("rate.conduct.confirm_before_write.obligation: judge 0.838 [0.827, 0.849] -> corrected "
                        "0.715 [0.684, 0.746], 600 labels")
    assert s.audit[1].value == 0.715 and s.audit[1].n == 600
    assert texts[2] == "retired (out of the analyses): mast.1_5"
    assert texts[3].startswith("wrong way: conduct.write_arguments_grounded.violated vs task_reward: AUC 0.462 "
                               "[0.405, 0.500], difference +0.60 [+0.11, +0.73]")
    assert len(texts) == 4  # the flags pointing the right way are not repeated here
    out = render(s)
    at, end = out.index("Audit"), out.index("next:")
    assert " ".join(" ".join(out[at + 1:end]).split()) == " ".join(texts)  # every line whole, wrapped
    assert out[at + 3].startswith("  rate.conduct.confirm_before_write.obligation: judge 0.838 [0.827, 0.849]")
    assert all(cell_len(line) <= SUMMARY_WIDTH for line in out)
    assert set(s.model_dump(mode="json")) == {"store", "traffic", "components", "absent", "outcomes", "next",
                                              "audit"}


def test_an_audit_without_a_rater_says_what_it_did_and_asks_for_labels() -> None:
    # A rules-only audit of the tau-bench shared set: nothing re-collected, criterion validity only.
    bare = AuditReport(audit_id="audit-7e401acc7f", started_at="2026-12-06T19:48:15+00:00", seconds=13.8,
                       model_calls=0, criterion=(CONFIRM, HANDED_OFF),
                       notes=("no audit rater configured (--rater, [models] audit, AGENT_FACTORY_AUDIT_MODELS): "
                              "nothing was re-collected; agreement reads people's labels only",))
    text = _flat(plain(audit_view(bare, options="--store tau.duckdb")))
    assert "0 model call(s), no sample re-collected; raters: none" in text
    assert "Agreement per item: no item has two raters yet" in text
    assert "2 flag-outcome pair(s), 0 pointing the wrong way" in text and "note: no audit rater configured" in text
    assert audit_next(bare, options="--store tau.duckdb")[0] == "agent-factory review export --store tau.duckdb"
    from agent_factory.factory.views.summary import audit_lines

    assert [line.text for line in audit_lines(bare)] == [
        "audit audit-7e401acc7f (2026-12-06T19:48:15+00:00): no item had two raters, 0 of 2 flag-outcome pair(s) "
        "pointing the wrong way"]
    sections = _sections(audit=bare)
    assert [b.title for b in sections["adjudication"].blocks] == ["Criterion validity", "What the audit could not do"]
    assert sections["corrections"].absent == "no correction yet: the audits so far retired and rewrote nothing"
