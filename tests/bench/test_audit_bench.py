"""`bench/audit.py` on a tiny store: its phases and figures have the shape the report reads (a rules-only run as
the floor, an audit that asked the fake server, an unchanged audit that asked nothing); and the speed-ups it
measured change no result: the bootstrap of a flag's AUC drawn in blocks is the one drawn resample by resample,
and labels written as one Arrow table replace what they replace."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Hashable, Sequence
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from agent_factory.evaluators.audit import validity as v
from agent_factory.evaluators.audit.model import Rating
from agent_factory.evaluators.stats import cluster_auc
from agent_factory.factory.store import Store
from agent_factory.factory.store.audit import read_labels, write_labels
from tests.conftest import REPO


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("audit_bench", REPO / "bench" / "audit.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["audit_bench"] = module
    spec.loader.exec_module(module)
    return module


def test_the_bench_measures_a_run_an_audit_and_an_unchanged_audit(tmp_path: Path) -> None:
    out = _load().bench(3, tmp_path, sample=12, seed=0)
    assert out["users"] == 3 and out["turns"] > 0 and out["sample"] == 12
    run, audit, same = (out["phases"][p] for p in ("run", "audit", "same"))
    assert run["model_calls"] == 0 and run["seconds"] > 0 and run["units"]["trace"] == out["turns"]
    # The audit asked the rater over HTTP, each call counted by the audit and at the server alike.
    assert audit["model_calls"] == audit["server_calls"] > 0
    assert audit["sampled"] > 0 and audit["items"] > 0
    # An unchanged audit reads every answer from the cache.
    assert same["model_calls"] == same["server_calls"] == 0 and same["sampled"] == audit["sampled"]
    for r in (audit, same):
        assert r["run_ratio"] == pytest.approx(r["seconds"] / run["seconds"])
        assert {"sample", "re-collect", "agreement", "validity", "corrected", "corrections"} <= set(r["steps"])
        assert sum(r["steps"].values()) == pytest.approx(r["seconds"], abs=0.01)
    assert all(out["phases"][p]["peak_rss_mb"] > 0 for p in out["phases"])


def _sequential(flags: Sequence[float], bad: Sequence[bool], clusters: Sequence[Hashable], n_boot: int,
                seed: int) -> list[float]:
    """The resampled AUCs as `flag_auc` drew them before: one `integers` call and one sum per resample."""
    keys = {c: i for i, c in enumerate(dict.fromkeys(clusters))}
    g = len(keys)
    cid = np.asarray([keys[c] for c in clusters])
    f, y = np.asarray(flags) > 0, np.asarray(bad, dtype=bool)
    counts = np.stack([np.bincount(cid, weights=(f & y).astype(float), minlength=g),
                       np.bincount(cid, weights=y.astype(float), minlength=g),
                       np.bincount(cid, weights=(f & ~y).astype(float), minlength=g),
                       np.bincount(cid, weights=(~y).astype(float), minlength=g)], axis=1)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_boot):
        tp, b, fp, gd = (float(x) for x in np.bincount(rng.integers(0, g, size=g), minlength=g) @ counts)
        if b and gd:
            out.append((tp * (gd - fp) + 0.5 * (tp * fp + (b - tp) * (gd - fp))) / (b * gd))
    return out


@pytest.mark.parametrize(("units", "groups", "cells"), [(40, 7, 2_000_000), (301, 151, 1000), (900, 333, 333)])
def test_the_flag_auc_resamples_drawn_in_blocks_are_the_ones_drawn_one_by_one(
    units: int, groups: int, cells: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(v, "_BOOT_CELLS", cells)  # blocks of a few resamples, or of one
    rng = np.random.default_rng(units)
    clusters = [f"u{k}" for k in rng.integers(0, groups, size=units)]
    flags = (rng.random(units) < 0.3).astype(float).tolist()
    bad = (rng.random(units) < 0.2).tolist()
    reference = _sequential(flags, bad, clusters, 500, 11)
    fast = v.flag_auc(flags, bad, clusters, n_boot=500, seed=11)
    assert fast.note == f"cluster bootstrap over {len(set(clusters))} clusters, {len(reference)} resamples"
    tail = (1.0 - 0.95) / 2.0  # as `flag_auc` computes it (0.025000000000000022)
    low, high = np.quantile(np.asarray(reference), [tail, 1.0 - tail])
    assert (fast.low, fast.high) == (float(low), float(high))  # the same floats, not approximately


def test_labels_written_as_one_table_replace_those_of_the_same_unit_item_and_rater(tmp_path: Path) -> None:
    st = Store(tmp_path / "s.duckdb")
    first = [Rating(f"u{i}", f"p{i % 3}", item, rater, "yes")
             for i in range(5) for item in ("a.x", "a.y") for rater in ("human:ann", "human:bob")]
    assert write_labels(st, first, source="one.csv") == 20
    again = [Rating("u0", "p0", "a.x", "human:ann", "no"), Rating("u9", "p9", "a.x", "human:ann", "not_applicable")]
    assert write_labels(st, again, source="two.csv") == 2 and write_labels(st, [], source="none") == 0
    stored = {(r.unit_id, r.item, r.rater): (r.user, r.value) for r in read_labels(st)}
    assert len(stored) == len(read_labels(st)) == 21
    assert stored[("u0", "a.x", "human:ann")] == ("p0", "no") and stored[("u9", "a.x", "human:ann")] == ("p9", "not_applicable")
    assert stored[("u0", "a.x", "human:bob")] == ("p0", "yes") and stored[("u0", "a.y", "human:ann")] == ("p0", "yes")
    sources = dict(st.con.execute("SELECT source, count(*) FROM labels GROUP BY 1").fetchall())
    assert sources == {"one.csv": 19, "two.csv": 2}
    assert st.con.execute("SELECT count(DISTINCT imported_at) FROM labels WHERE source = 'one.csv'").fetchone() == (1,)


@pytest.mark.parametrize("cells", [2_000_000, 700, 1])
def test_the_score_auc_is_cluster_auc_to_the_last_bit(cells: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(v, "_BOOT_CELLS", cells)
    rng = np.random.default_rng(cells)
    for units, groups, scores in ((60, 12, rng.random(60)),  # every score distinct
                                  (200, 40, rng.integers(0, 4, size=200) * 0.25),  # many ties
                                  (90, 90, -np.round(rng.normal(size=90), 1))):  # one unit per cluster
        clusters = [f"u{k}" for k in rng.integers(0, groups, size=units)]
        bad = (rng.random(units) < 0.35).tolist()
        fast = v.score_auc(scores.tolist(), bad, clusters, n_boot=300, seed=5)
        assert fast == cluster_auc(scores.tolist(), bad, clusters, n_boot=300, seed=5) and fast.low is not None
    for scores_, bad_, clusters_ in (([0.1, 0.2], [True, True], ["a", "b"]),  # one class empty
                                     ([0.1, 0.2, 0.2], [True, False, True], ["a", "a", "a"]),  # one cluster
                                     ([0.1, float("nan"), 0.3, 0.2], [True, False, True, False], ["a", "b", "c", "d"]),
                                     ([], [], [])):
        # repr: a NaN score gives a NaN AUC, equal to itself only in print
        assert repr(v.score_auc(scores_, bad_, clusters_, n_boot=40)) == repr(cluster_auc(scores_, bad_, clusters_, n_boot=40, seed=v.SEED))
