"""Ingest benchmark: spans/s and peak RSS at 1x and 10x the default simulation, and a 1M-span run.

Usage:  .venv/bin/python bench/ingest_bench.py [--sizes 1x,10x,1m] [--workdir bench/out] [--workers auto|N]

Each ingest runs in a fresh child process so its peak RSS (VmHWM: `common.peak_rss_mb`) is its own; "tree MB"
is the peak of the summed PSS of the ingest and its workers (`common.TreeMemory`). The 1M-span input is a
generated OTLP JSON-lines file (the simulator's format) so the run needs no simulation time. Memory must not
grow with the number of records: compare the peak RSS column across sizes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from common import child_json, peak_rss_mb  # noqa: E402

CHILD = r"""
import json, resource, sys, time
# the child runs in the repository's root
from bench.common import TreeMemory, parse_seconds, peak_rss_mb, store_seconds
tree = TreeMemory()
from pathlib import Path
from agent_factory.factory.store import Store
from agent_factory.factory.ingest.files import ingest_paths
from agent_factory.knowledge_packs import load_pack
src, store = Path(sys.argv[1]), Path(sys.argv[2])
pack = load_pack(sys.argv[3])
workers = int(sys.argv[4]) if sys.argv[4] != "auto" else None
t0 = time.perf_counter()
with Store(store) as st:
    rep = ingest_paths(st, [src], pack=pack, workers=workers)
    spans = st.con.execute("SELECT count(*) FROM spans").fetchone()[0]
    turns = st.con.execute("SELECT count(*) FROM turns").fetchone()[0]
dt = time.perf_counter() - t0
tree_mb = tree.stop()
parse_dt = parse_seconds(src)
peak = peak_rss_mb()  # before the store floor reads the tables back
store_dt = store_seconds(store, ("spans", "turns", "provenance", "conversations", "events", "quarantine"))
print(json.dumps({"seconds": dt, "spans": spans, "turns": turns, "read": rep.read, "accepted": rep.accepted,
                  "quarantined": rep.quarantined, "parse_only_seconds": parse_dt, "store_only_seconds": store_dt,
                  "peak_rss_mb": peak, "tree_peak_mb": tree_mb,
                  "worker_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def write_synthetic_otlp(path: Path, *, spans: int, seed: int = 0) -> Path:
    """OTLP JSON lines, one trace (root + children, ~3.3 spans) per line, until `spans` spans are written."""
    rng = random.Random(seed)
    written = 0
    t = 1_700_000_000_000_000_000
    with open(path, "w", encoding="utf-8") as f:
        i = 0
        while written < spans:
            trace = f"{seed:08x}{i:024x}"  # seeds give disjoint trace ids
            n_children = min(rng.choice((1, 2, 2, 3, 3)), spans - written - 1)
            root = f"{i:08x}00000000"
            user = f"u{rng.randrange(40_000)}"
            attrs = [
                {"key": "session.id", "value": {"stringValue": f"s{i // 2}"}},
                {"key": "user.id", "value": {"stringValue": user}},
                {"key": "agent.mode", "value": {"stringValue": "normal"}},
                {"key": "openinference.span.kind", "value": {"stringValue": "AGENT"}},
                {"key": "input.value", "value": {"stringValue": f"show me sales for region {i % 97}"}},
                {"key": "output.value", "value": {"stringValue": f"Region {i % 97} sales grew 4% ..." * 3}},
            ]
            span_list = [{
                "traceId": trace, "spanId": root, "name": "agent", "startTimeUnixNano": str(t),
                "endTimeUnixNano": str(t + 40_000_000_000), "status": {"code": 1}, "attributes": attrs,
            }]
            for c in range(n_children):
                span_list.append({
                    "traceId": trace, "spanId": f"{i:08x}{c + 1:08x}", "parentSpanId": root, "name": "llm",
                    "startTimeUnixNano": str(t + c), "endTimeUnixNano": str(t + 1_000_000_000 + c),
                    "status": {"code": 1},
                    "attributes": [
                        {"key": "openinference.span.kind", "value": {"stringValue": "LLM"}},
                        {"key": "session.id", "value": {"stringValue": f"s{i // 2}"}},
                        {"key": "user.id", "value": {"stringValue": user}},
                        {"key": "llm.token_count.prompt", "value": {"intValue": "812"}},
                        {"key": "output.value", "value": {"stringValue": "intermediate " * 10}},
                    ],
                })
            line = {"resourceSpans": [{"resource": {"attributes": []},
                                       "scopeSpans": [{"scope": {"name": "bench"}, "spans": span_list}]}]}
            f.write(json.dumps(line) + "\n")
            written += len(span_list)
            t += 60_000_000_000
            i += 1
    return path


def run_child(src: Path, store: Path, pack: str, workers: str = "auto") -> dict[str, float]:
    if store.exists():
        store.unlink()
    return child_json(CHILD, str(src), str(store), pack, workers)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1x,10x,1m")
    ap.add_argument("--workdir", type=Path, default=HERE / "out")
    ap.add_argument("--workers", default="auto", help="processes that assemble traces (auto: ingest's default)")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    from agent_factory.factory.simulate import SimConfig, simulate

    rows = []
    for size in args.sizes.split(","):
        t0 = time.perf_counter()
        if size in ("1x", "10x"):
            users = 1136 * (10 if size == "10x" else 1)
            out = args.workdir / f"sim-{size}"
            simulate(SimConfig(users=users, seed=1), out)
            src, pack = out / "traces.otlp.jsonl", "business_analysis"
        elif size == "1m":
            src, pack = args.workdir / "synthetic-1m.otlp.jsonl", "default"
            if not src.exists():
                write_synthetic_otlp(src, spans=1_000_000)
        else:
            raise SystemExit(f"unknown size {size!r}; valid: 1x, 10x, 1m")
        gen = time.perf_counter() - t0
        r = run_child(src, args.workdir / f"store-{size}.duckdb", pack, args.workers)
        r.update(size=size, input_mb=src.stat().st_size / 1e6, generate_seconds=gen,
                 spans_per_s=r["spans"] / r["seconds"],
                 parse_ratio=r["seconds"] / max(r["parse_only_seconds"], 1e-9),
                 store_ratio=r["seconds"] / max(r["store_only_seconds"], 1e-9))
        rows.append(r)
        print(json.dumps(r), flush=True)
    print()
    print(f"{'size':>5} {'input MB':>9} {'spans':>9} {'turns':>8} {'quar':>5} {'sec':>7} {'spans/s':>9} "
          f"{'x parse':>8} {'x store':>8} {'peak RSS MB':>12} {'worker MB':>10} {'tree MB':>8}")
    for r in rows:
        print(f"{r['size']:>5} {r['input_mb']:>9.1f} {r['spans']:>9,} {r['turns']:>8,} {r['quarantined']:>5} "
              f"{r['seconds']:>7.1f} {r['spans_per_s']:>9,.0f} {r['parse_ratio']:>8.1f} "
              f"{r['store_ratio']:>8.1f} {r['peak_rss_mb']:>12.0f} "
              f"{r['worker_peak_rss_mb']:>10.0f} {r['tree_peak_mb']:>8.0f}")
    print("(peak RSS: the ingesting process; worker MB: the largest worker's peak, 0 without workers; each worker "
          "is a fork, so pages it shares with the ingesting process count in both; tree MB: the process and its "
          "workers together, each shared page once, sampled every 0.5 s)")
    print("(x parse: to json.loads of every line; x store: to DuckDB alone appending the rows ingest wrote, from "
          "Arrow, to an empty store: `common.store_seconds`; both timed in the ingesting child, after it)")
    print(f"(bench process peak RSS {peak_rss_mb():.0f} MB)")


if __name__ == "__main__":
    main()
