"""Packaging: the repository's top-level folders install as one namespace, `agent_factory.*`.

The folders stay where the project lays them out (`adapters/`, `evaluators/`, `factory/`, `knowledge_packs/`);
`package_dir` maps each to `agent_factory.<name>`, so nothing but `agent_factory` lands at the top of
site-packages (`factory` is factory_boy's import name, `adapters` another project's). Everything else is in
pyproject.toml.
"""

from setuptools import find_namespace_packages, setup

FOLDERS = ("adapters", "evaluators", "factory", "knowledge_packs")

# Namespace packages too: data folders without an `__init__.py` (prompt templates) ship as package data.
packages = ["agent_factory"] + [
    f"agent_factory.{p}" for p in find_namespace_packages(
        include=[*FOLDERS, *(f"{f}.*" for f in FOLDERS)], exclude=["*.__pycache__"])
]
setup(
    packages=packages,
    package_dir={"agent_factory": "agent_factory", **{f"agent_factory.{f}": f for f in FOLDERS}},
)
