"""Tool-use checks: grounding (see the package docstring)."""

from __future__ import annotations

__all__: list[str] = []
