r"""The text the redactor's patterns read: the matching view, and the decoded view of JSON-escaped text.

- `matching_view(text)`: the same length as `text`, one character for one, so a range found in it is the same
  range of the original: compatibility forms of ASCII (full-width `４１１１`, `ａｌｉｃｅ＠…`, other scripts'
  digits; NFKC of each is one ASCII character) as ASCII; JSON escapes (`\n`, `\"`, `\u4e2d`) as spaces, so
  `\n13800138000` or `\u8bdd13800138000` does not glue a letter to what follows it.
- `decoded_view(text)`: text holding `\uXXXX` escapes (tools return JSON with ASCII escapes, Python's default)
  decoded, with where each decoded character came from, so a secret written with escaped characters
  (`\uff14\uff11...`, full-width digits; `alice\u0040example.com`) is found and its range mapped back.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

_ESCAPE = re.compile(r'\\[nrtbf"/\\]')
_UNICODE_ESCAPE = re.compile(r"\\u[0-9a-fA-F]{4}")
_ANY_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|([nrtbf"/\\]))')
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", '"': '"', "/": "/", "\\": "\\"}


@cache
def _compat_table() -> dict[int, int]:
    """Characters whose NFKC form is one ASCII character (full-width forms, mathematical letters and digits,
    other scripts' decimal digits), and spaces -> ' ': one character for one."""
    table: dict[int, int] = {}
    ranges = ((0x00A0, 0x00A1), (0x0660, 0x06FA), (0x07C0, 0x07CA), (0x0966, 0x0970), (0x09E6, 0x09F0),
              (0x2000, 0x200B), (0x202F, 0x2030), (0x205F, 0x2060), (0x3000, 0x3001), (0xFF01, 0xFF5F),
              (0x1D400, 0x1D800))
    for lo, hi in ranges:
        for cp in range(lo, hi):
            ch = chr(cp)
            if ch.isspace():
                table[cp] = 0x20
                continue
            nf = unicodedata.normalize("NFKC", ch)
            if len(nf) == 1 and nf.isascii() and nf.isprintable():
                table[cp] = ord(nf)
            elif unicodedata.category(ch) == "Nd":
                table[cp] = 0x30 + unicodedata.digit(ch)
    return table


@cache
def _compat_chars() -> re.Pattern[str]:
    """A class of the table's characters, as ranges (a class of single characters is scanned 10x slower)."""
    ranges: list[list[int]] = []
    for c in sorted(_compat_table()):
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return re.compile("[" + "".join(re.escape(chr(a)) + (f"-{re.escape(chr(b))}" if b > a else "")
                                    for a, b in ranges) + "]")


def matching_view(text: str) -> str:
    """`text` as the patterns read it, the same length (module docstring)."""
    view = text
    if not text.isascii() and _compat_chars().search(text) is not None:
        view = text.translate(_compat_table())
    if "\\" in view:
        view = _UNICODE_ESCAPE.sub("      ", _ESCAPE.sub("  ", view))
    return view


def has_unicode_escapes(text: str) -> bool:
    r"""Whether `text` holds a `\uXXXX` escape (then `decoded_view` may find more)."""
    return "\\u" in text and _UNICODE_ESCAPE.search(text) is not None


def decoded_view(text: str) -> tuple[str, list[int], list[int]]:
    """`text` with its JSON escapes decoded, and for each decoded character where it starts and ends in `text`.
    Built a segment at a time (a plain segment's offsets are a `range`), so linear in the text."""
    parts: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    pos = 0
    for m in _ANY_ESCAPE.finditer(text):
        if m.start() > pos:
            parts.append(text[pos:m.start()])
            starts.extend(range(pos, m.start()))
            ends.extend(range(pos + 1, m.start() + 1))
        code, simple = m.group(1), m.group(2)
        parts.append(chr(int(code, 16)) if code is not None else _SIMPLE[simple])
        starts.append(m.start())
        ends.append(m.end())
        pos = m.end()
    parts.append(text[pos:])
    starts.extend(range(pos, len(text)))
    ends.extend(range(pos + 1, len(text) + 1))
    return "".join(parts), starts, ends
