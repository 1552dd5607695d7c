"""`agent-factory review export` / `review import`: the page of sampled (unit, item) pairs a person labels offline
(escaped, redacted, self-contained), its CSV, the labels read back (checked row by row, all or nothing), and the
page driven in headless Chromium: a label set, kept across a reload, downloaded and imported."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from markupsafe import escape
from typer.testing import CliRunner

from agent_factory.errors import SpecError
from agent_factory.evaluators.audit.model import RATED_VALUES
from agent_factory.evaluators.audit.sample import draw_sample
from agent_factory.evaluators.collect.redact import DefaultRedactor, Redaction, merge, redact_text
from agent_factory.factory.cli.app import app
from agent_factory.factory.loops.audit.review_page import (
    DEFAULT_SAMPLE,
    LABEL_COLUMNS,
    REDACTED_KEY,
    Passage,
    ReviewQuestion,
    ReviewUnit,
    parse_labels,
    render_page,
    unit_key,
)
from agent_factory.factory.project import open_project
from agent_factory.factory.project.reviewing import DEFAULT_REVIEW_SAMPLE
from agent_factory.factory.store import Store
from agent_factory.factory.store.audit import read_labels, sample_candidates
from agent_factory.factory.store.lookup import locate, spans_of, turns_of, unit_data

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
EVIL = '<script>alert("x")</script></pre><img src=x onerror=alert(1)>'
EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+\.[A-Za-z]{2,}")
NO_MODEL = {"AGENT_FACTORY_SMALL_MODEL": "", "AGENT_FACTORY_JURY": "", "AGENT_FACTORY_CONFIG": ""}


def _invoke(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args), env=NO_MODEL)
    return res.exit_code, res.stdout, res.stderr


def _unit(key: str = "conv-1", text: str = EVIL) -> ReviewUnit:
    return ReviewUnit(
        key=key, unit=key, kind="conversation", layer="conversation", user="u1", component="conduct",
        stratum="real", weight=2.0,
        passages=(Passage(role="user", label="turn 0 · user", text=text),
                  Passage(role="tool", label="turn 0 · tool get_x", text="arguments: {}", cut=7)),
        questions=(ReviewQuestion(item="conduct.c1.obligation", question=f"Did the agent comply? {EVIL}",
                                  primary="no"),
                   ReviewQuestion(item="conduct.c1.trigger", question="Was it triggered?", primary="yes")))


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


# ---- the page, pure ----------------------------------------------------------------------------------------

def test_the_page_shows_evidence_and_questions_as_text_and_fetches_nothing() -> None:
    page = render_page([_unit()], store_name="s.duckdb", seed=3, generated="now")
    assert "<img src=x" not in page and 'alert("x")</script>' not in page
    assert page.count("&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&lt;/pre&gt;&lt;img src=x") == 2
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # nothing fetched at view time
    assert "default-src 'none'" in page  # and the page forbids it
    assert page.count('<fieldset class="pair"') == 2
    assert 'data-unit="conv-1" data-item="conduct.c1.obligation"' in page
    assert "7 more characters not shown" in page
    # The evaluator's values are left off the page: a person's labels stay independent of them.
    flipped = _unit().model_copy(update={"questions": tuple(
        q.model_copy(update={"primary": "not_applicable"}) for q in _unit().questions)})
    assert render_page([flipped], store_name="s.duckdb", seed=3, generated="now") == page
    assert page.count('type="radio"') == 2 * len(RATED_VALUES)


def test_a_unit_whose_id_the_redactor_hides_gets_a_digest_as_its_key() -> None:
    redactor = DefaultRedactor()
    assert unit_key("tau-3-1/turn-2", redactor) == "tau-3-1/turn-2"
    key = unit_key("ana.lima@example.com", redactor)
    assert key.startswith(REDACTED_KEY) and "ana" not in key
    assert key == unit_key("ana.lima@example.com", redactor) != unit_key("bo@example.com", redactor)


def test_the_default_sample_is_the_same_in_the_command_and_the_job() -> None:
    assert DEFAULT_REVIEW_SAMPLE == DEFAULT_SAMPLE


# ---- labels read back, pure --------------------------------------------------------------------------------

def test_labels_are_read_with_extra_columns_quotes_a_bom_and_unlabelled_rows() -> None:
    text = ("\ufeffunit_id,item,rater,value,question\n"
            't1,conduct.c1.obligation,"human:Ana ""A"", QA",Yes,"a, b"\n'
            "t1,conduct.c1.trigger,,,why\n"
            "t2,conduct.c1.trigger,human:bo,not_applicable,\n"
            "t2,conduct.c1.trigger,human:bo,not_applicable,\n"
            "\n")
    rows, skipped = parse_labels(text, name="l.csv")
    assert [(r.line, r.unit_id, r.item, r.rater, r.value) for r in rows] == [
        (2, "t1", "conduct.c1.obligation", 'human:Ana "A", QA', "yes"),
        (4, "t2", "conduct.c1.trigger", "human:bo", "not_applicable")]
    assert skipped == 1


@pytest.mark.parametrize(("text", "where"), [
    ("", "l.csv: the file is empty"),
    ("unit_id,item,value\nt1,conduct.c1.trigger,yes\n", "l.csv line 1: no column 'rater'"),
    ("unit_id,item,rater,value\nt1,conduct.c1.trigger,human:a,maybe\n", "l.csv line 2, field value: 'maybe'"),
    ("unit_id,item,rater,value\nt1,conduct.c1.trigger,human:a,uncollected\n", "l.csv line 2, field value: "
     "'uncollected' is a missing label"),
    ("unit_id,item,rater,value\nt1,conduct.c1.trigger,human:a,yes\nt2,conduct.c1.trigger,ana,no\n",
     "l.csv line 3, field rater: 'ana'"),
    ("unit_id,item,rater,value\nt1,conduct.c1.trigger,human: ,no\n", "l.csv line 2, field rater"),
    ("unit_id,item,rater,value\n,conduct.c1.trigger,human:a,no\n", "l.csv line 2, field unit_id: empty"),
    ("unit_id,item,rater,value\nt1,Conduct c1,human:a,no\n", "l.csv line 2, field item: 'Conduct c1'"),
    ("unit_id,item,rater,value\nt1,conduct.other,human:a,no\n", "l.csv line 2, field item: 'conduct.other' "
     "is not a data item of the suite"),
    ("unit_id,item,rater,value\nt1,conduct.c1.trigger,human:a,no\nt1,conduct.c1.trigger,human:a,yes\n",
     "l.csv line 3, field value: 'yes' contradicts line 2"),
    ("unit_id,item,rater,value\nt1,conduct.c1.trigger,human:a\n", "l.csv line 2: 3 fields, the header has 4"),
])
def test_a_bad_row_is_one_error_naming_the_file_line_and_field(text: str, where: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_labels(text, name="l.csv", items={"conduct.c1.trigger", "conduct.c1.obligation"})
    assert str(e.value).startswith(where), str(e.value)
    assert "\n" not in str(e.value)


# ---- export and import on the real tau-bench store --------------------------------------------------------

@pytest.fixture
def tau_copy(tau_store: Path, tmp_path: Path) -> Path:
    """A writable copy of the tau-bench store (128 airline conversations, run with rules only)."""
    path = tmp_path / "tau.duckdb"
    shutil.copy(tau_store, path)
    return path


def _export(store: Path, out: Path, *extra: str) -> dict[str, object]:
    code, stdout, stderr = _invoke("review", "export", "--store", str(store), "--out", str(out), "--json", *extra)
    assert code == 0, stderr
    done: dict[str, object] = json.loads(stdout)
    return done


def test_export_writes_the_audit_sample_as_pairs_with_their_questions_and_primary_values(
        tau_store: Path, tmp_path: Path) -> None:
    done = _export(tau_store, tmp_path / "a", "--sample", "12", "--seed", "7")
    rows = _rows(Path(str(done["csv"])).read_text(encoding="utf-8"))
    assert list(rows[0]) == ["unit_id", "item", "rater", "value", "user_id", "question", "primary_value"]
    assert rows and len(rows) == done["pairs"] and all(r["rater"] == r["value"] == "" for r in rows)
    page = Path(str(done["html"])).read_text(encoding="utf-8")
    assert page.count('<fieldset class="pair"') == len(rows)
    with open_project(store=tau_store, unapproved=True) as p:
        questions = {d.id: d.question for c in p.suite.components for d in c.definitions_for(p.suite.pack)}
        st = p.store()
        drawn, summary = draw_sample(sample_candidates(st), size=12, seed=7)
        primary = {(d.unit_id, d.item): d.value for d in unit_data(st, sorted({r["unit_id"] for r in rows}))
                   if d.rater == "primary"}
        users = {u: locate(st, u) for u in {r["unit_id"] for r in rows}}
    assert done["sample"] == summary.model_dump(mode="json")
    drawn_pairs = {(d.unit_id, d.component) for d in drawn}
    for r in rows:
        assert (r["unit_id"], r["item"].split(".")[0]) in drawn_pairs  # every pair is of a drawn unit and component
        assert r["question"] == questions[r["item"]]
        assert r["primary_value"] == primary[(r["unit_id"], r["item"])]
        located = users[r["unit_id"]]
        assert located is not None and r["user_id"] == located.user_id
        assert f'data-unit="{r["unit_id"]}" data-item="{r["item"]}"' in page
    # Every drawn (unit, component) with a yes/no item of the suite on it is on the page, each item of it once.
    assert len({(r["unit_id"], r["item"]) for r in rows}) == len(rows)
    assert {(r["unit_id"], r["item"].split(".")[0]) for r in rows} == {
        (u, c) for (u, c) in drawn_pairs if any(k[0] == u and k[1].split(".")[0] == c for k in primary)}
    again = _export(tau_store, tmp_path / "b", "--sample", "12", "--seed", "7")
    assert Path(str(again["csv"])).read_bytes() == Path(str(done["csv"])).read_bytes()  # reproducible by seed


def test_the_page_quotes_every_sampled_unit_redacted(tau_store: Path, tmp_path: Path) -> None:
    done = _export(tau_store, tmp_path / "r", "--sample", "30")
    page = Path(str(done["html"])).read_text(encoding="utf-8")
    rows = _rows(Path(str(done["csv"])).read_text(encoding="utf-8"))
    raw: set[str] = set()
    with open_project(store=tau_store, unapproved=True) as p:
        st, redactor = p.store(), p.redactor
        for uid in {r["unit_id"] for r in rows}:
            where = locate(st, uid)
            assert where is not None
            turns = (turns_of(st, conversation_id=uid) if where.kind == "conversation"
                     else turns_of(st, turn_id=where.turn_id or uid))
            for t in turns:
                raw.update(EMAIL.findall(t.request or "") + EMAIL.findall(t.answer or ""))
                for s in spans_of(st, turn_id=t.id):
                    raw.update(EMAIL.findall(s.output or "") + EMAIL.findall(s.input or ""))
                if t.request and t.request.strip():  # every message is on the page, redacted and escaped
                    assert str(escape(redact_text(t.request, redactor)))[:60] in page, t.id
    assert raw, "the sampled evidence should hold e-mail addresses (tau-bench's user records do)"
    assert EMAIL.findall(page) == [] and "[EMAIL]" in page


def test_a_store_with_nothing_run_has_nothing_to_review(tmp_path: Path) -> None:
    Store(tmp_path / "s.duckdb").close()
    code, _, err = _invoke("review", "export", "--store", str(tmp_path / "s.duckdb"), "--out", str(tmp_path / "r"))
    assert code == 1 and "nothing to review" in err and "agent-factory run" in err
    assert not (tmp_path / "r").exists()
    code, _, err = _invoke("review", "export", "--store", str(tmp_path / "none.duckdb"))
    assert code == 1 and "no store here yet" in err


def test_import_stores_every_label_or_none(tau_copy: Path, tmp_path: Path) -> None:
    done = _export(tau_copy, tmp_path / "r", "--sample", "6")
    rows = _rows(Path(str(done["csv"])).read_text(encoding="utf-8"))
    good = [(r["unit_id"], r["item"], "human:ana", RATED_VALUES[i % 3]) for i, r in enumerate(rows[:5])]
    bad = tmp_path / "bad.csv"
    bad.write_text("unit_id,item,rater,value\n" + "".join(",".join(g) + "\n" for g in good)
                   + f"{rows[5]['unit_id']},{rows[5]['item']},human:ana,perhaps\n", encoding="utf-8")
    code, _, err = _invoke("review", "import", str(bad), "--store", str(tau_copy))
    assert code == 1 and "bad.csv line 7, field value: 'perhaps'" in err
    with Store(tau_copy, read_only=True) as st:
        assert read_labels(st) == []  # nothing half-imported
    unknown = tmp_path / "unknown.csv"
    unknown.write_text(f"unit_id,item,rater,value\nno-such-unit,{rows[0]['item']},human:ana,yes\n", encoding="utf-8")
    code, _, err = _invoke("review", "import", str(unknown), "--store", str(tau_copy))
    assert code == 1 and "unknown.csv line 2, field unit_id: 'no-such-unit' is no unit of" in err
    code, _, err = _invoke("review", "import", str(done["csv"]), "--store", str(tau_copy))
    assert code == 1 and "no row has a value" in err  # the unfilled review.csv: nothing to import


class TaskIdRedactor:
    """A redactor that also hides tau-bench's task numbers (`tau-<task>-<trial>`), as a deployment might hide an
    id that names a customer: the conversations' ids then never reach the page."""

    version = "test-task-ids"

    def __init__(self) -> None:
        self.default = DefaultRedactor()

    def find(self, text: str) -> list[Redaction]:
        """The default redactor's ranges and every task id."""
        found = [(r.start, r.end, 0, r.placeholder) for r in self.default.find(text)]
        found += [(m.start(), m.end(), 1, "[TASK]") for m in re.finditer(r"tau-\d+-\d+", text)]
        return merge(found)


def test_a_unit_whose_id_is_hidden_goes_by_a_key_that_import_maps_back(tau_copy: Path, tmp_path: Path) -> None:
    config = tmp_path / "agent-factory.toml"
    config.write_text(f'[privacy]\nredactor = "{__name__}:TaskIdRedactor"\n', encoding="utf-8")
    done = _export(tau_copy, tmp_path / "r", "--sample", "4", "--config", str(config))
    rows = _rows(Path(str(done["csv"])).read_text(encoding="utf-8"))
    page = Path(str(done["html"])).read_text(encoding="utf-8")
    assert rows and all(r["unit_id"].startswith(REDACTED_KEY) for r in rows)
    assert not re.search(r"tau-\d+-\d+", page) and "[TASK]" in page
    labels = tmp_path / "labels.csv"
    labels.write_text(f"unit_id,item,rater,value\n{rows[0]['unit_id']},{rows[0]['item']},human:ana,yes\n",
                      encoding="utf-8")
    code, _, err = _invoke("review", "import", str(labels), "--store", str(tau_copy), "--config", str(config))
    assert code == 0, err
    with Store(tau_copy, read_only=True) as st:
        (stored,) = read_labels(st)
        where = locate(st, stored.unit_id)
    assert re.fullmatch(r"tau-\d+-\d+(/.*)?", stored.unit_id) and where is not None
    assert unit_key(stored.unit_id, TaskIdRedactor()) == rows[0]["unit_id"] and stored.user == where.user_id


# ---- the page in headless Chromium --------------------------------------------------------------------------

def test_the_page_in_chromium_sets_keeps_and_downloads_labels_that_import(tau_copy: Path, tmp_path: Path) -> None:
    done = _export(tau_copy, tmp_path / "r", "--sample", "6", "--seed", "1")
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian package `chromium`; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    rows = _rows(Path(str(done["csv"])).read_text(encoding="utf-8"))
    page_url = Path(str(done["html"])).resolve().as_uri()
    rater = 'Ana "A", QA'
    console: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            ctx = browser.new_context(accept_downloads=True, viewport={"width": 1200, "height": 1500})
            page = ctx.new_page()
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
            page.goto(page_url)
            assert page.get_attribute("body", "data-ready") == "true"
            pairs = page.locator("fieldset.pair")
            assert pairs.count() == len(rows)
            # Without a name nothing is downloaded, and the page says why.
            pairs.nth(0).locator("input[value=yes]").check()
            page.click("#download")
            assert page.get_attribute("body", "data-downloaded") is None
            assert "Write your name first" in page.inner_text("#status")
            page.fill("#rater", rater)
            pairs.nth(1).locator("input[value=not_applicable]").check()
            pairs.nth(2).locator("input[value=no]").check()
            pairs.nth(3).locator("input[value=yes]").check()
            pairs.nth(3).locator("button.clear").click()
            pairs.nth(0).locator("input[value=no]").check()  # changed its mind
            assert page.inner_text("#progress") == f"3 of {len(rows)} labelled"
            page.reload()  # progress and the name are kept in the browser
            assert page.inner_text("#progress") == f"3 of {len(rows)} labelled"
            assert page.input_value("#rater") == rater
            assert pairs.nth(2).locator("input[value=no]").is_checked()
            with page.expect_download() as caught:
                page.click("#download")
            download = caught.value
            got = Path(download.path()).read_text(encoding="utf-8")
            name = download.suggested_filename
            assert page.get_attribute("body", "data-downloaded") == "3"
            page.screenshot(path=str(tmp_path / "review.png"), full_page=False)
        finally:
            browser.close()
    assert console == [], console  # the page logs nothing: no error, no warning
    assert name == "labels-Ana-A-QA.csv"
    labels = _rows(got)
    assert got.splitlines()[0] == ",".join(LABEL_COLUMNS)
    expected = {(rows[0]["unit_id"], rows[0]["item"], "no"), (rows[1]["unit_id"], rows[1]["item"], "not_applicable"),
                (rows[2]["unit_id"], rows[2]["item"], "no")}
    assert {(r["unit_id"], r["item"], r["value"]) for r in labels} == expected
    assert {r["rater"] for r in labels} == {f"human:{rater}"}
    assert {r["value"] for r in labels} <= set(RATED_VALUES)
    assert (tmp_path / "review.png").stat().st_size > 10_000
    downloaded = tmp_path / name
    downloaded.write_text(got, encoding="utf-8")
    code, stdout, err = _invoke("review", "import", str(downloaded), "--store", str(tau_copy), "--json")
    assert code == 0, err
    assert json.loads(stdout)["labels"] == 3
    with Store(tau_copy, read_only=True) as st:
        stored = read_labels(st)
        users = {u: where.user_id for u, _, _ in expected if (where := locate(st, u)) is not None}
    assert {(r.unit_id, r.item, r.value) for r in stored} == expected
    assert {r.rater for r in stored} == {f"human:{rater}"}
    assert set(users) == {u for u, _, _ in expected} and all(r.user == users[r.unit_id] for r in stored)
