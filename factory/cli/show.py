"""`agent-factory show`: one unit with its evidence, data, results and flags; or `--worst N`, the units most
flagged with one quote each.

Registered on the app of `factory.cli.app` (which imports this module at its end), so it shares its options,
error handling and exit codes.
"""

from __future__ import annotations

from typing import Annotated, cast

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


def _lines(lines: list[str]) -> None:
    # Trace text is data: no rich markup, no emoji codes, no highlighting, never re-wrapped into new lines.
    for line in lines:
        out.print(line, markup=False, emoji=False, highlight=False, soft_wrap=True)


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
    from agent_factory.evaluators.collect.config import load_model_config
    from agent_factory.factory.store import Store
    from agent_factory.factory.views.show.read import flags_and_redactor, read_unit, read_worst
    from agent_factory.factory.views.show.text import render_unit, render_worst
    from agent_factory.factory.views.show.unit import WORST_LEVELS

    try:
        if (unit_id is None) == (worst is None):
            raise AgentFactoryError("show: give a UNIT_ID or --worst N (not both)")
        if worst is None and (component or clause or level != "conversation"):
            raise AgentFactoryError("show: --component, --clause and --level go with --worst N")
        if level not in WORST_LEVELS:
            raise AgentFactoryError(f"show: unknown --level {level!r}; valid: {', '.join(WORST_LEVELS)}")
        if not store.exists():
            raise AgentFactoryError(f"{store}: no store here yet; run `agent-factory ingest PATH` and `run` first")
        ref = load_model_config(config).redactor
        with Store(store, read_only=True) as st:
            specs, redactor = flags_and_redactor(st, suite, pack, ref)
            if unit_id is not None:
                shown = read_unit(st, unit_id, specs, redactor)
            else:
                ranked = read_worst(st, specs, redactor, n=cast(int, worst), level=level,
                                    component=component, clause=clause)
    except AgentFactoryError as e:
        raise fail(e) from e
    if unit_id is not None:
        if as_json:
            emit_json(shown.model_dump(mode="json"))
        else:
            _lines(render_unit(shown))
        return
    if as_json:
        emit_json(ranked.model_dump(mode="json"))
        return
    from agent_factory.factory.cli.summary import store_flag

    _lines(render_worst(ranked, options=store_flag(store, suite)))
