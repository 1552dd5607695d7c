"""The `agent-factory` command line: the app of `cli.base` with every command group registered, and `main()`.

Each command module (`traffic`: simulate, ingest, stats; `review`: build, diff, approve; `run`: run, watch;
`views`: summary, show, export, report) imports only `cli.base` and `factory.project`; this module imports them
all, so importing it gives the whole command line, and none of them imports it back. The commands are thin:
parse options, call a `Project` method, print.

Exit codes: 0 success; 1 an error of the user's input (spec, pack, option, file), or an ingest that accepted
nothing; 2 a usage error (typer); 3 some records were quarantined (everything else was ingested); 130 interrupted
(Ctrl-C), in one line.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys

import agent_factory
from agent_factory.factory.cli import audit, gate, labels, review, reviewing, run, tasks, traffic, views
from agent_factory.factory.cli.base import (
    EXIT_INTERRUPTED,
    EXIT_QUARANTINED,
    EXIT_USER_ERROR,
    app,
    mark_entry,
    report_interrupted,
    storage_error,
    watch_ctrl_c,
)

COMMAND_MODULES = (traffic, review, reviewing, run, views, audit, labels, gate, tasks)
"""The modules whose import registers the commands."""
ORDER = ("simulate", "ingest", "stats", "build", "diff", "approve", "run", "watch", "summary", "show", "export",
         "report", "audit", "agreement", "incidents", "fixes")
"""The commands in the order `--help` lists them: a project's course, not the modules' import order."""
app.registered_commands.sort(key=lambda c: ORDER.index(c.callback.__name__ if c.callback else ""))


def main() -> None:  # pragma: no cover - console entry
    """The console entry point, `agent-factory`."""
    mark_entry(agent_factory.IMPORTED_AT)
    # Arrow allocates through the C library's malloc unless the user chose a pool. pyarrow's default, mimalloc,
    # keeps what it freed resident: a rules-only run of the default simulation peaked at 424-441 MB with it and at
    # 364-371 MB with malloc, in the same time (three runs each). The variable is read once, when Arrow first
    # allocates, so it is set before anything imports pyarrow (no command module imports it at its top;
    # `pyarrow.set_memory_pool` later would leave Arrow's own allocations in mimalloc: 397-405 MB). It is set
    # here, not on import of the package: importing a library changes nothing in the process.
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    pressed = watch_ctrl_c()
    try:
        app()
    except SystemExit as e:
        if e.code == EXIT_INTERRUPTED:
            _exit_interrupted()
        if pressed.is_set() and e.code in (0, None):
            report_interrupted()
            _exit_interrupted()
        raise
    if pressed.is_set():
        report_interrupted()
        _exit_interrupted()


def _exit_interrupted() -> None:  # pragma: no cover - console entry
    """End an interrupted command with exit status 130, as its one line said. Left to the interpreter's exit, a
    run with workers interrupted by Ctrl-C sometimes ended by SIGINT after printing that line (status -2 to its
    parent, 1 run in 6 under load; CPython kills itself with SIGINT at exit when it believes a KeyboardInterrupt
    went unhandled). The exit handlers still run here (the worker pool is joined; the store was closed as the
    command unwound); a second Ctrl-C meanwhile is ignored rather than printing a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(EXIT_INTERRUPTED)


__all__ = ["COMMAND_MODULES", "EXIT_INTERRUPTED", "ORDER", "EXIT_QUARANTINED", "EXIT_USER_ERROR", "app", "main",
           "storage_error"]
