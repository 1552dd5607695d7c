r"""Text normalization for lexicon matching, keeping a map back to the original characters.

Patterns are matched on normalized text so that variants an attacker (or a keyboard) produces do not slip
through: NFKC folds full-width letters and punctuation to ASCII (`ＩＧＮＯＲＥ` -> `IGNORE`, `，` -> `,`);
zero-width and other format characters are dropped; whitespace between two CJK characters is dropped so that
Chinese patterns need no `\s*` between every character. Evidence must cite the original text, so every
rewrite records which original characters each normalized character came from.

`normalize(text, decode=True)` first undoes the encodings text takes on its way through tools and pages, for
the injection scan: JSON string escapes (`\u5ffd\u7565` -> `忽略`, `\n`, `\"`; nested JSON is decoded again),
HTML character references (`&lt;/transcript&gt;`), Unicode tag characters (invisible ASCII look-alikes, made
visible), Markdown emphasis and code marks (`**ignore**`), and Cyrillic or Greek letters that look Latin; and
it keeps line breaks between CJK characters, since patterns read lines ("系统：" at the start of one).
"""

from __future__ import annotations

import html
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

VERSION = "1"
"""Version of the normalization; results that match on normalized text include it in their own version."""
DECODE_VERSION = "2"
"""Version of the decoding that `normalize(..., decode=True)` adds; the injection scan records it. 2: numeric
character references without their `;` (`&#73gnore`), and references encoded twice (`&amp;#73;`)."""


@dataclass(frozen=True, slots=True)
class Step:
    """One rewrite of a text: its output is a sequence of segments, each copied from or replacing an input range."""

    out: tuple[int, ...]
    """Output index where each segment starts (increasing; deleted input has no segment)."""
    src: tuple[tuple[int, int, bool], ...]
    """Per segment: input start, input end, and whether it was copied (else it replaces the whole range)."""

    def back(self, start: int, end: int) -> tuple[int, int]:
        """The input range that output range [start, end) (end > start) came from."""
        i = bisect_right(self.out, start) - 1
        a, _, copied = self.src[i]
        s = a + (start - self.out[i]) if copied else a
        j = bisect_right(self.out, end - 1) - 1
        a, b, copied = self.src[j]
        e = a + (end - 1 - self.out[j]) + 1 if copied else b
        return s, e


def _rewrite(text: str, rx: re.Pattern[str], repl: Callable[[re.Match[str]], str]) -> tuple[str, Step | None]:
    """Replace every match of `rx` by `repl(match)`, recording the segments; None when nothing changed."""
    out: list[str] = []
    starts: list[int] = []
    src: list[tuple[int, int, bool]] = []
    n = 0  # output length so far
    pos = 0
    for m in rx.finditer(text):
        rep = repl(m)
        if rep == m.group():
            continue
        a, b = m.span()
        if a > pos:
            out.append(text[pos:a])
            starts.append(n)
            src.append((pos, a, True))
            n += a - pos
        if rep:
            out.append(rep)
            starts.append(n)
            src.append((a, b, False))
            n += len(rep)
        pos = b
    if not src and pos == 0:
        return text, None
    if pos < len(text):
        out.append(text[pos:])
        starts.append(n)
        src.append((pos, len(text), True))
    return "".join(out), Step(tuple(starts), tuple(src))


@dataclass(frozen=True, slots=True)
class Normalized:
    """Normalized text and the rewrites that lead back to the original."""

    text: str
    """The normalized text."""
    steps: tuple[Step, ...] = ()
    """The rewrites applied, in order; empty when the text is unchanged (identity map)."""

    def original_range(self, start: int, end: int) -> tuple[int, int]:
        """The original character range covering normalized range [start, end) (end > start)."""
        for step in reversed(self.steps):
            start, end = step.back(start, end)
        return start, end

    def original_ranges(self, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """`original_range` of each (start, end) in `spans`, for many at once: a range's original start depends
        on its start alone and its end on its end alone, so both are looked up in per-position maps built once
        (with numpy) when there are enough of them to pay for it."""
        if not self.steps:
            return spans
        if len(spans) < 32:
            return [self.original_range(a, b) for a, b in spans]
        starts, ends = _position_maps(self)
        return [(starts[a], ends[b]) for a, b in spans]

    @property
    def origin(self) -> tuple[int, ...] | None:
        """`origin[i]` is the original index of `text[i]`; None when the text is unchanged (identity map)."""
        if not self.steps:
            return None
        return tuple(self.original_range(i, i + 1)[0] for i in range(len(self.text)))


@lru_cache(maxsize=64)
def _position_maps(norm: Normalized) -> tuple[list[int], list[int]]:
    """(original start of a range starting at i, original end of a range ending at j), for every i < len and
    0 < j <= len of the normalized text: `original_range` as two lookups, composed over the steps in numpy."""
    n = len(norm.text)
    s = np.arange(n, dtype=np.int64)
    e = np.arange(1, n + 1, dtype=np.int64)
    for step in reversed(norm.steps):
        out = np.asarray(step.out, dtype=np.int64)
        src = np.asarray(step.src, dtype=np.int64).reshape(-1, 3)
        i = np.searchsorted(out, s, side="right") - 1
        s = np.where(src[i, 2] != 0, src[i, 0] + (s - out[i]), src[i, 0])
        j = np.searchsorted(out, e - 1, side="right") - 1
        e = np.where(src[j, 2] != 0, src[j, 0] + (e - 1 - out[j]) + 1, src[j, 1])
    return s.tolist(), [0, *e.tolist()]


# Characters outside ASCII and the CJK ideograph block may change under NFKC or be format characters: they
# are normalized one by one; everything else is copied in runs.
_SPECIAL = re.compile(r"[^\x00-\x7f\u4e00-\u9fff]")
# CJK scripts (ideographs, kana, hangul, CJK symbols) after NFKC; whitespace between two of them is dropped.
_CJK = (
    "\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf"
    "\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\U00020000-\U0003fffd"
)
_GAP = re.compile(rf"(?<=[{_CJK}])\s+(?=[{_CJK}])")
_SAME_LINE_GAP = re.compile(rf"(?<=[{_CJK}])[^\S\n]+(?=[{_CJK}])")  # decoding keeps line breaks: patterns read lines


@lru_cache(maxsize=8192)
def _char(ch: str) -> str:
    if unicodedata.category(ch) == "Cf":  # zero-width space / joiner, soft hyphen, bidi marks
        return ""
    return unicodedata.normalize("NFKC", ch)


def _fold(text: str, char: Callable[[str], str], gap: re.Pattern[str]) -> tuple[str, list[Step]]:
    steps: list[Step] = []
    if not text.isascii():
        text, step = _rewrite(text, _SPECIAL, lambda m: char(m.group()))
        if step is not None:
            steps.append(step)
        text, step = _rewrite(text, gap, lambda m: "")
        if step is not None:
            steps.append(step)
    return text, steps


# ---- decoding (the injection scan) ---------------------------------------------------------------------

_JSON_ESCAPE = re.compile(r'\\(?:u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|["\\/bfnrt])')
_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_ENTITY = re.compile(r"&(?:#[0-9]{1,7};?|#[xX][0-9a-fA-F]{1,6};?|[A-Za-z][A-Za-z0-9]{1,31};)")
_MARKUP = re.compile(r"[*`]+")
_MAX_DECODE_PASSES = 3  # JSON inside a JSON string inside a JSON string is decoded; deeper is not

# Letters of other scripts that render like Latin ones (a mixed-script "іgnore" reads as "ignore").
_LOOKALIKES = {
    **dict(zip("аеорсухіјѕԁһԛԝкмнтв", "aeopcyxijsdhqwkmhtb", strict=True)),
    **dict(zip("АЕОРСУХІЈЅКМНТВ", "AEOPCYXIJSKMHTB", strict=True)),
    **dict(zip("οαεικνρτυχ", "oaeikvptux", strict=True)),
    **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "ABEZHIKMNOPTYX", strict=True)),
}


def _json_unescape(m: re.Match[str]) -> str:
    s = m.group()
    if s[1] != "u":
        return _SIMPLE[s[1]]
    if len(s) == 12:  # a surrogate pair: one character outside the BMP
        hi, lo = int(s[2:6], 16), int(s[8:12], 16)
        return chr(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
    code = int(s[2:6], 16)
    return s if 0xD800 <= code <= 0xDFFF else chr(code)  # a lone surrogate stays as written


@lru_cache(maxsize=8192)
def _scan_char(ch: str) -> str:
    code = ord(ch)
    if 0xE0020 <= code <= 0xE007E:  # Unicode tag characters: invisible copies of ASCII
        return chr(code - 0xE0000)
    look = _LOOKALIKES.get(ch)
    return look if look is not None else _char(ch)


def _decode(text: str) -> tuple[str, list[Step]]:
    steps: list[Step] = []
    for _ in range(_MAX_DECODE_PASSES):
        if "\\" not in text:
            break
        text, step = _rewrite(text, _JSON_ESCAPE, _json_unescape)
        if step is None:
            break
        steps.append(step)
    for _ in range(2):  # `&amp;#73;` is `&#73;` once decoded: a reference encoded twice is decoded twice
        if "&" not in text:
            break
        text, step = _rewrite(text, _ENTITY, lambda m: html.unescape(m.group()))
        if step is None:
            break
        steps.append(step)
    if "*" in text or "`" in text:
        text, step = _rewrite(text, _MARKUP, lambda m: "")
        if step is not None:
            steps.append(step)
    return text, steps


@lru_cache(maxsize=512)
def normalize(text: str, *, decode: bool = False) -> Normalized:
    """Normalize `text` for matching (see the module docstring); text needing no change comes back as is."""
    steps: list[Step] = []
    if decode:
        text, steps = _decode(text)
    text, more = _fold(text, _scan_char, _SAME_LINE_GAP) if decode else _fold(text, _char, _GAP)
    return Normalized(text, tuple(steps + more))


def lower(text: str) -> str:
    """`text` lower-cased, character for character: indices stay those of `text` ('İ'.lower() is two characters;
    such a character is kept as it is)."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


@lru_cache(maxsize=512)
def fold(text: str) -> str:
    """Normalized and case-folded text, for literal comparisons (truncation markers)."""
    return normalize(text).text.casefold()
