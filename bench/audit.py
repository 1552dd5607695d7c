"""Audit benchmark: what `agent-factory audit` costs against the rules-only `run` of the same store.

On a simulated store (`--users`, default 200) ingested once, three fresh child processes, each timed from the
call (the project, its store, suite and cache opened before the clock, as `run_bench.py` does):

- `run`: the rules-only run of the store (empty cache): the floor every ratio divides by, measured in the same
  bench run on the same machine;
- `audit`: the audit of that store with one rater (`openai/fake-audit`, family `beta`) over real HTTP to the
  local fake OpenAI-compatible server (`tests/fakes/openai_server.py`, started here, outside the measured child,
  so the child's peak memory is the audit's own), its answers uncached: a stratified sample re-collected,
  agreement, rules against the model, reliability, validity, corrected rates, retirements;
- `same`: the same audit again, nothing changed: every answer comes from the cache (0 model calls).

Each prints wall seconds, the steps' seconds (`on_step`), peak RSS (VmHWM: `common.peak_rss_mb`), model calls as
the audit counts them and as the server counted them, and `x run`, the ratio to the floor. The last line is one
JSON document of every phase.

Usage:  .venv/bin/python bench/audit.py [--users 200] [--sample 200] [--seed 0] [--workdir bench/out]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from common import child_json  # noqa: E402

KEY_ENV = "AGENT_FACTORY_BENCH_KEY"
"""The variable the rater's key is read from: a placeholder (the fake server checks none)."""
RATER_MODEL = "openai/fake-audit"
RATER_FAMILY = "beta"
"""The rater's family: the store's primary data are rules (no family), so any family is admitted."""

RUN_CHILD = r"""
import json, sys, time
from bench.common import peak_rss_mb
from pathlib import Path
from agent_factory.evaluators.collect import ModelConfig
from agent_factory.factory.project import open_project
import agent_factory.factory.pipeline.engine  # noqa: F401  (imported before the clock: the run's figure)
store, cache = Path(sys.argv[1]), Path(sys.argv[2])
with open_project(store=store, pack="business_analysis", config=ModelConfig(), cache=cache) as project:
    project.store(write=True)
    project.suite
    project.cache
    t0 = time.perf_counter()
    rep = project.run()
    dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "units": rep.units, "model_calls": rep.model_calls, "peak_rss_mb": peak_rss_mb()}))
"""

AUDIT_CHILD = r"""
import json, sys, time
from bench.common import peak_rss_mb
from pathlib import Path
from agent_factory.evaluators.collect import ModelConfig, ModelSpec
from agent_factory.factory.project import open_project
import agent_factory.factory.loops.audit.run  # noqa: F401  (imported before the clock: the audit's figure)
store, cache, base, key, model, family = Path(sys.argv[1]), Path(sys.argv[2]), *sys.argv[3:7]
sample, seed = int(sys.argv[7]), int(sys.argv[8])
rater = ModelSpec(model=model, api_base=base, api_key_env=key, family=family, timeout_s=30.0)
steps = {}
with open_project(store=store, pack="business_analysis", config=ModelConfig(audit=(rater,)), cache=cache) as project:
    project.store(write=True)
    project.suite
    project.cache
    t0 = time.perf_counter()
    last = ["start", t0]
    def step(name):
        now = time.perf_counter()
        steps[last[0]] = steps.get(last[0], 0.0) + now - last[1]
        last[:] = [name, now]
    rep = project.audit(sample=sample, seed=seed, on_step=step)
    dt = time.perf_counter() - t0
    steps[last[0]] = steps.get(last[0], 0.0) + time.perf_counter() - last[1]
print(json.dumps({"seconds": dt, "steps": {k: round(v, 3) for k, v in steps.items()}, "model_calls": rep.model_calls,
                  "items": len(rep.items), "sampled": rep.sample.size if rep.sample is not None else 0,
                  "retired": len(rep.retired), "criterion": len(rep.criterion), "peak_rss_mb": peak_rss_mb()}))
"""


def _remove(*paths: Path) -> None:
    for p in paths:
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


def prepare(users: int, workdir: Path, *, seed: int = 1) -> Path:
    """The simulated traffic of `users` users ingested into a store (made once per size, reused after): the
    store each bench run copies."""
    from agent_factory.factory.project import open_project
    from agent_factory.factory.simulate import SimConfig, simulate

    workdir.mkdir(parents=True, exist_ok=True)
    sim = workdir / f"audit-sim-{users}"
    base = workdir / f"audit-ingested-{users}.duckdb"
    if not base.exists():
        _remove(sim, base.with_name(base.name + ".wal"))
        simulate(SimConfig(users=users, seed=seed), sim)
        partial = base.with_name(base.name + ".partial")
        _remove(partial, partial.with_name(partial.name + ".wal"))
        with open_project(store=partial, pack="business_analysis") as project:
            project.ingest([sim / "traces.otlp.jsonl"])
        partial.rename(base)  # only a finished ingest is reused
    return base


def bench(users: int, workdir: Path, *, sample: int = 200, seed: int = 0) -> dict[str, Any]:
    """The three phases (module docstring) on `users` simulated users; one dict per phase under `phases`."""
    sys.path.insert(0, str(ROOT))
    from tests.evaluators.test_collect_support import hashed_answers
    from tests.fakes.openai_server import FakeOpenAIServer

    base = prepare(users, workdir)
    store, run_cache, audit_cache = (workdir / f"audit-store-{users}.duckdb", workdir / f"audit-run-cache-{users}",
                                     workdir / f"audit-cache-{users}")
    # A killed bench's write-ahead log would not match the store copied over it (DuckDB refuses to open it).
    _remove(store, store.with_name(store.name + ".wal"), run_cache, audit_cache)
    shutil.copyfile(base, store)
    os.environ.setdefault(KEY_ENV, "bench-key-not-secret")
    phases: dict[str, dict[str, Any]] = {"run": child_json(RUN_CHILD, str(store), str(run_cache))}
    floor = phases["run"]["seconds"]
    # Answers differ by model, item and prompt: the rater disagrees with the rules on some units, as a real one.
    with FakeOpenAIServer(responder=hashed_answers) as server:
        for phase in ("audit", "same"):
            server.reset()
            r = child_json(AUDIT_CHILD, str(store), str(audit_cache), server.base_url, KEY_ENV, RATER_MODEL,
                           RATER_FAMILY, str(sample), str(seed))
            r.update(server_calls=server.calls, run_ratio=r["seconds"] / floor if floor else None)
            phases[phase] = r
    # The machine's load beside the figures: on a shared machine it moves them by a third or more.
    return {"users": users, "turns": phases["run"]["units"].get("trace", 0), "sample": sample, "seed": seed,
            "load_avg_1m": os.getloadavg()[0], "phases": phases}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=200, help="simulated users (default 200)")
    ap.add_argument("--sample", type=int, default=200, help="(unit, component) pairs the audit re-collects")
    ap.add_argument("--seed", type=int, default=0, help="the audit's seed (sample and bootstrap)")
    ap.add_argument("--workdir", type=Path, default=HERE / "out")
    args = ap.parse_args()
    out = bench(args.users, args.workdir, sample=args.sample, seed=args.seed)
    print(f"{'phase':>6} {'sec':>7} {'x run':>6} {'calls':>6} {'server':>7} {'peak RSS MB':>12}  steps")
    for name, r in out["phases"].items():
        ratio = r.get("run_ratio")
        steps = " ".join(f"{k} {v:.2f}" for k, v in r.get("steps", {}).items())
        print(f"{name:>6} {r['seconds']:>7.2f} {ratio if ratio is not None else 1.0:>6.2f} {r['model_calls']:>6} "
              f"{r.get('server_calls', 0):>7} {r['peak_rss_mb']:>12.0f}  {steps}")
    print(f"({out['users']} users, {out['turns']} turns; x run: the audit's seconds over the rules-only run of the "
          "same store, measured in this bench run; calls: as the audit counts them, server: as the fake server "
          "counted them)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
