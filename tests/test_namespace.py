"""One import namespace: everything is `agent_factory.*`, and the wheel installs nothing else at the top level."""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("adapters", "evaluators", "factory", "knowledge_packs")


def test_every_module_imports_under_the_namespace_and_no_old_name_is_loaded() -> None:
    names = []
    for folder in FOLDERS:
        pkg = importlib.import_module(f"agent_factory.{folder}")
        # The folder stays where the project lays it out; agent_factory/<folder> is a symlink to it.
        assert Path(pkg.__file__).resolve().parent == ROOT / folder
        assert (ROOT / "agent_factory" / folder).resolve() == ROOT / folder
        names += [m.name for m in pkgutil.walk_packages(pkg.__path__, f"agent_factory.{folder}.")]
    assert len(names) > 50
    for name in names:
        if name.endswith("__main__"):
            continue
        importlib.import_module(name)
    # The repository root is on sys.path under pytest, so a module still importing `adapters.x` would work here
    # and break for every user: no module of the project may be loaded under a bare folder name.
    stray = sorted(
        n for n, m in sys.modules.items()
        if n.split(".")[0] in FOLDERS and str(getattr(m, "__file__", "") or "").startswith(str(ROOT))
    )
    assert stray == []


@pytest.mark.slow
def test_the_wheel_holds_only_the_namespace(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("agent_factory-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"agent_factory"}
    packages = {n.rsplit("/", 1)[0].replace("/", ".") for n in names if n.endswith("/__init__.py")}
    expected = {"agent_factory"} | {
        "agent_factory." + str(p.parent.relative_to(ROOT)).replace("/", ".")
        for folder in FOLDERS for p in (ROOT / folder).rglob("__init__.py")
    }
    assert packages == expected
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    # Package data travels with its package: the default knowledge pack and the prompt templates.
    assert any(n.startswith("agent_factory/knowledge_packs/") and n.endswith(".yaml") for n in names)
    assert any(n.endswith(".j2") for n in names)
    assert not any(n.startswith(("tests/", "bench/")) for n in names)


def test_the_kernel_imports_no_layer() -> None:
    # The kernel (errors, frozen base, digests, validation, plugins) sits below adapters <- knowledge_packs <-
    # evaluators <- factory: its modules import one another, never a layer (`__main__` is the CLI's entry).
    import ast

    kernel = sorted(p.stem for p in (ROOT / "agent_factory").glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert {"errors", "frozen", "digest", "validation", "plugins"} <= set(kernel)
    allowed = {"agent_factory", *(f"agent_factory.{k}" for k in kernel)}
    for name in kernel:
        tree = ast.parse((ROOT / "agent_factory" / f"{name}.py").read_text(encoding="utf-8"))
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | {
            a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not {m for m in imported if m.startswith("agent_factory") and m not in allowed}, name


# The command line's `main()` chooses the pool (importing the package changes no environment variable).
_THROUGH_MAIN = """
import sys
from agent_factory.factory.cli.app import main
sys.argv = ["agent-factory", "--version"]
try:
    main()
except SystemExit:
    pass
import pyarrow as pa
print(pa.default_memory_pool().backend_name)
"""


@pytest.mark.parametrize(("chosen", "expected"), [(None, "system"), ("mimalloc", "mimalloc")])
def test_arrow_allocates_through_malloc_unless_the_user_chose_a_pool(chosen: str | None, expected: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    out = subprocess.run([sys.executable, "-c", _THROUGH_MAIN], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip().splitlines()[-1] == expected


def test_importing_the_package_changes_no_environment_variable() -> None:
    code = ("import os; before = dict(os.environ); import agent_factory, agent_factory.factory.cli.app; "
            "from agent_factory import open_project; print(dict(os.environ) == before)")
    env = {k: v for k, v in os.environ.items() if k not in ("ARROW_DEFAULT_MEMORY_POOL", "LITELLM_LOCAL_MODEL_COST_MAP")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "True"
