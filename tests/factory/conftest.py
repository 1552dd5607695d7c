"""Environments the factory tests run the CLI in: no model configured, or the small model behind the local
OpenAI-compatible test server (`tests/fakes/openai_server.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer, fake_openai  # noqa: F401

MODEL_VARS = ("AGENT_FACTORY_SMALL_MODEL", "AGENT_FACTORY_JURY", "AGENT_FACTORY_CONFIG", "AGENT_FACTORY_API_BASE")


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
