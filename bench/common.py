"""What the benchmark scripts share: running a measured step in a fresh child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def child_json(code: str, *args: str) -> dict[str, Any]:
    """Run `code` in a fresh Python (so its peak RSS is its own) and return the JSON of its last stdout line.

    No model is configured in the child: benchmarks measure rules, storage and analyses, never a provider.
    """
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    for var in ("AGENT_FACTORY_SMALL_MODEL", "AGENT_FACTORY_JURY", "AGENT_FACTORY_CONFIG"):
        env.pop(var, None)
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          check=False)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark child failed ({' '.join(args)}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def parse_seconds(path: Path | str, *, passes: int = 3) -> float:
    """The floor every ratio of the benches divides by: plain `json.loads` of each line of `path`, the fastest
    of `passes` passes (one pass moved by a tenth or more from run to run). Called in the measured child, after
    the step, so the floor is taken in the same process."""
    best = float("inf")
    for _ in range(passes):
        t0 = time.perf_counter()
        with open(path, "rb") as f:
            for line in f:
                json.loads(line)
        best = min(best, time.perf_counter() - t0)
    return best
