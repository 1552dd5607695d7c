"""Rules-only runs over public traces nobody here wrote (skipped when ../shared/data is absent), under the store's
own memory caps. TRAIL's spans carry prompts of 41 kB on average and its users hold long traces, which the
simulation never does: a run's reads of them (`store.buckets`) must fit the limit a run sets (`READ_MEMORY`; at
64 MB the query that cuts a large user's turns into pieces asked for 64 MiB at once and the run failed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_factory.factory.cli.app import app
from agent_factory.factory.ingest.files import IngestReport
from agent_factory.factory.store import Store


@pytest.mark.realdata
@pytest.mark.parametrize("ingested", ["trail_store", "who_and_when_store"])
def test_a_rules_only_run_over_public_traces_collects_every_turn(
    ingested: str, request: pytest.FixtureRequest, no_model: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    src: tuple[Path, IngestReport] = request.getfixturevalue(ingested)
    store = no_model / "s.duckdb"
    shutil.copy(src[0], store)  # the ingested store is shared: the run writes to a copy
    monkeypatch.delenv("AGENT_FACTORY_DUCKDB_MEMORY", raising=False)  # the store's own caps
    res = CliRunner().invoke(app, ["run", "--store", str(store), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    with Store(store, read_only=True) as st:
        turns = st.con.execute("SELECT count(*) FROM turns WHERE segment = 'real'").fetchone()[0]  # type: ignore[index]
        with_data = st.con.execute(
            "SELECT count(DISTINCT unit_id) FROM atomic_data WHERE layer = 'trace'").fetchone()[0]  # type: ignore[index]
    assert turns > 0
    assert report["units"]["trace"] == turns == with_data
    assert report["items"]["collected"] > 0 and report["model_calls"] == 0
