"""Gate benchmark: the gate's vectorized test (`evaluators.gate.stats.split_change`) against statsmodels'
cluster-robust regression, split by split.

On a store run with a suite (given with `--store` and `--suite`, opened read-only; else `--users` simulated users,
a suite built from specs/business_analysis_zh.md by the deterministic compiler and approved, ingested and run once
under `--workdir` and reused after), the baseline's columns of every gated measure (`factory.loops.gate.data`):

- `fast`: `--splits` random halves of the users (`calibrate.half_masks`, seeded) through `split_change` at once
  (the masks made before the clock), the fastest of three passes;
- `statsmodels`: for a sample of those splits (`--sample` drawn at random, plus for each metric the split whose z
  is just above and the one just below its threshold, where a numerical difference could flip a decision),
  `WLS(y/x ~ 1 + b, weights=x).fit(cov_type="cluster", groups=user)` per metric (what the gate's test is: the
  module docstring of `evaluators/gate/stats.py`), its design built per fit as a per-split loop would;
- the thresholds: the A/A calibration of the same store (`calibrate.calibrate`, its own seconds), so a decision is
  z > the metric's calibrated threshold.

It prints the seconds per split per metric of each, their ratio, the largest differences of delta and se, and
"same decisions k/k" over the sampled (split, metric) pairs (a pair undefined for the gate, no row or no variance on
a side, is no alarm; statsmodels is not fitted on it). The last line is one JSON document.

Usage:  .venv/bin/python bench/gate_bench.py [--store S --suite D] [--users 300] [--splits 4000] [--sample 50]
        [--seed 0] [--workdir bench/out]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SPEC = ROOT / "specs" / "business_analysis_zh.md"
PACK = "business_analysis"


def prepare(users: int, workdir: Path, *, seed: int = 1) -> tuple[Path, Path]:
    """A store of `users` simulated users run with a built, approved suite (made once per size, reused after):
    (store, suite)."""
    from agent_factory.factory.project import open_project
    from agent_factory.factory.simulate import SimConfig, simulate

    workdir.mkdir(parents=True, exist_ok=True)
    sim, suite = workdir / f"gate-sim-{users}", workdir / f"gate-suite-{users}"
    store = workdir / f"gate-{users}.duckdb"
    if store.exists():
        return store, suite
    partial = store.with_name(store.name + ".partial")
    for p in (sim, suite, partial, partial.with_name(partial.name + ".wal")):
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    simulate(SimConfig(users=users, seed=seed), sim)
    with open_project(store=partial, pack=PACK) as project:
        project.build(SPEC, out=suite, model=False)
        project.approve(suite, by="gate_bench")
    with open_project(store=partial, suite=suite) as project:  # the suite carries its own pack
        project.ingest([sim / "traces.otlp.jsonl"])
        project.run()
    partial.rename(store)  # only a finished run is reused
    return store, suite


def load(store: Path, suite: Path) -> Any:
    """The baseline's `GateColumns` of every gated measure of `suite`, read from `store` (read-only)."""
    from agent_factory.factory.loops.gate.data import Side, gate_measures, load_side
    from agent_factory.factory.project import open_project

    with open_project(store=store, suite=suite) as project:
        measures = gate_measures(project.pack, project.suite.components)
        return load_side(project.store(), Side(store=store), measures)


def _statsmodels(rows: Any, mask: np.ndarray, sign: float) -> tuple[float, float, float]:
    """delta, se and worse-direction z of one split and metric by statsmodels' WLS with CR1 errors by user."""
    import statsmodels.api as sm  # type: ignore[import-untyped]

    exog = sm.add_constant(mask[rows.user], has_constant="add")
    fit = sm.WLS(rows.y / rows.x, exog, weights=rows.x).fit(cov_type="cluster", cov_kwds={"groups": rows.user})
    delta, se = float(fit.params[1]), float(fit.bse[1])
    return delta, se, sign * delta / se


def _sample(z: np.ndarray, thresholds: np.ndarray, sample: int, rng: np.random.Generator) -> list[int]:
    """`sample` random splits, and per metric the splits nearest its threshold from above and from below."""
    picked = set(rng.choice(len(z), size=min(sample, len(z)), replace=False).tolist())
    for m in range(z.shape[1]):
        col = z[:, m]
        for side in (col > thresholds[m], col <= thresholds[m]):
            idx = np.flatnonzero(side & ~np.isnan(col))
            if len(idx) and np.isfinite(thresholds[m]):
                picked.add(int(idx[np.argmin(np.abs(col[idx] - thresholds[m]))]))
    return sorted(picked)


def bench(store: Path, suite: Path, *, splits: int = 4000, sample: int = 50, seed: int = 0) -> dict[str, Any]:
    """The figures of the module docstring on `store` run with `suite`."""
    from agent_factory.evaluators.gate.calibrate import calibrate, half_masks
    from agent_factory.evaluators.gate.stats import split_change

    cols = load(store, suite)
    stats = cols.user_stats()
    sign = np.array([m.sign for m in cols.measures], dtype=np.float64)
    n_measures = len(cols.measures)
    if n_measures == 0:
        raise SystemExit(f"{store}: the suite {suite} gates no measure")
    t0 = time.perf_counter()
    thresholds_by_key, aa = calibrate(stats, sign, keys=cols.keys, splits=splits, seed=seed)
    calibrate_seconds = time.perf_counter() - t0
    thresholds = np.array([thresholds_by_key[k] for k in cols.keys])
    masks = half_masks(np.random.default_rng(seed + 1), splits, len(cols.users))
    split_change(stats, masks[:2], sign)  # warm: the first einsum plans its path
    passes = []
    for _ in range(3):
        t0 = time.perf_counter()
        fast = split_change(stats, masks, sign)
        passes.append(time.perf_counter() - t0)
    fast_seconds = min(passes)
    picked = _sample(fast.z, thresholds, sample, np.random.default_rng(seed + 2))
    same = pairs = fits = alarms = 0
    max_delta = max_se = 0.0
    sm_seconds = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # statsmodels' notes on few clusters are not what is measured
        for s in picked:
            for m, rows in enumerate(cols.rows):
                pairs += 1
                fast_alarm = bool(fast.z[s, m] > thresholds[m]) if not np.isnan(fast.z[s, m]) else False
                alarms += fast_alarm
                if np.isnan(fast.z[s, m]):
                    same += not fast_alarm  # undefined for the gate: no alarm, nothing to fit
                    continue
                t0 = time.perf_counter()
                delta, se, z = _statsmodels(rows, masks[s], float(sign[m]))
                sm_seconds += time.perf_counter() - t0
                fits += 1
                max_delta = max(max_delta, abs(delta - float(fast.delta[s, m])))
                max_se = max(max_se, abs(se - float(fast.se[s, m])) / se)
                same += bool(z > thresholds[m]) == fast_alarm
    fast_per = fast_seconds / (splits * n_measures)
    sm_per = sm_seconds / fits if fits else float("nan")
    return {
        "store": str(store), "suite": str(suite), "users": len(cols.users), "measures": list(cols.keys),
        "rows": {k: len(r.user) for k, r in zip(cols.keys, cols.rows, strict=True)}, "splits": splits,
        "fast_seconds": fast_seconds, "fast_us_per_split_metric": fast_per * 1e6,
        "statsmodels_fits": fits, "statsmodels_seconds": sm_seconds, "statsmodels_us_per_split_metric": sm_per * 1e6,
        "ratio": sm_per / fast_per, "sampled_splits": len(picked), "pairs": pairs, "same_decisions": same,
        "alarms_in_sample": alarms, "max_abs_delta_diff": max_delta, "max_rel_se_diff": max_se,
        "calibrate_seconds": calibrate_seconds,
        "aa": aa.model_dump(mode="json"), "load_avg_1m": os.getloadavg()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, help="a store already run with --suite (read only)")
    ap.add_argument("--suite", type=Path, help="the suite --store was run with")
    ap.add_argument("--users", type=int, default=300, help="simulated users when no --store (default 300)")
    ap.add_argument("--splits", type=int, default=4000)
    ap.add_argument("--sample", type=int, default=50, help="random splits refitted by statsmodels (default 50)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path, default=HERE / "out")
    args = ap.parse_args()
    if (args.store is None) != (args.suite is None):
        ap.error("--store and --suite go together")
    store, suite = (args.store, args.suite) if args.store is not None else prepare(args.users, args.workdir)
    out = bench(store, suite, splits=args.splits, sample=args.sample, seed=args.seed)
    print(f"{out['users']} users, {len(out['measures'])} measures, {out['splits']} splits")
    print(f"split_change  {out['fast_seconds']:.3f} s for all splits: "
          f"{out['fast_us_per_split_metric']:.2f} us per split per metric")
    print(f"statsmodels   {out['statsmodels_seconds']:.3f} s for {out['statsmodels_fits']} fits: "
          f"{out['statsmodels_us_per_split_metric']:.0f} us per split per metric")
    print(f"ratio         {out['ratio']:.0f}x")
    print(f"same decisions {out['same_decisions']}/{out['pairs']} ({out['sampled_splits']} splits, "
          f"{out['alarms_in_sample']} alarms among them); max |delta diff| {out['max_abs_delta_diff']:.2e}, "
          f"max se rel diff {out['max_rel_se_diff']:.2e}")
    aa = out["aa"]
    print(f"A/A ({out['calibrate_seconds']:.2f} s): family false alarm held out {aa['family_false_alarm_heldout']:.4f} "
          f"(calibration {aa['family_false_alarm_calibration']:.4f}, level {aa['level']:.5f}), per-turn family "
          f"{aa['per_turn_family_false_alarm']:.4f}")
    for key, m in aa["per_metric"].items():
        print(f"  {key}: threshold {m['threshold']}, held out {m['false_alarm_heldout']:.4f}, per-turn "
              f"{m['per_turn_false_alarm']:.4f}, undefined splits {m['undefined_splits']}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
