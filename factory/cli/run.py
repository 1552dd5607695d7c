"""`agent-factory run` and `watch`: evaluate the store (only what changed), once or as new traces arrive."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from agent_factory.errors import AgentFactoryError
from agent_factory.factory.cli.base import (
    CacheOpt,
    ConfigOpt,
    JsonOpt,
    RunPackOpt,
    StoreOpt,
    SuiteOpt,
    UnapprovedOpt,
    app,
    command_start,
    ctrl_c_handled,
    emit_json,
    err,
    fail,
    note,
    out,
    print_lines,
    progress_bar,
)
from agent_factory.factory.project import DEFAULT_STORE, open_project

if TYPE_CHECKING:
    from agent_factory.factory.pipeline.report import RunReport
    from agent_factory.factory.pipeline.watch import Cycle

METRICS_SHOWN = 25
"""Rows of a component's table with `run --verbose` (the rest are in --json)."""


def run_line(report: RunReport) -> str:
    """What a run did, in two lines (`run` and each `watch` cycle print it)."""
    p, items = report.plan, report.items
    return (
        f"run {report.run_id}: {p.trigger}; users visited {p.users_visited:,} of {p.users_total:,}, "
        f"definitions recollected {p.definitions_recollected} of {p.definitions_total}, "
        f"analyses rerun {p.analyses_rerun} of {p.analyses_total} ({report.seconds:.1f}s)\n"
        f"items: collected {items['collected']:,}, reused {items['reused'] + items['kept']:,} "
        f"({items['kept']:,} kept in the store, {items['reused']:,} from the cache), "
        f"uncollected {items['uncollected']:,}; model calls {report.model_calls}; results "
        f"{report.results['added']:,} added, {report.results['removed']:,} removed, "
        f"{report.results['unchanged']:,} unchanged"
    )


def _tables(report: RunReport) -> None:
    """Every component's population results as a table (`run --verbose`)."""
    from agent_factory.factory.views.summary import metric_text

    for name, comp in report.components.items():
        table = Table(title=f"{name}", show_header=True, title_justify="left")
        for col in ("metric", "layer", "stratum", "value", "95% CI", "n"):
            table.add_column(col, justify="right" if col in ("value", "n") else "left",
                             overflow="fold", no_wrap=col in ("value", "95% CI", "n"))
        for m in comp.metrics[:METRICS_SHOWN]:
            value, ci = metric_text(name, m.metric, m.value, m.low, m.high)  # as its component declares the kind
            n = f"{m.n:,}" if m.n is not None else ""
            table.add_row(m.metric, m.layer, m.stratum, value, ci, n)
        if len(comp.metrics) > METRICS_SHOWN:
            table.caption = f"{len(comp.metrics) - METRICS_SHOWN} more in --json"
        out.print(table)


@app.command()
def run(
    store: StoreOpt = DEFAULT_STORE,
    suite: SuiteOpt = None,
    pack: RunPackOpt = None,
    config: ConfigOpt = None,
    cache_dir: CacheOpt = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Units collected at once.")] = 8,
    workers: Annotated[
        int | None, typer.Option("--workers", min=1, help="Processes that collect a rules-only run (no model "
                                 "configured); default: one per core, up to 4, from 200 users on; 1: this process.")
    ] = None,
    full: Annotated[
        bool, typer.Option("--full", help="Recompute everything (rules afresh, model answers through the cache) "
                                          "instead of only what changed.")
    ] = False,
    unapproved: UnapprovedOpt = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Print every component's results table instead of the summary.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Evaluate the store, recomputing only what changed since the last run, then print the summary.

    New trace files rebuild the units of the users they touch; changed definitions are recollected on every
    unit; only the analyses that read changed data rerun; results are merged into the store. Unchanged
    inputs: nothing is collected or analysed. --full walks every unit again (model answers through the cache).
    """
    started = command_start()
    try:
        with open_project(store=store, suite=suite, pack=pack, config=config, cache=cache_dir,
                          unapproved=unapproved, on_notice=note) as p:
            with progress_bar(quiet=as_json) as progress:
                task = progress.add_task("evaluating users", total=None)
                report = p.run(full=full, concurrency=concurrency, workers=workers, started=started,
                               progress=lambda done, total: progress.update(task, completed=done, total=total))
            if as_json:
                emit_json(report.model_dump(mode="json"))
                return
            out.print(run_line(report), markup=False)
            if report.uncollected_reasons:
                out.print("uncollected by reason: "
                          + ", ".join(f"{k}: {v:,}" for k, v in report.uncollected_reasons.items()))
            if verbose:
                _tables(report)
                return
            from agent_factory.factory.views.summary import render

            print_lines(render(p.summary()))
    except AgentFactoryError as e:
        raise fail(e) from e


@app.command()
def watch(
    directory: Annotated[Path, typer.Argument(help="Directory to watch for new trace files.")],
    store: StoreOpt = DEFAULT_STORE,
    suite: SuiteOpt = None,
    pack: RunPackOpt = None,
    config: ConfigOpt = None,
    cache_dir: CacheOpt = None,
    interval: Annotated[float, typer.Option("--interval", min=0.0, help="Seconds between scans.")] = 10.0,
    settle: Annotated[
        float, typer.Option("--settle", min=0.0, help="Seconds a file must stay unchanged before it is read.")
    ] = 2.0,
    cycles: Annotated[
        int | None, typer.Option("--cycles", min=1, help="Stop after this many scans [default: run until Ctrl-C].")
    ] = None,
    unapproved: UnapprovedOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Ingest new trace files as they appear in DIR and run the pipeline on them (only new units are computed)."""

    def show(c: Cycle) -> None:
        if as_json:
            sys.stdout.write(json.dumps(c.model_dump(mode="json"), ensure_ascii=False, default=str) + "\n")
            sys.stdout.flush()
            return
        ing = c.ingest
        head = f"cycle {c.cycle}: {len(c.new_files)} new file(s)"
        if ing is not None:
            head += f", read {ing.read}, accepted {ing.accepted}, quarantined {ing.quarantined}"
        if c.waiting:
            head += f"; {len(c.waiting)} still being written"
        out.print(head, markup=False)
        if c.run is not None:
            out.print(run_line(c.run), markup=False)

    try:
        with open_project(store=store, suite=suite, pack=pack, config=config, cache=cache_dir,
                          unapproved=unapproved, on_notice=note) as p:
            p.watch(directory, interval=interval, settle=settle, cycles=cycles, on_cycle=show)
    except AgentFactoryError as e:
        raise fail(e) from e
    except KeyboardInterrupt:
        ctrl_c_handled()
        err.print("stopped")
