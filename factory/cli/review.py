"""`agent-factory diff` and `agent-factory approve`: a person reviews a spec change and approves a suite.

Registered on the app of `factory.cli.app` (which imports this module at its end), so they share its options,
error handling and exit codes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from agent_factory.errors import AgentFactoryError
from agent_factory.factory.cli.app import JsonOpt, app, emit_json, err, fail, out

if TYPE_CHECKING:  # the review module loads only when a command runs
    from agent_factory.factory.suite.review import SuiteDiff


def _missing(path: Path) -> typer.Exit | None:
    return fail(AgentFactoryError(f"{path}: no such file or directory")) if not path.exists() else None


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
    from agent_factory.factory.suite.review import suite_diff

    for path in (old, new):
        if (missing := _missing(path)) is not None:
            raise missing
    try:
        d = suite_diff(old, new, pack=pack)
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
    from agent_factory.factory.suite.review import approval_status, approve_suite

    if (missing := _missing(directory)) is not None:
        raise missing
    try:
        try:
            before = approval_status(directory)
        except AgentFactoryError:
            before = None  # a damaged approval: approving again repairs it, so this is no error here
        approval = approve_suite(directory, by=by, note=note)
    except AgentFactoryError as e:
        raise fail(e) from e
    unchanged = before is not None and before.approved and not before.newer_unapproved and before.at == approval.at
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
