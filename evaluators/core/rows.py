"""One layer's unit rows held as columns (`LayerRows`): what the analyses read, with no Python object per unit
until an analysis reads it.

At 10x the default simulation the largest group of analyses reads 502k unit rows. As `UnitRow` tuples they held
161 MB of Python objects in the process that loads them, and every forked analysis worker that walked them copied
the pages it touched (a read writes the tuple's reference count), so the analyses' processes took 1,005 MB
together. Held as columns (Arrow strings for the unit ids, numpy arrays for numbers and for the codes of columns
with few distinct values: users, conversations, modes, value maps; the facts one coded column per item,
`FactColumns`), the rows hold 51 MB, and the processes take 760 MB. `UnitRow`s are made a chunk at a time as an
analysis iterates, and dropped as it moves on: some 0.5-0.6 us a row (its facts' map included), under 2 s over
the 3M rows the analyses read at 10x.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from types import MappingProxyType
from typing import Any, cast, overload

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from agent_factory.evaluators.core.model import Layer
from agent_factory.evaluators.core.registry import UnitRow

_CHUNK = 4096
"""Rows made at a time while iterating: small enough to stay in cache, large enough for the columns' bulk
conversions to pay."""


@dataclass(frozen=True, eq=False)
class Coded:
    """A column of few distinct values: one small code per row and the distinct values once."""

    codes: npt.NDArray[np.int32]
    vocab: tuple[Any, ...]
    """The distinct values (None among them for a column with nulls); each is shared by every row that has it."""
    _lookup: npt.NDArray[np.object_] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # An object array takes a chunk's codes in one step (a third of the time of a comprehension). Filled one
        # by one: given a list, numpy would read a tuple or a sequence among the values as a row of its own.
        lookup = np.empty(len(self.vocab), dtype=object)
        for k, v in enumerate(self.vocab):
            lookup[k] = v
        object.__setattr__(self, "_lookup", lookup)

    @classmethod
    def of(cls, values: Sequence[Any], *, key: Callable[[Any], Any] | None = None) -> Coded:
        """Code Python values in order of first appearance, two values the same when their `key` is (the
        values themselves, hashable; `id` for value maps, which are not, and which the store's loader shares
        among every unit with the same values)."""
        index: dict[Any, int] = {}
        vocab: list[Any] = []
        codes = np.empty(len(values), dtype=np.int32)
        for k, v in enumerate(values):
            code = index.setdefault(v if key is None else key(v), len(vocab))
            if code == len(vocab):
                vocab.append(v)
            codes[k] = code
        return cls(codes, tuple(vocab))

    def cells(self, lo: int, hi: int) -> list[Any]:
        """The values of rows `lo` to `hi`."""
        return cast("list[Any]", self._lookup[self.codes[lo:hi]].tolist())


_NO_FACTS: Mapping[str, float | str | None] = MappingProxyType({})
"""The facts of a row that has none (shared by every such row)."""


def _typed(v: Any) -> Any:
    # 1, 1.0 and True are one key to a dict: a fact keeps its own type.
    return (type(v), v)


@dataclass(frozen=True, eq=False)
class FactColumns:
    """One layer's facts as columns: per item, in item order, the rows that have a fact of it (ascending) and
    those facts, coded. A row's facts are made as it is read, a map in item order; a row with none shares one
    empty map. At 10x the default simulation the facts as one map per unit were 73 MB of the 84 the largest
    group's rows took, and building the maps was the peak of the run; as columns the rows take 51 MB in all."""

    n: int
    """Rows of the layer."""
    items: Mapping[str, tuple[npt.NDArray[np.int64], Coded]]
    """item id -> (positions of the rows with a fact of it, ascending; their facts)."""

    @classmethod
    def of(cls, facts: Sequence[Mapping[str, float | str | None]]) -> FactColumns:
        """Columns of per-row fact maps."""
        at: dict[str, tuple[list[int], list[Any]]] = {}
        for k, f in enumerate(facts):
            for item, v in f.items():
                pos, vals = at.setdefault(item, ([], []))
                pos.append(k)
                vals.append(v)
        return cls(len(facts), {item: (np.array(at[item][0], dtype=np.int64), Coded.of(at[item][1], key=_typed))
                                for item in sorted(at)})

    def __len__(self) -> int:
        return self.n

    def cells(self, lo: int, hi: int) -> list[Mapping[str, float | str | None]]:
        """The fact maps of rows `lo` to `hi`."""
        m = hi - lo
        found = []
        for item, (pos, coded) in self.items.items():
            a, b = (int(x) for x in np.searchsorted(pos, (lo, hi)))
            if a < b:
                found.append((item, pos, coded, a, b))
        if not found:
            return [_NO_FACTS] * m
        # Item by item in item order, so every map iterates its items sorted.
        if any(b - a == m for *_, a, b in found):  # an item every row has: a map per row, filled in C (`map`)
            maps: list[dict[str, float | str | None]] = [{} for _ in range(m)]
            put = dict.__setitem__
            for item, pos, coded, a, b in found:
                rows = maps if b - a == m else map(maps.__getitem__, (pos[a:b] - lo).tolist())
                deque(map(put, rows, repeat(item), coded.cells(a, b)), maxlen=0)
            return [d or _NO_FACTS for d in maps]
        sparse: list[dict[str, float | str | None] | None] = [None] * m
        for item, pos, coded, a, b in found:
            for p, v in zip((pos[a:b] - lo).tolist(), coded.cells(a, b), strict=True):
                d = sparse[p]
                if d is None:
                    sparse[p] = {item: v}
                else:
                    d[item] = v
        return [_NO_FACTS if d is None else d for d in sparse]


def _floats(col: npt.NDArray[np.float64], lo: int, hi: int) -> list[float | None]:
    """A float column's cells, NaN (how a missing time is held) as None."""
    cells = col[lo:hi].tolist()
    return [None if x != x else x for x in cells] if np.isnan(col[lo:hi]).any() else cells


class LayerRows(Sequence[UnitRow]):
    """One layer's `UnitRow`s in a fixed order, as columns; a read-only sequence whose items are made as read.

    Two are equal when they hold equal rows in the same order (so is one and a list or tuple of those rows).
    """

    __slots__ = ("layer", "_unit_id", "_user", "_conversation", "_position", "_start", "_end", "_mode", "_values",
                 "_facts")

    def __init__(self, layer: Layer, *, unit_id: pa.Array[Any], user_id: Coded, conversation_id: Coded,
                 position: npt.NDArray[np.int64], start: npt.NDArray[np.float64], end: npt.NDArray[np.float64],
                 mode: Coded, values: Coded, facts: FactColumns | Sequence[Mapping[str, float | str | None]]) -> None:
        n = len(unit_id)
        if not all(len(c) == n for c in (user_id.codes, conversation_id.codes, position, start, end, mode.codes,
                                         values.codes, facts)):
            raise ValueError(f"LayerRows({layer!r}): columns of unequal length")
        self.layer: Layer = layer
        self._unit_id, self._user, self._conversation, self._position = unit_id, user_id, conversation_id, position
        self._start, self._end, self._mode, self._values = start, end, mode, values
        self._facts = facts if isinstance(facts, FactColumns) else FactColumns.of(facts)

    @classmethod
    def from_rows(cls, layer: Layer, rows: Sequence[UnitRow]) -> LayerRows:
        """Rows given as `UnitRow`s (all of `layer`), in the order given."""
        if any(r.layer != layer for r in rows):
            raise ValueError(f"LayerRows({layer!r}): a row of another layer")

        def nan(x: float | None) -> float:
            return float("nan") if x is None else x

        return cls(
            layer, unit_id=pa.array([r.unit_id for r in rows], type=pa.string()),
            user_id=Coded.of([r.user_id for r in rows]), conversation_id=Coded.of([r.conversation_id for r in rows]),
            position=np.array([r.position for r in rows], dtype=np.int64),
            start=np.array([nan(r.start) for r in rows], dtype=np.float64),
            end=np.array([nan(r.end) for r in rows], dtype=np.float64),
            mode=Coded.of([r.mode for r in rows]), values=Coded.of([r.values for r in rows], key=id),
            facts=[r.facts for r in rows])

    def __len__(self) -> int:
        return len(self._unit_id)

    def _rows(self, lo: int, hi: int) -> list[UnitRow]:
        n = hi - lo
        if n <= 0:
            return []
        ids = cast("list[str]", self._unit_id.slice(lo, n).to_pylist())
        # `tuple.__new__` over zip's tuples, not `UnitRow(...)`: the named tuple's own constructor parses its ten
        # arguments in Python, at twice the cost; and zip reuses its tuple once the new row has copied it.
        return list(map(tuple.__new__, repeat(UnitRow, n), zip(
            ids, repeat(self.layer, n), self._user.cells(lo, hi), self._conversation.cells(lo, hi),
            self._position[lo:hi].tolist(), _floats(self._start, lo, hi), _floats(self._end, lo, hi),
            self._mode.cells(lo, hi), self._values.cells(lo, hi), self._facts.cells(lo, hi), strict=True)))

    def __iter__(self) -> Iterator[UnitRow]:
        n = len(self)
        for lo in range(0, n, _CHUNK):
            yield from self._rows(lo, min(n, lo + _CHUNK))

    @overload
    def __getitem__(self, k: int) -> UnitRow: ...

    @overload
    def __getitem__(self, k: slice) -> list[UnitRow]: ...

    def __getitem__(self, k: int | slice) -> UnitRow | list[UnitRow]:
        n = len(self)
        if isinstance(k, slice):
            lo, hi, step = k.indices(n)
            return self._rows(lo, hi) if step == 1 else [self[i] for i in range(lo, hi, step)]
        i = k + n if k < 0 else k
        if not 0 <= i < n:
            raise IndexError(f"row {k} of a layer of {n}")
        return self._rows(i, i + 1)[0]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or len(other) != len(self):
            return False
        return all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"LayerRows({self.layer!r}, {len(self)} rows)"


__all__ = ["Coded", "FactColumns", "LayerRows"]
