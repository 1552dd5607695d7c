"""Ctrl-C during a run: one line of its own and exit 130, the workers quiet, and the store as good as before (the
next run completes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_factory.factory.simulate import SimConfig, simulate

NO_MODEL = {"AGENT_FACTORY_SMALL_MODEL": "", "AGENT_FACTORY_JURY": "", "AGENT_FACTORY_CONFIG": "",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


@pytest.mark.slow
def test_ctrl_c_during_a_run_with_workers_is_one_line_and_exit_130(tmp_path: Path) -> None:
    simulate(SimConfig(users=600, seed=3), tmp_path / "sim")
    store = tmp_path / "s.duckdb"
    env = {**os.environ, **NO_MODEL}
    cli = [sys.executable, "-m", "agent_factory"]
    ingest = subprocess.run([*cli, "ingest", str(tmp_path / "sim"), "--store", str(store), "--pack",
                             "business_analysis"], env=env, capture_output=True, text=True, check=False)
    assert ingest.returncode == 0, ingest.stderr
    # Its own session, as a terminal's foreground job: Ctrl-C sends SIGINT to every process of the group.
    proc = subprocess.Popen([*cli, "run", "--store", str(store), "--workers", "2"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(4.0)
    assert proc.poll() is None, "the run finished before it could be interrupted; simulate more users"
    os.killpg(proc.pid, signal.SIGINT)
    out, errors = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, errors)
    lines = [ln for ln in errors.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("interrupted"), errors
    assert "Traceback" not in errors + out
    done = subprocess.run([*cli, "run", "--store", str(store), "--workers", "2"], env=env, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr


def _interrupted_query() -> BaseException:
    """What DuckDB raises when a running query is interrupted (as Ctrl-C does, through its signal check)."""
    import threading

    import duckdb

    con = duckdb.connect()
    timer = threading.Timer(0.3, con.interrupt)
    timer.start()
    try:
        con.execute("SELECT count(*) FROM range(10000000000) a")
    except BaseException as e:  # noqa: BLE001 - the exception is the datum
        return e
    finally:
        timer.cancel()
        con.close()
    raise AssertionError("the query was not interrupted")


def _interrupted_arrow_read() -> BaseException:
    """What DuckDB raises when Ctrl-C lands while it reads an Arrow stream: the KeyboardInterrupt raised in the
    stream's Python code, wrapped in DuckDB's own error (CI saw it end a run with exit 1 as a storage failure)."""
    import duckdb
    import pyarrow as pa

    def batches() -> Iterator[pa.RecordBatch]:
        yield pa.record_batch([pa.array([1, 2])], names=["a"])
        raise KeyboardInterrupt

    stream = pa.RecordBatchReader.from_batches(pa.schema([("a", pa.int64())]), batches())
    con = duckdb.connect()
    con.register("stream", stream)
    try:
        con.execute("SELECT sum(a) FROM stream").fetchall()
    except duckdb.Error as e:
        return e
    finally:
        con.close()
    raise AssertionError("the read was not interrupted")


@pytest.mark.parametrize("make", [_interrupted_query, lambda: RuntimeError("Query interrupted"),
                                  _interrupted_arrow_read],
                         ids=["duckdb-interrupt", "arrow-insert-interrupt", "arrow-stream-interrupt"])
def test_ctrl_c_inside_a_duckdb_query_ends_as_ctrl_c_does(make: Callable[[], BaseException]) -> None:
    from typer.testing import CliRunner

    from agent_factory.factory.cli.base import EXIT_INTERRUPTED, _App, interrupted

    e = make()
    assert interrupted(e)
    assert not interrupted(RuntimeError("something else")) and not interrupted(ValueError("Query interrupted"))
    app = _App(add_completion=False)

    @app.command()
    def work() -> None:
        raise e

    @app.command()
    def other() -> None:
        pass

    result = CliRunner().invoke(app, ["work"])
    assert result.exit_code == EXIT_INTERRUPTED and isinstance(result.exception, SystemExit)
