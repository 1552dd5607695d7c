"""`agent-factory simulate`, `ingest` and `stats`: traffic into the store, and what it holds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from agent_factory.adapters.base import adapter_names
from agent_factory.adapters.jsonio import MAX_FIELD_CHARS, MAX_RECORD_CHARS, MIN_FIELD_CHARS
from agent_factory.errors import AgentFactoryError, SpecError
from agent_factory.factory.cli.base import (
    EXIT_QUARANTINED,
    EXIT_USER_ERROR,
    MAX_ERROR_LINES,
    JsonOpt,
    PackOpt,
    StoreOpt,
    app,
    emit_json,
    err,
    fail,
    out,
    progress_bar,
)
from agent_factory.factory.project import DEFAULT_STORE, open_project


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
    from pydantic import ValidationError

    from agent_factory.factory.simulate import SimConfig, load_config
    from agent_factory.factory.simulate import simulate as run_sim
    from agent_factory.validation import describe_error

    overrides = {k: v for k, v in (("users", users), ("seed", seed)) if v is not None}
    try:
        cfg = load_config(config, **overrides) if config is not None else SimConfig(**overrides)
        with progress_bar(quiet=as_json) as progress:
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
    from agent_factory.adapters.jsonio import FieldLimits

    try:
        limits = FieldLimits(max_field_chars=max_field_chars, max_record_chars=max_record_chars)
        with open_project(store=store, pack=pack) as p, progress_bar(quiet=as_json) as progress:
            task = progress.add_task("ingesting", total=None)
            report = p.ingest(
                paths, fmt=fmt, limits=limits, workers=workers, replace=replace,
                on_file=lambda f: progress.update(task, description=f"ingesting {f.name}"),
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
def stats(store: StoreOpt = DEFAULT_STORE, as_json: JsonOpt = False) -> None:
    """Counts of real traffic in the store (turns, sessions, users, spans) and turns per segment."""
    try:
        with open_project(store=store) as p:
            data = p.stats()
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
