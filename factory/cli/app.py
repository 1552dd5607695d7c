"""The `agent-factory` command line: thin wrappers that parse options, call the library, and print.

Exit codes: 0 success; 1 an error of the user's input (spec, pack, option, file), or an ingest that accepted
nothing; 2 a usage error (typer); 3 some records were quarantined (everything else was ingested); 130 interrupted
(Ctrl-C), in one line.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any, cast

import duckdb
import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from typer.models import CommandFunctionType

import agent_factory
from agent_factory.adapters.base import adapter_names, get_adapter
from agent_factory.adapters.jsonio import MAX_FIELD_CHARS, MAX_RECORD_CHARS, MIN_FIELD_CHARS, FieldLimits
from agent_factory.errors import AgentFactoryError, SpecError, StoreError
from agent_factory.factory.store import DEFAULT_STORE, Store
from agent_factory.validation import describe_error

EXIT_USER_ERROR = 1
EXIT_QUARANTINED = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command ended by Ctrl-C
MAX_ERROR_LINES = 50

_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


def storage_error(e: BaseException) -> StoreError | None:
    """A failure of the storage under a command (disk full, a damaged store file) as the one line a user reads,
    or None for any other exception. DuckDB reports both as its own errors, from any query."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    full = (isinstance(e, OSError) and e.errno in _FULL) or any(
        s in text for s in ("No space left on device", "File too large", "Disk quota exceeded"))
    if full:
        where = f" ({e.filename})" if isinstance(e, OSError) and e.filename else ""
        return StoreError(f"the disk is full{where}: {text}; free some space and run the command again (a file "
                          "whose ingest was cut off is removed from the store the next time it is opened)")
    if isinstance(e, duckdb.Error):
        return StoreError(f"the store could not be read or written: {text}; it may be damaged: restore it from a "
                          "copy, or ingest the traces again into a new --store")
    return None


class _App(typer.Typer):
    """Typer whose commands end on a storage failure (disk full, a damaged store) with one line and exit 1."""

    def command(self, name: str | None = None, **kwargs: Any) -> Callable[[CommandFunctionType], CommandFunctionType]:
        """`typer.Typer.command`, the command wrapped so a storage failure becomes one line (`storage_error`)."""
        register = super().command(name, **kwargs)

        def decorator(f: CommandFunctionType) -> CommandFunctionType:
            @functools.wraps(f)
            def guarded(*a: Any, **kw: Any) -> Any:
                try:
                    return f(*a, **kw)
                except KeyboardInterrupt:
                    err.print("interrupted: what was complete is kept; a file whose ingest was cut off is removed "
                              "from the store when it is next opened, and the next run redoes what this one left",
                              soft_wrap=True, markup=False)
                    raise typer.Exit(EXIT_INTERRUPTED) from None
                except (OSError, duckdb.Error) as e:
                    problem = storage_error(e)
                    if problem is None:
                        raise
                    raise fail(problem) from e

            register(cast(CommandFunctionType, guarded))
            return f

        return decorator


app = _App(
    name="agent-factory",
    help="Closed-loop evaluation of LLM agents: ingest (or simulate) traces, build evaluator suites, run them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True, highlight=False)
out = Console(highlight=False)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("agent-factory")
        except PackageNotFoundError:  # running from a source tree that was never installed
            v = "unknown (not installed)"
        out.print(f"agent-factory {v}", markup=False)
        raise typer.Exit(0)


@app.callback()
def _options(
    show_version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Closed-loop evaluation of LLM agents: ingest (or simulate) traces, build evaluator suites, run them."""

StoreOpt = Annotated[
    Path,
    typer.Option("--store", envvar="AGENT_FACTORY_STORE", help="DuckDB store file.", show_default=True),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
PackOpt = Annotated[
    str, typer.Option("--pack", envvar="AGENT_FACTORY_PACK", help="Knowledge pack: a built-in name or a YAML path.")
]


def fail(e: Exception) -> typer.Exit:
    """The one-line error a command exits with (exit 1): what failed, never a traceback."""
    err.print(f"[red]error:[/red] {e}", soft_wrap=True)
    return typer.Exit(EXIT_USER_ERROR)


def emit_json(data: Any) -> None:
    """Print `data` as the `--json` output (indented, UTF-8 text kept)."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def _progress(*, quiet: bool) -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, disable=quiet or not err.is_terminal, transient=True,
    )


@app.command()
def simulate(
    out_dir: Annotated[Path, typer.Option("--out", help="Directory to write traces and ground truth into.")] = Path(
        "sim"
    ),
    users: Annotated[
        int | None, typer.Option("--users", min=1, help="Number of simulated users [default: 1136].")
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Random seed: same seed, same bytes [default: 0].")] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="YAML or JSON file with more simulator knobs (SimConfig).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write simulated traffic of a business-analysis agent (OTLP JSON lines) with its ground truth."""
    from agent_factory.factory.simulate import SimConfig, load_config
    from agent_factory.factory.simulate import simulate as run_sim

    overrides = {k: v for k, v in (("users", users), ("seed", seed)) if v is not None}
    try:
        cfg = load_config(config, **overrides) if config is not None else SimConfig(**overrides)
        with _progress(quiet=as_json) as progress:
            task = progress.add_task("simulating users", total=cfg.users)
            summary = run_sim(cfg, out_dir, progress=lambda done, total: progress.update(task, completed=done))
    except AgentFactoryError as e:
        raise fail(e) from e
    except ValidationError as e:  # the --users / --seed overrides
        raise fail(SpecError(f"simulate: {describe_error(e, overrides)}")) from e
    except OSError as e:
        raise fail(AgentFactoryError(f"{e.filename or out_dir}: cannot write the simulation ({e.strerror})")) from e
    data = summary.model_dump(mode="json")
    if as_json:
        emit_json(data)
        return
    out.print(f"wrote simulated traffic to {out_dir}")
    for k, v in data.items():
        out.print(f"  {k}: {v}")


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Trace files or directories to ingest.")],
    store: StoreOpt = DEFAULT_STORE,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format", help="Input format; auto-detected when omitted. One of: " + ", ".join(adapter_names())
        ),
    ] = None,
    pack: PackOpt = "default",
    max_field_chars: Annotated[int, typer.Option(
        "--max-field-chars", min=MIN_FIELD_CHARS,
        help="Longer text fields are cut to this many characters, head and tail kept, and the cut declared.",
    )] = MAX_FIELD_CHARS,
    max_record_chars: Annotated[int, typer.Option(
        "--max-record-chars", min=1, help="A record holding more text than this in all is quarantined.",
    )] = MAX_RECORD_CHARS,
    workers: Annotated[int | None, typer.Option(
        "--workers", min=1, help="Processes that assemble a large file's traces into turns; default: one per core, "
                                 "up to 4, from 20,000 spans on; 1: this process.",
    )] = None,
    replace: Annotated[bool, typer.Option(
        "--replace", help="A file ingested before under the same path with other content (an edited file): remove "
                          "what that earlier version stored, then read this one. Without it, the earlier records "
                          "stay and this version's records under their ids are quarantined.",
    )] = False,
    as_json: JsonOpt = False,
) -> None:
    """Read trace files into the store: each file atomically, bad records quarantined with a reason."""
    from agent_factory.factory.ingest.files import expand_paths, ingest_paths
    from agent_factory.knowledge_packs import load_pack

    try:
        if fmt is not None:
            get_adapter(fmt)
        expand_paths(paths)  # a missing path fails here, before a store file is created
        kp = load_pack(pack)
        limits = FieldLimits(max_field_chars=max_field_chars, max_record_chars=max_record_chars)
        with Store(store) as st, _progress(quiet=as_json) as progress:
            task = progress.add_task("ingesting", total=None)
            report = ingest_paths(
                st, paths, fmt=fmt, pack=kp, limits=limits, workers=workers, replace=replace,
                on_file=lambda p: progress.update(task, description=f"ingesting {p.name}"),
                on_record=lambda n: progress.update(task, completed=n),
            )
    except AgentFactoryError as e:
        raise fail(e) from e
    skipped = sum(1 for f in report.files if f.status == "already-ingested")
    if as_json:
        emit_json(report.model_dump(mode="json"))
    else:
        for q in report.errors[:MAX_ERROR_LINES]:
            err.print(q.line(), soft_wrap=True, markup=False)
        more = len(report.errors) - MAX_ERROR_LINES + report.errors_not_shown
        if more > 0:
            err.print(f"... and {more} more quarantined records (see --json, or the store's quarantine table)")
        for c in report.truncated[:MAX_ERROR_LINES]:
            err.print(f"{c.source}: {c.location}: {c.field}: cut from {c.original_chars} to {c.kept_chars} "
                      "characters (head and tail kept)", soft_wrap=True, markup=False)
        cut = sum(f.truncated for f in report.files)
        out.print(
            f"read {report.read}, accepted {report.accepted}, quarantined {report.quarantined} "
            f"from {len(report.files)} file(s)" + (f"; {skipped} already ingested, unchanged" if skipped else "")
            + (f"; {report.already_stored} record(s) already stored" if report.already_stored else "")
            + (f"; {cut} field(s) cut to {max_field_chars} characters" if cut else "") + f" -> {store}"
        )
        if report.pending_spans:
            err.print(f"{report.pending_spans} span(s) of {report.pending_traces} trace(s) wait for their parent span "
                      "(kept; joined to their trace when a file with the parent is ingested)",
                      soft_wrap=True, markup=False)
    if not report.files:
        # Nothing to read (a directory without trace files): no record was accepted, a failure as below.
        if not as_json:
            where = ", ".join(str(p) for p in paths).replace("[", "\\[")  # a path is no markup
            err.print(f"[red]error:[/red] no trace file in {where} (a directory's .json, .jsonl and .ndjson files are "
                      "read, gzipped or not); nothing was ingested", soft_wrap=True)
        raise typer.Exit(EXIT_USER_ERROR)
    if report.quarantined and not report.accepted and not skipped:
        # No record of the input is in the store (none accepted now, none earlier): a failure, not a partial one.
        if not as_json:
            err.print("[red]error:[/red] no record was accepted; nothing was ingested")
        raise typer.Exit(EXIT_USER_ERROR)
    if report.quarantined:
        raise typer.Exit(EXIT_QUARANTINED)


@app.command()
def build(
    spec: Annotated[Path, typer.Option("--spec", help="The agent's system prompt (role spec), markdown or text.")],
    pack: Annotated[
        str, typer.Option("--pack", help="Base knowledge pack: a built-in name or a YAML path.")
    ] = "default",
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Suite directory to write; default: suites/<spec>.")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Model config (agent-factory.toml); default: ./agent-factory.toml if present. "
                                      "With a small model, it compiles the sentences the rules could not."),
    ] = None,
    no_model: Annotated[
        bool, typer.Option("--no-model", help="Use only the deterministic compiler, even with a model configured.")
    ] = False,
    cache_dir: Annotated[
        Path, typer.Option("--cache", help="Cache of the model's answers (a rebuild asks nothing again).")
    ] = Path(".agent-factory/cache"),
    as_json: JsonOpt = False,
) -> None:
    """Compile a role spec into a reviewable evaluator suite: clauses, data definitions, schemas, manifest."""
    from agent_factory.evaluators.collect import DatumCache, load_model_config
    from agent_factory.evaluators.collect.backends import CallCounters
    from agent_factory.factory.compile import COMPILER_VERSION, build_suite

    if not spec.exists():
        raise fail(AgentFactoryError(f"{spec}: no such spec file"))
    target = out_dir if out_dir is not None else Path("suites") / spec.stem
    counters = CallCounters()
    try:
        cfg = None if no_model else load_model_config(config)
        small = cfg.small if cfg is not None else None
        if small is None:
            report = build_suite(spec, pack=pack, out=target)
        else:
            # The cache is opened only for model builds: a deterministic build leaves no directory behind.
            with DatumCache(cache_dir) as cache:
                report = build_suite(spec, pack=pack, out=target, model=cfg, cache=cache, counters=counters)
    except AgentFactoryError as e:
        raise fail(e) from e
    compiler = f"deterministic compiler {COMPILER_VERSION}"
    if small is not None:
        compiler += (f", then the model orchestrator ({small.name}; {counters.model_calls} model call(s), "
                     f"{counters.tokens} tokens; answers cached in {cache_dir})")
    elif not no_model:
        compiler += " (no model configured: --config or AGENT_FACTORY_SMALL_MODEL adds one)"
    err.print(f"compiler: {compiler}", markup=False, soft_wrap=True)
    if as_json:
        emit_json(report.model_dump(mode="json"))
        return
    data = report.model_dump(mode="json")
    from_pack = sum(1 for c in data["clauses"] if c["origin"] == "pack")
    total = len(data["clauses"])
    table = Table(title=f"{total} clauses the suite runs: {total - from_pack} from {spec} "
                        f"({data['normative_sentences']} rule sentences, {data['compiled']} clauses compiled), "
                        f"{from_pack} from the pack {data['extends']}", title_justify="left")
    for col in ("id", "line", "trigger", "obligation", "check"):
        table.add_column(col, overflow="fold")
    for c in data["clauses"]:
        line = str(c["source_line"]) if c["source_line"] is not None else "pack"
        table.add_row(str(c["id"]), line, str(c["trigger"]), str(c["obligation"]), str(c["check"]))
    out.print(table)
    for m in data["merged"]:
        lines = ", ".join(str(n) for n in m["lines"])
        where = f"{spec.name} line{'s' if len(m['lines']) > 1 else ''} {lines}"
        twice = f" (also {', '.join(m['dropped'])}, not run)" if m["dropped"] else ""
        pack = f" and the pack's clause {m['pack_clause']}" if m["pack_clause"] else ""
        out.print(f"merged: {where}{twice}{pack} state one check, {m['check']}: run once as {m['kept']} "
                  f"(source: line {m['source_line']}); {m['note']}", markup=False, soft_wrap=True)
    out.print(f"{data['always_triggers']} clause(s) have a trigger that matches every unit (their obligation is "
              "asked of every unit)", markup=False)
    if data["uncompiled"]:
        err.print(f"could not compile {len(data['uncompiled'])} sentence(s):")
        for u in data["uncompiled"]:
            err.print(f"  {spec}:{u.get('line', u.get('source_line', '?'))}: {u.get('reason', '')}: "
                      f"{u.get('sentence', u.get('text', ''))}", markup=False, soft_wrap=True)
    out.print(f"suite written to {target} ({data.get('files', '?')} files); review it, approve it with "
              f"`agent-factory approve {target}`, then `agent-factory run --suite {target}`", markup=False)


ReadSuiteOpt = Annotated[
    Path | None, typer.Option("--suite", help="The suite the store was run with (its clauses' flags).")
]
"""`--suite` of the commands that read a store's findings (report, summary, show, export)."""
ReadPackOpt = Annotated[str | None, typer.Option("--pack", help="Knowledge pack, without --suite.")]
"""`--pack` of the commands that read a store's findings."""
RedactorConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="agent-factory.toml naming the redactor (default: its lookup).")
]
"""`--config` of the commands that quote trace text (report --evidence, show)."""
SuiteOpt = Annotated[
    Path | None, typer.Option("--suite", help="Suite directory (built by `build`, approved by `approve`).")
]
RunPackOpt = Annotated[
    str | None,
    typer.Option("--pack", envvar="AGENT_FACTORY_PACK", help="Knowledge pack; default: the one used at ingest."),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="Model config (agent-factory.toml); default: ./agent-factory.toml if present."),
]
CacheOpt = Annotated[Path | None, typer.Option("--cache", help="Cache directory; default: beside the store.")]
UnapprovedOpt = Annotated[
    bool, typer.Option("--unapproved", help="Run a built suite nobody has approved yet (its working files).")
]


def _runner(st: Store, store: Path, *, stack: ExitStack, suite: Path | None, pack: str | None,
            config: Path | None, cache_dir: Path | None, unapproved: bool, concurrency: int = 8,
            full: bool = False, started: float | None = None, workers: int | None = None) -> Any:
    """The pipeline runner for a store and suite (says on stderr which suite version runs); its datum cache
    is closed with `stack`."""
    from agent_factory.evaluators.collect import Budget, Cascade, DatumCache, load_model_config, load_redactor
    from agent_factory.evaluators.collect.prompt import template_dir
    from agent_factory.factory.pipeline.engine import Runner
    from agent_factory.factory.suite.read import load_suite

    chosen = load_suite(suite, pack=pack, store=st, allow_unapproved=unapproved)
    ingested = st.get_meta("pack")
    if ingested and ingested not in (chosen.pack.name, chosen.pack.extends):
        # Segments, hand-offs, closing messages and coverage were decided at ingest with that pack: results of
        # this suite would mix two packs' knowledge and replace the stored results without a word.
        raise SpecError(f"{store}: ingested with pack {ingested!r}, but the suite runs pack {chosen.pack.name!r}"
                        f"{f' (extends {chosen.pack.extends!r})' if chosen.pack.extends else ''}; ingest into a "
                        f"new store with --pack {chosen.pack.extends or chosen.pack.name}, or run with the pack "
                        f"used at ingest")
    if chosen.notice:
        err.print(f"[yellow]note:[/yellow] {chosen.notice}", soft_wrap=True)
    cfg = load_model_config(config)
    # Prompts render from the suite's (approved) templates: a template edit a person approved is what runs.
    cascade = Cascade(
        cfg, cache=stack.enter_context(DatumCache(cache_dir if cache_dir is not None else store.parent / "cache")),
        budget=Budget(cfg.budget), templates=template_dir(chosen.files),
        # The pack's phone regions: prompts are redacted as `show` and `export` are.
        redactor=load_redactor(cfg.redactor, phone_regions=chosen.pack.phone_regions),
    )
    return Runner(st, pack=chosen.pack, collector=cascade, specs=chosen.components, concurrency=concurrency,
                  full=full, started=started, workers=workers)


def _value_text(v: Any, m: dict[str, Any]) -> str:
    """A result's value for people: counts (whole numbers without an interval) as integers, rates to 3 places."""
    if isinstance(v, float) and v.is_integer() and m.get("low") is None and m.get("high") is None:
        return f"{int(v):,}"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def _run_line(report: Any) -> str:
    p, items = report.plan, report.items
    return (
        f"run {report.run_id}: {p['trigger']}; users visited {p['users_visited']:,} of {p['users_total']:,}, "
        f"definitions recollected {p['definitions_recollected']} of {p['definitions_total']}, "
        f"analyses rerun {p['analyses_rerun']} of {p['analyses_total']} ({report.seconds:.1f}s)\n"
        f"items: collected {items['collected']:,}, reused {items['reused'] + items['kept']:,} "
        f"({items['kept']:,} kept in the store, {items['reused']:,} from the cache), "
        f"uncollected {items['uncollected']:,}; model calls {report.model_calls}; results "
        f"{report.results['added']:,} added, {report.results['removed']:,} removed, "
        f"{report.results['unchanged']:,} unchanged"
    )


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
    started = _command_start()
    if not store.exists():
        raise fail(AgentFactoryError(f"{store}: no store here yet; run `agent-factory ingest PATH` first"))
    try:
        with Store(store) as st, ExitStack() as stack:
            runner = _runner(st, store, stack=stack, suite=suite, pack=pack, config=config, cache_dir=cache_dir,
                             unapproved=unapproved, concurrency=concurrency, full=full, started=started,
                             workers=workers)
            with _progress(quiet=as_json) as progress:
                task = progress.add_task("evaluating users", total=runner.users_to_visit())
                runner.progress = lambda done: progress.update(task, completed=done)
                report = runner.run()
            from agent_factory.evaluators.findings import all_flags

            flags = all_flags(runner.pack, runner.specs)
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json(report.model_dump(mode="json"))
        return
    out.print(_run_line(report), markup=False)
    if report.uncollected_reasons:
        out.print("uncollected by reason: " + ", ".join(f"{k}: {v:,}" for k, v in report.uncollected_reasons.items()))
    if not verbose:
        from agent_factory.factory.cli.summary import print_summary

        try:
            print_summary(store, flags, suite=suite)
        except AgentFactoryError as e:
            raise fail(e) from e
        return
    for name, comp in report.components.items():
        table = Table(title=f"{name}", show_header=True, title_justify="left")
        for col in ("metric", "layer", "stratum", "value", "95% CI", "n"):
            table.add_column(col, justify="right" if col in ("value", "n") else "left",
                             overflow="fold", no_wrap=col in ("value", "95% CI", "n"))
        for m in comp["metrics"][:25]:
            v = m["value"]
            ci = f"{m['low']:.3f}-{m['high']:.3f}" if m["low"] is not None and m["high"] is not None else ""
            table.add_row(m["metric"], m["layer"], m["stratum"], _value_text(v, m), ci, f"{m['n']:,}")
        if len(comp["metrics"]) > 25:
            table.caption = f"{len(comp['metrics']) - 25} more in --json"
        out.print(table)


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
    from agent_factory.factory.pipeline.watch import Cycle
    from agent_factory.factory.pipeline.watch import watch as run_watch

    if not directory.is_dir():
        raise fail(AgentFactoryError(f"{directory}: not a directory"))
    store.parent.mkdir(parents=True, exist_ok=True)

    def make_run(st: Store) -> Any:
        with ExitStack() as stack:
            return _runner(st, store, stack=stack, suite=suite, pack=pack, config=config, cache_dir=cache_dir,
                           unapproved=unapproved).run()

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
            out.print(_run_line(c.run), markup=False)

    try:
        from agent_factory.factory.suite.read import load_suite

        with Store(store) as st:  # the suite's pack also segments the traffic at ingest
            kp = load_suite(suite, pack=pack, store=st, allow_unapproved=unapproved).pack
        run_watch(directory, store, pack=kp, make_run=make_run, interval=interval, settle=settle, cycles=cycles,
                  on_cycle=show)
    except AgentFactoryError as e:
        raise fail(e) from e
    except KeyboardInterrupt:
        err.print("stopped")


@app.command()
def stats(store: StoreOpt = DEFAULT_STORE, as_json: JsonOpt = False) -> None:
    """Counts of real traffic in the store (turns, sessions, users, spans) and turns per segment."""
    try:
        with Store(store, read_only=True) as st:
            recover = st.needs_recovery()
            data = None if recover else st.counts()
        if data is None:  # an interrupted ingest left rows behind: a read-write open of this store removes them
            with Store(store) as st:
                data = st.counts()
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json(data)
        return
    table = Table(title=f"store {store}", show_header=True)
    table.add_column("real traffic")
    table.add_column("count", justify="right")
    for k in ("turns", "sessions", "users", "spans"):
        table.add_row(k, f"{data[k]:,}")
    table.add_row("steps (spans below a root)", f"{data['steps']:,}")
    if data["turns"]:
        table.add_row("spans per turn", f"{data['spans'] / data['turns']:.2f}")
        table.add_row("steps per turn", f"{data['steps'] / data['turns']:.2f}")
    out.print(table)
    seg = Table(title="turns by segment (only 'real' is analysed)")
    seg.add_column("segment")
    seg.add_column("turns", justify="right")
    seg.add_column("share", justify="right")
    total = sum(data["segments"].values()) or 1
    for name, n in data["segments"].items():
        seg.add_row(name, f"{n:,}", f"{n / total:.1%}")
    out.print(seg)
    if data["pending"]["spans"]:
        out.print(f"pending spans (waiting for their parent span): {data['pending']['spans']:,} of "
                  f"{data['pending']['traces']:,} trace(s)")
    out.print(
        f"quarantined records: {data['all']['quarantined']:,}; turns with incomplete evidence: "
        f"{data['all']['incomplete_evidence_turns']:,}; turns with injection flags: "
        f"{data['all']['turns_with_injection_flags']:,}"
    )


_entry_started: float | None = None
"""Set by `main()`: when the process began importing the package (`agent_factory.IMPORTED_AT`)."""


def _command_start() -> float:
    """When the current command began, for the wall time it reports: the process's import of this module when
    the command came through `main()` (the console script and `python -m` import it just before), else now (a
    command invoked in-process, as tests do)."""
    global _entry_started
    start, _entry_started = _entry_started, None
    return start if start is not None else time.perf_counter()


def main() -> None:  # pragma: no cover - console entry
    """The console entry point, `agent-factory`."""
    global _entry_started
    _entry_started = agent_factory.IMPORTED_AT
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    app()


from agent_factory.factory.cli import review as cli_review  # noqa: E402,F401,I001  (registers diff and approve)
from agent_factory.factory.cli import report as cli_report  # noqa: E402,F401,I001  (registers report)
from agent_factory.factory.cli import summary as cli_summary  # noqa: E402,F401,I001  (registers summary)
from agent_factory.factory.cli import export as cli_export  # noqa: E402,F401,I001  (registers export)
from agent_factory.factory.cli import show as cli_show  # noqa: E402,F401,I001  (registers show)
