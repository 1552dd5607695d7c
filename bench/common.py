"""What the benchmark scripts share: running a measured step in a fresh child process, its parsing floor, and
the memory it took.

A measured child reports its own peak with `peak_rss_mb` (VmHWM), never `ru_maxrss`: Linux keeps `ru_maxrss`
across exec, so a child started by a bench process that had grown to 545 MB (it ingested 10x in process) reports
545 MB for a run that peaked at 183. `TreeMemory` samples what the child and its forked workers take together.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def child_json(code: str, *args: str) -> dict[str, Any]:
    """Run `code` in a fresh Python (so its peak RSS is its own) and return the JSON of its last stdout line.

    No model is configured in the child: benchmarks measure rules, storage and analyses, never a provider.
    """
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    # Arrow allocates through the C library's malloc unless the user chose a pool, as the command line's `main()`
    # sets it: pyarrow's default, mimalloc, keeps what it freed resident (a rules-only run of the default
    # simulation peaked at 424-441 MB with it, 364-371 MB with malloc, in the same time). The variable is read
    # when Arrow first allocates, so it is set for the child, before it imports pyarrow; importing the package
    # sets nothing.
    env.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
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


def store_seconds(store: Path | str, tables: tuple[str, ...]) -> float:
    """A second floor: what DuckDB alone takes to append the rows a step wrote to `tables` of `store` (read back
    as Arrow first, untimed) to the same empty tables of a fresh store, and to checkpoint them. No Python touches
    a row: any design that keeps these rows in DuckDB pays at least this. Called in the measured child, after the
    step, beside `parse_seconds`."""
    import tempfile

    import duckdb

    with duckdb.connect(str(store), read_only=True) as src:
        ddl = {t: src.execute("SELECT sql FROM duckdb_tables() WHERE table_name = ?", [t]).fetchall()[0][0]
               for t in tables}
        arrow = {t: src.sql(f"SELECT * FROM {t}").to_arrow_table() for t in tables}
    with tempfile.TemporaryDirectory() as tmp, duckdb.connect(str(Path(tmp) / "floor.duckdb")) as con:
        for t in tables:
            con.execute(ddl[t])
        t0 = time.perf_counter()
        for t, rows in arrow.items():
            con.register("rows", rows)
            con.execute(f"INSERT INTO {t} SELECT * FROM rows")
            con.unregister("rows")
        con.execute("CHECKPOINT")
        return time.perf_counter() - t0


def peak_rss_mb() -> float:
    """This process's peak resident set since it was exec'd (VmHWM of /proc/self/status), in MB."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("/proc/self/status has no VmHWM line")


def _pss_kb(pid: int) -> int:
    """Proportional set size of one process (0 if it is gone): a page shared by n processes counts 1/n."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children", encoding="ascii") as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            kids = []
        out.extend(kids)
        todo.extend(kids)
    return out


class TreeMemory:
    """The peak, over samples every `period` seconds, of the summed PSS of this process and its descendants: what
    a run and its forked workers take together, each shared page once (their RSS figures count a page the workers
    inherited at the fork in every one of them). A sample reads smaps_rollup (about 7 ms per 600 MB process), so
    the default period costs a few percent of one core."""

    def __init__(self, *, period: float = 0.5) -> None:
        self.period, self.peak_kb = period, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        me = os.getpid()
        while True:
            self.peak_kb = max(self.peak_kb, sum(_pss_kb(p) for p in (me, *_descendants(me))))
            if self._stop.wait(self.period):
                return

    def stop(self) -> float:
        """Stop sampling; the peak in MB."""
        self._stop.set()
        self._thread.join()
        return self.peak_kb / 1024
