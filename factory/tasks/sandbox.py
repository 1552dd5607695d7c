"""A fresh sandbox per trial: an in-memory SQLite database built from the suite's spec, files in a temporary
directory, and the suite's tools as Python callables bound to them.

Each tool is confined to its sandbox: `query_sql` is read-only (an SQLite authorizer refuses every write), no
statement may ATTACH or DETACH a database (which also stops `VACUUM INTO`, as it attaches its target file) or set
a PRAGMA, and file paths must resolve inside the temporary directory. A tool never raises: a failure is a
`ToolResult` with the error, which the agent sees and may recover from. `snapshot` reads the final state the
criteria are checked on (`evaluators/tasks/criteria.py`).
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from agent_factory.evaluators.tasks.criteria import FinalState, QueryOutcome, Row
from agent_factory.evaluators.tasks.suite import SandboxSpec
from agent_factory.frozen import Frozen

_READ_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                           sqlite3.SQLITE_RECURSIVE})
_NEVER = frozenset({sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH})
_SCHEMA_PRAGMAS = frozenset({"table_info", "table_xinfo", "table_list", "index_list", "index_info",
                             "index_xinfo", "foreign_key_list"})
"""PRAGMAs that take an argument yet only read the schema: how an agent learns a table's columns."""
MAX_ROWS = 200
"""Rows a query returns to the agent at most (the rest is counted, not shown)."""


class SandboxError(Exception):
    """A tool was asked for something outside its sandbox or its rights."""


class ToolResult(Frozen):
    """What a tool call gave: its output for the agent, or the error."""

    tool: str
    ok: bool
    output: str = ""
    """JSON for queries (`{"columns", "rows", "truncated"}`), the content for `read_file`, a note otherwise."""
    error: str | None = None


class Sandbox:
    """One trial's sandbox; use as a context manager (or call `close`) so its directory is removed."""

    def __init__(self, spec: SandboxSpec) -> None:
        self._lock = threading.Lock()
        self._read_only = False
        # A runner may call sync tools from a worker thread; the lock serialises them.
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._db.set_authorizer(self._authorize)
        self.root = Path(tempfile.mkdtemp(prefix="af-task-")).resolve()
        try:
            self._build(spec)
        except Exception:
            self.close()
            raise
        self.initial_tables = self._tables()

    def _build(self, spec: SandboxSpec) -> None:
        for statement in (*spec.sqlite.tables, *spec.sqlite.rows):
            self._db.execute(statement)
        for table, text in spec.sqlite.csv.items():
            reader = csv.reader(io.StringIO(text.strip()))
            header = next(reader)
            cols = ", ".join(f'"{c.strip()}"' for c in header)
            marks = ", ".join("?" for _ in header)
            self._db.executemany(f'INSERT INTO "{table}" ({cols}) VALUES ({marks})',  # noqa: S608 - spec's own names
                                 [[_csv_value(v) for v in row] for row in reader if row])
        for path, content in spec.files.items():
            target = self._path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")

    def _authorize(self, action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None
                   ) -> int:
        # A PRAGMA with a value sets something, except those that only read the schema.
        setting = action == sqlite3.SQLITE_PRAGMA and arg2 is not None and (arg1 or "").lower() not in _SCHEMA_PRAGMAS
        if action in _NEVER or setting:
            return sqlite3.SQLITE_DENY
        if self._read_only and action not in _READ_ACTIONS and action != sqlite3.SQLITE_PRAGMA:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def _run(self, sql: str, *, read_only: bool) -> tuple[list[str], list[Row]]:
        with self._lock:
            self._read_only = read_only
            try:
                cur = self._db.execute(sql)
                rows = [tuple(r) for r in cur.fetchall()]
                cols = [d[0] for d in cur.description or ()]
            finally:
                self._read_only = False
        return cols, rows

    def _path(self, path: str) -> Path:
        if not path or Path(path).is_absolute():
            raise SandboxError(f"path must be relative to the sandbox: {path!r}")
        target = (self.root / path).resolve()
        if not target.is_relative_to(self.root):
            raise SandboxError(f"path is outside the sandbox: {path!r}")
        return target

    # The tools. Each returns a ToolResult and never raises.

    def query_sql(self, sql: str) -> ToolResult:
        """Run one read-only SQL statement; its columns and rows as JSON."""
        return _guard("query_sql", lambda: _rows_json(*self._run(sql, read_only=True)))

    def execute_sql(self, sql: str) -> ToolResult:
        """Run one SQL statement that may change the database; rows as JSON, or how many rows changed."""
        def run() -> str:
            before = self._db.total_changes
            cols, rows = self._run(sql, read_only=False)
            return _rows_json(cols, rows) if cols else json.dumps({"changed": self._db.total_changes - before})
        return _guard("execute_sql", run)

    def read_file(self, path: str) -> ToolResult:
        """The text of a file in the sandbox."""
        return _guard("read_file", lambda: self._path(path).read_text(encoding="utf-8", errors="replace"))

    def write_file(self, path: str, content: str) -> ToolResult:
        """Write a text file in the sandbox (its folders are created)."""
        def run() -> str:
            target = self._path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
            return f"wrote {len(content)} characters to {path}"
        return _guard("write_file", run)

    def list_files(self) -> ToolResult:
        """The sandbox's files, one relative path a line."""
        return _guard("list_files", lambda: "\n".join(sorted(self._files())))

    def tools(self, names: Iterable[str]) -> dict[str, Callable[..., ToolResult]]:
        """The named tools (a task's `tools`) as callables bound to this sandbox; KeyError for an unknown name."""
        table: dict[str, Callable[..., ToolResult]] = {
            "query_sql": self.query_sql, "execute_sql": self.execute_sql, "read_file": self.read_file,
            "write_file": self.write_file, "list_files": self.list_files,
        }
        unknown = [n for n in names if n not in table]
        if unknown:
            raise KeyError(f"no sandbox tool {unknown} (tools: {sorted(table)})")
        return {name: table[name] for name in names}

    def _files(self) -> dict[str, str]:
        return {p.relative_to(self.root).as_posix(): p.read_text(encoding="utf-8", errors="replace")
                for p in self.root.rglob("*") if p.is_file()}

    def _tables(self) -> dict[str, tuple[Row, ...]]:
        _, names = self._run("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
                             read_only=True)
        return {str(n[0]): tuple(self._run(f'SELECT * FROM "{n[0]}"', read_only=True)[1])  # noqa: S608
                for n in names}

    def snapshot(self, answer: str | None, queries: Iterable[str] = ()) -> FinalState:
        """The final state: the answer, each query's outcome (read-only), files, tables now and at the start."""
        outcomes: dict[str, QueryOutcome] = {}
        for query in queries:
            try:
                outcomes[query] = QueryOutcome(rows=tuple(self._run(query, read_only=True)[1]))
            except (sqlite3.Error, SandboxError) as e:
                outcomes[query] = QueryOutcome(error=f"{type(e).__name__}: {e}")
        return FinalState(answer=answer, queries=outcomes, files=self._files(), tables=self._tables(),
                          initial_tables=self.initial_tables)

    def close(self) -> None:
        """Close the database and remove the directory."""
        self._db.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
                 ) -> None:
        self.close()


def _csv_value(text: str) -> int | float | str | None:
    """A CSV cell as SQLite would want it: an empty cell is NULL, numbers are numbers."""
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _rows_json(cols: list[str], rows: list[Row]) -> str:
    shown: list[list[Any]] = [list(r) for r in rows[:MAX_ROWS]]
    return json.dumps({"columns": cols, "rows": shown, "truncated": max(0, len(rows) - MAX_ROWS)}, default=str)


def _guard(tool: str, run: Callable[[], str]) -> ToolResult:
    """A tool's body run so that any failure is an error result the agent sees, never a crash."""
    try:
        return ToolResult(tool=tool, ok=True, output=run())
    except Exception as e:  # noqa: BLE001 - a tool that raises gives an error result, whatever it raised
        return ToolResult(tool=tool, ok=False, error=f"{tool}: {type(e).__name__}: {e}")


__all__ = ["MAX_ROWS", "Sandbox", "SandboxError", "ToolResult"]
