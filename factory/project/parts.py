"""The parts a `Project` assembles once: the store's connection, the suite (its pack, components and flags),
the model config, the redactor, the datum cache and the run's collector; and the project's lifetime.

Each part is made when a job first needs it, never in the constructor: a read job opens the store read-only and
creates no file, and a deterministic `build` opens no cache. The module imports no layer at its top, so that
`import agent_factory` and the CLI's option parsing stay cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from agent_factory.evaluators.collect import Cascade, DatumCache, ModelConfig
    from agent_factory.evaluators.collect.redact import Redactor
    from agent_factory.evaluators.core.flags import FlagSpec
    from agent_factory.factory.store import Store
    from agent_factory.factory.suite.read import Suite
    from agent_factory.knowledge_packs import KnowledgePack

DEFAULT_STORE = Path(".agent-factory") / "store.duckdb"
"""The store a project uses unless told (`factory.store.schema.DEFAULT_STORE`, repeated here so that parsing the
CLI's options imports no store; a test holds the two equal)."""


class ProjectParts:
    """The parts a `Project`'s jobs need, each assembled once, and their lifetime (a context manager closing
    the store's connection and the cache). Options are those of the commands: `store` (the DuckDB file), `suite`
    (a suite directory; None: every component over `pack`), `pack` (a pack name or YAML path; None: the suite's,
    else the one used at ingest, else `default`), `config` (agent-factory.toml, or a `ModelConfig`;
    None: its lookup), `cache` (the
    model answers' cache; None: beside the store), `unapproved` (run a built suite nobody approved, as it is), and
    `on_notice`, called with what the person running should know (a suite with unapproved changes) before a run.
    """

    def __init__(
        self, *, store: Path | str = DEFAULT_STORE, suite: Path | str | None = None, pack: str | None = None,
        config: Path | str | ModelConfig | None = None, cache: Path | str | None = None, unapproved: bool = False,
        on_notice: Callable[[str], None] | None = None,
    ) -> None:
        self.store_path = Path(store)
        """The store file."""
        self.suite_dir = Path(suite) if suite is not None else None
        """The suite directory; None: every component over the pack."""
        self.pack_name = pack
        """The pack asked for (None: the suite's, else the one used at ingest, else `default`)."""
        self.config_path = Path(config) if isinstance(config, (str, Path)) else None
        """The model config file (None: its lookup, `load_model_config`)."""
        self.cache_dir = Path(cache) if cache is not None else self.store_path.parent / "cache"
        """The model answers' cache (and the report's plotting bundle)."""
        self.unapproved = unapproved
        self.on_notice = on_notice
        self._store: Store | None = None
        self._writable = False
        self._suite: Suite | None = None
        self._config: ModelConfig | None = None if isinstance(config, (str, Path)) else config
        self._cache: DatumCache | None = None
        self._redactor: Redactor | None = None
        self._flags: tuple[FlagSpec, ...] | None = None

    # ---- lifetime --------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the store's connection and the cache, if opened (closing twice does nothing)."""
        try:
            self._release()
        finally:
            if self._cache is not None:
                cache, self._cache = self._cache, None
                cache.close()

    def _release(self) -> None:
        """Close the store's connection (a job that opens the store itself, or another mode, follows)."""
        if self._store is not None:
            st, self._store = self._store, None
            st.close()

    # ---- what a project assembles once ---------------------------------------------------------------

    def store(self, *, write: bool = False) -> Store:
        """The store, opened on first use: read-only unless `write` (a read-only connection is reopened for
        writing, since DuckDB keeps one mode per file in a process). Reading a missing store is a `StoreError`;
        writing creates it."""
        if self._store is None or (write and not self._writable):
            from agent_factory.factory.store import Store

            self._release()
            self._store, self._writable = Store(self.store_path, read_only=not write), write
        return self._store

    @property
    def is_open(self) -> bool:
        """Whether the store's connection is open now."""
        return self._store is not None

    @property
    def suite(self) -> Suite:
        """The suite a run uses (`load_suite`: an approved suite's snapshot; a built unapproved one only with
        `unapproved`), read from the store when it exists (the pack used at ingest is the default pack)."""
        if self._suite is None:
            from agent_factory.factory.suite.read import load_suite

            st = self._store if self._store is not None else (self.store() if self.store_path.exists() else None)
            self._suite = load_suite(self.suite_dir, pack=self.pack_name, store=st, allow_unapproved=self.unapproved)
        return self._suite

    @property
    def pack(self) -> KnowledgePack:
        """The suite's knowledge pack."""
        return self.suite.pack

    @property
    def notice(self) -> str | None:
        """What the person running should know about the suite (unapproved changes), or None."""
        return self.suite.notice

    @property
    def flags(self) -> tuple[FlagSpec, ...]:
        """Every flag of the suite's components over its pack (Conduct's from its clauses), but those reading a
        datum an audit retired (`store.audit.retired_in_force`), as their item or as their gate (a clause's
        trigger: a flag gated by an untrusted datum is untrusted too): a retired item leaves the findings too."""
        if self._flags is None:
            from agent_factory.evaluators.findings import all_flags
            from agent_factory.factory.store.audit import retired_in_force

            retired = retired_in_force(self.store()) if self.store_path.exists() else frozenset()
            self._flags = tuple(f for f in all_flags(self.suite.pack, self.suite.components)
                                if not (f.source == "datum" and (f.item in retired or f.gate in retired)))
        return self._flags

    @property
    def model_config(self) -> ModelConfig:
        """The model config (`load_model_config` of `config`: agent-factory.toml and the environment)."""
        if self._config is None:
            from agent_factory.evaluators.collect import load_model_config

            self._config = load_model_config(self.config_path)
        return self._config

    @property
    def redactor(self) -> Redactor:
        """The configured redactor, looking for the phone numbers of the regions the suite's pack names: what
        prompts, `show`, `export` and the report's quotes all redact with."""
        if self._redactor is None:
            from agent_factory.evaluators.collect import load_redactor

            self._redactor = load_redactor(self.model_config.redactor, phone_regions=self.suite.pack.phone_regions)
        return self._redactor

    @property
    def cache(self) -> DatumCache:
        """The model answers' cache, opened on first use (a killed run repeats no answered call)."""
        if self._cache is None:
            from agent_factory.evaluators.collect import DatumCache

            self._cache = DatumCache(self.cache_dir)
        return self._cache

    def collector(self) -> Cascade:
        """The primary collector for one run: the configured tiers over the project's cache, redactor and the
        suite's (approved) templates, with a budget of its own (the config's limits are per run)."""
        from agent_factory.evaluators.collect import Budget, Cascade
        from agent_factory.evaluators.collect.prompt import template_dir

        cfg = self.model_config
        # Prompts render from the suite's (approved) templates: a template edit a person approved is what runs.
        return Cascade(cfg, cache=self.cache, budget=Budget(cfg.budget), templates=template_dir(self.suite.files),
                       redactor=self.redactor)

    @property
    def command_options(self) -> str:
        """`--store S --suite D`, to repeat in the commands a view suggests (the store unless it is the
        default)."""
        parts = [] if self.store_path == DEFAULT_STORE else [f"--store {self.store_path}"]
        return " ".join(parts + ([f"--suite {self.suite_dir}"] if self.suite_dir else []))


__all__ = ["DEFAULT_STORE", "ProjectParts"]
