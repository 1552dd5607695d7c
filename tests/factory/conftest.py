"""Environments the factory tests run the CLI in: no model configured, or the small model behind the local
OpenAI-compatible test server (`tests/fakes/openai_server.py`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_factory.factory.ingest.files import IngestReport, ingest_paths
from agent_factory.factory.store import Store
from agent_factory.knowledge_packs import load_pack
from tests.conftest import shared_data
from tests.fakes.openai_server import FakeOpenAIServer, fake_openai  # noqa: F401


@pytest.fixture(scope="session")
def trail_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, IngestReport]:
    """TRAIL's traces (`../shared/data/trail/traces`) ingested once with the default pack: the store's path (open
    it read-only, or copy it to write) and the ingest's report. Skips when the data is absent."""
    return _ingested(tmp_path_factory, "trail", "traces")


@pytest.fixture(scope="session")
def who_and_when_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, IngestReport]:
    """Who&When's logs (`../shared/data/who-and-when`) ingested once, as `trail_store`."""
    return _ingested(tmp_path_factory, "who-and-when")


def _ingested(tmp_path_factory: pytest.TempPathFactory, *parts: str) -> tuple[Path, IngestReport]:
    src = shared_data(*parts)
    path = tmp_path_factory.mktemp(parts[0]) / "s.duckdb"
    with Store(path) as st:
        report = ingest_paths(st, [src], pack=load_pack("default"))
    return path, report


MODEL_VARS = ("AGENT_FACTORY_SMALL_MODEL", "AGENT_FACTORY_JURY", "AGENT_FACTORY_CONFIG", "AGENT_FACTORY_API_BASE",
              "AGENT_FACTORY_AUDIT_MODELS")


@pytest.fixture
def no_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`tmp_path` as the working directory, with no model configured from the environment."""
    monkeypatch.chdir(tmp_path)
    for var in MODEL_VARS:
        monkeypatch.delenv(var, raising=False)
    return tmp_path


@pytest.fixture
def model_env(tmp_path: Path, fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> Path:  # noqa: F811
    """`tmp_path` as the working directory, the small model `openai/fake-small` served by `fake_openai`."""
    monkeypatch.chdir(tmp_path)
    for k, v in {"AGENT_FACTORY_SMALL_MODEL": "openai/fake-small", "AGENT_FACTORY_API_BASE": fake_openai.base_url,
                 "OPENAI_API_KEY": "test", "AGENT_FACTORY_JURY": ""}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AGENT_FACTORY_CONFIG", raising=False)
    return tmp_path


NO_MODEL = {"AGENT_FACTORY_SMALL_MODEL": "", "AGENT_FACTORY_JURY": "", "AGENT_FACTORY_CONFIG": ""}
"""The environment of a CLI run with no model configured (whatever the machine's environment says)."""


@dataclass(frozen=True)
class Res:
    """What a command did: its exit code, stdout and stderr; `json()` reads stdout."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def cli(*args: str) -> Res:
    """`agent-factory ARGS...` in this process, with no model configured."""
    from typer.testing import CliRunner

    from agent_factory.factory.cli.app import app

    res = CliRunner().invoke(app, list(args), env=NO_MODEL)
    return Res(res.exit_code, res.stdout, res.stderr)


def _ingest_and_run(store: Path, *ingest: str) -> str:
    from typer.testing import CliRunner

    from agent_factory.factory.cli.app import app

    runner = CliRunner()
    res = runner.invoke(app, ["ingest", *ingest, "--store", str(store)], env=NO_MODEL)
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["run", "--store", str(store)], env=NO_MODEL)
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.fixture(scope="session")
def sim_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """12 simulated users ingested and run with the shipped pack, rules only (read it, do not write it):
    the store and what `run` printed."""
    from agent_factory.factory.simulate import SimConfig, simulate

    root = tmp_path_factory.mktemp("sim-store")
    simulate(SimConfig(users=12, seed=5), root / "sim")
    store = root / "store.duckdb"
    return store, _ingest_and_run(store, str(root / "sim"), "--pack", "business_analysis")


@pytest.fixture(scope="session")
def tau_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 128 tau-bench airline conversations ingested and run with the airline pack, rules only (read it, do
    not write it); skips when the shared data is absent."""
    from tests.conftest import shared_data

    src = shared_data("tau-bench-airline-gpt4o", "gpt-4o-airline.json")
    store = tmp_path_factory.mktemp("tau-store") / "tau.duckdb"
    _ingest_and_run(store, str(src), "--pack", "airline")
    return store
