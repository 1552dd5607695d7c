"""Which evaluators a run uses: the knowledge pack and the components, from a suite directory or defaults.

A suite directory holds `suite.yaml` (`pack`: a built-in name or a path relative to the suite; `components`:
names, default all seven). The spec compiler of the next milestone writes richer suites into the same place.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from adapters.exceptions import SpecError
from evaluators.core import COMPONENTS, Component, ComponentSpec, get_component, load_yaml_model
from factory.store import Store
from knowledge_packs import KnowledgePack, load_pack

SUITE_FILE = "suite.yaml"


class SuiteFile(BaseModel):
    """The `suite.yaml` of a suite directory."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pack: str = "default"
    """Knowledge pack: built-in name, entry-point name, or a path relative to the suite directory."""
    components: tuple[Component, ...] = Field(default=COMPONENTS)
    """Components to run, in the design's order."""


@dataclass(frozen=True)
class Suite:
    """A resolved suite: the pack and the component specs."""

    pack: KnowledgePack
    components: tuple[ComponentSpec, ...]
    source: Path | None


def load_suite(directory: Path | None, *, pack: str | None, store: Store | None = None) -> Suite:
    """The suite to run. Pack precedence: `pack` argument, the suite's pack, the pack used at ingest, `default`."""
    spec = SuiteFile()
    if directory is not None:
        path = directory / SUITE_FILE
        if not path.exists():
            raise SpecError(f"{directory}: no {SUITE_FILE} in the suite directory")
        spec = load_yaml_model(SuiteFile, path)
    name = pack or (spec.pack if directory is not None else None) or (store.get_meta("pack") if store else None)
    name = name or "default"
    if directory is not None and pack is None and (directory / name).exists():
        name = str(directory / name)
    return Suite(
        pack=load_pack(name), components=tuple(get_component(c) for c in spec.components), source=directory,
    )
