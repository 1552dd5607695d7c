"""Model configuration: families, agent-factory.toml, the environment, and the cross-family jury rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_factory.errors import SpecError
from agent_factory.evaluators.collect.config import ModelConfig, ModelSpec, derive_family, load_model_config
from tests.evaluators.test_collect_support import answer, scripted


@pytest.mark.parametrize(("model", "family"), [
    ("openai/gpt-4o-mini", "openai"),
    ("gpt-4.1", "openai"),
    ("openai/o3-mini", "openai"),
    ("azure/my-deployment", "openai"),
    ("anthropic/claude-3-5-haiku-latest", "anthropic"),
    ("bedrock/anthropic.claude-3-sonnet-20240229-v1:0", "anthropic"),
    ("gemini/gemini-2.0-flash", "google"),
    ("vertex_ai/gemini-1.5-pro", "google"),
    ("mistral/mistral-small-latest", "mistral"),
    ("deepseek/deepseek-chat", "deepseek"),
    ("openai/qwen2.5-7b-instruct", "qwen"),
    ("ollama/llama3.1:8b", "meta"),
    ("together_ai/meta-llama/Llama-3-70b-chat-hf", "meta"),
    ("openai/fake-small", "openai"),
    ("acme/x1", "acme"),
    ("fake-small", "fake"),
])
def test_family_is_derived_from_name_then_provider(model: str, family: str) -> None:
    assert derive_family(model) == family
    assert ModelSpec(model=model).family == family


def test_explicit_family_wins() -> None:
    assert ModelSpec(model="openai/fake-judge", family="judge-b").family == "judge-b"


def test_same_family_jury_is_refused_naming_members_and_family() -> None:
    with pytest.raises(SpecError) as e:
        ModelConfig(jury=(ModelSpec(model="openai/gpt-4o-mini"), ModelSpec(model="openai/gpt-4.1")))
    msg = str(e.value)
    assert "openai/gpt-4o-mini" in msg and "openai/gpt-4.1" in msg and "are all openai" in msg


def test_one_member_jury_is_refused() -> None:
    with pytest.raises(SpecError, match="at least two members"):
        ModelConfig(jury=(ModelSpec(model="anthropic/claude-3-5-haiku-latest"),))


def test_cross_family_jury_and_pydantic_ai_models_are_accepted() -> None:
    m = scripted(lambda i, p: answer(), name="judge")
    cfg = ModelConfig(small=ModelSpec(model="openai/gpt-4o-mini"),
                      jury=(ModelSpec(model=m, family="x"), ModelSpec(model="anthropic/claude-3-5-haiku-latest")))
    assert [j.family for j in cfg.jury] == ["x", "anthropic"]
    assert cfg.jury[0].name == "function:judge"
    assert cfg.small is not None and cfg.small.name == "openai/gpt-4o-mini"
    assert [j.name for j in cfg.jury] == ["function:judge", "anthropic/claude-3-5-haiku-latest"]


TOML = """
[models]
small = { model = "openai/qwen2.5-7b-instruct", api_base = "http://127.0.0.1:8000/v1", api_key_env = "LOCAL_KEY" }
jury = [ { model = "anthropic/claude-3-5-haiku-latest" }, { model = "openai/gpt-4o-mini", family = "openai" } ]
escalate_below = 0.6

[budget]
calls = 100
tokens = 50_000
cost_usd = 1.5

[collect]
concurrency = 3
batch = "unit"
retries = 2
retry_max_wait_s = 0.5

[privacy]
redactor = "agent_factory.evaluators.collect.redact:DefaultRedactor"
"""


def test_load_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "agent-factory.toml"
    path.write_text(TOML)
    cfg = load_model_config(path, env={})
    assert cfg.small is not None and cfg.small.family == "qwen" and cfg.small.api_base == "http://127.0.0.1:8000/v1"
    assert cfg.small.api_key_env == "LOCAL_KEY"
    assert [m.family for m in cfg.jury] == ["anthropic", "openai"]
    assert cfg.escalate_below == 0.6
    assert (cfg.budget.calls, cfg.budget.tokens, cfg.budget.cost_usd) == (100, 50_000, 1.5)
    assert cfg.concurrency == 3 and cfg.retry.attempts == 2 and cfg.retry.max_wait_s == 0.5
    assert cfg.batch == "unit" and ModelConfig().batch == "conversation"  # the file's choice over the default
    assert cfg.redactor == "agent_factory.evaluators.collect.redact:DefaultRedactor"


def test_working_directory_file_and_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "agent-factory.toml").write_text(TOML)
    monkeypatch.chdir(tmp_path)
    env = {"AGENT_FACTORY_SMALL_MODEL": "openai/fake-small", "AGENT_FACTORY_JURY": "gemini/gemini-2.0-flash, "
           "mistral/mistral-small-latest", "AGENT_FACTORY_API_BASE": "http://127.0.0.1:9/v1"}
    cfg = load_model_config(env=env)
    assert cfg.small is not None and cfg.small.model == "openai/fake-small"
    assert cfg.small.api_base == "http://127.0.0.1:9/v1"
    assert [m.family for m in cfg.jury] == ["google", "mistral"]
    assert cfg.budget.calls == 100  # the file's other sections still apply


def test_environment_only_and_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_model_config(env={}) == ModelConfig()
    assert not ModelConfig().has_models
    with pytest.raises(SpecError, match="are all openai"):
        load_model_config(env={"AGENT_FACTORY_JURY": "openai/gpt-4o-mini,openai/o3-mini"})


@pytest.mark.parametrize(("text", "match"), [
    ("[models\nsmall=", "cannot read TOML"),
    ("[models]\nsmal = 'openai/x'", "unknown keys"),
    ("[budget]\ncalls = -1", "budget.calls"),
    ("[models]\nescalate_below = 2", "escalate_below"),
    ("[collect]\nconcurrency = 0", "concurrency"),
    ("[collect]\nbatch = 'session'", "batch"),
    ("[models]\njury = 'openai/x'", "models.jury must be a list"),
])
def test_bad_files_name_the_field(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "agent-factory.toml"
    path.write_text(text)
    with pytest.raises(SpecError, match=match) as e:
        load_model_config(path, env={})
    assert str(path) in str(e.value)
