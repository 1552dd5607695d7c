"""Canonical JSON and the digests made from it: one encoding for every id, fingerprint and cache key.

`canonical_json` sorts keys, keeps non-ASCII text as is, writes no whitespace between tokens and turns values
JSON has no type for (dates, paths, sets) into their `str`, so equal content is equal bytes on every machine.
`digest` is the sha256 of those bytes (or of raw bytes), cut to `n` hex characters. Pure functions.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """`value` as canonical JSON text (sorted keys, compact, UTF-8 text kept, unknown types as `str`)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def stable_id(*parts: object, prefix: str = "") -> str:
    """A short deterministic id from content parts: sha256 over each part's `repr` and a separator, 16 hex
    characters after `prefix`. Unit ids are made this way since the first store: the encoding is kept so ids
    stay the same across versions (content digests use `digest`)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(repr(p).encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return f"{prefix}{h.hexdigest()[:16]}"


def digest(value: Any, *, n: int = 64) -> str:
    """sha256 hex (first `n` characters) of `value`: bytes as they are, str as UTF-8, anything else as its
    canonical JSON."""
    if isinstance(value, bytes):
        data = value
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
    else:
        data = canonical_json(value).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:n]


__all__ = ["canonical_json", "digest"]
