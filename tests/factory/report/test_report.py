"""`agent-factory report`: the pure page builder (escaping, sections, absent data) and the command on a small
simulated store, opened in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_factory.evaluators.collect.redact import DefaultRedactor
from agent_factory.factory.cli.app import app
from agent_factory.factory.views.report import build_html, report_sections
from agent_factory.factory.views.report.model import Quote, ReportData
from agent_factory.factory.views.report.read import _field_text, quote_window
from agent_factory.factory.views.results import ResultRow, StoreFacts

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SECTION_KEYS = ["layers", "spine", "execution", "substance", "trajectory", "results", "conduct", "provenance",
                "adjudication", "outcomes", "gate", "corrections"]
FAKE_RUNTIME = "window.vegaEmbed = function () { return Promise.resolve(); };"
EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def _data(**extra: object) -> ReportData:
    facts = StoreFacts(path="s.duckdb", turns=10, sessions=4, users=2, spans=30, segments={"real": 10},
                       quarantined=0, units={"trace": 10}, last_run="2026-01-01T00:00:00+00:00")
    rows = (
        ResultRow(component="execution", layer="trace", metric="failure_rate", stratum="all", value=0.2, low=0.1,
                  high=0.3, n=10),
        ResultRow(component="conduct", layer="trace", metric=f"violations.{EVIL}", stratum="all", value=3.0, n=5),
        ResultRow(component="conduct", layer="trace", metric=f"C(r).{EVIL}", stratum="all", value=0.4, low=0.1,
                  high=0.8, n=5, note=EVIL),
        ResultRow(component="substance", layer="trace", metric="S", stratum="all", value=None, n=0),
        ResultRow(component="substance", layer="trace", metric="uncollected", stratum="item=substance.i1", value=7.0,
                  n=10),
    )
    return ReportData(facts=facts, rows=rows, per_unit={}, **extra)  # type: ignore[arg-type]


def test_trace_text_is_escaped_data_and_absent_sections_say_why() -> None:
    quote = Quote(component="conduct", finding=f"violation.{EVIL}", unit_id="t1", field="answer", text=EVIL)
    page = build_html(_data(quotes=(quote,)), runtime_js=FAKE_RUNTIME, generated="now")
    # The only <script> elements are the report's own three: specs, runtime, boot.
    assert page.count("<script") == 3
    assert "<img" not in page and "onerror=alert(1)>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    specs = re.search(r'<script type="application/json" id="af-specs">(.*?)</script>', page, re.S)
    assert specs is not None and "</" not in specs.group(1)
    assert EVIL in repr(json.loads(specs.group(1)))  # the data survive as data
    sections = {s.key: s for s in report_sections(_data())}
    assert list(sections) == SECTION_KEYS
    assert sections["substance"].absent is not None and sections["substance"].absent.startswith("needs a model")
    assert sections["adjudication"].absent is not None and "second rater" in sections["adjudication"].absent
    assert sections["outcomes"].absent is not None and "no outcome events" in sections["outcomes"].absent
    assert sections["conduct"].absent is None and sections["execution"].blocks


def test_composite_only_when_asked_and_last() -> None:
    assert "composite" not in [s.key for s in report_sections(_data())]
    with_it = report_sections(_data(), with_composite=True)
    assert with_it[-1].key == "composite" and "a view" in with_it[-1].title
    rows = with_it[-1].blocks[0].table.rows  # type: ignore[union-attr]
    # execution 1 - 0.2 = 0.8 (weight .25), conduct mean C(r) 0.4 (weight .15): (0.2 + 0.06) / 0.4 = 0.65
    assert rows[-1] == ("composite (view)", "0.650", "1.00")


def test_quote_window_redacts_across_the_cut() -> None:
    text = "x" * 200 + " write to alice@example.com now " + "y" * 200
    start = text.index("alice") + 3  # the pointer starts inside the address
    q = quote_window(text, start, start + 5, DefaultRedactor())
    assert "alice" not in q and "example.com" not in q and "[EMAIL]" in q
    assert q.startswith("…") and q.endswith("…")


def test_quoted_attributes_are_found_flat_nested_or_mixed(tmp_path: Path) -> None:
    # OTel exporters write attributes flat ("gen_ai.prompt"); adapters nest some; a pointer names the dotted key.
    from agent_factory.factory.store import Store

    with Store(tmp_path / "s.duckdb") as st:
        st.con.execute("INSERT INTO turns (id, conversation_id, attributes) VALUES (?, 'c', ?), (?, 'c', ?)", [
            "t1", json.dumps({"gen_ai.prompt": "flat text", "llm": {"output": {"value": "nested text"}}}),
            "t2", json.dumps({"tool": {"call.args": "mixed text"}, "n": 3})])
        assert _field_text(st, "t1", "attributes.gen_ai.prompt") == "flat text"
        assert _field_text(st, "t1", "attributes.llm.output.value") == "nested text"
        assert _field_text(st, "t2", "attributes.tool.call.args") == "mixed text"
        assert _field_text(st, "t2", "attributes.n") is None and _field_text(st, "t2", "attributes.gone") is None


@pytest.fixture
def small_store(sim_store: tuple[Path, str]) -> Path:
    """12 simulated users ingested and run with the shipped pack (rules only; the session's `sim_store`)."""
    return sim_store[0]


def _chromium(*args: str, user_dir: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={user_dir}",
             "--enable-logging=stderr", "--v=0", "--virtual-time-budget=20000"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120, check=False)


def rendered_dom(page: Path, *, charts: int, user_dir: Path) -> str:
    """The page's DOM once headless Chromium ran its scripts, checked: nothing logged to the console (no error, no
    warning from vega) and all `charts` plots drawn. Skips when Chromium is not installed."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian package `chromium`; .ci/run installs it)")
    dom = _chromium("--dump-dom", page.as_uri(), user_dir=user_dir)
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console
    html = dom.stdout
    assert 'data-plots="rendered"' in html and f'data-plots-rendered="{charts}"' in html
    return html


def test_report_opens_in_chromium_with_every_section_and_plot(small_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    res = CliRunner().invoke(app, ["report", "--store", str(small_store), "--out", str(out), "--evidence",
                                   "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["sections"] == SECTION_KEYS and summary["charts"] >= 8
    assert out.stat().st_size == summary["bytes"] < 10_000_000
    page = out.read_text(encoding="utf-8")
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # nothing fetched at view time
    html = rendered_dom(out, charts=summary["charts"], user_dir=tmp_path / "ud1")
    for key in SECTION_KEYS:
        assert f'data-section="{key}"' in html, key
    chart_ids = re.findall(r'<div class="chart" id="([^"]+)"', page)
    assert len(chart_ids) == summary["charts"]
    for key in chart_ids:  # each plot's element now holds the SVG vega drew into it
        at = html.index(f'id="{key}"')
        assert re.search(r'<svg [^>]*class="marks"', html[at:at + 2000]), key
    shot = tmp_path / "report.png"
    _chromium("--window-size=1280,2400", f"--screenshot={shot}", out.as_uri(), user_dir=tmp_path / "ud2")
    assert shot.exists() and shot.stat().st_size > 10_000


def test_a_clause_count_is_printed_whole_with_its_thousands() -> None:
    # The clause table cut each count at its first comma: 1,892 violations read "1".
    facts = StoreFacts(path="s.duckdb", turns=5000, sessions=40, users=20, spans=9000, segments={"real": 5000},
                       quarantined=0, units={"trace": 5000}, last_run="2026-01-01T00:00:00+00:00")
    rows = (
        ResultRow(component="conduct", layer="trace", metric="violations.confirm", stratum="all", value=1892.0,
                  n=4000),
        ResultRow(component="conduct", layer="trace", metric="uncollected.confirm", stratum="all", value=12345.0,
                  n=20000),
        ResultRow(component="conduct", layer="trace", metric="C(r).confirm", stratum="all", value=0.5, low=0.4,
                  high=0.6, n=4000),
    )
    page = build_html(ReportData(facts=facts, rows=rows, per_unit={}), runtime_js=FAKE_RUNTIME, generated="now")
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", page)
    assert "1,892" in cells and "12,345" in cells
    assert "1" not in cells and "12" not in cells


def test_rows_over_no_unit_are_said_once_bands_keep_their_order_and_rates_read_as_percentages() -> None:
    # tau-bench records no latency and no retrieval: those estimates are over no unit at all.
    facts = StoreFacts(path="s.duckdb", turns=864, sessions=128, users=21, spans=2272, segments={"real": 864},
                       quarantined=0, units={"trace": 864}, last_run="2026-01-01T00:00:00+00:00")

    def row(metric: str, value: float | None, n: int, stratum: str = "all") -> ResultRow:
        return ResultRow(component="execution", layer="trace", metric=metric, stratum=stratum, value=value,
                         low=None if value is None else value / 2, high=None if value is None else value * 2, n=n)

    rows = (row("failure_rate", 0.4921, 828), row("failure_rate.no_retrieval", 0.0024, 828),
            row("failure_rate.retrieval", None, 0), row("failure_rate.thinking", None, 0),
            row("failure_rate.no_thinking", 0.0024, 828),
            *(row(f"failure_rate.band[{b}]", v, n) for b, v, n in (("10-120s", 0.1, 40), ("5-10s", 0.2, 30),
                                                                  ("<5s", 0.3, 20), (">120s", None, 0))))
    sections = {s.key: s for s in report_sections(ReportData(facts=facts, rows=rows, per_unit={}))}
    blocks = {b.title: b for b in sections["execution"].blocks}
    steps = blocks["Failure by chain step (all modes)"]
    assert steps.table is not None and all("undefined" not in cell for r in steps.table.rows for cell in r)
    assert [r[0] for r in steps.table.rows] == ["failure_rate.no_retrieval", "failure_rate.no_thinking"]
    assert steps.note.count("not recorded by this format") == 1
    assert "retrieval (with the step), thinking (with the step)" in steps.note
    band = blocks["The fast-failure band (all modes)"]
    assert band.table is not None and [r[0] for r in band.table.rows] == [
        "failure_rate.band[<5s]", "failure_rate.band[5-10s]", "failure_rate.band[10-120s]"]
    assert ">120s" in band.note and band.chart is not None
    assert band.chart.spec["layer"][0]["encoding"]["y"]["sort"] == ["<5s", "5-10s", "10-120s"]
    first = blocks["Delivery failure by mode"].table
    assert first is not None and first.rows[0][2:5] == ("49.2%", "24.6% – 98.4%", "828")


def test_report_of_an_audited_store_shows_adjudication_and_the_log_in_chromium(small_store: Path,
                                                                               tmp_path: Path) -> None:
    # The session's store is read-only for tests: the audit is recorded in a copy.
    from datetime import UTC, datetime

    from agent_factory.factory.store import Store
    from agent_factory.factory.store.audit import log_corrections, record_audit
    from tests.factory.test_views_audit import RETIREMENT, _audit

    store = tmp_path / "audited.duckdb"
    shutil.copyfile(small_store, store)
    with Store(store) as st:
        record_audit(st, _audit(), finished=datetime(2026, 12, 6, 19, 41, tzinfo=UTC))
        log_corrections(st, [RETIREMENT])
    out = tmp_path / "report.html"
    res = CliRunner().invoke(app, ["report", "--store", str(store), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["sections"] == SECTION_KEYS
    assert "adjudication" not in summary["absent"] and "corrections" not in summary["absent"]
    page = out.read_text(encoding="utf-8")
    assert all(f'id="chart-adjudication-{i}"' in page for i in (1, 2, 3))
    assert "points the wrong way" in page and "mast.1_5" in page
    html = rendered_dom(out, charts=summary["charts"], user_dir=tmp_path / "ud")
    for key in ("chart-adjudication-1", "chart-adjudication-2", "chart-adjudication-3"):
        at = html.index(f'id="{key}"')
        assert re.search(r'<svg [^>]*class="marks"', html[at:at + 2000]), key
