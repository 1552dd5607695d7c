"""`run --json` item counters are true counts: each datum of a run is collected, reused or uncollected exactly
once, kept counts the stored data the run did not revisit, and the four add up to the store.

The expected numbers come from the stored rows, not from the report: a row of this run is reused when the
cache held its key before the run (a key some earlier run stored, unless a rerun could fix it), collected
when it has a value and a new key (rule data carry none: they are recomputed, never cached), uncollected when it
has no value. A cross-family jury that always splits
puts uncollected data in the cache, which a warm rerun finds again (they once counted as reused and as
uncollected, so `collected` went negative).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from agent_factory.evaluators.collect.reasons import is_transient
from agent_factory.factory.simulate import SimConfig, simulate
from agent_factory.factory.store import Store
from tests.factory.test_incremental import NEW_LINE, OLD_LINE, SPEC, _build, _cli
from tests.fakes.openai_server import FakeOpenAIServer, schema_responder

# Two jurors of different families on the fake server; the schema responder's confidence (0) sends every
# small-model answer to them.
JURY = "openai/fake-llama,openai/fake-qwen"


def _dissent(value: Any) -> Any:
    """The answer with every "yes" turned into "no"."""
    if isinstance(value, dict):
        return {k: "no" if k == "value" and v == "yes" else _dissent(v) for k, v in value.items()}
    return value


def _splitting_jury(body: dict[str, Any]) -> Any:
    answer = schema_responder(body)
    return _dissent(answer) if "qwen" in str(body.get("model", "")) else answer


def _rows(store: Path) -> list[tuple[str, str | None, str, str | None]]:
    with Store(store, read_only=True) as st:
        return st.con.execute("SELECT run_id, key, value, reason FROM atomic_data").fetchall()


def _cacheable(rows: list[tuple[str, str | None, str, str | None]]) -> set[str]:
    """Keys the cascade caches: every keyed datum but the uncollected ones a rerun could collect."""
    return {k for _, k, v, why in rows if k and not (v == "uncollected" and is_transient(why))}


def _recomputed(rows: list[tuple[str, str | None, str, str | None]], run_id: str) -> int:
    """Rule data of run `run_id` with a value: keyless, so collected afresh by every run that visits them."""
    return sum(1 for r, k, v, _ in rows if r == run_id and not k and v != "uncollected")


def _expected(rows: list[tuple[str, str | None, str, str | None]], run_id: str, cached: set[str]) -> dict[str, int]:
    mine = [(k, v) for r, k, v, _ in rows if r == run_id]
    keyed = [k for k, _ in mine if k]
    assert len(keyed) == len(set(keyed))  # no two units share a key: reuse within a run cannot blur the counts
    return {
        "collected": sum(1 for k, v in mine if v != "uncollected" and k not in cached),
        "reused": sum(1 for k, v in mine if v != "uncollected" and k in cached),
        "kept": len(rows) - len(mine),
        "uncollected": sum(1 for _, v in mine if v == "uncollected"),
    }


def _check(report: dict, rows: list[tuple[str, str | None, str, str | None]], cached: set[str]) -> dict[str, int]:
    items = report["items"]
    assert items == _expected(rows, report["run_id"], cached)
    assert all(n >= 0 for n in items.values())
    assert sum(items.values()) == len(rows)
    assert sum(report["uncollected_reasons"].values()) == items["uncollected"]
    return items


def test_item_counts_on_cold_warm_and_partial_reruns(model_env: Path, fake_openai: FakeOpenAIServer,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_FACTORY_JURY", JURY)
    fake_openai.responder = _splitting_jury
    simulate(SimConfig(users=8, seed=5), model_env / "sim")
    store = model_env / "store.duckdb"
    _cli("ingest", str(model_env / "sim"), "--store", str(store), "--pack", "business_analysis")
    spec, suite = model_env / "spec.md", model_env / "suite"
    shutil.copy(SPEC, spec)
    _build(spec, suite)
    run = ("run", "--store", str(store), "--suite", str(suite))

    # Cold: everything is decided now; the split jury leaves items uncollected (and cached).
    cold = _cli(*run)
    cold_rows = _rows(store)
    items = _check(cold, cold_rows, cached=set())
    assert items["collected"] > 0 and items["reused"] == 0 and items["kept"] == 0
    assert cold["uncollected_reasons"].get("jury split", 0) == items["uncollected"] > 0
    cached = _cacheable(cold_rows)

    # Warm: every model answer comes back from the cache, nothing is asked; rules are recomputed.
    warm = _cli(*run, "--full")
    assert warm["model_calls"] == 0
    rules = _recomputed(cold_rows, cold["run_id"])
    assert 0 < rules <= items["collected"]  # (the split jury leaves every model item uncollected)
    assert _check(warm, _rows(store), cached) == {
        "collected": rules, "reused": items["collected"] - rules, "kept": 0, "uncollected": items["uncollected"]}
    assert warm["uncollected_reasons"] == cold["uncollected_reasons"]

    # Nothing changed: nothing is revisited, every stored datum is kept.
    same = _cli(*run)
    assert same["items"] == {"collected": 0, "reused": 0, "kept": len(cold_rows), "uncollected": 0}

    # Partial change: one clause edited (its items are new), then put back (its items are in the cache).
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace(OLD_LINE, NEW_LINE), encoding="utf-8")
    _build(spec, suite)
    edited = _cli(*run)
    edited_rows = _rows(store)
    changed = _check(edited, edited_rows, cached)
    assert changed["reused"] == 0 and changed["collected"] + changed["uncollected"] > 0
    assert 0 < changed["kept"] < len(cold_rows)
    cached |= _cacheable(edited_rows)

    spec.write_text(text, encoding="utf-8")
    _build(spec, suite)
    reverted = _cli(*run)
    assert reverted["model_calls"] == 0
    back_rows = _rows(store)
    back = _check(reverted, back_rows, cached)
    assert back["collected"] == _recomputed(back_rows, reverted["run_id"])  # no model item asked afresh
    assert back["uncollected"] > 0
    assert back["kept"] == changed["kept"]  # the clauses left alone, untouched both times
    assert _rows(store) and sorted((r[1:] for r in _rows(store)), key=repr) == sorted((r[1:] for r in cold_rows), key=repr)


def test_a_collector_shared_by_runs_counts_each_run_apart(no_model: Path) -> None:
    from agent_factory.evaluators.collect import Cascade, DatumCache, load_model_config
    from agent_factory.factory.pipeline.engine import Runner
    from agent_factory.factory.store.inputs import read_run_inputs
    from agent_factory.factory.suite.read import load_suite

    simulate(SimConfig(users=6, seed=7), no_model / "sim")
    store = no_model / "store.duckdb"
    _cli("ingest", str(no_model / "sim"), "--store", str(store), "--pack", "business_analysis")
    with Store(store) as st, DatumCache(no_model / "cache") as cache:
        suite = load_suite(None, pack=None, store=st)
        cascade = Cascade(load_model_config(None), cache=cache)
        reports = [Runner(st, pack=suite.pack, collector=cascade, specs=suite.components, inputs=read_run_inputs(st),
                          full=True).run()
                   for _ in range(3)]
    cold, *warm = (r.items for r in reports)
    assert cold["collected"] > 0 and cold["reused"] == 0 and cold["uncollected"] > 0  # no model configured
    for items in warm:  # the cascade's totals grow run after run; each report counts its own run (rules afresh)
        assert items == {"collected": cold["collected"], "reused": 0, "kept": 0, "uncollected": cold["uncollected"]}
