"""Text normalization for lexicon matching, keeping a map back to the original characters.

Patterns are matched on normalized text so that variants an attacker (or a keyboard) produces do not slip
through: NFKC folds full-width letters and punctuation to ASCII (`ＩＧＮＯＲＥ` -> `IGNORE`, `，` -> `,`);
zero-width and other format characters are dropped; whitespace between two CJK characters is dropped so that
Chinese patterns need no `\\s*` between every character. Evidence must cite the original text, so each
normalized character remembers the index of the original character it came from.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

VERSION = "1"
"""Version of the normalization; results that match on normalized text include it in their own version."""


@dataclass(frozen=True, slots=True)
class Normalized:
    """Normalized text and, per normalized character, the index of its original character."""

    text: str
    """The normalized text."""
    origin: tuple[int, ...] | None
    """`origin[i]` is the original index of `text[i]`; None when the text is unchanged (identity map)."""

    def original_range(self, start: int, end: int) -> tuple[int, int]:
        """The original character range covering normalized range [start, end) (end > start)."""
        if self.origin is None:
            return start, end
        return self.origin[start], self.origin[end - 1] + 1


# Characters outside ASCII and the CJK ideograph block may change under NFKC or be format characters: they
# are normalized one by one; everything else is copied in runs.
_SPECIAL = re.compile(r"[^\x00-\x7f\u4e00-\u9fff]")
# CJK scripts (ideographs, kana, hangul, CJK symbols) after NFKC; whitespace between two of them is dropped.
_CJK = (
    "\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf"
    "\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\U00020000-\U0003fffd"
)
_GAP = re.compile(rf"(?<=[{_CJK}])\s+(?=[{_CJK}])")


@lru_cache(maxsize=8192)
def _char(ch: str) -> str:
    if unicodedata.category(ch) == "Cf":  # zero-width space / joiner, soft hyphen, bidi marks
        return ""
    return unicodedata.normalize("NFKC", ch)


@lru_cache(maxsize=512)
def normalize(text: str) -> Normalized:
    """Normalize `text` for matching (see the module docstring); text needing no change comes back as is."""
    if text.isascii():
        return Normalized(text, None)
    parts: list[str] = []
    origin: list[int] = []
    changed = False
    pos = 0
    for m in _SPECIAL.finditer(text):
        i = m.start()
        if i > pos:
            parts.append(text[pos:i])
            origin.extend(range(pos, i))
        ch = text[i]
        rep = _char(ch)
        changed = changed or rep != ch
        parts.append(rep)
        origin.extend([i] * len(rep))
        pos = i + 1
    if changed:
        parts.append(text[pos:])
        origin.extend(range(pos, len(text)))
        folded = "".join(parts)
    else:
        folded, origin = text, []
    gaps = [(m.start(), m.end()) for m in _GAP.finditer(folded)]
    if not changed and not gaps:
        return Normalized(text, None)
    if not changed:
        origin = list(range(len(text)))
    out: list[str] = []
    out_origin: list[int] = []
    pos = 0
    for a, b in gaps:
        out.append(folded[pos:a])
        out_origin.extend(origin[pos:a])
        pos = b
    out.append(folded[pos:])
    out_origin.extend(origin[pos:])
    return Normalized("".join(out), tuple(out_origin))


@lru_cache(maxsize=512)
def fold(text: str) -> str:
    """Normalized and case-folded text, for literal comparisons (truncation markers)."""
    return normalize(text).text.casefold()
