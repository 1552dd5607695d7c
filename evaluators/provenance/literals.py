r"""What a regex needs of a text before it can match there: required literals and possible first characters.

Two analyses of a case-insensitive regex, read from the standard library's parser (`re._parser`, private but
stable since Python 3.11; without it, both answer "unknown" and callers fall back to plain matching):

- `required_literals`: for each top-level alternative, sets of lower-case strings such that every match holds
  one string of each set (a positive lookaround's content counts too: it must be in the text). Boundary marks
  (`B`) inside a string say where a `\b` must hold. Sets made of very common words or of one- or
  two-letter strings are left out: they would not tell texts apart.
- `first_chars`: the characters a match can start with (None when any could).

Both are sound: a text without the required literals has no match, and no match starts with another
character. They only make matching cheaper; they never decide a result.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

try:
    from re import _constants as _C  # type: ignore[attr-defined]  # private: typeshed has no stub
    from re import _parser as _P  # type: ignore[attr-defined]  # private: typeshed has no stub
except ImportError:  # pragma: no cover - another Python
    _C = _P = None

B = "\x02"
"""In a required literal: a word boundary (`\\b`) holds at this point of the match."""
Needs = tuple[tuple[frozenset[str], ...], ...]
"""Per alternative, the literal sets it needs, most selective first."""

_CAP = 128  # most strings a literal set may hold before it is given up
_Set = frozenset[str] | None  # None: unknown / unbounded
_EMPTY: frozenset[str] = frozenset({""})
_BOUNDARY: frozenset[str] = frozenset({B})
# The commonest English words make poor anchors: a set holding one is not worth looking for.
_COMMON = frozenset(
    "a an the this that these those it its is are was were be been being to of in on at by for with from as and or"
    " not no all any every each will would can could may might must should shall do does did has have had you your"
    " i we our they he she my me us them what which who now then new only just also more most very so".split()
)
_SPACES = "".join(chr(i) for i in range(0x3001) if chr(i).isspace())
_CASE_SPECIALS = "ıſKÅ"  # characters IGNORECASE equates with a letter other than their lower / upper case


def raw(literal: str) -> str:
    """The literal without its boundary marks."""
    return literal.replace(B, "")


@lru_cache(maxsize=8192)
def raw_set(literals: frozenset[str]) -> tuple[str, ...]:
    """The literals without their boundary marks."""
    return tuple({raw(x) for x in literals})


def _length(x: str) -> int:
    # Past a few characters (fewer for CJK) a longer literal is hardly rarer, and a set of many long ones (the
    # product of two alternations) costs more to look for than it saves.
    r = raw(x)
    return 1 if r in _COMMON else min(len(r), 5 if r.isascii() else 2)


@lru_cache(maxsize=65536)
def _score(s: frozenset[str]) -> tuple[bool, int, int, int]:
    """Higher is more selective: worth looking for at all, longer shortest literal, more boundary marks, fewer
    literals."""
    return _selective(s), min(map(_length, s)), min(x.count(B) for x in s), -len(s)


@lru_cache(maxsize=65536)
def _useful(s: _Set) -> bool:
    return s is not None and len(s) > 0 and min(len(raw(x)) for x in s) >= 2


@lru_cache(maxsize=65536)
def _selective(s: frozenset[str]) -> bool:
    return all(raw(x) not in _COMMON and len(raw(x)) >= (3 if x.isascii() else 2) for x in s)


def _best(a: _Set, b: _Set) -> _Set:
    cands = [x for x in (a, b) if _useful(x)]
    return max(cands, key=_score) if cands else None


def _product(a: frozenset[str], b: frozenset[str]) -> _Set:
    if len(a) * len(b) > _CAP:
        return None
    return frozenset((x + y).replace(B + B, B) for x in a for y in b)


def _sets(items: Any) -> tuple[_Set, list[frozenset[str]]]:
    """Of a sequence: every string it can match (or None), and literal sets each of which any match meets."""
    sets: list[frozenset[str]] = []
    run: frozenset[str] = _EMPTY
    whole: _Set = _EMPTY
    for item in items:
        exact, need = _item(item)
        if need is not None and _useful(need):
            sets.append(need)
        if exact is None:
            sets += [run] if _useful(run) else []
            run, whole = _EMPTY, None
            continue
        if _useful(exact):  # on its own too: a small set may beat the long run it is part of
            sets.append(exact)
        joined = _product(run, exact)
        if joined is None:  # too many combinations: close this run, start another
            sets += [run] if _useful(run) else []
            joined = exact
        run = joined
        whole = _product(whole, exact) if whole is not None else None
    sets += [run] if _useful(run) else []
    return whole, sets


def _seq(items: Any) -> tuple[_Set, _Set]:
    exact, sets = _sets(items)
    return exact, (max(sets, key=_score) if sets else None)


def _item(item: tuple[Any, Any]) -> tuple[_Set, _Set]:  # noqa: C901 - one branch per regex parser opcode
    """(exact, need) of one parsed item."""
    op, av = item
    if op is _C.LITERAL:
        return frozenset({chr(av).lower()}), None
    if op is _C.AT and av is _C.AT_BOUNDARY:
        return _BOUNDARY, None
    if op in (_C.AT, _C.ASSERT_NOT):
        return _EMPTY, None
    if op is _C.ASSERT:
        return _EMPTY, _seq(av[1])[1]
    if op is _C.IN:
        chars: set[str] = set()
        for sop, sav in av:
            if sop is _C.LITERAL:
                chars.add(chr(sav).lower())
            elif sop is _C.RANGE and sav[1] - sav[0] < 16:
                chars.update(chr(c).lower() for c in range(sav[0], sav[1] + 1))
            else:
                return None, None
        return (frozenset(chars), None) if len(chars) <= _CAP else (None, None)
    if op is _C.BRANCH:
        parts = [_seq(alt) for alt in av[1]]
        exact: _Set = None
        if all(e is not None for e, _ in parts):
            merged = frozenset[str]().union(*(e for e, _ in parts if e is not None))
            exact = merged if len(merged) <= _CAP else None
        needs = [_best(e, n) for e, n in parts]
        need = frozenset[str]().union(*(n for n in needs if n is not None)) if all(needs) else None
        return exact, need
    if op is _C.SUBPATTERN:
        return _seq(av[3])
    if op is _C.ATOMIC_GROUP:
        return _seq(av)
    if op in (_C.MAX_REPEAT, _C.MIN_REPEAT, _C.POSSESSIVE_REPEAT):
        lo, hi, sub = av
        exact, need = _seq(sub)
        if lo == 0:
            return (exact | {""} if exact is not None and hi == 1 else None), None
        if lo == hi == 1:
            return exact, need
        return None, _best(exact, need)
    return None, None


def _conjunction(items: list[tuple[Any, Any]]) -> tuple[frozenset[str], ...]:
    """The most selective set (the anchor), then up to three small ones (cheap to check)."""
    _, sets = _sets(items)
    ranked = sorted({x for x in sets if _selective(x)}, key=_score, reverse=True)
    return tuple(ranked[:1] + [x for x in ranked[1:] if len(x) <= 32][:3])


def _alternatives(items: list[tuple[Any, Any]]) -> list[tuple[frozenset[str], ...]] | None:
    while len(items) == 1 and items[0][0] is _C.SUBPATTERN:  # a group around the whole pattern
        items = list(items[0][1][3])
    # The parser moves a prefix common to all alternatives (such as `\b`) out of the branch, leaving the branch
    # last: it is put back into each.
    if items and items[-1][0] is _C.BRANCH and all(op in (_C.AT, _C.ASSERT, _C.ASSERT_NOT) for op, _ in items[:-1]):
        conjs = [_conjunction(items[:-1] + list(alt)) for alt in items[-1][1][1]]
        return conjs if any(conjs) else None
    conj = _conjunction(items)
    return [conj] if conj else None


def required_literals(pattern: str) -> Needs | None:
    """What a text must hold for `pattern` (case-insensitive) to match in it: for some alternative (one per
    top-level `|`, or a single one), one string of each of its sets. An alternative with no set (`()`) needs
    nothing selective: it must be tried on every text.

    None when no alternative needs anything (or the regex cannot be analysed).
    """
    if _P is None:  # pragma: no cover
        return None
    try:
        alts = _alternatives(list(_P.parse(pattern, re.IGNORECASE)))
    except Exception:  # noqa: BLE001 - an unparseable regex has no prefilter; compile_pattern reports it
        return None
    return tuple(alts) if alts else None


# ---- first characters ----------------------------------------------------------------------------------


def _firsts(items: Any) -> tuple[set[str] | None, bool]:
    """(characters a match of the sequence can start with, or None for any; whether it can be empty)."""
    out: set[str] = set()
    for item in items:
        chars, empty = _first_of(item)
        if chars is None:
            return None, False
        out |= chars
        if not empty:
            return out, False
    return out, True


def _first_of(item: tuple[Any, Any]) -> tuple[set[str] | None, bool]:
    op, av = item
    if op is _C.LITERAL:
        return {chr(av)}, False
    if op in (_C.AT, _C.ASSERT, _C.ASSERT_NOT):
        return set(), True
    if op is _C.IN:
        chars: set[str] = set()
        for sop, sav in av:
            if sop is _C.LITERAL:
                chars.add(chr(sav))
            elif sop is _C.RANGE and sav[1] - sav[0] < 256:
                chars.update(chr(c) for c in range(sav[0], sav[1] + 1))
            elif sop is _C.CATEGORY and sav is _C.CATEGORY_SPACE:
                chars.update(_SPACES)
            else:
                return None, False
        return chars, False
    if op is _C.BRANCH:
        out: set[str] = set()
        empty = False
        for alt in av[1]:
            alt_chars, e = _firsts(alt)
            if alt_chars is None:
                return None, False
            out |= alt_chars
            empty = empty or e
        return out, empty
    if op is _C.SUBPATTERN:
        return _firsts(av[3])
    if op is _C.ATOMIC_GROUP:
        return _firsts(av)
    if op in (_C.MAX_REPEAT, _C.MIN_REPEAT, _C.POSSESSIVE_REPEAT):
        sub_chars, e = _firsts(av[2])
        return sub_chars, e or av[0] == 0
    return None, False


def first_chars(pattern: str) -> frozenset[str] | None:
    """Every character (in every case IGNORECASE accepts) a match of `pattern` can start with; None when any
    character could, or when the pattern can match the empty string."""
    if _P is None:  # pragma: no cover
        return None
    try:
        chars, empty = _firsts(_P.parse(pattern, re.IGNORECASE))
    except Exception:  # noqa: BLE001
        return None
    if chars is None or empty or not chars:
        return None
    out: set[str] = set()
    for ch in chars:
        cases = {ch, ch.lower(), ch.upper()}
        out |= cases | {x for x in _CASE_SPECIALS if x.lower() in cases or x.upper() in cases}
    return frozenset(c for c in out if len(c) == 1)
