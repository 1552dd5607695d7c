"""One JSON text parsed as `json` parses it, faster, and within the bounds every reader keeps.

`loads` and `parse_json_text` give `json.loads`'s values with orjson's speed where the two agree;
`loads_embedded` decodes JSON held in a string field (a message list, tool arguments) only within the depth and
Unicode bounds of `jsonguard`, so no field decoded after reading brings back what the readers refuse.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from agent_factory.adapters.base import Quarantine
from agent_factory.adapters.jsonguard import mark_lone_surrogates, too_deep

_DIGIT_MAP = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))  # every digit to "0", the rest to " "
_LONG_RUN = b"0" * 19


def _may_hold_big_int(text: str | bytes) -> bool:
    """Whether `text` may hold a JSON integer orjson would not read exactly (one of 19 digits or more: past
    64 bits it gives a float): a run of 19 digits that is not inside a string, as far as the characters before
    it tell (a number follows `:`, `,`, `[` or nothing, then spaces and a sign). Digits quoted as a string (OTLP
    nanosecond times) are no such run; a false alarm only costs `json`'s speed."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    digits = raw.translate(_DIGIT_MAP)
    at = digits.find(_LONG_RUN)
    while at >= 0:  # `find` gives the first position of a run: `at` starts one
        j = at - 1
        if j >= 0 and raw[j] == 45:  # "-"
            j -= 1
        while j >= 0 and raw[j] in b" \t\r\n":
            j -= 1
        if j < 0 or raw[j] in b":,[":
            return True
        end = at + len(_LONG_RUN)
        while end < len(digits) and digits[end] == 48:
            end += 1
        at = digits.find(_LONG_RUN, end)
    return False
_NAN_KEY = re.compile(r'"([^"\\]{1,200})"\s*:\s*(?:-?NaN|-?Infinity)\b')


class _BareConstant(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _BareConstant(name)


def _nan_field(text: str) -> str | None:
    m = _NAN_KEY.search(text)
    return m.group(1) if m else None


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`, the same values (types included), faster: orjson where it gives exactly those values.

    orjson refuses what it does not read like `json` (bare NaN, lone surrogate escapes, syntax errors), and
    those texts go to `json`, which accepts or raises as before. So does a text with a run of 19 digits or
    more that is a number (not a string): orjson reads an integer past 64 bits as a float, where `json` keeps
    it exact.
    """
    if not _may_hold_big_int(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


REFUSED = object()
"""What `fast_loads` gives for a text orjson does not read exactly as `json` would."""


def fast_loads(raw: bytes) -> Any:
    """orjson's value of a JSON text, or `REFUSED` when orjson refuses it (invalid UTF-8, a byte-order mark, a lone
    surrogate escape, bare NaN, a syntax error) or it may hold an integer orjson would not read exactly: what it
    takes needs no other check of its text, what it refuses goes to `parse_json_text`."""
    if _may_hold_big_int(raw):
        return REFUSED
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return REFUSED


def parse_json_text(text: str, *, source: str, location: str) -> Any | Quarantine:
    """Parse one JSON text strictly (no bare NaN / Infinity); a `Quarantine` on failure."""
    try:
        # The fast parser's values where it gives `json`'s (see `loads`); the rest is parsed, or reported, by
        # `json` as before.
        if not _may_hold_big_int(text):
            return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except _BareConstant as e:
        return Quarantine(
            source=source, location=location, field=_nan_field(text),
            message=f"bare {e} is not valid JSON; write null or a string",
        )
    except json.JSONDecodeError as e:
        return Quarantine(
            source=source, location=location, field=None,
            message=f"invalid JSON at column {e.colno}: {e.msg}",
        )
    except RecursionError:
        return Quarantine(source=source, location=location, message="JSON nested too deeply")


def loads_embedded(text: str) -> Any:
    """A JSON text held in a string field (a message list, tool arguments) decoded as `loads` does, within the
    bounds of every reader: `ValueError` if it is no JSON, nests deeper than `MAX_DEPTH` or holds a lone
    surrogate escape (the field is then kept as the string it is)."""
    raw = text.encode("utf-8", "surrogatepass")
    deep = too_deep(raw)
    if deep is not None:
        raise deep
    if mark_lone_surrogates(raw)[1]:
        raise ValueError("a lone surrogate escape is no Unicode character")
    return loads(text)
