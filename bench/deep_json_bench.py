"""Hostile JSON through ingest: time and peak RSS of documents nested 100,000 deep, each in a fresh child process.

Usage:  .venv/bin/python bench/deep_json_bench.py [--workdir bench/out/deep] [--json]

ijson builds a prefix string per nesting level for every event, so a document nested n deep used to cost O(n^2)
memory (a 40 KB file peaked at 1.1 GB, a 600 KB OTLP document passed 7 GB). Every case must now be refused with
one quarantine line in under `MAX_SECONDS` at under `MAX_RSS_MB` (what the child takes, imports included), the
records beside the deep one kept. `tests/factory/test_ingest_encodings.py` runs these cases and asserts that.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

MAX_SECONDS = 5.0
"""What a case may take, ingest alone (the child's imports not counted)."""
MAX_RSS_MB = 300.0
"""What the child may peak at, imports and an empty store included."""
DEPTH = 100_000
T0 = 1_700_000_000_000_000_000

CHILD = r"""
import json, sys, time
from pathlib import Path
from agent_factory.factory.ingest.files import ingest_paths
from agent_factory.factory.store import Store
from agent_factory.knowledge_packs import load_pack
src, store, fmt = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] or None
pack = load_pack("default")
t0 = time.perf_counter()
with Store(store) as st:
    rep = ingest_paths(st, [src], fmt=fmt, pack=pack, workers=1)
seconds = time.perf_counter() - t0
with open("/proc/self/status", encoding="ascii") as f:
    rss = next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:"))
print(json.dumps({"seconds": seconds, "peak_rss_mb": rss, "read": rep.read, "accepted": rep.accepted,
                  "quarantined": rep.quarantined, "errors": [q.line() for q in rep.errors]}))
"""


def _span(i: int) -> str:
    return json.dumps({"traceId": "a" * 32, "spanId": f"{i:016x}", "name": f"s{i}",
                       "startTimeUnixNano": str(T0 + i), "endTimeUnixNano": str(T0 + i + 1000)})


def _deep(kind: str) -> str:
    return "[" * DEPTH + "]" * DEPTH if kind == "array" else '{"a":' * DEPTH + "1" + "}" * DEPTH


def cases() -> dict[str, tuple[str, str | None, int]]:
    """Case name -> (file text, --format or None, records to accept: all but the deep one)."""
    deep_span = '{"spanId":"' + "c" * 16 + '","x":' + _deep("array") + "}"
    mb_span = '{"spanId":"' + "d" * 16 + '","x":' + "[" * 500_000 + "]" * 500_000 + "}"

    def otlp(spans: list[str]) -> str:
        return ('{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"scope":{"name":"t"},"spans":['
                + ",".join(spans) + "]}]}]}")

    out: dict[str, tuple[str, str | None, int]] = {
        "arrays, sniffed": (_deep("array"), None, 0),
        "objects, sniffed": (_deep("object"), None, 0),
        "in an array at record 2": ("[" + ",".join([_span(1), _span(2), deep_span, _span(4)]) + "]", None, 3),
        "in an OTLP document at span 2": (otlp([_span(1), _span(2), deep_span, _span(4)]), None, 3),
        "1 MB in an OTLP document at span 1": (otlp([_span(1), mb_span, _span(3)]), None, 2),
        "in JSON lines at line 3": ("\n".join([_span(1), _span(2), deep_span, _span(4)]) + "\n", None, 3),
        "1 MB of objects, as otlp-json": ('{"a":' * 200_000 + "1" + "}" * 200_000, "otlp-json", 0),
    }
    for fmt in ("otel-nested", "otel-spans-jsonl", "tau-bench", "openai-chat", "who-and-when", "step-log"):
        out[f"arrays, as {fmt}"] = (_deep("array"), fmt, 0)
    return out


def run_case(workdir: Path, name: str, text: str, fmt: str | None) -> dict[str, Any]:
    """Ingest one case in a fresh child; its time, peak RSS and counts (a child killed at 120 s fails)."""
    slug = "".join(c if c.isalnum() else "-" for c in name)
    src = workdir / f"{slug}.json"
    src.write_text(text, encoding="utf-8")
    store = workdir / f"{slug}.duckdb"
    store.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_FACTORY_")}
    env.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")  # as the command line's main() (`common.child_json`)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(src), str(store), fmt or ""], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{name}: child failed:\n{proc.stderr[-3000:]}")
    got: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    got["bytes"] = src.stat().st_size
    return got


def main() -> None:
    """Run every case and print a table (or JSON); exit 1 if a case is over its bounds."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=HERE / "out" / "deep")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    results = {name: run_case(args.workdir, name, text, fmt) | {"accepted_expected": accepted}
               for name, (text, fmt, accepted) in cases().items()}
    over = [n for n, r in results.items() if r["seconds"] >= MAX_SECONDS or r["peak_rss_mb"] >= MAX_RSS_MB
            or r["accepted"] != r["accepted_expected"]]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print("| case | KB | s | peak MB | accepted | quarantined |\n|---|---|---|---|---|---|")
        for name, r in results.items():
            print(f"| {name} | {r['bytes'] // 1024} | {r['seconds']:.2f} | {r['peak_rss_mb']:.0f} | {r['accepted']} "
                  f"| {r['quarantined']} |")
    raise SystemExit(1 if over else 0)


if __name__ == "__main__":
    main()
