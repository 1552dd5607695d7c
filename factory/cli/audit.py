"""`agent-factory audit`: the inner loop over `Project.audit`."""

from __future__ import annotations

from typing import Annotated

import typer

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
    emit_json,
    err,
    fail,
    note,
    out,
)
from agent_factory.factory.project import DEFAULT_STORE, open_project


@app.command()
def audit(
    store: StoreOpt = DEFAULT_STORE,
    suite: SuiteOpt = None,
    pack: RunPackOpt = None,
    config: ConfigOpt = None,
    cache_dir: CacheOpt = None,
    rater: Annotated[
        list[str] | None,
        typer.Option("--rater", help="A second rater (litellm model string), repeatable; default: [models] audit "
                                     "in agent-factory.toml or AGENT_FACTORY_AUDIT_MODELS. It must be of another "
                                     "family than the models that collected the data."),
    ] = None,
    sample: Annotated[
        int | None, typer.Option("--sample", min=1, help="(unit, component) pairs to re-collect (default 200).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sample and of the bootstrap over users.")] = 0,
    no_rewrite: Annotated[
        bool, typer.Option("--no-rewrite", help="Retire failing items without asking the model for a rewrite.")
    ] = False,
    unapproved: UnapprovedOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Audit the evaluator: a stratified sample re-collected by a second rater, agreement per data item
    (admission at kappa >= 0.60), rules against models, criterion validity of every flag against the outcomes
    the traces carry, corrected estimates where labels exist. Failing items are retired (the next `run` reruns
    only the analyses that read them); with a small model and a built suite, a rewrite is proposed for review."""
    from agent_factory.factory.views.audit import audit_view

    try:
        with open_project(store=store, suite=suite, pack=pack, config=config, cache=cache_dir,
                          unapproved=unapproved, on_notice=note) as p:
            report = p.audit(raters=rater or (), sample=sample, seed=seed, propose=not no_rewrite,
                             on_step=None if as_json else (lambda s: err.print(f"audit: {s}", style="dim")))
            options = p.command_options
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json(report.model_dump(mode="json"))
        return
    out.print(audit_view(report, options=options, suite=str(suite) if suite else None))
