"""The cache: k = sha256(v || sha256(pi(x))) -> datum, on disk (diskcache), durable per write.

Two kinds of entries share one directory:
- data, keyed by `cache_key(v, pi_digest)`: v covers the definition digest (its version and projection), the
  collector (rule name, version and source, or model strings, families and template digests) and, for rule
  items, the knowledge pack; a rerun with nothing changed finds every datum and calls no model;
- model answers, keyed by `call_key(model, prompt, schema)`: written the moment a call returns, so a run
  killed between a call and its data (or between the small model and the jury) never repeats that call.
  A unit's data are written together (`put_data`, one transaction), so the rerun's prompts are the same.

Values are JSON text (never pickles), so a cache directory is safe to share and inspect.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import diskcache

from agent_factory.adapters.model import Turn
from agent_factory.digest import canonical_json
from agent_factory.evaluators.core.memo import memos
from agent_factory.evaluators.core.model import AtomicDatum
from agent_factory.evaluators.core.registry import EngagementView, RuleFn, SpanView, get_rule
from agent_factory.evaluators.core.source import function_digest, module_digest

_DATUM = "d:"
_ANSWER = "a:"


def _canonical(value: object) -> bytes:
    return canonical_json(value).encode("utf-8", "surrogatepass")


def sha256(data: bytes | str) -> str:
    """Hex sha256 of bytes, or of a string's UTF-8 (lone surrogates kept)."""
    return hashlib.sha256(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data).hexdigest()


def version_digest(version: Mapping[str, Any]) -> str:
    """v: the sha256 of the canonical JSON of the version parts."""
    return sha256(_canonical(dict(version)))


def cache_key(version: Mapping[str, Any] | str, pi_digest: str) -> str:
    """k = sha256(v || sha256(pi(x))); `version` is the parts of v or v itself (`version_digest`)."""
    v = version if isinstance(version, str) else version_digest(version)
    return sha256(f"{v}{pi_digest}")


def call_key(model: str, family: str, prompt: str, schema: Mapping[str, Any]) -> str:
    """Key of one model answer: the model, the exact prompt and the output schema."""
    return sha256(_canonical({"model": model, "family": family, "prompt": prompt, "schema": dict(schema)}))


def _turn_digest(turn: Turn) -> str:
    # Every span of a turn is a unit that carries the whole turn: hash the turn once per run, not once per span.
    return memos().identity("cache.turn_digest", max_entries=256).get(
        None, turn, None, lambda: sha256(turn.model_dump_json()))


def unit_digest(unit: object) -> str:
    """sha256 of everything a rule may read of a unit (the `pi` of rule items is the whole unit)."""
    h = hashlib.sha256()
    if isinstance(unit, SpanView):
        parts: list[str] = [unit.span.model_dump_json(), _turn_digest(unit.turn)]
    elif isinstance(unit, EngagementView):
        parts = [unit.engagement.model_dump_json(), *(c.model_dump_json() for c in unit.conversations),
                 unit.horizon.isoformat() if unit.horizon else ""]
    elif hasattr(unit, "model_dump_json"):
        parts = [unit.model_dump_json()]
    else:
        parts = [repr(unit)]
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\x1e")
    return h.hexdigest()


def context_digest(view: EngagementView) -> str:
    """What a session's judgment may depend on beyond itself: which sessions the user had, and when observation
    ended. Sessions are immutable once ingested, so their ids, sizes and ends stand for their content."""
    h = hashlib.sha256()
    for c in view.conversations:
        h.update(f"{c.id}\x1f{len(c.turns)}\x1f{c.end.isoformat() if c.end else ''}\x1e".encode())
    h.update((view.horizon.isoformat() if view.horizon else "").encode())
    return h.hexdigest()


def rule_identity(name: str) -> tuple[str, str]:
    """(version, source digest) of the rule registered as `name` in the registry in use: the version people read
    (the function's `version` attribute or its module's `VERSION`, else "1") and a digest of its module's source,
    so an edited rule never reuses the answers of the old one. Once per function in a run (`core.memo`)."""
    fn = get_rule(name)
    return memos().identity("cache.rule_identity", max_entries=1024).get(None, fn, None, lambda: _identity(fn))


def _identity(fn: RuleFn) -> tuple[str, str]:
    module = sys.modules.get(getattr(fn, "__module__", ""), None)
    version = str(getattr(fn, "version", None) or getattr(module, "VERSION", None) or "1")
    return version, module_digest(module) if module is not None else function_digest(fn)[:16]


class DatumCache:
    """Data and model answers by key in a directory (diskcache: process-safe, each write durable).

    `directory=None` keeps nothing (every lookup misses): a run without a cache must not grow in memory with
    the number of units it collects.
    """

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else None
        self._disk: diskcache.Cache | None = (
            # No eviction: a result cache that silently dropped entries would silently cost model calls, and
            # culling's per-write size checks were a third of a rules-only run's time.
            diskcache.Cache(str(directory), eviction_policy="none", cull_limit=0)
            if directory is not None else None
        )

    def _get(self, key: str) -> str | None:
        if self._disk is None:
            return None
        value = self._disk.get(key)
        return value if isinstance(value, str) else None

    def _set(self, key: str, value: str) -> None:
        if self._disk is not None:
            self._disk.set(key, value)

    def get_datum(self, key: str) -> AtomicDatum | None:
        """The datum stored under `key`, or None."""
        raw = self._get(_DATUM + key)
        return AtomicDatum.model_validate_json(raw) if raw is not None else None

    def put_datum(self, datum: AtomicDatum) -> None:
        """Store a datum under its own `key`."""
        if not datum.key:
            raise ValueError(f"{datum.item} on {datum.unit_id}: a datum needs its key to be cached")
        self._set(_DATUM + datum.key, datum.model_dump_json())

    def put_data(self, data: Sequence[AtomicDatum]) -> None:
        """Store a unit's data in one transaction: after a kill, a unit has all its data or none, so the rerun
        asks the model exactly what the killed run asked (and finds that answer in the cache)."""
        if self._disk is None:
            return
        with self._disk.transact():
            for datum in data:
                self.put_datum(datum)

    def get_answer(self, key: str) -> dict[str, Any] | None:
        """The raw model answer stored under `key`, or None."""
        raw = self._get(_ANSWER + key)
        return json.loads(raw) if raw is not None else None

    def put_answer(self, key: str, answer: Mapping[str, Any]) -> None:
        """Store a raw model answer under `key`."""
        self._set(_ANSWER + key, json.dumps(dict(answer), ensure_ascii=False))

    def __len__(self) -> int:
        return len(self._disk) if self._disk is not None else 0

    def close(self) -> None:
        """Close the disk cache (a no-op for the in-memory one)."""
        if self._disk is not None:
            self._disk.close()

    def __enter__(self) -> DatumCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
