"""`agent-factory watch DIR`: the pipeline's trigger on new traces (docs/method.md section 8, step 1).

Each cycle lists the trace files under DIR, ingests those not seen before (a file counts once its size and
mtime have stayed put for `settle` seconds, so a file still being written is not read half-way), and when any
record was accepted runs the pipeline, which recomputes only the new users' units and what reads them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent_factory.factory.ingest.files import IngestReport, expand_paths, ingest_paths
from agent_factory.factory.pipeline.report import RunReport
from agent_factory.factory.store import Store
from agent_factory.frozen import Frozen
from agent_factory.knowledge_packs import KnowledgePack


class Cycle(Frozen):
    """One watch cycle (a JSON line with `--json`)."""

    cycle: int
    """1, 2, ..."""
    new_files: list[str]
    """Files ingested in this cycle."""
    waiting: list[str]
    """Files seen but still changing (read in a later cycle)."""
    ingest: IngestReport | None
    """The ingest of the new files, if any."""
    run: RunReport | None
    """The pipeline run, when the new files added records."""


@dataclass
class Watcher:
    """State between cycles: which files were handled, and the last stat of those still settling."""

    directory: Path
    settle: float = 2.0
    handled: dict[Path, tuple[int, float]] = field(default_factory=dict)
    cycles: int = 0

    def ready(self, *, now: float | None = None) -> tuple[list[Path], list[Path]]:
        """(files to ingest now, files still settling)."""
        now = time.time() if now is None else now
        ready: list[Path] = []
        waiting: list[Path] = []
        for f in expand_paths([self.directory]):
            try:
                st = f.stat()
            except FileNotFoundError:  # removed between listing and stat
                continue
            sig = (st.st_size, st.st_mtime)
            if self.handled.get(f) == sig:
                continue
            (ready if now - st.st_mtime >= self.settle else waiting).append(f)
        return ready, waiting

    def cycle(
        self, store: Store, *, pack: KnowledgePack, make_run: Callable[[Store], RunReport],
    ) -> Cycle:
        """Ingest what is ready; run the pipeline when records were added."""
        self.cycles += 1
        ready, waiting = self.ready()
        report = ingest_paths(store, ready, pack=pack) if ready else None
        for f in ready:
            st = f.stat()
            self.handled[f] = (st.st_size, st.st_mtime)
        new = [f.path for f in report.files if f.status == "ingested"] if report else []
        run = make_run(store) if report is not None and report.accepted and new else None
        return Cycle(cycle=self.cycles, new_files=new, waiting=[str(w) for w in waiting], ingest=report, run=run)


def watch(
    directory: Path, store_path: Path, *, pack: KnowledgePack, make_run: Callable[[Store], RunReport],
    interval: float = 10.0, settle: float = 2.0, cycles: int | None = None,
    on_cycle: Callable[[Cycle], None] | None = None, sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Watch `directory` until interrupted (or for `cycles` cycles); the number of cycles run. The store is
    opened per cycle, so other commands (`stats`, `run`) can use it between cycles."""
    watcher = Watcher(directory, settle=settle)
    while cycles is None or watcher.cycles < cycles:
        with Store(store_path) as store:
            result = watcher.cycle(store, pack=pack, make_run=make_run)
        if on_cycle is not None:
            on_cycle(result)
        if cycles is None or watcher.cycles < cycles:
            sleep(interval)
    return watcher.cycles
