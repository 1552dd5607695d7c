"""The computations of `bench/validity_tau.py`: its AUCs are scikit-learn's, its precision and recall count what
they say, an undecided flag is left out (never read as "not raised"), the grouped cross-validation never trains
on a task it tests, and the exit rule names a "bad" flag that points the other way and nothing else."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Hashable, Sequence
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest
from sklearn import metrics as sklearn_metrics

from tests.conftest import REPO, shared_data


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("validity_tau", REPO / "bench" / "validity_tau.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["validity_tau"] = module
    spec.loader.exec_module(module)
    return module


vt = _load()


def _convs(failed: Sequence[bool], tasks: Sequence[Hashable], messages: Sequence[float]) -> dict[str, Any]:
    return {f"c{i}": vt.Conversation(task=t, failed=f, messages=m, writes=float(i % 3), flags_total=None)
            for i, (f, t, m) in enumerate(zip(failed, tasks, messages, strict=True))}


# Twelve conversations over six tasks (two trials each), with ties in the score.
FAILED = [True, True, False, True, False, False, True, False, True, True, False, False]
TASKS = [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
MESSAGES = [30.0, 22.0, 14.0, 22.0, 10.0, 30.0, 18.0, 14.0, 26.0, 8.0, 12.0, 22.0]


def test_a_score_auc_is_sklearns_roc_auc() -> None:
    convs = _convs(FAILED, TASKS, MESSAGES)
    row = vt.score_row("messages", "baseline", {c: v.messages for c, v in convs.items()}, convs, boot=200,
                       binary=False)
    assert row["auc"] == pytest.approx(sklearn_metrics.roc_auc_score(FAILED, MESSAGES))
    assert row["n"] == 12 and row["tasks"] == 6 and row["failed"] == 6
    assert row["low"] is not None and row["low"] <= row["auc"] <= row["high"]
    assert row["flagged"] is None and row["p_fail_given_flag"] is None and row["recall"] is None


def test_a_flag_counts_precision_and_recall_on_decided_conversations_only() -> None:
    convs = _convs(FAILED, TASKS, MESSAGES)
    # Raised on c0, c1 (failed) and c2 (succeeded); undecided on c3 (failed) and c4; not raised elsewhere.
    values: dict[str, int | None] = {c: 0 for c in convs}
    values |= {"c0": 1, "c1": 1, "c2": 1, "c3": None, "c4": None}
    row = vt.score_row("f", "bad", values, convs, boot=200, binary=True)
    decided = [c for c in convs if values[c] is not None]
    y = [convs[c].failed for c in decided]
    assert row["n"] == 10 and row["flagged"] == 3 and row["failed"] == sum(y) == 5
    assert row["p_fail_given_flag"] == pytest.approx(2 / 3)  # P(fail | flagged)
    assert row["recall"] == pytest.approx(2 / 5)  # P(flagged | fail), c3 left out, not counted as missed
    assert row["auc"] == pytest.approx(sklearn_metrics.roc_auc_score(y, [values[c] for c in decided]))


def test_grouped_folds_put_each_task_on_one_side_and_test_every_row_once() -> None:
    folds = vt.grouped_folds(TASKS, 5)
    assert len(folds) == 5
    tested: list[int] = []
    for train, test in folds:
        assert not {TASKS[i] for i in train} & {TASKS[i] for i in test}
        assert sorted(train + test) == list(range(len(TASKS)))
        tested += test
    assert sorted(tested) == list(range(len(TASKS)))
    assert len(vt.grouped_folds(TASKS, 50)) == 6  # never more folds than tasks


class RecordingModel:
    """A fake estimator: remembers the rows it was fitted on (column 0 holds the row's task) and scores a row by
    its column 1."""

    fitted: list[set[float]] = []

    def fit(self, x: Any, y: Any) -> RecordingModel:
        RecordingModel.fitted.append({float(v) for v in x[:, 0]})
        self.seen = {float(v) for v in x[:, 0]}
        return self

    def predict_proba(self, x: Any) -> Any:
        assert not {float(v) for v in x[:, 0]} & self.seen, "a model scored a task it was trained on"
        return np.column_stack([1 - x[:, 1] / 100, x[:, 1] / 100])


def test_out_of_fold_scores_never_come_from_a_model_trained_on_the_task() -> None:
    RecordingModel.fitted = []
    x = [[float(t), m] for t, m in zip(TASKS, MESSAGES, strict=True)]
    scores = vt.out_of_fold(x, FAILED, TASKS, k=3, make=RecordingModel)
    assert len(RecordingModel.fitted) == 3
    assert scores == pytest.approx([m / 100 for m in MESSAGES])  # every row scored once, out of its own fold


def test_out_of_fold_with_the_real_model_and_the_combined_rows() -> None:
    convs = _convs(FAILED, TASKS, MESSAGES)
    flag = vt.Flag("bad", "f", {c: int(v.messages is not None and v.messages > 20) for c, v in convs.items()})
    rows = vt.combined_rows(convs, {"x.f": flag}, boot=100, k=3)
    assert [r["name"] for r in rows] == ["combined: logistic on 1 flags", "combined: logistic on messages + writes",
                                         "combined: logistic on flags + messages + writes"]
    ids = sorted(convs)
    oof = vt.out_of_fold([[float(flag.values[c])] for c in ids], [convs[c].failed for c in ids],
                         [convs[c].task for c in ids], k=3)
    assert all(p is not None and 0 < p < 1 for p in oof)
    assert rows[0]["auc"] == pytest.approx(sklearn_metrics.roc_auc_score([convs[c].failed for c in ids], oof))
    assert all("GroupKFold by task (3 folds)" in r["note"] for r in rows)


def test_measure_names_a_bad_flag_that_points_the_other_way_and_nothing_else() -> None:
    tasks = list(range(20))
    failed = [t % 2 == 0 for t in tasks]
    convs = {f"c{t}": vt.Conversation(task=t, failed=f, messages=float(t), writes=0.0, flags_total=float(not f))
             for t, f in zip(tasks, failed, strict=True)}
    success = {c: int(not v.failed) for c, v in convs.items()}
    flags = {"a.bad_on_success": vt.Flag("bad", "raised on every success", success),
             "a.handed_off": vt.Flag("descriptive", "also on every success", dict(success)),
             "a.quiet": vt.Flag("bad", "never raised", dict.fromkeys(convs, 0)),
             "a.model": vt.Flag("bad", "never decided", dict.fromkeys(convs))}
    result = vt.measure(convs, flags, boot=300, k=5)
    assert result["points_other_way"] == ["flags_total", "any bad flag (flags_total > 0)", "a.bad_on_success"]
    assert result["never_fired"] == ["a.quiet"] and result["not_collected"] == ["a.model"]
    assert [r["name"] for r in result["flags"]] == ["a.bad_on_success", "a.handed_off"]
    assert result["conversations"] == 20 and result["failed"] == 10 and result["tasks"] == 20
    json.dumps(result)  # the --json output: plain values only
    assert all(len(line) <= 120 for line in vt.table(result))


def test_write_tools_read_the_pack_declaration_else_the_confirmation_clause() -> None:
    clause = SimpleNamespace(id=vt.CONFIRM_CLAUSE, trigger=SimpleNamespace(tool_names=("cancel", "book")))
    declared = SimpleNamespace(tools=SimpleNamespace(write=("refund",)), clauses=(clause,))
    assert vt.write_tools(declared) == (frozenset({"refund"}), "pack tools.write")
    undeclared = SimpleNamespace(tools=SimpleNamespace(write=()), clauses=(clause,))
    assert vt.write_tools(undeclared) == (frozenset({"cancel", "book"}), "confirm_before_write trigger")
    assert vt.write_tools(SimpleNamespace(tools=SimpleNamespace(write=()), clauses=())) == (frozenset(),
                                                                                           "none declared")


@pytest.mark.realdata
def test_the_messages_baseline_on_real_records_is_sklearns() -> None:
    path = shared_data("tau-bench-airline-gpt4o", "gpt-4o-airline.json")
    records = json.loads(Path(path).read_text(encoding="utf-8"))[:40]
    convs = {f"tau-{r['task_id']}-{r['trial']}": vt.Conversation(
        task=r["task_id"], failed=r["reward"] < 1, messages=float(len(r["traj"])), writes=None, flags_total=None)
        for r in records}
    row = vt.score_row("messages", "baseline", {c: v.messages for c, v in convs.items()}, convs, boot=200,
                       binary=False)
    y = [v.failed for v in convs.values()]
    assert 0 < sum(y) < len(y)
    assert row["auc"] == pytest.approx(sklearn_metrics.roc_auc_score(y, [v.messages for v in convs.values()]))
    assert row["tasks"] == len({r["task_id"] for r in records})
