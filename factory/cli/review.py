"""`agent-factory build`, `diff` and `approve`: a role spec compiled into a suite, a spec change reviewed, a
suite approved by a person."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from agent_factory.errors import AgentFactoryError
from agent_factory.factory.cli.base import JsonOpt, app, emit_json, err, fail, out
from agent_factory.factory.project import open_project

if TYPE_CHECKING:  # the review module loads only when a command runs
    from agent_factory.factory.suite.review import SuiteDiff


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
    from agent_factory.evaluators.collect.backends import CallCounters
    from agent_factory.factory.compile import COMPILER_VERSION

    target = out_dir if out_dir is not None else Path("suites") / spec.stem
    counters = CallCounters()
    try:
        # The cache is opened only for model builds: a deterministic build leaves no directory behind.
        with open_project(pack=pack, config=config, cache=cache_dir) as p:
            report = p.build(spec, out=target, model=not no_model, counters=counters)
            small = None if no_model else p.model_config.small
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


@app.command()
def diff(
    old: Annotated[Path, typer.Argument(help="Old suite directory (e.g. DIR/approved) or spec file (.md, .txt).")],
    new: Annotated[Path, typer.Argument(help="New suite directory or spec file.")],
    pack: Annotated[
        str, typer.Option("--pack", help="Base knowledge pack for compiling a spec file given as OLD or NEW.")
    ] = "default",
    as_json: JsonOpt = False,
) -> None:
    """Show what a spec change does: clauses, data definitions (what a rerun recollects), evaluator versions."""
    try:
        with open_project(pack=pack) as p:
            d = p.diff(old, new)
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json(d.model_dump(mode="json"))
        return
    for table in (_clause_table(d, f"clauses: {old} -> {new}"), _definition_table(d), _evaluator_table(d)):
        if table.row_count:
            out.print(table)
    _print_notes(d)


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in columns:
        table.add_column(col, overflow="fold")
    return table


def _clause_table(d: SuiteDiff, title: str) -> Table:
    clauses = _table(title, "change", "id", "line", "what")
    for c in d.clauses_added:
        clauses.add_row("added", c.id, str(c.source_line or ""), c.text)
    for c in d.clauses_removed:
        clauses.add_row("removed", c.id, str(c.source_line or ""), c.text)
    for ch in d.clauses_changed:
        what = "; ".join(f"{f.field}: {f.old!r} -> {f.new!r}" for f in ch.fields)
        clauses.add_row("changed", ch.id, str(ch.source_line or ""), what)
    return clauses


def _definition_table(d: SuiteDiff) -> Table:
    defs = _table("data definitions", "change", "id", "version")
    for r in d.definitions_added:
        defs.add_row("added", r.id, r.version)
    for r in d.definitions_removed:
        defs.add_row("removed", r.id, r.version)
    for dc in d.definitions_changed:
        name = dc.id if dc.id == dc.old_id else f"{dc.old_id} -> {dc.id}"
        defs.add_row("changed", name, f"{dc.old_version} -> {dc.new_version}")
    return defs


def _evaluator_table(d: SuiteDiff) -> Table:
    evaluators = _table("evaluator versions", "component", "old", "new")
    for ev in d.evaluators_changed:
        evaluators.add_row(ev.component, ev.old or "-", ev.new or "-")
    return evaluators


def _print_notes(d: SuiteDiff) -> None:
    for label, ids in (("invariants added", d.invariants_added), ("invariants removed", d.invariants_removed)):
        if ids:
            out.print(f"{label}: {', '.join(ids)}")
    for ic in d.invariants_confirmation:
        out.print(f"invariant {ic.clause}: confirmed {str(ic.old).lower()} -> {str(ic.new).lower()}")
    for label, items in (("newly uncompiled", d.uncompiled_added), ("no longer uncompiled", d.uncompiled_removed)):
        for u in items:
            out.print(f"{label}: line {u.line}: {u.sentence}", markup=False, soft_wrap=True)
    out.print(d.summary)


@app.command()
def approve(
    directory: Annotated[Path, typer.Argument(help="Suite directory to approve (its current files).")],
    by: Annotated[str | None, typer.Option("--by", help="Who approves; default: $USER.")] = None,
    note: Annotated[str | None, typer.Option("--note", help="A note recorded with the approval.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Approve a reviewed suite: snapshot its files into DIR/approved/; runs use that snapshot."""
    try:
        with open_project() as p:
            approval, unchanged = p.approve(directory, by=by, note=note)
    except AgentFactoryError as e:
        raise fail(e) from e
    if as_json:
        emit_json({"directory": str(directory), "already_approved": unchanged, **approval.model_dump(mode="json")})
        return
    if unchanged:
        out.print(f"{directory} is already approved as it is (digest {approval.suite_digest[:16]}, "
                  f"by {approval.by} at {approval.at}); nothing to do")
        return
    out.print(f"approved {directory} by {approval.by} at {approval.at}: digest {approval.suite_digest[:16]}, "
              f"{len(approval.files)} files -> {directory / 'approved'}")
    out.print(f"confirmed invariants: {', '.join(approval.invariants) or 'none'}")
    if approval.unconfirmed:
        err.print(f"proposed but not confirmed (not invariants in runs): {', '.join(approval.unconfirmed)}")
    if approval.inherited:
        out.print(f"invariants of the base pack: {', '.join(approval.inherited)}")
