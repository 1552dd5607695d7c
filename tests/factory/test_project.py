"""`Project`, the one composition root: the documented example runs, two projects in one process share nothing,
the context manager closes what it opened, and reading jobs create no file."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import agent_factory
from agent_factory.errors import AgentFactoryError, SpecError, StoreError
from agent_factory.evaluators.collect import ModelConfig
from agent_factory.factory.project import DEFAULT_STORE, Project, open_project
from agent_factory.factory.simulate import SimConfig, simulate
from agent_factory.factory.store import Store
from agent_factory.factory.store.schema import DEFAULT_STORE as STORE_DEFAULT
from tests.conftest import REPO

DOC = REPO / "docs" / "python-api.md"


def test_the_python_api_example_runs(no_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    match = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert match is not None, f"{DOC}: no ```python block"
    exec(compile(match.group(1), str(DOC), "exec"), {"__name__": "python_api_example"})  # noqa: S102
    printed = capsys.readouterr().out
    assert re.search(r"accepted [1-9]\d* of [1-9]\d* records", printed), printed
    assert "first run - " in printed and "delivery failure" in printed
    assert (no_model / "demo" / "store.duckdb").is_file()


def test_the_readme_python_example_runs(no_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    readme = REPO / "README.md"
    match = re.search(r"```python\n(.*?)```", readme.read_text(encoding="utf-8"), re.DOTALL)
    assert match is not None, f"{readme}: no ```python block"
    exec(compile(match.group(1), str(readme), "exec"), {"__name__": "readme_example"})  # noqa: S102
    printed = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"[1-9]\d* records in", printed[0]) and printed[1] == "first run", printed
    assert any(line.startswith("execution") and "delivery failure" in line for line in printed), printed


def test_the_package_offers_the_project_lazily() -> None:
    assert agent_factory.open_project is open_project and agent_factory.Project is Project
    assert {"Project", "open_project", "__version__"} <= set(agent_factory.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        agent_factory.nothing  # noqa: B018
    assert DEFAULT_STORE == STORE_DEFAULT  # the project repeats the store's default so the CLI imports no store


def _ingested(root: Path, name: str, pack: str) -> Path:
    store = root / f"{name}.duckdb"
    with open_project(store=store, pack=pack) as p:
        assert p.ingest([root / "sim"]).accepted > 0
    return store


def test_two_projects_in_one_process_share_nothing(no_model: Path) -> None:
    simulate(SimConfig(users=6, seed=7), no_model / "sim")
    business = _ingested(no_model, "business", "business_analysis")
    default = _ingested(no_model, "default", "default")
    alone = no_model / "alone.duckdb"
    shutil.copyfile(business, alone)
    rules = ModelConfig()
    with open_project(store=business, config=rules) as a, open_project(store=default, config=rules) as b:
        first_a, first_b = a.run(), b.run()
        assert (a.pack.name, b.pack.name) == ("business_analysis", "default")  # each store's ingest pack
        assert a.flags != b.flags
        assert a.run().plan.trigger == "nothing changed"  # b's run changed nothing a had recorded
        side_by_side = a.summary()
    assert first_a.plan.trigger == first_b.plan.trigger == "first run"
    with open_project(store=alone, config=rules) as c:
        only = c.run()
        assert c.summary().components == side_by_side.components
    assert only.items == first_a.items and only.results == first_a.results
    assert only.components == first_a.components


def test_the_context_manager_closes_the_store_and_the_cache(no_model: Path) -> None:
    simulate(SimConfig(users=2, seed=3), no_model / "sim")
    store = _ingested(no_model, "s", "default")
    with open_project(store=store, config=ModelConfig(), cache=no_model / "cache") as p:
        assert p.stats()["turns"] > 0 and p.is_open
        p.cache  # noqa: B018  (opened here, closed by the with block)
    assert not p.is_open
    with Store(store):  # a read-write open in this process: refused while a read-only connection stays open
        pass
    p.close()  # closing twice does nothing


def test_reading_jobs_create_no_file_and_say_what_to_do(no_model: Path) -> None:
    missing = no_model / "none" / "s.duckdb"
    with open_project(store=missing) as p:
        for job in (p.summary, lambda: p.show("u1"), lambda: p.worst(3), lambda: p.report(no_model / "r.html")):
            with pytest.raises(AgentFactoryError, match="no store here yet; run `agent-factory ingest PATH`"):
                job()
        with pytest.raises(StoreError, match="no store here yet"):
            p.stats()
        with pytest.raises(AgentFactoryError, match="no such file or directory"):
            p.ingest([no_model / "missing.jsonl"])
        with pytest.raises(AgentFactoryError, match="no store here yet"):
            p.run()
    assert not missing.parent.exists()


def test_a_suite_of_another_pack_is_one_line(no_model: Path) -> None:
    simulate(SimConfig(users=2, seed=5), no_model / "sim")
    store = _ingested(no_model, "s", "business_analysis")
    with open_project(store=store, pack="default", config=ModelConfig()) as p:
        with pytest.raises(SpecError, match="ingested with pack 'business_analysis', but the suite runs pack") as caught:
            p.run()
    assert "\n" not in str(caught.value)


def test_ingest_takes_sources_as_a_path_does(tmp_path: Path) -> None:
    from agent_factory.adapters.source import BytesSource
    from tests.conftest import FIXTURES

    tau = FIXTURES / "chat" / "tau_small.json"
    with open_project(store=tmp_path / "a.duckdb") as p:
        by_path = p.ingest([tau])
        turns_a = p.stats()["turns"]
    with open_project(store=tmp_path / "b.duckdb") as p:
        by_bytes = p.ingest([BytesSource(name="tau.json", data=tau.read_bytes())])
        turns_b = p.stats()["turns"]
    assert (by_bytes.read, by_bytes.accepted, by_bytes.quarantined) == (by_path.read, by_path.accepted,
                                                                        by_path.quarantined)
    assert by_path.accepted > 0 and turns_a == turns_b
