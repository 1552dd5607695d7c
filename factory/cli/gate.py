"""`agent-factory gate`, `gate calibrate`, `incidents` and `fixes`: the outer loop over `GateJobs` of `Project`.

`gate` is a command group whose callback gates a candidate when no subcommand is given, so `gate --baseline A
--candidate B` and `gate calibrate` read as one command each. Its exit code is the report's (0 pass, 4 a component
failed, 5 an incident), so a CI job needs nothing else; 1 and 2 as every command.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel

from agent_factory.errors import AgentFactoryError
from agent_factory.factory.cli.base import (
    EXIT_INTERRUPTED,
    CacheOpt,
    ConfigOpt,
    JsonOpt,
    RunPackOpt,
    StoreOpt,
    SuiteOpt,
    UnapprovedOpt,
    _App,
    app,
    emit_json,
    err,
    fail,
    interrupted,
    note,
    print_lines,
    report_interrupted,
    storage_error,
)
from agent_factory.factory.project import DEFAULT_STORE, open_project

F = TypeVar("F", bound=Callable[..., Any])

gate_app = _App(name="gate", help="Gate a candidate agent version against a baseline, per component; `gate "
                "calibrate` checks the gate on the baseline alone.", invoke_without_command=True,
                no_args_is_help=False, add_completion=False, pretty_exceptions_enable=False)
app.add_typer(gate_app, name="gate")


def _guarded(f: F) -> F:
    """The callback ended as `_App`'s commands are on a storage failure (one line, exit 1) or Ctrl-C (exit 130):
    typer's callbacks do not pass through `_App.command`."""

    @functools.wraps(f)
    def run(*a: Any, **kw: Any) -> Any:
        try:
            return f(*a, **kw)
        except KeyboardInterrupt:
            report_interrupted()
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as e:
            if interrupted(e):
                report_interrupted()
                raise typer.Exit(EXIT_INTERRUPTED) from None
            problem = storage_error(e)
            if problem is None:
                raise
            raise fail(problem) from e

    return run  # type: ignore[return-value]


def _jsonable(model: BaseModel) -> Any:
    """A report as `--json` prints it: its stored JSON, so an infinite threshold (a metric no split could test)
    reads "Infinity", a string, and the output stays valid JSON for strict parsers."""
    return json.loads(model.model_dump_json())


def _options(store: Path | None, suite: Path | None) -> str:
    """`--store S --suite D` to repeat in suggested commands (the store unless it is the default or None)."""
    parts = [] if store is None or store == DEFAULT_STORE else [f"--store {store}"]
    return " ".join(parts + ([f"--suite {suite}"] if suite else []))


@gate_app.callback()
@_guarded
def gate(
    ctx: typer.Context,
    baseline: Annotated[
        str | None, typer.Option("--baseline", help="The baseline: a store file, or KEY=VALUE[,VALUE] selecting "
                                                     "conversations of --store (service.version=2.3.0, trial=0,1).")
    ] = None,
    candidate: Annotated[
        str | None, typer.Option("--candidate", help="The candidate: a store file, or a selector on --store.")
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
    suite: SuiteOpt = None,
    pack: RunPackOpt = None,
    config: ConfigOpt = None,
    cache_dir: CacheOpt = None,
    unapproved: UnapprovedOpt = False,
    sequential: Annotated[
        bool, typer.Option("--sequential", help="Always-valid verdicts: check after every ingest without "
                                                "inflating false alarms (the looks are counted).")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Gate a candidate agent version against its baseline, per component: pass, fail or incident, each metric
    tested user-clustered against the baseline's calibrated threshold, confirmed invariants with zero tolerance.
    Exit 0 all pass, 4 a component failed, 5 an incident. Recorded in the baseline's store."""
    if ctx.invoked_subcommand is not None:
        return
    if baseline is None or candidate is None:
        raise typer.BadParameter("gate needs --baseline and --candidate (or a subcommand: gate calibrate)",
                                 param_hint="--baseline/--candidate")
    try:
        with open_project(store=store, suite=suite, pack=pack, config=config, cache=cache_dir,
                          unapproved=unapproved, on_notice=note) as p:
            report = p.gate(baseline=baseline, candidate=candidate, sequential=sequential)
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json(_jsonable(report))
    else:
        from agent_factory.factory.views.gate import gate_lines

        # The incidents' units are in the candidate's store: a candidate file, else the selector's --store.
        cand_store = Path(candidate) if Path(candidate).is_file() else store
        base_store = Path(baseline) if Path(baseline).is_file() else store
        print_lines(gate_lines(report, options=_options(base_store, suite), show_options=_options(cand_store, suite)))
    raise typer.Exit(report.exit_code)


@gate_app.command("calibrate")
def calibrate(
    store: StoreOpt = DEFAULT_STORE,
    suite: SuiteOpt = None,
    pack: RunPackOpt = None,
    config: ConfigOpt = None,
    cache_dir: CacheOpt = None,
    unapproved: UnapprovedOpt = False,
    baseline: Annotated[
        str | None, typer.Option("--baseline", help="A selector KEY=VALUE[,VALUE] on --store: calibrate on those "
                                                     "conversations only (default: the whole store).")
    ] = None,
    splits: Annotated[int, typer.Option("--splits", min=2, help="A/A splits of the users into halves.")] = 4000,
    draws: Annotated[int, typer.Option("--draws", min=1, help="Draws per seeded defect and strength.")] = 300,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the splits and the draws.")] = 0,
    no_power: Annotated[bool, typer.Option("--no-power", help="A/A only: skip the seeded defects.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Check the gate on the baseline alone: A/A splits calibrate each metric's threshold so that the family
    false-alarm rate is at most 5% (with 95% confidence) on half of them, and measure it on the other half (the
    per-turn test's beside it); seeded defects in half the users give the smallest effect caught in 80% of draws
    (MDE) and the cross-talk. Stored; `gate` reuses it until the baseline or the suite changes. Progress on
    stderr."""
    try:
        with open_project(store=store, suite=suite, pack=pack, config=config, cache=cache_dir,
                          unapproved=unapproved, on_notice=note) as p:
            report = p.gate_calibrate(side=baseline, splits=splits, draws=draws, seed=seed, power=not no_power,
                                      on_progress=lambda s: err.print(f"gate calibrate: {s}", style="dim",
                                                                      markup=False, soft_wrap=True))
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json(_jsonable(report))
        return
    from agent_factory.factory.views.gate import calibration_lines

    # The gate to run next: this store (or the selector's conversations of it) as the baseline.
    named = f"--baseline {store}" if baseline is None else f"--baseline {baseline} --store {store}"
    print_lines(calibration_lines(report, baseline_options=f"{named} {_options(None, suite)}".strip()))


@app.command()
def incidents(store: StoreOpt = DEFAULT_STORE, suite: SuiteOpt = None, as_json: JsonOpt = False) -> None:
    """The incidents the gate recorded in this (baseline) store: confirmed invariants a candidate broke, each with
    its unit and evidence."""
    try:
        with open_project(store=store, suite=suite, unapproved=True) as p:
            found = p.incidents()
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json([_jsonable(i) for i in found])
        return
    from agent_factory.factory.views.gate import incident_lines

    print_lines(incident_lines(found, options=_options(store, suite)))


@app.command()
def fixes(store: StoreOpt = DEFAULT_STORE, suite: SuiteOpt = None, as_json: JsonOpt = False) -> None:
    """The fixes the gate proposed in this (baseline) store, open first: each finding bound to the metric that
    accepts it, re-checked on every later gate run."""
    try:
        with open_project(store=store, suite=suite, unapproved=True) as p:
            found = p.fixes()
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json([_jsonable(f) for f in found])
        return
    from agent_factory.factory.views.gate import fix_lines

    print_lines(fix_lines(found, baseline_options=f"--baseline {store} {_options(None, suite)}".strip()))


__all__ = ["calibrate", "fixes", "gate", "gate_app", "incidents"]
