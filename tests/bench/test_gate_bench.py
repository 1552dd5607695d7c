"""`bench/gate_bench.py` on a small simulated store run with a built suite: the gate's vectorized test takes the
same decisions as statsmodels' cluster-robust WLS on every sampled (split, metric) pair, with the same delta and se,
and the figures the note reads are there."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import REPO


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gate_bench", REPO / "bench" / "gate_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gate_bench"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    bench = _load()
    store, suite = bench.prepare(30, tmp_path_factory.mktemp("gate-bench"))
    result: dict[str, Any] = bench.bench(store, suite, splits=1000, sample=12, seed=3)
    return result


def test_the_bench_takes_the_same_decisions_as_statsmodels(out: dict[str, Any]) -> None:
    assert out["users"] == 30 and out["splits"] == 1000 and len(out["measures"]) >= 2
    assert out["pairs"] == out["sampled_splits"] * len(out["measures"]) and out["sampled_splits"] >= 12
    assert out["same_decisions"] == out["pairs"]
    assert out["statsmodels_fits"] > 0 and out["alarms_in_sample"] > 0  # the splits near a threshold were sampled
    assert out["max_abs_delta_diff"] <= 1e-10 and out["max_rel_se_diff"] <= 1e-10


def test_the_bench_reports_its_times_and_the_calibration(out: dict[str, Any]) -> None:
    assert out["fast_seconds"] > 0 and out["statsmodels_seconds"] > 0
    assert out["ratio"] == pytest.approx(out["statsmodels_us_per_split_metric"] / out["fast_us_per_split_metric"])
    assert set(out["aa"]["per_metric"]) == set(out["measures"]) and out["aa"]["splits"] == 1000
    assert 0.0 <= out["aa"]["family_false_alarm_heldout"] <= 1.0
