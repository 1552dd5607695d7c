"""A bounded memo of results computed from one text: the same text is scanned once, not once per field.

Traces repeat their texts (every model call of an agent carries the same system prompt and tool list, tool
results are quoted again in the next prompt, simulators and templates reuse whole messages), so provenance keeps
the text-only part of its work (injection matches, truncation markers) per distinct text. Only results that
depend on nothing but the text and the frozen pack logic are kept; unit ids and field names are applied after.
The memo holds at most `max_entries` texts and `max_chars` characters of them, and is emptied when either fills:
memory stays bounded, and a miss only costs the computation it would have done anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class TextMemo(Generic[T]):
    """`get(key, text, make)`: `make()` the first time (key, text) is seen, the kept result after."""

    __slots__ = ("max_entries", "max_chars", "_chars", "_kept")

    def __init__(self, *, max_entries: int = 50_000, max_chars: int = 8_000_000) -> None:
        self.max_entries, self.max_chars = max_entries, max_chars
        self._chars = 0
        self._kept: dict[tuple[Hashable, str], T] = {}

    def get(self, key: Hashable, text: str, make: Callable[[], T]) -> T:
        """The result for `text` under `key` (what else the result depends on: the pack's plan)."""
        k = (key, text)
        hit = self._kept.get(k, _NONE)
        if hit is not _NONE:
            return hit  # type: ignore[return-value]
        value = make()
        if len(text) > self.max_chars // 4:
            return value  # one huge text would evict everything else for nothing
        if len(self._kept) >= self.max_entries or self._chars + len(text) > self.max_chars:
            self._kept.clear()
            self._chars = 0
        self._kept[k] = value
        self._chars += len(text)
        return value

    def clear(self) -> None:
        """Forget everything."""
        self._kept.clear()
        self._chars = 0


_NONE = object()
