"""What every command of the `agent-factory` command line shares: the typer app, its options, the output helpers
and the exit codes. The command modules import this (and `factory.project`), never one another or `cli.app`, so
the command line has no import circle; `cli.app` imports them all and defines `main()`.

Exit codes: 0 success; 1 an error of the user's input (spec, pack, option, file), or an ingest that accepted
nothing; 2 a usage error (typer); 3 some records were quarantined (everything else was ingested); 130 interrupted
(Ctrl-C), in one line.
"""

from __future__ import annotations

import errno
import functools
import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Annotated, Any, cast

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from typer.models import CommandFunctionType

from agent_factory.errors import StoreError

EXIT_USER_ERROR = 1
EXIT_QUARANTINED = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command ended by Ctrl-C
MAX_ERROR_LINES = 50

_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


def storage_error(e: BaseException) -> StoreError | None:
    """A failure of the storage under a command (disk full, a damaged store file) as the one line a user reads,
    or None for any other exception. DuckDB reports both as its own errors, from any query."""
    # duckdb is looked up, not imported: a process that never imported it has no DuckDB error to read.
    duckdb = sys.modules.get("duckdb")
    is_duckdb = duckdb is not None and isinstance(e, duckdb.Error)
    if not (isinstance(e, OSError) or is_duckdb):
        return None
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    full = (isinstance(e, OSError) and e.errno in _FULL) or any(
        s in text for s in ("No space left on device", "File too large", "Disk quota exceeded"))
    if full:
        where = f" ({e.filename})" if isinstance(e, OSError) and e.filename else ""
        return StoreError(f"the disk is full{where}: {text}; free some space and run the command again (a file "
                          "whose ingest was cut off is removed from the store the next time it is opened)")
    if is_duckdb:
        return StoreError(f"the store could not be read or written: {text}; it may be damaged: restore it from a "
                          "copy, or ingest the traces again into a new --store")
    return None


def interrupted(e: BaseException) -> bool:
    """Whether `e` is Ctrl-C reaching a DuckDB query: DuckDB checks for signals while a query runs and ends it
    with its own interrupt error (`InterruptException`, or a `RuntimeError` "Query interrupted" from a query over
    Arrow data), so the KeyboardInterrupt never surfaces."""
    duckdb = sys.modules.get("duckdb")
    if duckdb is not None and isinstance(e, getattr(duckdb, "InterruptException", ())):
        return True
    if duckdb is not None and isinstance(e, duckdb.Error):
        # Ctrl-C while DuckDB reads a Python object (an Arrow stream) is the KeyboardInterrupt raised in that
        # object's code, which DuckDB wraps into its own error with the Python traceback as its text. Taken for
        # a storage failure, it ended an interrupted run with "the store could not be read" and exit 1.
        if "KeyboardInterrupt" in (ln.strip() for ln in str(e).splitlines()) or _PRESSED.is_set():
            return True
    return isinstance(e, RuntimeError) and str(e).strip() == "Query interrupted"


_PRESSED = threading.Event()


def watch_ctrl_c() -> threading.Event:  # pragma: no cover - console entry
    """Ctrl-C raises KeyboardInterrupt as usual, and is also remembered (the event returned): a command that
    ends normally after it (the interrupt was caught and lost in a library's C code: a run under load once
    finished its work and exited 0 after a Ctrl-C) still ends as an interrupted one, with its line and exit
    status 130 (`app.main`). A command whose normal end is Ctrl-C (`watch`) says so with `ctrl_c_handled`."""

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        _PRESSED.set()
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, on_sigint)
    return _PRESSED


def ctrl_c_handled() -> None:
    """The command ended on Ctrl-C as it should (`watch` stops so): not an interrupted command."""
    _PRESSED.clear()


def report_interrupted() -> None:
    """The one line an interrupted command prints."""
    err.print("interrupted: what was complete is kept; a file whose ingest was cut off is removed from the store "
              "when it is next opened, and the next run redoes what this one left", soft_wrap=True, markup=False)


def _interrupted() -> typer.Exit:
    report_interrupted()
    return typer.Exit(EXIT_INTERRUPTED)


class _App(typer.Typer):
    """Typer whose commands end on a storage failure (disk full, a damaged store) with one line and exit 1, and on
    Ctrl-C with one line and exit 130."""

    def command(self, name: str | None = None, **kwargs: Any) -> Callable[[CommandFunctionType], CommandFunctionType]:
        """`typer.Typer.command`, the command wrapped so a storage failure becomes one line (`storage_error`)."""
        register = super().command(name, **kwargs)

        def decorator(f: CommandFunctionType) -> CommandFunctionType:
            @functools.wraps(f)
            def guarded(*a: Any, **kw: Any) -> Any:
                try:
                    return f(*a, **kw)
                except Exception as e:
                    if not interrupted(e):
                        problem = storage_error(e)
                        if problem is None:
                            raise
                        raise fail(problem) from e
                    raise _interrupted() from None
                except KeyboardInterrupt:
                    raise _interrupted() from None

            register(cast(CommandFunctionType, guarded))
            return f

        return decorator


app = _App(
    name="agent-factory",
    help="Closed-loop evaluation of LLM agents: ingest (or simulate) traces, build evaluator suites, run them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True, highlight=False)
out = Console(highlight=False)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("agent-factory")
        except PackageNotFoundError:  # running from a source tree that was never installed
            v = "unknown (not installed)"
        out.print(f"agent-factory {v}", markup=False)
        raise typer.Exit(0)


@app.callback()
def _options(
    show_version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Closed-loop evaluation of LLM agents: ingest (or simulate) traces, build evaluator suites, run them."""


StoreOpt = Annotated[
    Path,
    typer.Option("--store", envvar="AGENT_FACTORY_STORE", help="DuckDB store file.", show_default=True),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
PackOpt = Annotated[
    str, typer.Option("--pack", envvar="AGENT_FACTORY_PACK", help="Knowledge pack: a built-in name or a YAML path.")
]
ReadSuiteOpt = Annotated[
    Path | None, typer.Option("--suite", help="The suite the store was run with (its clauses' flags).")
]
"""`--suite` of the commands that read a store's findings (report, summary, show, export)."""
ReadPackOpt = Annotated[str | None, typer.Option("--pack", help="Knowledge pack, without --suite.")]
"""`--pack` of the commands that read a store's findings."""
RedactorConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="agent-factory.toml naming the redactor (default: its lookup).")
]
"""`--config` of the commands that quote trace text (report --evidence, show)."""
SuiteOpt = Annotated[
    Path | None, typer.Option("--suite", help="Suite directory (built by `build`, approved by `approve`).")
]
RunPackOpt = Annotated[
    str | None,
    typer.Option("--pack", envvar="AGENT_FACTORY_PACK", help="Knowledge pack; default: the one used at ingest."),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="Model config (agent-factory.toml); default: ./agent-factory.toml if present."),
]
CacheOpt = Annotated[Path | None, typer.Option("--cache", help="Cache directory; default: beside the store.")]
UnapprovedOpt = Annotated[
    bool, typer.Option("--unapproved", help="Run a built suite nobody has approved yet (its working files).")
]


def fail(e: Exception) -> typer.Exit:
    """The one-line error a command exits with (exit 1): what failed, never a traceback."""
    # Escaped: a message quoting a selector (`a.duckdb[trial=0]`) or a span's field (`answer[32:51]`) would read as
    # rich markup and lose its brackets.
    err.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
    return typer.Exit(EXIT_USER_ERROR)


def emit_json(data: Any) -> None:
    """Print `data` as the `--json` output (indented, UTF-8 text kept)."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def print_lines(lines: list[str]) -> None:
    """Print lines made of trace text or views of it: no rich markup, no emoji codes, no highlighting, never
    re-wrapped into new lines."""
    for line in lines:
        out.print(line, markup=False, emoji=False, highlight=False, soft_wrap=True)


def note(text: str) -> None:
    """Say on stderr what the person running should know (a suite's unapproved changes) before a run."""
    err.print(f"[yellow]note:[/yellow] {text}", soft_wrap=True)


def progress_bar(*, quiet: bool) -> Progress:
    """A transient progress bar on stderr (none when `quiet` or stderr is no terminal)."""
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, disable=quiet or not err.is_terminal, transient=True,
    )


_entry_started: float | None = None
"""Set by `cli.app.main()`: when the process began importing the package (`agent_factory.IMPORTED_AT`)."""


def mark_entry(started: float) -> None:
    """Record when the process began (the console script's start), for the next command's wall time."""
    global _entry_started
    _entry_started = started


def command_start() -> float:
    """When the current command began, for the wall time it reports: the process's import of the package when
    the command came through `main()` (the console script and `python -m` import it just before), else now (a
    command invoked in-process, as tests do)."""
    global _entry_started
    start, _entry_started = _entry_started, None
    return start if start is not None else time.perf_counter()
