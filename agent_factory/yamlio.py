"""Reading YAML with libyaml's parser when PyYAML was built with it, PyYAML's safe semantics either way.

Packs and suites are read on every build, approval and run; with the pure-Python parser that took most of an
approval's seconds. The C parser builds the same nodes (with line marks) and the same safe values.
"""

from __future__ import annotations

from typing import Any

import yaml

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """`yaml.safe_load(text)`, parsed by libyaml when available."""
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader (CSafeLoader or SafeLoader)


def compose(text: str) -> yaml.Node | None:
    """`yaml.compose(text, Loader=SafeLoader)`: the node tree with line marks, parsed by libyaml when available."""
    return yaml.compose(text, Loader=_LOADER)
