"""The one base of every spec, definition, unit and result model: frozen, unknown fields refused.

A model read back from YAML or the store is exactly what was written; a typo in a field name is an error that
names the field, not a silently ignored key.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """A frozen pydantic model that forbids extra fields (`extra="forbid"`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


__all__ = ["Frozen"]
