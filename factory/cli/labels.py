"""`agent-factory labels import` and `agreement`: people's labels as raters of items, and agreement among every
rater (people and models), each a few lines over `Project`."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agent_factory.errors import AgentFactoryError
from agent_factory.factory.cli.base import (
    JsonOpt,
    ReadPackOpt,
    ReadSuiteOpt,
    StoreOpt,
    _App,
    app,
    emit_json,
    fail,
    out,
    print_lines,
)
from agent_factory.factory.project import DEFAULT_STORE, open_project

if TYPE_CHECKING:
    from agent_factory.factory.loops.audit.labels import LabelImport


class LabelFormat(str, Enum):
    """The formats `labels import` reads."""

    mast = "mast"
    trail = "trail"
    who_and_when = "who-and-when"
    csv = "csv"


labels_app = _App(name="labels", help="People's labels as raters of items.", no_args_is_help=True)
app.add_typer(labels_app, name="labels")


@labels_app.command("import")
def import_(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="The label file (or the benchmark's folder).")],
    fmt: Annotated[LabelFormat, typer.Option("--format", help="What the file is.", case_sensitive=False)],
    store: StoreOpt = DEFAULT_STORE,
    suite: ReadSuiteOpt = None,
    pack: ReadPackOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Store human labels as raters (`human:<name>`) of items: MAST's annotators per failure mode, TRAIL's span
    annotations and Who&When's decisive steps mapped to the items they answer (the report says which, and which
    answer none), or a CSV `unit_id,item,rater,value` (optional user_id). A bad row stores nothing."""
    try:
        with open_project(store=store, suite=suite, pack=pack) as p:
            done = p.import_labels(path, fmt=fmt.value)
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json(done.model_dump(mode="json"))
        return
    print_lines(render_import(done))


def render_import(done: LabelImport) -> list[str]:
    """The lines `labels import` prints."""
    lines = [f"stored {done.labels} label(s) of {len(done.items)} item(s) on {done.units} unit(s) by "
             f"{', '.join(done.raters) or 'no rater'} from {done.source}"
             + (f" ({done.skipped} row(s) without a label skipped)" if done.skipped else ""),
             f"units the store has data of (a run evaluated them): {done.units_with_data} of {done.units}"]
    if done.mapped:
        lines.append("answer suite items:")
        lines += [f"  {m.label}: {m.count} -> {', '.join(m.items)}: {m.why}" for m in done.mapped]
    if done.unmapped:
        lines.append("answer no suite item:")
        lines += [f"  {m.label}: {m.count}" + (f" -> kept as {', '.join(m.items)}" if m.items else "")
                  + f": {m.why}" for m in done.unmapped]
    lines += [f"note: {n}" for n in done.notes]
    return lines


@app.command()
def agreement(
    store: StoreOpt = DEFAULT_STORE,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap over users.")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Agreement among every rater the store holds, people (`labels import`) and models (the suite's cascade,
    audit raters), per item and overall: Cohen's or Fleiss' kappa and Krippendorff's alpha with 95% intervals
    from a bootstrap over users; an item is admitted at kappa >= 0.60 (two decimals)."""
    try:
        with open_project(store=store) as p:
            report = p.agreement(seed=seed)
            options = p.command_options
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json(report.model_dump(mode="json"))
        return
    from agent_factory.factory.views.audit import agreement_view

    out.print(agreement_view(report, options=options))


__all__ = ["LabelFormat", "agreement", "import_", "labels_app", "render_import"]
