"""Rules-only evaluation benchmark: turns/s, peak RSS and the ratio to only parsing the input JSON, at 1x and
10x the default simulation; a cold run (empty cache), a rerun after deleting the cache (rule data live in the
store: nothing is recollected), a full rerun (`full=True`: every unit walked again, every rule recomputed), and
a rerun with nothing changed (the pipeline recomputes nothing). The sizes of the cache (model answers only: none
here) and of the store are printed after the cold run.

Usage:  .venv/bin/python bench/run_bench.py [--sizes 1x,10x] [--workdir bench/out] [--workers auto|N]

Each run is a fresh child process so its peak RSS (VmHWM: `common.peak_rss_mb`) is its own; "tree MB" is the
peak of the summed PSS of the run and its workers (`common.TreeMemory`), the memory they take together. No model
is configured, so model-tier items are recorded uncollected (the figure measures rules, cache and analyses).
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

CHILD = r"""
import json, resource, sys, time
start = time.perf_counter()
# the child runs in the repository's root
from bench.common import TreeMemory, parse_seconds, peak_rss_mb, store_seconds
tree = TreeMemory()
from pathlib import Path
from agent_factory.evaluators.collect import ModelConfig
from agent_factory.factory.project import open_project
# Imported before the clock (the project imports lazily): the figure is the run's, not its imports'.
import agent_factory.factory.pipeline.engine  # noqa: F401
store, cache, full, src = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "full", Path(sys.argv[4])
workers = int(sys.argv[5]) if sys.argv[5] != "auto" else None
with open_project(store=store, pack="business_analysis", config=ModelConfig(), cache=cache) as project:
    # The store, the suite and the cache are opened before the clock starts, as they were before the project.
    project.store(write=True)
    project.suite
    project.cache
    t0 = time.perf_counter()
    rep = project.run(full=full, workers=workers)
    dt = time.perf_counter() - t0
process = time.perf_counter() - start
tree_mb = tree.stop()
parse = parse_seconds(src)
peak = peak_rss_mb()  # before the store floor reads the tables back
# The floor of a run that wrote every datum (cold, full); a rerun that wrote nothing has none.
store_dt = store_seconds(store, ("atomic_data", "units", "results")) if rep.units else None
print(json.dumps({"seconds": dt, "process_seconds": process, "parse_only_seconds": parse,
                  "store_only_seconds": store_dt, "units": rep.units,
                  "trigger": rep.plan.trigger, "items": rep.items,
                  "model_calls": rep.model_calls,
                  "peak_rss_mb": peak, "tree_peak_mb": tree_mb,
                  "worker_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def child(store: Path, cache: Path, *, full: bool, src: Path, workers: str = "auto") -> dict:
    """One run in a fresh process; its seconds, and those of parsing `src` (plain json.loads per line) after it
    in the same process."""
    return child_json(CHILD, str(store), str(cache), "full" if full else "incremental", str(src), workers)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1x,10x")
    ap.add_argument("--workdir", type=Path, default=HERE / "out")
    ap.add_argument("--reuse-ingest", action="store_true",
                    help="copy the store bench/ingest_bench.py left for a size (store-<size>.duckdb) instead of "
                         "ingesting the simulation again")
    ap.add_argument("--workers", default="auto", help="processes that collect (auto: the run's default)")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    from agent_factory.factory.project import open_project
    from agent_factory.factory.simulate import SimConfig, simulate

    rows = []
    for size in args.sizes.split(","):
        if size not in ("1x", "10x"):
            raise SystemExit(f"unknown size {size!r}; valid: 1x, 10x")
        sim = args.workdir / f"sim-{size}"
        if not (sim / "traces.otlp.jsonl").exists():
            simulate(SimConfig(users=1136 * (10 if size == "10x" else 1), seed=1), sim)
        store = args.workdir / f"run-store-{size}.duckdb"
        cache = args.workdir / f"run-cache-{size}"
        # A killed bench's write-ahead log would not match the store copied over it (DuckDB refuses to open it).
        for p in (store, cache, store.with_name(store.name + ".wal")):
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
        ingested = args.workdir / f"store-{size}.duckdb"
        if args.reuse_ingest and ingested.exists():
            shutil.copyfile(ingested, store)
        else:
            with open_project(store=store, pack="business_analysis") as project:
                project.ingest([sim / "traces.otlp.jsonl"])
        for phase in ("cold", "nocache", "full", "same"):
            if phase == "nocache":
                shutil.rmtree(cache)
            r = child(store, cache, full=phase == "full", src=sim / "traces.otlp.jsonl", workers=args.workers)
            turns = r["units"].get("trace", 0)
            r.update(size=size, phase=phase, turns=turns, turns_per_s=turns / r["seconds"] if turns else 0.0,
                     parse_ratio=r["seconds"] / r["parse_only_seconds"],
                     store_ratio=r["seconds"] / r["store_only_seconds"] if r["store_only_seconds"] else None,
                     cache_mb=_size(cache) / 2**20, store_mb=_size(store) / 2**20)
            rows.append(r)
            print(json.dumps(r), flush=True)
    print()
    print(f"{'size':>5} {'phase':>7} {'turns':>8} {'units':>8} {'sec':>7} {'turns/s':>8} {'x parse':>8} "
          f"{'x store':>8} {'collected':>10} {'reused':>9} {'kept':>9} {'calls':>6} {'peak RSS MB':>12} "
          f"{'worker MB':>10} {'tree MB':>8} {'cache MB':>9} {'store MB':>9}")
    for r in rows:
        print(f"{r['size']:>5} {r['phase']:>7} {r['turns']:>8,} {sum(r['units'].values()):>8,} {r['seconds']:>7.1f} "
              f"{r['turns_per_s']:>8,.0f} {r['parse_ratio']:>8.1f} "
              f"{r['store_ratio'] if r['store_ratio'] is not None else float('nan'):>8.1f} "
              f"{r['items']['collected']:>10,} "
              f"{r['items']['reused']:>9,} {r['items']['kept']:>9,} {r['model_calls']:>6} {r['peak_rss_mb']:>12.0f} "
              f"{r['worker_peak_rss_mb']:>10.0f} {r['tree_peak_mb']:>8.0f} {r['cache_mb']:>9.2f} {r['store_mb']:>9.1f}")
    print("(peak RSS: the running process; worker MB: the largest worker's peak, 0 without workers; each worker is "
          "a fork, so pages it shares with the running process count in both; tree MB: the process and its workers "
          "together, each shared page once, sampled every 0.5 s)")
    print("(x parse: to json.loads of every line of the input; x store: to DuckDB alone appending the atomic data, "
          "units and results the run wrote, from Arrow, to an empty store (`common.store_seconds`), for the runs "
          "that wrote them; both timed in the running child, after it)")


def _size(path: Path) -> int:
    """Bytes on disk of a file or a directory (0 if absent)."""
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size if path.exists() else 0


if __name__ == "__main__":
    main()
