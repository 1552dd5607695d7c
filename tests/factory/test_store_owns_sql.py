"""All SQL lives in `factory/store/` (ARCHITECTURE.md, "The store layer"): no module of `factory/` outside it runs a
query, touches a store's connection or imports DuckDB. The one exception is the CLI's error mapping, which names
`duckdb.Error` to turn a DuckDB failure into one line."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO

FACTORY = REPO / "factory"
STORE = FACTORY / "store"
SQL = {
    "a query run": re.compile(r"\.execute\(|\.executemany\(|\.sql\("),
    "a connection touched": re.compile(r"\.con\b"),
    "DuckDB imported": re.compile(r"^\s*(import duckdb|from duckdb\b)", re.MULTILINE),
}
SANDBOX = FACTORY / "tasks" / "sandbox.py"
"""A task trial's own in-memory SQLite database (the agent's world, not the project's store): its SQL is the
agent's tools. It may not import DuckDB or the store (`test_the_task_sandbox_never_touches_the_store`)."""
ERROR_MAPPING = re.compile(r"duckdb\.Error\b")
"""What the CLI may name of DuckDB: its error class, nothing else."""


def _outside_store() -> list[Path]:
    return sorted(p for p in FACTORY.rglob("*.py") if STORE not in p.parents and p != SANDBOX)


def _allowed_duckdb(path: Path, text: str) -> bool:
    """A CLI module that imports DuckDB only to map `duckdb.Error` to a one-line message."""
    uses = re.findall(r"duckdb\.\w+", text)
    return FACTORY / "cli" in path.parents and bool(uses) and all(ERROR_MAPPING.fullmatch(u) for u in uses)


def offences(path: Path, text: str) -> list[str]:
    """`line: what` for every line of the module `path` (its source `text`) that runs SQL, touches a connection or
    imports DuckDB where it may not."""
    found = []
    for what, pattern in SQL.items():
        if what == "DuckDB imported" and _allowed_duckdb(path, text):
            continue
        for m in pattern.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{line}: {what}")
    return found


def test_no_sql_outside_the_store_package() -> None:
    paths = _outside_store()
    assert len(paths) > 50 and FACTORY / "views" / "export.py" in paths  # the walk sees the package
    found = [f"{p.relative_to(REPO)}:{o}" for p in paths for o in offences(p, p.read_text(encoding="utf-8"))]
    assert found == []


def test_the_check_finds_each_kind_of_offence() -> None:
    # The patterns are live: each kind of line a view must not hold is found, and the CLI's mapping is the only
    # pass (its module may name `duckdb.Error`, nothing else of DuckDB).
    view = "import duckdb\nrows = store.con.execute('SELECT 1').fetchall()\nt = con.sql('x')\n"
    assert offences(FACTORY / "views" / "x.py", view) == [
        "2: a query run", "3: a query run", "2: a connection touched", "1: DuckDB imported"]
    mapping = "import duckdb\n\n\ndef code(e):\n    return isinstance(e, duckdb.Error)\n"
    assert offences(FACTORY / "cli" / "x.py", mapping) == []
    assert offences(FACTORY / "cli" / "x.py", mapping + "duckdb.connect()\n") == ["1: DuckDB imported"]
    assert offences(FACTORY / "views" / "x.py", mapping) == ["1: DuckDB imported"]


def test_the_task_sandbox_never_touches_the_store() -> None:
    text = SANDBOX.read_text(encoding="utf-8")
    assert "sqlite3.connect(\":memory:\"" in text
    assert "duckdb" not in text and "factory.store" not in text and SQL["a connection touched"].search(text) is None
