"""`agent-factory tasks import` and `tasks report`: long-horizon tasks' runs in, pass^k and the per-task report out,
`tasks run` (an agent against a suite) and `tasks compare` (a candidate's completion against a baseline's, exit 4
when it falls below), each a few lines over `Project` (`TaskJobs`)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from agent_factory.errors import AgentFactoryError
from agent_factory.factory.cli.base import JsonOpt, StoreOpt, _App, app, emit_json, fail, print_lines
from agent_factory.factory.project import DEFAULT_STORE, open_project

EXIT_BELOW = 4
"""`tasks compare`'s exit code when the candidate falls below the baseline (the gate's failure code)."""


class TaskFormat(str, Enum):
    """The formats `tasks import` reads."""

    tau_bench = "tau-bench"


tasks_app = _App(name="tasks", help="Long-horizon tasks: task runs imported, pass^k and the per-task report.",
                 no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")


def _options(store: Path) -> str:
    return "" if store == DEFAULT_STORE else f"--store {store}"


@tasks_app.command("import")
def import_(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="The benchmark's trajectory file.")],
    fmt: Annotated[TaskFormat, typer.Option("--format", help="What the file is.", case_sensitive=False)],
    store: StoreOpt = DEFAULT_STORE,
    as_json: JsonOpt = False,
) -> None:
    """Import a benchmark's trajectories as task runs (tau-bench: task id, trial, reward 1 = success): the file is
    ingested as any source, so every component applies, and one task run is stored per trajectory. A bad record
    stores nothing; the same file imported again adds nothing."""
    try:
        with open_project(store=store) as p:
            done = p.import_tasks(path, fmt=fmt.value)
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json(done.model_dump(mode="json"))
        return
    print_lines([f"imported {done.trajectories} trajectories of {done.tasks} task(s) from {done.file} as suite "
                 f"{done.suite}: {done.new_runs} new task run(s), {done.conversations_stored} new conversation(s)"
                 + (f"; {done.unlabelled} without a reward (no label)" if done.unlabelled else ""),
                 "next:", f"  agent-factory tasks report {_options(store)}".rstrip()])


@tasks_app.command("report")
def report(
    store: StoreOpt = DEFAULT_STORE,
    as_json: JsonOpt = False,
    composite: Annotated[str | None, typer.Option(
        "--composite", metavar="NAME", help="Add a seed's composite score, a view: gated-total (seed 000, 0-1) or "
                                            "intelligence-index (seed 003, 0-100); null when an input is missing.")
    ] = None,
) -> None:
    """pass^k for k = 1..K (tau-bench's definition: mean over tasks of C(c, k) / C(n, k)) and every task: trials,
    successes, its pass^k, dimensions (None: not collected), where its runs first deviate."""
    try:
        with open_project(store=store) as p:
            found = p.task_report(composite=composite)
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json(found.model_dump(mode="json"))
        return
    from agent_factory.factory.views.tasks import report_lines

    print_lines(report_lines(found, options=_options(store)))


@tasks_app.command("compare")
def compare(
    baseline: Annotated[str, typer.Option("--baseline", help="The baseline's task runs: a store file (all its "
                                                             "runs), or KEY=V1,V2 on --store over suite, agent, "
                                                             "source or trial (agent=script:succeed).")],
    candidate: Annotated[str, typer.Option("--candidate", help="The candidate's: a store file or a selector.")],
    store: StoreOpt = DEFAULT_STORE,
    alpha: Annotated[float, typer.Option("--alpha", help="The test's level, in (0, 1): below when p < alpha.")
                     ] = 0.05,
    strict: Annotated[bool, typer.Option("--strict", help="Any drop in mean completion over the shared tasks is "
                                                          "below, whether or not chance explains it.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Does the candidate fall below the baseline on completion? Per task, completion (successes / labelled trials)
    on each side and its change; a one-sided Wilcoxon signed-rank test over the tasks of both sides. Exit 0 not
    below, 4 below (the mean change is negative and p < alpha; with --strict, any drop), 1 bad input."""
    if not 0 < alpha < 1:
        raise typer.BadParameter(f"must lie strictly between 0 and 1, got {alpha}", param_hint="--alpha")
    try:
        with open_project(store=store) as p:
            found = p.compare_tasks(baseline, candidate, alpha=alpha, strict=strict)
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json(found.model_dump(mode="json"))
    else:
        from agent_factory.factory.views.tasks import compare_lines

        options = f"--baseline {baseline} --candidate {candidate} {_options(store)}".strip()
        print_lines(compare_lines(found, options=options + (" --strict" if strict else "")))
    raise typer.Exit(EXIT_BELOW if found.below else 0)


@tasks_app.command("run")
def run(
    suite: Annotated[Path, typer.Argument(metavar="SUITE", help="The task suite's YAML file.")],
    agent: Annotated[str, typer.Option("--agent", metavar="MODEL|script:NAME", help=(
        "A model: provider/model through litellm (served at agent-factory.toml's [agent] api_base, or "
        "$AGENT_FACTORY_AGENT_API_BASE), or a pydantic-ai model string provider:model; or a scripted agent "
        "script:NAME (succeed, fail-midway, recover, loop, refuse)."))],
    trials: Annotated[int, typer.Option("--trials", help="Trials per task, each from a fresh sandbox.")] = 1,
    store: StoreOpt = DEFAULT_STORE,
    as_json: JsonOpt = False,
) -> None:
    """Run a task suite with an agent for K trials per task: each trial's run contract is written as OTel spans
    (OTLP/JSON beside the store) and ingested, so every component applies, and one task run is stored per
    trial. Prints pass^k and every task over this run's trials."""
    try:
        with open_project(store=store) as p:
            done = p.run_tasks(suite, agent=agent, trials=trials)
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json(done.model_dump(mode="json"))
        return
    from agent_factory.factory.views.tasks import ending_lines, report_lines

    ended = ", ".join(f"{n} {how}" for how, n in sorted(done.ended_by.items()))
    print_lines([f"ran {done.agent} on {len(done.tasks)} task(s) x {done.trials} trial(s): {ended}; "
                 f"{done.new_runs} task run(s) stored, traces in {done.file}", *ending_lines(done.reasons),
                 *report_lines(done, options=_options(store))])
