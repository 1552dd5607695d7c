"""Importing the package changes nothing in the process: in a fresh interpreter, importing every module of
`agent_factory` leaves `os.environ` as it was, makes no plugin registry and no memo table, and leaves every
module-level dict, list and set of the registry and memo modules as importing that module alone left it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

REGISTRY_MODULES = (
    "agent_factory.plugins",
    "agent_factory.plugin_registry",
    "agent_factory.adapters.base",
    "agent_factory.adapters.builtin",
    "agent_factory.evaluators.core.registry",
    "agent_factory.evaluators.core.memo",
    "agent_factory.evaluators.core.source",
    "agent_factory.knowledge_packs.loader",
    "agent_factory.evaluators.collect.redact",
    "agent_factory.evaluators.collect.cache",
    "agent_factory.evaluators.components.provenance.rules",
    "agent_factory.evaluators.components.conduct.rules",
    "agent_factory.evaluators.provenance.coverage",
    "agent_factory.evaluators.kernel",
)
"""Where registries and memo tables live (or lived: module-level dicts filled at import or on first use)."""

SCRIPT = textwrap.dedent('''
    import importlib, json, os, pkgutil, sys
    from collections.abc import Sized

    environ = dict(os.environ)
    REGISTRY_MODULES = json.loads(sys.argv[1])

    def containers(module):
        """Every module-level dict / list / set (and other sized container) of `module`, as text."""
        out = {}
        for name, value in sorted(vars(module).items()):
            if name.startswith("__") or isinstance(value, (str, bytes, type)) or callable(value):
                continue
            if isinstance(value, (dict, list, set)) or (isinstance(value, Sized) and hasattr(value, "clear")):
                out[name] = repr(value)
        return out

    alone = {}
    for name in REGISTRY_MODULES:
        alone[name] = containers(importlib.import_module(name))

    import agent_factory
    walked = []
    for info in pkgutil.walk_packages(agent_factory.__path__, "agent_factory."):
        if info.name.split(".")[-1] == "__main__":
            continue
        importlib.import_module(info.name)
        walked.append(info.name)

    from agent_factory import plugins
    from agent_factory.evaluators.core import memo

    after = {name: containers(sys.modules[name]) for name in REGISTRY_MODULES}
    changed = {name: sorted(k for k in set(alone[name]) | set(after[name])
                            if alone[name].get(k) != after[name].get(k))
               for name in REGISTRY_MODULES}
    print(json.dumps({
        "walked": len(walked),
        "environ_added": sorted(set(os.environ) - set(environ)),
        "environ_changed": sorted(k for k in environ if os.environ.get(k) != environ[k]),
        "changed": {k: v for k, v in changed.items() if v},
        "plugins_filled": {k: v for k, v in containers(plugins).items() if v not in ("{}", "[]", "set()")},
        "registry_made": plugins.process_registry_made(),
        "memos_made": memo.process_memos_made(),
    }))
''')


def _import_everything() -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(REGISTRY_MODULES)], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=False, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_importing_every_module_changes_no_registry_no_memo_and_no_environment() -> None:
    got = _import_everything()
    assert got["walked"] > 150
    # No registration and no memo by import: a registry is made, and filled from the entry points, on the first
    # lookup; memo tables on the first run.
    assert got["registry_made"] is False
    assert got["memos_made"] is False
    assert got["plugins_filled"] == {}
    assert got["changed"] == {}
    # Importing the package writes no environment variable (the CLI's main sets what the process needs).
    assert got["environ_added"] == [] and got["environ_changed"] == []
