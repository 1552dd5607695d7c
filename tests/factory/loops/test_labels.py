"""People's labels as raters (`labels import`) and agreement among every rater (`agreement`).

MAST's human-human agreement is computed by the product and checked against an independent computation from the
raw JSON (`krippendorff.alpha`, statsmodels' Fleiss kappa); TRAIL's and Who&When's labels import as human raters
of the units the store gives their spans. Real data; skipped when `../shared/data` is absent.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss
from typer.testing import CliRunner

from agent_factory.evaluators.audit.model import Rating
from agent_factory.factory.cli.app import EXIT_USER_ERROR, app
from agent_factory.factory.ingest.files import IngestReport
from agent_factory.factory.loops.audit.label_formats import (
    DECISIVE_MISTAKE,
    TRAIL_RATER,
    WHO_WHEN_RATER,
    LabelError,
    mast_labels,
    trail_labels,
)
from agent_factory.factory.loops.audit.labels import csv_labels, rated_together
from agent_factory.factory.project import open_project
from agent_factory.factory.store import Store
from agent_factory.factory.store.audit import read_labels, read_ratings
from agent_factory.factory.store.lookup import spans_of
from tests.conftest import shared_data

NO_MODEL = {"AGENT_FACTORY_SMALL_MODEL": "", "AGENT_FACTORY_JURY": "", "AGENT_FACTORY_CONFIG": ""}


# ---- MAST: the product against an independent computation ------------------------------------------------------

def _mast_matrices(raw: list[dict[str, Any]]) -> dict[str, list[list[float]]]:
    """Per failure mode (keyed on its name, lower-cased, spacing collapsed: the code changes meaning between
    rounds), rows of [annotator_1, annotator_2, annotator_3] as 1.0 / 0.0 / nan, one row per trace."""
    modes: dict[str, list[list[float]]] = {}
    for rec in raw:
        for a in rec["annotations"]:
            name = " ".join(a["failure mode"].split("\n")[0].split()[1:]).lower()
            row = [float("nan") if isinstance(v, float) else float(v)
                   for v in (a["annotator_1"], a["annotator_2"], a["annotator_3"])]
            modes.setdefault(name, []).append(row)
    return modes


def _fleiss(rows: list[list[float]]) -> float | None:
    """statsmodels' Fleiss kappa over the rows every annotator labelled (None when undefined)."""
    full = np.array([r for r in rows if not any(math.isnan(v) for v in r)])
    table = np.stack([(full == 1).sum(axis=1), (full == 0).sum(axis=1)], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        k = float(sm_fleiss(table))
    return None if math.isnan(k) else k


def _alpha(rows: list[list[float]]) -> float | None:
    """krippendorff's nominal alpha (raters x units, nan missing); None when every label is the same."""
    data = np.array(rows).T
    if len(set(data[~np.isnan(data)].tolist())) < 2:
        return None
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))


@pytest.fixture(scope="module")
def mast(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], Any, Any]:
    """The raw MAST records, what `labels import` stored of them, and `agreement` on that store."""
    src = shared_data("mast-mad-human-labelled", "MAD_human_labelled_dataset.json")
    store = tmp_path_factory.mktemp("mast") / "s.duckdb"
    with open_project(store=store) as p:
        done = p.import_labels(src, fmt="mast")
        report = p.agreement(n_boot=200)
    return json.loads(src.read_text()), done, report


def test_mast_imports_three_annotators_per_failure_mode(mast: tuple[list[dict[str, Any]], Any, Any]) -> None:
    raw, done, _ = mast
    cells = sum(len(r["annotations"]) for r in raw)
    unlabelled = sum(isinstance(a[k], float) for r in raw for a in r["annotations"]
                     for k in ("annotator_1", "annotator_2", "annotator_3"))
    assert (cells, unlabelled) == (316, 2)
    assert done.labels == 3 * cells - unlabelled and done.skipped == unlabelled
    assert done.units == 19 and done.units_with_data == 0  # MAST's traces are not ingested
    assert done.raters == ("human:mast-annotator-1", "human:mast-annotator-2", "human:mast-annotator-3")
    assert len(done.items) == len(_mast_matrices(raw)) == 29 and not done.mapped
    # "1.3" is Step Repetition in the final taxonomy and "Unaware of stopping conditions" in rounds 2-3: by name.
    assert {"mast.step_repetition", "mast.unaware_of_stopping_conditions"} <= set(done.items)


def test_mast_agreement_matches_krippendorff_and_statsmodels(mast: tuple[list[dict[str, Any]], Any, Any]) -> None:
    raw, _, report = mast
    modes = _mast_matrices(raw)
    every = [row for rows in modes.values() for row in rows]
    o = report.overall
    assert (o.units, o.labels, o.raters) == (316, 946, 3)
    assert o.krippendorff_alpha == pytest.approx(_alpha(every), abs=1e-12)
    assert o.fleiss_kappa == pytest.approx(_fleiss(every), abs=1e-12)
    by_item = {a.item: a for a in report.items}
    assert len(by_item) == len(modes)
    defined = {}
    for name, rows in modes.items():
        a = by_item["mast." + re.sub(r"[^a-z0-9]+", "_", name).strip("_")]
        assert a.n == len(rows) and a.kappa_method == "fleiss"
        want_k, want_a = _fleiss(rows), _alpha(rows)
        assert (a.kappa is None) == (want_k is None), name
        assert (a.alpha is None) == (want_a is None), name
        if want_k is not None:
            assert a.kappa == pytest.approx(want_k, abs=1e-12), name
            defined[name] = a.kappa
        if want_a is not None:
            assert a.alpha == pytest.approx(want_a, abs=1e-12), name
    low, high = min(defined.values()), max(defined.values())
    print(f"\nMAST: overall alpha {o.krippendorff_alpha:.4f}, Fleiss kappa {o.fleiss_kappa:.4f} "
          f"({o.units} trace x mode, {o.labels} labels); kappa defined for {len(defined)} of {len(modes)} modes; "
          f"lowest {low:.3f} {sorted(m for m, k in defined.items() if k == low)}, highest {high:.3f} "
          f"({sum(k == high for k in defined.values())} modes); per mode: "
          + ", ".join(f"{m} {k:.3f}" for m, k in sorted(defined.items(), key=lambda mk: mk[1])))


def test_mast_bad_record_names_record_and_field() -> None:
    with pytest.raises(LabelError, match=r"^m.json: record 0: annotations\[0\]\.annotator_2: expected true, false"):
        mast_labels([{"trace_id": 1, "annotations": [{"failure mode": "1.1 X\n\nd", "annotator_1": True,
                                                      "annotator_2": "yes"}]}], where="m.json")


# ---- TRAIL -------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trail(trail_store: tuple[Path, IngestReport], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """The TRAIL store copied, run with rules only, and TRAIL's annotations imported into it."""
    store = tmp_path_factory.mktemp("trail-labels") / "s.duckdb"
    shutil.copy(trail_store[0], store)
    with pytest.MonkeyPatch.context() as mp:
        for k, v in NO_MODEL.items():
            mp.setenv(k, v)
        with open_project(store=store, pack="default") as p:
            p.run()
            done = p.import_labels(shared_data("trail"), fmt="trail")
    return store, done


def test_trail_annotations_import_as_human_raters_of_the_store_spans(trail: tuple[Path, Any]) -> None:
    store, done = trail
    notes = {f.stem: json.loads(f.read_text()) for f in sorted(shared_data("trail", "annotations").rglob("*.json"))}
    errors = [(tid, e) for tid, doc in notes.items() for e in doc["errors"]]
    assert len(errors) == 248
    assert sum(m.count for m in (*done.mapped, *done.unmapped)) == 248
    # A failed call answers execution.span_error only on the call's own (tool) span: the annotators also place
    # failed calls on the model step that read the error back, which is not the span that failed.
    assert {m.label for m in done.mapped} == {"Authentication Errors (span kind tool)", "Service Errors (span kind tool)"}
    assert all(m.suite_items == ("execution.span_error",) for m in done.mapped)
    unmapped = {m.label for m in done.unmapped}
    assert {"Timeout Issues (span kind llm)", "Resource Not Found (span kind llm)"} <= unmapped
    assert {"Formatting Errors", "Goal Deviation", "Tool Selection Errors"} <= unmapped
    assert all(not m.suite_items and m.why for m in done.unmapped)
    assert done.raters == (TRAIL_RATER,) and done.units_with_data == done.units
    with Store(store, read_only=True) as st:
        labels = read_labels(st)
        assert {r.unit_id for r in labels} == {e["location"] for _, e in errors}
        for r in labels[:40]:
            assert [s.id for s in spans_of(st, span_id=r.unit_id)] == [r.unit_id]
    assert {r.value for r in labels} == {"yes"}


def test_trail_labels_meet_the_rule_in_agreement(trail: tuple[Path, Any]) -> None:
    store, _ = trail
    with Store(store, read_only=True) as st:
        data = read_ratings(st)
    # A TRAIL turn is its own conversation (one id, two layers): still one rating per datum, and a span's user
    # is its trace (the user key of a source that names no user), the cluster the labels give it too.
    assert len({(r.unit_id, r.item, r.rater) for r in data}) == len(data)
    assert {r.user for r in data if r.item == "execution.span_error"} == {
        p.stem for p in shared_data("trail", "traces").rglob("*.json")}
    with open_project(store=store) as p:
        report = p.agreement(n_boot=100)
    (item,) = report.items
    assert item.item == "execution.span_error" and item.raters == ("human:trail", "primary")
    assert item.n >= 1 and item.kappa_method == "cohen"


def test_trail_spelling_variants_are_one_category() -> None:
    docs = {"t1": {"errors": [{"category": "Formatting Error", "location": "a"},
                              {"category": "Formatting Errors", "location": "b"},
                              {"category": "tool selection", "location": "c"}]}}
    parsed = trail_labels(docs, where={"t1": "t1.json"})
    assert [(m.label, m.count) for m in parsed.mappings] == [("Formatting Errors", 2), ("Tool Selection Errors", 1)]
    # A failed call maps by the kind of the span it sits on; a span the store lacks maps to nothing.
    calls = {"t1": {"errors": [{"category": "Service Errors", "location": s} for s in ("a", "b", "c")]}}
    parsed = trail_labels(calls, where={"t1": "t1.json"}, span_kinds={"a": "tool", "b": "llm"})
    assert {(m.label, m.suite_items) for m in parsed.mappings} == {
        ("Service Errors (span kind tool)", ("execution.span_error",)), ("Service Errors (span kind llm)", ()),
        ("Service Errors (span not in the store)", ())}
    assert sorted((r.unit_id, r.item) for r in parsed.ratings if r.item == "execution.span_error") == [
        ("a", "execution.span_error")]
    with pytest.raises(LabelError, match=r"^t1\.json: errors\[0\]\.location: expected a span id"):
        trail_labels({"t1": {"errors": [{"category": "Goal Deviation"}]}}, where={"t1": "t1.json"})


# ---- Who&When ----------------------------------------------------------------------------------------------------

def test_who_and_when_decisive_steps_import_on_the_store_spans(
    who_and_when_store: tuple[Path, IngestReport], tmp_path: Path
) -> None:
    store = tmp_path / "s.duckdb"
    shutil.copy(who_and_when_store[0], store)
    with open_project(store=store) as p:
        done = p.import_labels(shared_data("who-and-when"), fmt="who-and-when")
    assert done.raters == (WHO_WHEN_RATER,) and done.items == (DECISIVE_MISTAKE,)
    assert not done.mapped and {m.label for m in done.unmapped} == {"mistake_step", "mistake_agent", "mistake_reason"}
    with Store(store, read_only=True) as st:
        labels = read_labels(st)
        spans = st.count_rows("spans")
        # The step the store's own mistake_step event names is the one `yes` of its run.
        steps = {e.conversation_id: e.attributes["span_id"] for e in st.events() if e.kind == "mistake_step"}
    assert len(steps) == 184 and done.labels == len(labels) == spans
    assert {r.user: r.unit_id for r in labels if r.value == "yes"} == steps
    assert sum(r.value == "yes" for r in labels) == 184


# ---- CSV ---------------------------------------------------------------------------------------------------------

GOOD_CSV = "unit_id,item,rater,value,user_id\nt1,substance.s1_specific,alice,yes,u1\n" \
           "t1,substance.s1_specific,human:bob,No,u1\nt2,substance.s1_specific,alice,,u2\n"


def test_csv_imports_people_and_skips_blank_values(tmp_path: Path) -> None:
    f = tmp_path / "l.csv"
    f.write_text(GOOD_CSV)
    with open_project(store=tmp_path / "s.duckdb") as p:
        done = p.import_labels(f, fmt="csv")
        assert (done.labels, done.skipped, done.raters) == (2, 1, ("human:alice", "human:bob"))
        assert [(m.label, m.suite_items, m.count) for m in done.mapped] == [
            ("substance.s1_specific", ("substance.s1_specific",), 2)]
    with Store(tmp_path / "s.duckdb", read_only=True) as st:
        assert read_labels(st) == [Rating("t1", "u1", "substance.s1_specific", "human:alice", "yes"),
                                   Rating("t1", "u1", "substance.s1_specific", "human:bob", "no")]


@pytest.mark.parametrize(("body", "message"), [
    ("unit_id,item,value\nt1,x,yes\n", r"l\.csv: line 1: header: missing column\(s\) rater"),
    ("unit_id,item,rater,value\nt1,x,alice,yes\nt2,x,alice,maybe\n",
     r"l\.csv: line 3: value: 'maybe' is not one of yes, no, not_applicable"),
    ("unit_id,item,rater,value\nt1,x,primary,yes\n", r"l\.csv: line 2: rater: 'primary' is not a person's name"),
    ("unit_id,item,rater,value\nt1,,alice,yes\n", r"l\.csv: line 2: item: empty"),
    ("unit_id,item,rater,value\nt1,x,alice,yes\nt1,x,alice,no\n", r"l\.csv: line 3: value: 'no' contradicts line 2"),
])
def test_csv_bad_row_is_one_line_and_nothing_is_imported(tmp_path: Path, body: str, message: str) -> None:
    good, bad = tmp_path / "good.csv", tmp_path / "l.csv"
    good.write_text(GOOD_CSV)
    bad.write_text(body)
    store = tmp_path / "s.duckdb"
    res = CliRunner().invoke(app, ["labels", "import", str(bad), "--format", "csv", "--store", str(store)])
    assert res.exit_code == EXIT_USER_ERROR and not store.exists()  # a bad file creates no store
    assert re.search(message, res.output) and res.output.count("\n") <= 2, res.output
    with open_project(store=store) as p:
        p.import_labels(good, fmt="csv")
        with pytest.raises(LabelError, match=message):
            p.import_labels(bad, fmt="csv")
    with Store(store, read_only=True) as st:
        assert len(read_labels(st)) == 2  # the bad file added nothing


def test_csv_reader_is_pure_and_names_the_line() -> None:
    with pytest.raises(LabelError, match=r"^x\.csv: line 3: row: 2 field\(s\), the header has 4$"):
        csv_labels("unit_id,item,rater,value\nt1,x,a,yes\nt2,x\n", where="x.csv")
    with pytest.raises(LabelError, match=r"^x\.csv: line 2: row: 5 field\(s\), the header has 4$"):
        csv_labels("unit_id,item,rater,value\nt1,x,a,yes,surprise\n", where="x.csv")
    # A spreadsheet's trailing empty cells are no extra field; a quoted comma is one field.
    parsed = csv_labels('unit_id,item,rater,value\n"t1,a",x,a,yes,,\n', where="x.csv")
    assert [(r.unit_id, r.value) for r in parsed.ratings] == [("t1,a", "yes")]


# ---- agreement ---------------------------------------------------------------------------------------------------

def test_rated_together_keeps_the_store_user_and_items_of_two_raters() -> None:
    data = [Rating("s1", "trace-a", "execution.span_error", "primary", "yes"),
            Rating("s2", "trace-a", "execution.span_error", "primary", "no"),
            Rating("s1", "trace-a", "execution.delivered", "primary", "yes")]
    labels = [Rating("s1", "s1", "execution.span_error", "human:ann", "yes"),
              Rating("s9", "s9", "trail.goal_deviation", "human:ann", "yes")]
    got = rated_together(labels, data)
    assert got == [data[0], Rating("s1", "trace-a", "execution.span_error", "human:ann", "yes")]
    # Two label files clustering one unit differently: the first label's user holds.
    two = [Rating("x", "u1", "q", "human:a", "yes"), Rating("x", "u2", "q", "human:b", "no")]
    assert [r.user for r in rated_together(two, [])] == ["u1", "u1"]


def test_agreement_json_and_table_over_the_cli(tmp_path: Path) -> None:
    f, store = tmp_path / "l.csv", tmp_path / "s.duckdb"
    # Rater b flips units 0 and 1: 18 of 20 agree, both raters 10 yes / 10 no: kappa = (0.9 - 0.5) / 0.5 = 0.8.
    rows = [f"u{i},q.item,{r},{'yes' if (i % 2 == 1) != (r == 'b' and i < 2) else 'no'},user{i // 2}"
            for i in range(20) for r in ("a", "b")]
    f.write_text("unit_id,item,rater,value,user_id\n" + "\n".join(rows) + "\n")
    runner = CliRunner()
    res = runner.invoke(app, ["labels", "import", str(f), "--format", "csv", "--store", str(store), "--json"])
    assert res.exit_code == 0, res.output
    done = json.loads(res.stdout)
    assert done["labels"] == 40 and [m["label"] for m in done["unmapped"]] == ["q.item"]  # not a suite item
    res = runner.invoke(app, ["agreement", "--store", str(store), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert set(doc) == {"overall", "items"}
    assert set(doc["overall"]) == {"krippendorff_alpha", "fleiss_kappa", "units", "labels", "raters"}
    (item,) = doc["items"]
    assert (item["item"], item["n"], item["raters"]) == ("q.item", 20, ["human:a", "human:b"])
    assert item["kappa"] == pytest.approx(0.8) and item["kappa_method"] == "cohen"
    res = runner.invoke(app, ["agreement", "--store", str(store)], env={"COLUMNS": "100"})
    assert res.exit_code == 0 and "q.item" in res.stdout and "every item: Krippendorff's alpha" in res.stdout


def test_agreement_without_a_store_is_one_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["agreement", "--store", str(tmp_path / "none.duckdb")])
    assert res.exit_code == EXIT_USER_ERROR and "no store here yet" in res.output
