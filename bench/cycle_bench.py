"""The build -> run -> edit one clause -> rerun cycle on the tau-bench airline trajectories, rules only.

Usage:  .venv/bin/python bench/cycle_bench.py [--workdir bench/out/cycle]

Needs ../shared/data (tau-bench-policies/airline-policy.md and tau-bench-airline-gpt4o/gpt-4o-airline.json);
exits with a message when they are absent. Steps, each timed in a fresh child process (peak RSS its own):

1. build the suite from the real policy (pack `airline`), approve it, ingest the 128 trajectories;
2. first run (empty cache);
3. rerun with nothing changed;
4. edit one sentence of the policy (at most five passengers -> at most four), rebuild, approve;
5. incremental run (only the edited clause's items);
6. for comparison, a full run of the edited suite from an empty cache (`full=True`).

Prints one table: items collected / reused from the cache / kept in the store / uncollected, model calls,
definitions recollected, analyses rerun, seconds, peak RSS.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from common import child_json  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
POLICY = DATA / "tau-bench-policies" / "airline-policy.md"
TRACES = DATA / "tau-bench-airline-gpt4o" / "gpt-4o-airline.json"
OLD = "Each reservation can have at most five passengers."
NEW = "Each reservation can have at most four passengers."

BUILD = r"""
import json, sys, time
from bench.common import peak_rss_mb  # the child runs in the repository's root
from pathlib import Path
from agent_factory.factory.suite.write import build_suite
from agent_factory.factory.suite.review import approve_suite
spec, suite = Path(sys.argv[1]), Path(sys.argv[2])
t0 = time.perf_counter()
rep = build_suite(spec, pack="airline", out=suite)
approve_suite(suite, by="bench")
print(json.dumps({"seconds": time.perf_counter() - t0, "clauses": len(rep.clauses), "uncompiled": len(rep.uncompiled),
                  "peak_rss_mb": peak_rss_mb()}))
"""

INGEST = r"""
import json, sys, time
from bench.common import peak_rss_mb  # the child runs in the repository's root
from pathlib import Path
from agent_factory.factory.project import open_project
# What the step uses is imported before the clock (the project imports lazily): the figure is the step's own.
import agent_factory.factory.ingest.files, agent_factory.factory.suite.read  # noqa: E401
traces, store, suite = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
t0 = time.perf_counter()
with open_project(store=store, suite=suite) as project:
    rep = project.ingest([traces])
print(json.dumps({"seconds": time.perf_counter() - t0, "read": rep.read, "accepted": rep.accepted,
                  "quarantined": rep.quarantined,
                  "peak_rss_mb": peak_rss_mb()}))
"""

RUN = r"""
import json, sys, time
from bench.common import peak_rss_mb  # the child runs in the repository's root
from pathlib import Path
from agent_factory.evaluators.collect import ModelConfig
from agent_factory.factory.project import open_project
# What the step uses is imported before the clock (the project imports lazily): the figure is the step's own.
import agent_factory.factory.pipeline.engine, agent_factory.factory.suite.read  # noqa: E401
store, cache, suite, full = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] == "full"
t0 = time.perf_counter()
with open_project(store=store, suite=suite, config=ModelConfig(), cache=cache) as project:
    rep = project.run(full=full)
print(json.dumps({"seconds": time.perf_counter() - t0, "trigger": rep.plan.trigger, "items": rep.items,
                  "model_calls": rep.model_calls, "definitions": rep.plan.definitions_recollected,
                  "definitions_total": rep.plan.definitions_total, "analyses": rep.plan.analyses_rerun,
                  "analyses_total": rep.plan.analyses_total, "results": rep.results, "units": rep.units,
                  "peak_rss_mb": peak_rss_mb()}))
"""


def _row(name: str, r: dict) -> str:
    i = r["items"]
    return (f"| {name} | {i['collected']:,} | {i['reused']:,} | {i['kept']:,} | {i['uncollected']:,} | "
            f"{r['model_calls']} | {r['definitions']}/{r['definitions_total']} | {r['analyses']}/{r['analyses_total']}"
            f" | {r['results']['added']:,} / {r['results']['unchanged']:,} | {r['seconds']:.2f} | "
            f"{r['peak_rss_mb']:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, default=HERE / "out" / "cycle")
    args = ap.parse_args()
    if not (POLICY.exists() and TRACES.exists()):
        raise SystemExit(f"real data not present ({POLICY}, {TRACES}); nothing to measure")
    work: Path = args.workdir
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spec, suite, store = work / "airline-policy.md", work / "suite", work / "store.duckdb"
    shutil.copy(POLICY, spec)

    built = child_json(BUILD, str(spec), str(suite))
    print(f"build: {built['clauses']} clauses, {built['uncompiled']} uncompiled, {built['seconds']:.2f}s")
    ing = child_json(INGEST, str(TRACES), str(store), str(suite))
    print(f"ingest: read {ing['read']}, accepted {ing['accepted']}, quarantined {ing['quarantined']}, "
          f"{ing['seconds']:.2f}s")
    rows = [("first run (empty cache)", child_json(RUN, str(store), str(work / "cache"), str(suite), "incremental"))]
    rows.append(("rerun, nothing changed", child_json(RUN, str(store), str(work / "cache"), str(suite), "incremental")))
    text = spec.read_text(encoding="utf-8")
    if OLD not in text:
        raise SystemExit(f"{spec}: the sentence to edit is not there: {OLD!r}")
    spec.write_text(text.replace(OLD, NEW), encoding="utf-8")
    edited = child_json(BUILD, str(spec), str(suite))
    print(f"edit: {OLD!r} -> {NEW!r}; rebuilt {edited['clauses']} clauses")
    rows.append(("after the edit: incremental", child_json(RUN, str(store), str(work / "cache"), str(suite),
                                                           "incremental")))
    cold = work / "store-full.duckdb"
    shutil.copy(store, cold)
    rows.append(("after the edit: full, empty cache", child_json(RUN, str(cold), str(work / "cache-full"),
                                                                 str(suite), "full")))
    print("\n| run | collected | reused (cache) | kept (store) | uncollected | model calls | definitions "
          "recollected | analyses rerun | results added / unchanged | seconds | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in rows:
        print(_row(name, r))
    print(json.dumps({name: r for name, r in rows}, default=str))


if __name__ == "__main__":
    main()
