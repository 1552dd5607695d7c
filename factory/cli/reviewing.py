"""`agent-factory review export` and `review import`: a sample of the evaluator's data for people to label
offline in a browser, and the labels read back as human raters (`ReviewJobs` of `Project`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

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
    fail,
    out,
)
from agent_factory.factory.project import DEFAULT_STORE, open_project
from agent_factory.factory.project.reviewing import DEFAULT_REVIEW_SAMPLE

# The group is an app of the same class as the main one, so its commands end on a storage failure or Ctrl-C with
# one line as every other command does.
review_app = type(app)(
    name="review", help="Label a sample of the evaluator's data by hand: export a page, import its labels.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)
app.add_typer(review_app, name="review")


@review_app.command("export")
def review_export(
    store: StoreOpt = DEFAULT_STORE,
    suite: ReadSuiteOpt = None,
    pack: ReadPackOpt = None,
    config: RedactorConfigOpt = None,
    sample: Annotated[
        int, typer.Option("--sample", min=1, help="(unit, component) pairs to draw, as `audit --sample`.")
    ] = DEFAULT_REVIEW_SAMPLE,
    seed: Annotated[int, typer.Option("--seed", help="The draw's seed (the same seed draws the same pairs).")] = 0,
    out_dir: Annotated[Path, typer.Option("--out", help="The directory to write review.csv and review.html in.")]
    = Path("review"),
    as_json: JsonOpt = False,
) -> None:
    """Write a stratified sample of (unit, item) pairs to label: review.csv (one row per pair, with the question
    and the evaluator's value) and review.html, one self-contained page a person labels offline (evidence
    redacted; progress kept in the browser) and that downloads the labels as CSV for `review import`."""
    try:
        with open_project(store=store, suite=suite, pack=pack, config=config, unapproved=True) as p:
            done = p.review_export(out_dir, sample=sample, seed=seed)
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json(done.model_dump(mode="json"))
        return
    out.print(f"{done.pairs} questions on {done.units} units ({len(done.items)} items, seed {done.sample.seed}): "
              f"open {done.html} in a browser; {done.csv} lists the same pairs", markup=False, soft_wrap=True)


@review_app.command("import")
def review_import(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="The labels the review page downloaded (CSV).")],
    store: StoreOpt = DEFAULT_STORE,
    suite: ReadSuiteOpt = None,
    pack: ReadPackOpt = None,
    config: RedactorConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Store the labels of a file the review page downloaded (`unit_id,item,rater,value`; a filled review.csv
    too) as people's labels. Every row is checked first: a bad row fails naming its line and field, and nothing
    is stored."""
    try:
        with open_project(store=store, suite=suite, pack=pack, config=config, unapproved=True) as p:
            done = p.review_import(file)
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json(done.model_dump(mode="json"))
        return
    skipped = f"; {done.skipped} rows without a value skipped" if done.skipped else ""
    out.print(f"{done.labels} labels of {', '.join(done.raters) or 'nobody'} on {done.units} units "
              f"({len(done.items)} items) stored as {done.source}{skipped}", markup=False, soft_wrap=True)


__all__ = ["review_app", "review_export", "review_import"]
