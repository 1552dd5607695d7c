"""`Project`: the one composition root. It assembles a store, a suite (its pack and components), the model
config, the datum cache, the redactor and the prompt templates once (`project.parts`), and offers the jobs as
methods: ingest, run, watch, stats, summary, show, worst, export, report, and the suite's build, diff and approve.
The CLI, the tests, `bench/` and the coming loops (audit, gate, tasks) use it; nothing else builds a `Runner` or
a `Cascade`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_factory.errors import AgentFactoryError, SpecError
from agent_factory.factory.project.audit import AuditJobs
from agent_factory.factory.project.gate import GateJobs
from agent_factory.factory.project.labels import LabelJobs
from agent_factory.factory.project.parts import DEFAULT_STORE, ProjectParts
from agent_factory.factory.project.reviewing import ReviewJobs
from agent_factory.factory.project.tasks import TaskJobs

if TYPE_CHECKING:
    from agent_factory.adapters.jsonio import FieldLimits
    from agent_factory.evaluators.collect import ModelConfig
    from agent_factory.evaluators.collect.backends import CallCounters
    from agent_factory.evaluators.findings import Level
    from agent_factory.factory.compile.model import BuildReport
    from agent_factory.factory.ingest.files import IngestReport
    from agent_factory.factory.ingest.sources import Given
    from agent_factory.factory.pipeline.engine import Runner
    from agent_factory.factory.pipeline.report import RunReport
    from agent_factory.factory.pipeline.watch import Cycle
    from agent_factory.factory.project.outcomes import Approved, ReportWritten
    from agent_factory.factory.store import Store
    from agent_factory.factory.suite.review import SuiteDiff
    from agent_factory.factory.views.export import ExportSummary, Format
    from agent_factory.factory.views.show.unit import UnitShow, Worst
    from agent_factory.factory.views.summary import Summary
    from agent_factory.knowledge_packs import KnowledgePack


class Project(AuditJobs, LabelJobs, ReviewJobs, GateJobs, TaskJobs, ProjectParts):
    """One store evaluated with one suite: its parts (`ProjectParts`, each assembled once) and the jobs.

    Use it as a context manager (`with open_project(...) as p:`); it closes what it opened (the store's
    connection, the datum cache). A job raises an `AgentFactoryError` naming what failed and what to do.
    """

    # ---- traffic in --------------------------------------------------------------------------------

    def ingest(
        self, sources: Sequence[Given], *, fmt: str | None = None, limits: FieldLimits | None = None,
        workers: int | None = None, replace: bool = False, on_file: Callable[[Path], None] | None = None,
        on_record: Callable[[int], None] | None = None,
    ) -> IngestReport:
        """Read sources into the store: paths of files or directories (expanded), or `Source`s (a file, bytes, a
        request body: `agent_factory.adapters.source`), each atomically, bad records quarantined with a reason
        (`ingest_sources`). A missing path or an unknown format fails before a store file is created."""
        from agent_factory.adapters.base import get_adapter
        from agent_factory.adapters.source import FileSource, Source
        from agent_factory.factory.ingest.files import ingest_sources
        from agent_factory.factory.ingest.sources import expand_sources

        if fmt is not None:
            get_adapter(fmt)
        given = expand_sources(sources)  # a missing path fails here, before a store file is created
        pack = self._ingest_pack()
        def on_source(s: Source) -> None:
            if on_file is not None:
                on_file(s.path if isinstance(s, FileSource) else Path(s.id))

        return ingest_sources(self.store(write=True), given, fmt=fmt, pack=pack, limits=limits, workers=workers,
                              replace=replace, on_source=on_source, on_record=on_record)

    def _ingest_pack(self) -> KnowledgePack:
        """The pack that segments traffic at ingest: the suite's, else `pack`, the one used before, `default`."""
        if self.suite_dir is not None:
            return self.suite.pack
        from agent_factory.knowledge_packs import load_pack

        before = self.store().get_meta("pack") if self.pack_name is None and self.store_path.exists() else None
        return load_pack(self.pack_name or before or "default")

    def stats(self) -> dict[str, Any]:
        """Counts of the store's traffic (`Store.counts`). A store an interrupted ingest left rows in is opened
        for writing, which removes them, before counting."""
        st = self.store()
        if st.needs_recovery():
            st = self.store(write=True)
        return st.counts()

    # ---- evaluation ----------------------------------------------------------------------------------

    def run(
        self, *, full: bool = False, concurrency: int = 8, workers: int | None = None, started: float | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> RunReport:
        """Evaluate the store, recomputing only what changed since the last run (`full`: everything). `workers`:
        processes for a rules-only run (None: the run's default); `started`: when the work began
        (`time.perf_counter()`; the report's seconds count from it); `progress(done, total)`: users done."""
        started = started if started is not None else time.perf_counter()
        if not self.store_path.exists():
            raise AgentFactoryError(f"{self.store_path}: no store here yet; run `agent-factory ingest PATH` first")
        runner = self._runner(self.store(write=True), concurrency=concurrency, full=full, started=started,
                              workers=workers)
        if progress is not None:
            total = runner.users_to_visit()
            progress(0, total)
            runner.progress = lambda done: progress(done, total)
        return runner.run()

    def _runner(self, st: Store, *, concurrency: int = 8, full: bool = False, started: float | None = None,
                workers: int | None = None) -> Runner:
        """The one place a `Runner` is built: the suite checked against the store's ingest, the notice said."""
        from agent_factory.factory.pipeline.engine import Runner
        from agent_factory.factory.store.inputs import read_run_inputs

        chosen = self.suite
        ingested = st.get_meta("pack")
        if ingested and ingested not in (chosen.pack.name, chosen.pack.extends):
            # Segments, hand-offs, closing messages and coverage were decided at ingest with that pack: results of
            # this suite would mix two packs' knowledge and replace the stored results without a word.
            raise SpecError(f"{self.store_path}: ingested with pack {ingested!r}, but the suite runs pack "
                            f"{chosen.pack.name!r}"
                            f"{f' (extends {chosen.pack.extends!r})' if chosen.pack.extends else ''}; ingest into a "
                            f"new store with --pack {chosen.pack.extends or chosen.pack.name}, or run with the pack "
                            f"used at ingest")
        if chosen.notice and self.on_notice is not None:
            self.on_notice(chosen.notice)
        return Runner(st, pack=chosen.pack, collector=self.collector(), specs=chosen.components,
                      inputs=read_run_inputs(st), concurrency=concurrency, full=full, started=started,
                      workers=workers)

    def watch(
        self, directory: Path, *, interval: float = 10.0, settle: float = 2.0, cycles: int | None = None,
        on_cycle: Callable[[Cycle], None] | None = None, sleep: Callable[[float], None] = time.sleep,
    ) -> int:
        """Ingest new trace files as they appear in `directory` and run on them, until interrupted (or for
        `cycles` scans); the number of cycles run. The store is opened per cycle (`pipeline.watch`), so other
        commands can use it between cycles."""
        from agent_factory.factory.pipeline.watch import watch

        if not directory.is_dir():
            raise AgentFactoryError(f"{directory}: not a directory")
        self.store(write=True)
        pack = self._ingest_pack()  # the suite's pack also segments the traffic at ingest
        _ = self.suite  # read now, with the store: each cycle opens the store for writing, and runs this suite
        self._release()
        return watch(directory, self.store_path, pack=pack, make_run=lambda st: self._runner(st).run(),
                     interval=interval, settle=settle, cycles=cycles, on_cycle=on_cycle, sleep=sleep)

    # ---- findings out ---------------------------------------------------------------------------------

    def _results_store(self) -> Store:
        if not self.store_path.exists():
            raise AgentFactoryError(f"{self.store_path}: no store here yet; run `agent-factory ingest PATH` and "
                                    "`run` first")
        return self.store()

    def summary(self) -> Summary:
        """The few results that matter per component, each flag's association with the outcomes the traces
        carry, and where to look next (what `run` and `summary` print)."""
        from agent_factory.factory.store.audit import latest_audit
        from agent_factory.factory.views.findings import read_findings
        from agent_factory.factory.views.results import read_facts, read_rows
        from agent_factory.factory.views.summary import build_summary

        st = self._results_store()
        flags = self.flags
        facts, rows = read_facts(st), read_rows(st)
        assoc = read_findings(st, flags).associations if flags and facts.outcome_kinds else ()
        return build_summary(facts, rows, flags=flags, associations=assoc, store_flag=self.command_options,
                             audit=latest_audit(st))

    def show(self, unit_id: str) -> UnitShow:
        """One unit (a span, turn, conversation or user id) with its evidence, data, results and flags, its trace
        text redacted."""
        from agent_factory.factory.views.show.read import read_unit

        st = self._results_store()
        return read_unit(st, unit_id, self.flags, self.redactor)

    def worst(self, n: int, *, level: Level = "conversation", component: str | None = None,
              clause: str | None = None) -> Worst:
        """The `n` units of `level` with most flags meaning bad raised (only `component`'s, or only Conduct's of
        `clause`, when given), each with one redacted quote."""
        from agent_factory.factory.views.show.read import read_worst

        st = self._results_store()
        return read_worst(st, self.flags, self.redactor, n=n, level=level, component=component, clause=clause)

    def export(self, level: Level, *, out: Path | None = None, fmt: Format | None = None) -> ExportSummary:
        """Write one row per unit of `level` (csv, jsonl or parquet; default: from `out`'s suffix, else csv) to
        `out` (default: export-<level>.<format>), trace text redacted."""
        from agent_factory.factory.views.export import (
            ExportSummary,
            build_table,
            default_out,
            format_for,
            read_export,
            redact_table,
            write_table,
        )

        if not self.store_path.exists():
            raise AgentFactoryError(f"{self.store_path}: no store here yet; run `agent-factory ingest PATH` first")
        chosen = format_for(out, fmt)
        target = out if out is not None else default_out(level, chosen)
        specs, redactor = self.flags, self.redactor
        table = redact_table(build_table(level, specs, read_export(self.store(), specs, level)), redactor)
        try:
            write_table(table, target, chosen)
        except OSError as e:
            raise AgentFactoryError(f"{e.filename or target}: cannot write the export ({e.strerror})") from e
        return ExportSummary(out=str(target), level=level, format=chosen, rows=table.num_rows,
                             columns=table.num_columns)

    def report(self, out: Path, *, evidence: bool = False, composite: bool = False,
               generated: str | None = None) -> ReportWritten:
        """Write one self-contained HTML report to `out`: aggregates only, plus redacted example quotes with
        `evidence`, and a weighted composite view at the end with `composite`. `generated`: the time it names
        (default: now)."""
        from agent_factory.factory.project.outcomes import ReportWritten
        from agent_factory.factory.views.report import report_sections
        from agent_factory.factory.views.report.html import render_html
        from agent_factory.factory.views.report.read import read_report
        from agent_factory.factory.views.report.runtime import vega_bundle

        st = self._results_store()
        data = read_report(st, flags=self.flags, redactor=self.redactor if evidence else None)
        runtime_js = vega_bundle(cache_dir=self.cache_dir)
        sections = report_sections(data, with_composite=composite)
        page = render_html(sections, data.facts, runtime_js=runtime_js,
                           generated=generated or datetime.now(UTC).isoformat(timespec="seconds"))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(page, encoding="utf-8")
        return ReportWritten(
            out=str(out), bytes=out.stat().st_size, sections=[s.key for s in sections],
            absent={s.key: s.absent for s in sections if s.absent is not None},
            charts=sum(1 for s in sections for b in s.blocks if b.chart is not None),
            quotes=len(data.quotes or ()), composite=composite)

    # ---- the suite -----------------------------------------------------------------------------------

    def build(self, spec: Path, *, out: Path | None = None, model: bool = True,
              counters: CallCounters | None = None) -> BuildReport:
        """Compile the role spec `spec` over `pack` (default: `default`) into a reviewable suite at `out`
        (default: suites/<spec's stem>). With a small model configured (and `model`), it compiles the sentences
        the rules could not, its answers cached (`counters` counts its calls); else the deterministic compiler
        alone, which opens no cache."""
        from agent_factory.factory.suite.write import build_suite

        if not spec.exists():
            raise AgentFactoryError(f"{spec}: no such spec file")
        target = out if out is not None else Path("suites") / spec.stem
        pack = self.pack_name or "default"
        cfg = self.model_config if model else None
        if cfg is None or cfg.small is None:
            return build_suite(spec, pack=pack, out=target)
        return build_suite(spec, pack=pack, out=target, model=cfg, cache=self.cache, counters=counters)

    def diff(self, old: Path, new: Path) -> SuiteDiff:
        """What a spec change does (`old` and `new`: suite directories or spec files compiled with `pack`)."""
        from agent_factory.factory.suite.review import suite_diff

        for path in (old, new):
            _exists(path)
        return suite_diff(old, new, pack=self.pack_name or "default")

    def approve(self, directory: Path, *, by: str | None = None, note: str | None = None) -> Approved:
        """Approve the suite in `directory` as its files are now (a snapshot in `directory/approved/`, which
        runs use); an approval of identical files is left as it is."""
        from agent_factory.factory.project.outcomes import Approved
        from agent_factory.factory.suite.review import approval_status, approve_suite

        _exists(directory)
        try:
            before = approval_status(directory)
        except AgentFactoryError:
            before = None  # a damaged approval: approving again repairs it, so this is no error here
        approval = approve_suite(directory, by=by, note=note)
        unchanged = (before is not None and before.approved and not before.newer_unapproved
                     and before.at == approval.at)
        return Approved(approval=approval, already_approved=unchanged)


def _exists(path: Path) -> None:
    if not path.exists():
        raise AgentFactoryError(f"{path}: no such file or directory")


def open_project(
    *, store: Path | str = DEFAULT_STORE, suite: Path | str | None = None, pack: str | None = None,
    config: Path | str | ModelConfig | None = None, cache: Path | str | None = None, unapproved: bool = False,
    on_notice: Callable[[str], None] | None = None,
) -> Project:
    """A `Project` over `store` (see `Project` for the options); nothing is opened until a job needs it."""
    return Project(store=store, suite=suite, pack=pack, config=config, cache=cache, unapproved=unapproved,
                   on_notice=on_notice)


__all__ = ["DEFAULT_STORE", "Project", "open_project"]
