"""Lay out the source as it installs, `agent_factory/<folder>/...`, for tools that cannot follow `package_dir`.

setup.py maps the top-level folders to `agent_factory.<folder>`, and the editable install resolves that mapping
with an import hook. Static tools (mypy, import-linter's grimp) find packages on disk instead, so they see only
`agent_factory/__init__.py`. This script mirrors every source file into `build/src-tree/agent_factory/...` as a
symlink (a copy where symlinks are not allowed), so a tool pointed there sees the installed layout while edits to
the real files show through. It prints the tree's root; rerun it after adding or removing a module.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("adapters", "evaluators", "factory", "knowledge_packs")
TREE = ROOT / "build" / "src-tree"


def _sources() -> list[tuple[Path, Path]]:
    pairs = [(p, Path("agent_factory") / p.name) for p in (ROOT / "agent_factory").glob("*.py")]
    for folder in FOLDERS:
        for p in (ROOT / folder).rglob("*.py"):
            if "__pycache__" not in p.parts:
                pairs.append((p, Path("agent_factory") / p.relative_to(ROOT)))
    return pairs


def build(tree: Path = TREE) -> Path:
    """Recreate the mirror at `tree` and return it."""
    shutil.rmtree(tree, ignore_errors=True)
    for src, rel in _sources():
        dst = tree / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.symlink(src, dst)
        except OSError:  # no symlinks (Windows without developer mode): a copy is still a faithful mirror
            shutil.copy2(src, dst)
    return tree


if __name__ == "__main__":
    print(build(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else TREE))
