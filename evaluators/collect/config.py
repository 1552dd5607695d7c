"""Which models the cascade may call, how hard it may try, and what it may spend.

Models are litellm model strings (`openai/gpt-4o-mini`, `anthropic/claude-3-5-haiku-latest`,
`openai/qwen2.5-7b-instruct` behind a local `api_base`) or, in code and tests, pydantic-ai `Model` objects.
Each has a family; a jury is cross-family by construction (docs/method.md section 5: one family's models prefer
their own answers), so a jury with two members of one family is refused with the members named.

Sources, later ones overriding earlier ones: `agent-factory.toml` (section `[models]`, `[budget]`, `[collect]`,
`[privacy]`, `[agent]`), then the environment (`AGENT_FACTORY_SMALL_MODEL`, `AGENT_FACTORY_JURY` and
`AGENT_FACTORY_AUDIT_MODELS` comma-separated, `AGENT_FACTORY_API_BASE` for the models the environment names;
`AGENT_FACTORY_AGENT_API_BASE` and `AGENT_FACTORY_AGENT_API_KEY_ENV` for the task runner's model agents).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator

from agent_factory.errors import SpecError
from agent_factory.frozen import Frozen
from agent_factory.validation import describe_error

CONFIG_FILE = "agent-factory.toml"
"""Looked up in the working directory when no path is given."""
ENV_CONFIG = "AGENT_FACTORY_CONFIG"
ENV_SMALL = "AGENT_FACTORY_SMALL_MODEL"
ENV_JURY = "AGENT_FACTORY_JURY"
ENV_API_BASE = "AGENT_FACTORY_API_BASE"
ENV_AUDIT = "AGENT_FACTORY_AUDIT_MODELS"
ENV_AGENT_API_BASE = "AGENT_FACTORY_AGENT_API_BASE"
ENV_AGENT_KEY_ENV = "AGENT_FACTORY_AGENT_API_KEY_ENV"

# Model-name patterns first: `openai/qwen2.5-7b` behind a vLLM server is a Qwen model, whatever the transport.
_NAME_FAMILIES: tuple[tuple[str, str], ...] = (
    (r"gpt|chatgpt|o[1-9]|text-davinci|davinci|babbage", "openai"),
    (r"claude", "anthropic"),
    (r"gemini|gemma|palm|bison", "google"),
    (r"mistral|mixtral|codestral|ministral|magistral|pixtral|devstral", "mistral"),
    (r"deepseek", "deepseek"),
    (r"qwen|qwq", "qwen"),
    (r"llama|meta-|codellama", "meta"),
    (r"command|c4ai|aya", "cohere"),
    (r"grok", "xai"),
    (r"phi-?\d", "microsoft"),
    (r"glm|chatglm|zhipu", "zhipu"),
    (r"kimi|moonshot", "moonshot"),
    (r"yi-", "01ai"),
    (r"ernie", "baidu"),
    (r"doubao|seed-", "bytedance"),
    (r"minimax|abab", "minimax"),
    (r"nova|titan", "amazon"),
    (r"hunyuan", "tencent"),
)
_NAME_RES = tuple((re.compile(rf"(?:^|[/._:\-\s])(?:{p})", re.IGNORECASE), fam) for p, fam in _NAME_FAMILIES)
_PROVIDER_FAMILIES: dict[str, str] = {
    "openai": "openai", "azure": "openai", "azure_ai": "openai", "text-completion-openai": "openai",
    "anthropic": "anthropic", "gemini": "google", "vertex_ai": "google", "vertex_ai_beta": "google",
    "google": "google", "mistral": "mistral", "codestral": "mistral", "deepseek": "deepseek",
    "dashscope": "qwen", "cohere": "cohere", "cohere_chat": "cohere", "xai": "xai", "zhipuai": "zhipu",
    "moonshot": "moonshot", "volcengine": "bytedance", "meta_llama": "meta",
}


def derive_family(model: str) -> str:
    """Family of a litellm model string: from the model name when it names one, else from the provider prefix.

    `openai/gpt-4o-mini` -> openai, `bedrock/anthropic.claude-3` -> anthropic, `openai/qwen2.5-7b` -> qwen,
    `gemini/gemini-2.0-flash` -> google; an unknown name gives its provider prefix (`acme/x1` -> acme).
    """
    text = model.strip().lower()
    provider, _, name = text.partition("/")
    if not name:
        provider, name = "", text
    for pattern, family in _NAME_RES:
        if pattern.search(name):
            return family
    if provider:
        return _PROVIDER_FAMILIES.get(provider, provider)
    head = re.split(r"[-_.:]", name, maxsplit=1)[0]
    return head or name


class ModelSpec(Frozen):
    """One model the cascade may call."""

    model_config = ConfigDict(arbitrary_types_allowed=True)  # merged with Frozen's

    model: Any
    """A litellm model string, or a pydantic-ai `Model` object (called through a pydantic-ai Agent)."""
    api_base: str | None = None
    """Endpoint for OpenAI-compatible or self-hosted servers; None: the provider's default."""
    api_key_env: str | None = None
    """Name of the environment variable holding the key (keys never live in config files)."""
    family: str = ""
    """Model family; derived from the model string when not given. Jury members must differ in it."""
    timeout_s: float = Field(default=60.0, gt=0)
    """Per-call timeout in seconds."""

    @model_validator(mode="after")
    def _named(self) -> ModelSpec:
        if isinstance(self.model, str):
            if not self.model.strip():
                raise ValueError("model: an empty model string")
        elif not hasattr(self.model, "request"):
            raise ValueError(f"model: expected a litellm model string or a pydantic-ai Model, got {self.model!r}")
        if not self.family:
            object.__setattr__(self, "family", derive_family(self.name))
        return self

    @property
    def name(self) -> str:
        """The model string, or `<system>:<model_name>` for a pydantic-ai Model object."""
        if isinstance(self.model, str):
            return self.model
        system = getattr(self.model, "system", "model")
        return f"{system}:{getattr(self.model, 'model_name', type(self.model).__name__)}"


class BudgetLimits(Frozen):
    """Per-run ceilings; None means unlimited. When one is reached no further model call is made."""

    calls: int | None = Field(default=None, ge=0)
    """Model calls (every attempt, retries included: each is one request the provider bills)."""
    tokens: int | None = Field(default=None, ge=0)
    """Total tokens reported by the providers."""
    cost_usd: float | None = Field(default=None, ge=0)
    """Cost from litellm's local cost map (unknown models cost 0)."""


class RetryPolicy(Frozen):
    """tenacity's bounds for one structured call."""

    attempts: int = Field(default=4, ge=1, le=20)
    """Attempts per call, the first included."""
    initial_wait_s: float = Field(default=0.5, ge=0)
    """First backoff; doubles per attempt, with jitter."""
    max_wait_s: float = Field(default=8.0, ge=0)
    """Cap of one backoff."""


def check_jury(jury: tuple[ModelSpec, ...]) -> None:
    """Refuse a jury that is not cross-family: fewer than two members, or two members of one family."""
    if not jury:
        return
    members = ", ".join(f"{m.name} ({m.family})" for m in jury)
    if len(jury) < 2:
        raise SpecError(f"a jury needs at least two members of different families; got {members}")
    by_family: dict[str, list[str]] = {}
    for m in jury:
        by_family.setdefault(m.family, []).append(m.name)
    shared = {f: names for f, names in by_family.items() if len(names) > 1}
    if shared:
        detail = "; ".join(f"{', '.join(names)} are all {f}" for f, names in sorted(shared.items()))
        raise SpecError(
            f"jury members must come from different model families (to avoid self-preference): {detail}; "
            f"members: {members}. Set a different model or an explicit `family` for each member."
        )


class AgentEndpoint(Frozen):
    """Where a model agent of `agent-factory tasks run --agent MODEL` is served (section `[agent]`; the model
    itself is named on the command line)."""

    api_base: str | None = None
    """Endpoint for OpenAI-compatible or self-hosted servers; None: the provider's default."""
    api_key_env: str | None = None
    """Name of the environment variable holding the key (keys never live in config files)."""
    timeout_s: float = Field(default=120.0, gt=0)
    """Per-request timeout in seconds."""


class ModelConfig(Frozen):
    """phi's models, limits and options for one run."""

    small: ModelSpec | None = None
    """The small model; None: model-tier items are recorded `uncollected` ("no model configured")."""
    jury: tuple[ModelSpec, ...] = ()
    """The cross-family jury; empty: escalation keeps the small model's answer (items demanding a jury stay
    uncollected)."""
    escalate_below: float = Field(default=0.7, ge=0, le=1)
    """Small-model confidence under which an item goes to the jury."""
    audit: tuple[ModelSpec, ...] = ()
    """The audit's second raters (`agent-factory audit`): each re-collects the audit sample as `audit:<model>`;
    a rater of the family that collected a datum is refused (docs/method.md section 6)."""
    budget: BudgetLimits = Field(default_factory=BudgetLimits)
    """Per-run ceilings."""
    concurrency: int = Field(default=8, ge=1, le=1024)
    """Units collected at once (and model calls in flight)."""
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    """Retries of one structured call."""
    batch: Literal["unit", "conversation"] = "conversation"
    """How many units one model call covers. `unit`: every model-tier item of one unit (a turn, a session) in
    one call. `conversation`: the items of every turn of one conversation in one call (and one call per juror
    for the turns' unsure items), each answer keyed by its turn and judged on that turn's evidence only; the
    data and their cache keys are the same as with `unit`, so the two share cached answers."""
    agent: AgentEndpoint = Field(default_factory=AgentEndpoint)
    """Where the task runner's model agents are served (`agent-factory tasks run --agent MODEL`)."""
    redactor: str | None = None
    """`module:attr` of a custom redactor (a `Redactor` instance, or a class / factory called without
    arguments); None: `DefaultRedactor`."""

    @model_validator(mode="after")
    def _cross_family(self) -> ModelConfig:
        check_jury(self.jury)
        return self

    @property
    def has_models(self) -> bool:
        """Whether any model tier (small model or jury) is configured."""
        return self.small is not None or bool(self.jury)


def _spec_from(value: Any, where: str) -> dict[str, Any]:
    if isinstance(value, str):
        return {"model": value}
    if isinstance(value, Mapping):
        return dict(value)
    raise SpecError(f"{where}: expected a model string or a table with `model`, got {value!r}")


def _read_config(path: Path | None, env: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
    """(the name errors give, the tables): of `path`, else `$AGENT_FACTORY_CONFIG`, else `./agent-factory.toml`."""
    if path is None:
        named = env.get(ENV_CONFIG)
        path = Path(named) if named else (Path.cwd() / CONFIG_FILE)
        if not named and not path.exists():
            return "environment", {}
    try:
        return str(path), tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise SpecError(f"{path}: cannot read TOML: {e}") from None


def _models_section(models: Mapping[str, Any], source: str) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    if "small" in models:
        raw["small"] = _spec_from(models["small"], f"{source}: models.small")
    if "jury" in models:
        jury = models["jury"]
        if not isinstance(jury, list):
            raise SpecError(f"{source}: models.jury must be a list of models")
        raw["jury"] = [_spec_from(m, f"{source}: models.jury.{i}") for i, m in enumerate(jury)]
    if "audit" in models:
        audit = models["audit"]
        if not isinstance(audit, list):
            raise SpecError(f"{source}: models.audit must be a list of models")
        raw["audit"] = [_spec_from(m, f"{source}: models.audit.{i}") for i, m in enumerate(audit)]
    if "escalate_below" in models:
        raw["escalate_below"] = models["escalate_below"]
    unknown = set(models) - {"small", "jury", "audit", "escalate_below"}
    if unknown:
        raise SpecError(f"{source}: models: unknown keys {sorted(unknown)}; valid: audit, escalate_below, jury, "
                        "small")
    return raw


def _collect_section(collect: Mapping[str, Any], source: str) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    retry: dict[str, Any] = {}
    for key, target in (("retries", "attempts"), ("retry_initial_wait_s", "initial_wait_s"),
                        ("retry_max_wait_s", "max_wait_s")):
        if key in collect:
            retry[target] = collect[key]
    raw["retry"] = retry
    for key in ("concurrency", "batch"):
        if key in collect:
            raw[key] = collect[key]
    unknown = set(collect) - {"batch", "concurrency", "retries", "retry_initial_wait_s", "retry_max_wait_s"}
    if unknown:
        raise SpecError(f"{source}: collect: unknown keys {sorted(unknown)}")
    return raw


def load_model_config(path: Path | None = None, env: Mapping[str, str] = os.environ) -> ModelConfig:
    """The run's model configuration from `agent-factory.toml` and the environment.

    `path` None: `$AGENT_FACTORY_CONFIG`, else `./agent-factory.toml` when it exists, else the environment only.
    File layout::

        [models]
        small = { model = "openai/gpt-4o-mini" }
        jury = [ { model = "anthropic/claude-3-5-haiku-latest" }, { model = "gemini/gemini-2.0-flash" } ]
        escalate_below = 0.7
        audit = [ "gemini/gemini-2.0-flash" ]       # the audit's second raters
        [budget]
        calls = 5000
        tokens = 2_000_000
        cost_usd = 5.0
        [collect]
        concurrency = 8
        retries = 4
        batch = "unit"        # or "conversation": a conversation's turns in one call
        [privacy]
        redactor = "mypkg.privacy:MyRedactor"
        [agent]               # the task runner's model agents (`tasks run --agent MODEL`)
        api_base = "http://127.0.0.1:8000/v1"
        api_key_env = "MY_AGENT_KEY"

    Errors are `SpecError`s naming the file and the field.
    """
    source, data = _read_config(path, env)
    models = data.get("models", {})
    budget = data.get("budget", {})
    collect = data.get("collect", {})
    privacy = data.get("privacy", {})
    agent = data.get("agent", {})
    for name, section in (("models", models), ("budget", budget), ("collect", collect), ("privacy", privacy),
                          ("agent", agent)):
        if not isinstance(section, Mapping):
            raise SpecError(f"{source}: [{name}] must be a table")
    raw = _models_section(models, source)
    raw["budget"] = dict(budget)
    raw.update(_collect_section(collect, source))
    if "redactor" in privacy:
        raw["redactor"] = privacy["redactor"]
    unknown = set(agent) - set(AgentEndpoint.model_fields)
    if unknown:
        raise SpecError(f"{source}: agent: unknown keys {sorted(unknown)}; valid: "
                        f"{', '.join(sorted(AgentEndpoint.model_fields))}")
    raw["agent"] = dict(agent)
    for key, name in ((ENV_AGENT_API_BASE, "api_base"), (ENV_AGENT_KEY_ENV, "api_key_env")):
        if env.get(key, "").strip():
            raw["agent"][name] = env[key].strip()

    # The environment overrides the file for the models it names.
    api_base = env.get(ENV_API_BASE) or None
    if env.get(ENV_SMALL, "").strip():
        raw["small"] = {"model": env[ENV_SMALL].strip(), "api_base": api_base}
    if env.get(ENV_JURY, "").strip():
        raw["jury"] = [{"model": m.strip(), "api_base": api_base} for m in env[ENV_JURY].split(",") if m.strip()]
    if env.get(ENV_AUDIT, "").strip():
        raw["audit"] = [{"model": m.strip(), "api_base": api_base} for m in env[ENV_AUDIT].split(",") if m.strip()]
    try:
        return ModelConfig.model_validate(raw)
    except ValidationError as e:
        raise SpecError(f"{source}: {describe_error(e, raw)}") from None
