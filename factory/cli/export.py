"""`agent-factory export`: one row per unit of a level as csv, jsonl or parquet (`factory.views.export` builds it).

Registered on the app of `factory.cli.app` (which imports this module at its end), so it shares its options,
error handling and exit codes.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from agent_factory.errors import AgentFactoryError
from agent_factory.factory.cli.app import (
    JsonOpt,
    ReadPackOpt,
    ReadSuiteOpt,
    RedactorConfigOpt,
    StoreOpt,
    app,
    emit_json,
    fail,
    out,
)
from agent_factory.factory.store import DEFAULT_STORE


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


@app.command()
def export(
    level: Annotated[LevelChoice, typer.Option("--level", help="The units of the rows.", show_choices=True)],
    store: StoreOpt = DEFAULT_STORE,
    fmt: Annotated[
        FormatChoice | None,
        typer.Option("--format", help="File format (default: from --out's suffix, else csv)."),
    ] = None,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="The file to write (default: export-<level>.<format>).")
    ] = None,
    suite: ReadSuiteOpt = None,
    pack: ReadPackOpt = None,
    config: RedactorConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write one row per unit of a level: its ids, every per-unit datum and result of its layer, the outcome
    events joined to it, and the number of flags raised on it (total and per component). The columns are
    documented in the README ("Export columns"). Text from traces (ids included) is redacted; a csv has
    spreadsheet formulas neutralised."""
    from agent_factory.evaluators.collect.config import load_model_config
    from agent_factory.evaluators.findings import LEVELS
    from agent_factory.factory.store import Store
    from agent_factory.factory.views.export import (
        ExportSummary,
        build_table,
        default_out,
        format_for,
        read_export,
        redact_table,
        write_table,
    )
    from agent_factory.factory.views.show.read import flags_and_redactor

    if not store.exists():
        raise fail(AgentFactoryError(f"{store}: no store here yet; run `agent-factory ingest PATH` first"))
    lv = LEVELS[list(LevelChoice).index(level)]  # the same names, typed as the findings' Level
    chosen = format_for(out_file, fmt.value if fmt is not None else None)
    target = out_file if out_file is not None else default_out(lv, chosen)
    try:
        ref = load_model_config(config).redactor
        with Store(store, read_only=True) as st:
            specs, redactor = flags_and_redactor(st, suite, pack, ref)
            table = redact_table(build_table(lv, specs, read_export(st, specs, lv)), redactor)
        write_table(table, target, chosen)
    except AgentFactoryError as e:
        raise fail(e) from e
    except OSError as e:
        raise fail(AgentFactoryError(f"{e.filename or target}: cannot write the export ({e.strerror})")) from e
    summary = ExportSummary(out=str(target), level=lv, format=chosen, rows=table.num_rows,
                            columns=table.num_columns)
    if as_json:
        emit_json(summary.model_dump(mode="json"))
        return
    out.print(f"wrote {target}: {summary.rows} {lv} rows x {summary.columns} columns ({chosen})", soft_wrap=True)
