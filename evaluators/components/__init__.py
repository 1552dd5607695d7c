"""The seven components; importing this package registers their definitions, rules and analyses."""

from __future__ import annotations

import importlib

BUILTIN = ("execution", "substance", "trajectory", "results", "conduct", "provenance", "adjudication")

for _name in BUILTIN:
    try:
        importlib.import_module(f"evaluators.components.{_name}")
    except ModuleNotFoundError as e:
        # While components are being built in parallel a missing one is skipped; any other import error is real.
        if e.name != f"evaluators.components.{_name}":
            raise
