"""Character-bigram similarity of two requests: the redo rule's measure (docs/method.md section 4, Results).

Character bigrams need no word segmentation, so the same rule works for Chinese, where words are not
separated by spaces, and for English. A redo is two adjacent requests with Jaccard >= 0.6 (the threshold is
the knowledge pack's, not this module's).
"""

from __future__ import annotations

import re
import unicodedata

VERSION = "1"

_SPACE = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """NFKC, case folding, every whitespace run to one space, ends stripped.

    NFKC folds full-width forms (common in Chinese input: `ＡＢＣ`, `１２３`, the ideographic space) to their
    ordinary forms, so the same request typed with another input method compares equal.
    """
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def char_bigrams(text: str) -> frozenset[str]:
    """Set of adjacent character pairs of the normalized text (a space between words counts as a character).

    Empty text gives the empty set; a one-character text gives that character as its only element, so two
    equal one-character requests are identical rather than incomparable.
    """
    s = normalize_text(text)
    if len(s) < 2:
        return frozenset({s}) if s else frozenset()
    return frozenset(s[i : i + 2] for i in range(len(s) - 1))


def bigram_jaccard(a: str, b: str) -> float:
    """Jaccard similarity |A & B| / |A | B| of the two texts' character bigrams, in [0, 1].

    Both empty (after normalization) -> 1.0: nothing differs. Exactly one empty -> 0.0.
    """
    x, y = char_bigrams(a), char_bigrams(b)
    if not x and not y:
        return 1.0
    return len(x & y) / len(x | y)
