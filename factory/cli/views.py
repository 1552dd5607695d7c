"""`agent-factory summary`, `show`, `export` and `report`: the views of a store already run, each a few lines
over `Project` (`factory.views` builds what they print or write). Reading results approves nothing, so they read a
built suite's flags whether or not it is approved (`unapproved=True`)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from agent_factory.errors import AgentFactoryError
from agent_factory.factory.cli.base import (
    JsonOpt,
    ReadPackOpt,
    ReadSuiteOpt,
    RedactorConfigOpt,
    StoreOpt,
    app,
    emit_json,
    err,
    fail,
    out,
    print_lines,
)
from agent_factory.factory.project import DEFAULT_STORE, open_project

if TYPE_CHECKING:
    from agent_factory.factory.views.export import Format


@app.command()
def summary(
    store: StoreOpt = DEFAULT_STORE,
    suite: ReadSuiteOpt = None,
    pack: ReadPackOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the few results that matter per component, worst first, with their 95% intervals and n; each
    flag's association with the outcomes the traces carry; and where to look next."""
    from agent_factory.factory.views.summary import render

    try:
        with open_project(store=store, suite=suite, pack=pack, unapproved=True) as p:
            found = p.summary()
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json(found.model_dump(mode="json"))
        return
    print_lines(render(found))


@app.command()
def show(
    unit_id: Annotated[
        str | None,
        typer.Argument(metavar="UNIT_ID", help="A span, turn, conversation or user id (ids: `show --worst 10`)."),
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
    worst: Annotated[
        int | None, typer.Option("--worst", min=1, help="List the N units with most flags meaning bad raised.")
    ] = None,
    component: Annotated[
        str | None, typer.Option("--component", help="With --worst: count only this component's flags.")
    ] = None,
    clause: Annotated[
        str | None, typer.Option("--clause", help="With --worst: count only conduct's flag of this clause.")
    ] = None,
    level: Annotated[
        str, typer.Option("--level", help="With --worst: rank conversations, turns or users.")
    ] = "conversation",
    suite: ReadSuiteOpt = None,
    pack: ReadPackOpt = None,
    config: RedactorConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show one unit: its evidence (request, answer, spans), every atomic datum with its value, reason,
    collector and the text its evidence pointers cite (marked «»), the per-unit results and the flags raised on
    it. Or, with --worst N, the units most flagged, each with its flags and one redacted quote."""
    from agent_factory.factory.views.show.text import render_unit, render_worst
    from agent_factory.factory.views.show.unit import WORST_LEVELS

    try:
        if (unit_id is None) == (worst is None):
            raise AgentFactoryError("show: give a UNIT_ID or --worst N (not both)")
        if worst is None and (component or clause or level != "conversation"):
            raise AgentFactoryError("show: --component, --clause and --level go with --worst N")
        if level not in WORST_LEVELS:
            raise AgentFactoryError(f"show: unknown --level {level!r}; valid: {', '.join(WORST_LEVELS)}")
        with open_project(store=store, suite=suite, pack=pack, config=config, unapproved=True) as p:
            if unit_id is not None:
                shown = p.show(unit_id)
                if as_json:
                    emit_json(shown.model_dump(mode="json"))
                else:
                    print_lines(render_unit(shown))
                return
            ranked = p.worst(cast(int, worst), level=level, component=component, clause=clause)
            if as_json:
                emit_json(ranked.model_dump(mode="json"))
            else:
                print_lines(render_worst(ranked, options=p.command_options))
    except AgentFactoryError as e:
        raise fail(e) from e


class LevelChoice(str, Enum):
    """The units of the rows (typer lists these and exits 2 on any other)."""

    span = "span"
    turn = "turn"
    conversation = "conversation"
    user = "user"


class FormatChoice(str, Enum):
    """The file formats written."""

    csv = "csv"
    jsonl = "jsonl"
    parquet = "parquet"
    otlp_json = "otlp-json"


@app.command()
def export(
    level: Annotated[
        LevelChoice | None,
        typer.Option("--level", help="The units of the rows (required for csv, jsonl and parquet; not for "
                     "otlp-json, which writes every stored trace).", show_choices=True),
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
    fmt: Annotated[
        FormatChoice | None,
        typer.Option("--format", help="File format (default: from --out's suffix, else csv); otlp-json: the "
                     "stored traces as one OTLP/JSON document, which `ingest` reads back as the same traces."),
    ] = None,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="The file to write (default: export-<level>.<format>, "
                                  "export-traces.otlp.json for otlp-json).")
    ] = None,
    suite: ReadSuiteOpt = None,
    pack: ReadPackOpt = None,
    config: RedactorConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write one row per unit of a level: its ids, every per-unit datum and result of its layer, the outcome
    events joined to it, and the number of flags raised on it (total and per component). The columns are
    documented in the README ("Export columns"). Text from traces (ids included) is redacted; a csv has
    spreadsheet formulas neutralised. With `--format otlp-json`, the stored traces instead (docs/export.md)."""
    from agent_factory.evaluators.findings import LEVELS

    if fmt is FormatChoice.otlp_json:
        if level is not None:
            err.print("error: --level does not apply to --format otlp-json (it writes every stored trace)",
                      markup=False, soft_wrap=True)
            raise typer.Exit(2)
        _export_otlp(store, out_file, suite, pack, config, as_json)
        return
    if level is None:
        raise typer.BadParameter("required for csv, jsonl and parquet", param_hint="'--level'")
    lv = LEVELS[list(LevelChoice).index(level)]  # the same names, typed as the findings' Level
    try:
        with open_project(store=store, suite=suite, pack=pack, config=config, unapproved=True) as p:
            summary = p.export(lv, out=out_file, fmt=cast("Format | None", fmt.value if fmt is not None else None))
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json(summary.model_dump(mode="json"))
        return
    out.print(f"wrote {summary.out}: {summary.rows} {lv} rows x {summary.columns} columns ({summary.format})",
              soft_wrap=True)


def _export_otlp(store: Path, out_file: Path | None, suite: Path | None, pack: str | None, config: Path | None,
                 as_json: bool) -> None:
    """`export --format otlp-json`: the store's traces as one OTLP/JSON document, redacted."""
    from agent_factory.factory.views.export import default_otlp_out, export_otlp

    try:
        with open_project(store=store, suite=suite, pack=pack, config=config, unapproved=True) as p:
            if not p.store_path.exists():
                raise AgentFactoryError(f"{p.store_path}: no store here yet; run `agent-factory ingest PATH` first")
            written = export_otlp(p.store(), out_file or default_otlp_out(), p.redactor)
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json(written.model_dump(mode="json"))
        return
    lost = ", ".join(f"{k} {n}" for k, n in written.not_carried.items())
    out.print(f"wrote {written.out}: {written.conversations} conversations, {written.turns} turns, {written.spans} "
              f"spans ({written.format})" + (f"; not carried: {lost}" if lost else ""), soft_wrap=True)


@app.command()
def report(
    store: StoreOpt = DEFAULT_STORE,
    out_file: Annotated[Path, typer.Option("--out", help="The HTML file to write.")] = Path("report.html"),
    evidence: Annotated[
        bool, typer.Option("--evidence", help="Add redacted example quotes of the evidence behind each finding.")
    ] = False,
    with_composite: Annotated[
        bool, typer.Option("--composite", help="Add a weighted composite, labelled as a view, at the end.")
    ] = False,
    suite: ReadSuiteOpt = None,
    pack: ReadPackOpt = None,
    config: RedactorConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write one self-contained HTML report (scripts, styles and data inline): the seven components at the four
    layers, the spine, each component's results with plots, outcome associations. Aggregates only by default."""
    try:
        with open_project(store=store, suite=suite, pack=pack, config=config, unapproved=True) as p:
            written = p.report(out_file, evidence=evidence, composite=with_composite)
    except (AgentFactoryError, OSError) as e:
        raise fail(e) from e
    if as_json:
        emit_json(written.model_dump(mode="json"))
        return
    out.print(f"wrote {out_file} ({written.bytes / 1e6:.1f} MB): {len(written.sections)} sections, "
              f"{written.charts} plots" + (f", {written.quotes} redacted quotes" if evidence else ""), soft_wrap=True)
    for key, why in written.absent.items():
        out.print(f"  {key}: {why}", soft_wrap=True)
