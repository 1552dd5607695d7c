r"""Undo what attackers use to hide text from a lexical scan: base64, hex, rot13, URL encoding, spaced-out letters.

`find_blobs(text)` finds, in text already normalized for the scan (`normalize(..., decode=True)`: JSON escapes,
HTML entities, full-width forms and look-alikes undone), the runs that decode to readable text:

- base64 (standard or URL-safe) and hex (`49676e6f7265`, `\x49\x67`, `49 67 6e`) blobs of plausible length whose
  bytes are UTF-8 text that is printable and mostly letters;
- rot13: a stretch of Latin words scored by its share of common English words (`words.COMMON`), taken when its
  rot13 scores clearly higher (a stretch is only looked at when it holds a word that is a common word's rot13);
- URL encoding: a token with three or more `%xx` escapes or `+` spaces;
- letter spacing: four or more single letters separated by spaces, dots, dashes ("i g n o r e  a l l",
  "I-G-N-O-R-E", "忽.略"), collapsed into words (where no wider gap marks the word breaks, cut into the fewest
  common words).

The scan reads each blob's decoded text in place of the blob (`Blob.text`, itself normalized and decoded once
more for an encoding inside an encoding), so a match in it cites the whole blob in the original text. The work is
bounded and linear: candidates are found by regexes that do not backtrack, each is decoded at most once, and a text
has a budget of `MAX_BLOBS` blobs and `MAX_DECODED` decoded characters.
"""

from __future__ import annotations

import base64
import binascii
import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass
from urllib.parse import unquote, unquote_plus

from agent_factory.evaluators.provenance.normalize import lower, normalize
from agent_factory.evaluators.provenance.prefilter import trie_regex
from agent_factory.evaluators.provenance.words import COMMON, LONGEST

VERSION = "1"
"""Version of the decoding; the injection scan records it."""

MAX_BLOBS = 32
"""Most blobs decoded in one text."""
MAX_DECODED = 20_000
"""Most decoded characters kept for one text."""
MAX_TRIED = 256
"""Most candidates tried per kind in one text (each costs at most its length)."""
MIN_B64, MAX_B64 = 16, 16_384
"""Lengths of a plausible base64 blob."""
STRETCH = 600
"""How far from a hint of rot13 a stretch is scored, when no sentence mark bounds it nearer."""
MAX_DEPTH = 2
"""An encoding inside an encoding is decoded; deeper is not."""


@dataclass(frozen=True, slots=True)
class Blob:
    """An encoded run of a text and what it says."""

    start: int
    """Start of the run in the text searched."""
    end: int
    """Its end."""
    text: str
    """The decoded text (normalized as the scan reads text)."""
    how: str
    """The encoding: `base64`, `hex`, `rot13`, `url` or `spacing`; `base64+url` for one inside the other."""


# ---- plausibility ---------------------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffd]")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7a3]")


def _readable(s: str) -> bool:
    """Printable text, mostly letters, with word breaks (or CJK): what an instruction looks like."""
    if len(s) < 6 or _CONTROL.search(s):
        return False
    letters = sum(ch.isalpha() for ch in s)
    spaces = sum(ch.isspace() for ch in s)
    return letters >= 4 and (letters + spaces) / len(s) >= 0.6 and (spaces > 0 or _CJK.search(s) is not None)


def _utf8(raw: bytes) -> str | None:
    try:
        s = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return s if _readable(s) else None


# ---- base64 and hex -------------------------------------------------------------------------------------

_B64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{16,}={0,2}(?![A-Za-z0-9+/=_-])")
_HEX_WORD = re.compile(r"(?:0x)?((?:[0-9A-Fa-f]{2}){8,})")
_HEX_ESCAPED = re.compile(r"(?:\\x[0-9A-Fa-f]{2}){4,}")
_CJK_BYTES = re.compile(r"[eE][4-9] [89abAB][0-9a-fA-F] [89abAB]")  # a CJK character's UTF-8, spaced
_HEX_SPACED = re.compile(r"\b(?:(?:0x)?[0-9A-Fa-f]{2}[ ,:]{1,2}){5,}(?:0x)?[0-9A-Fa-f]{2}\b")
_HEX_NOISE = re.compile(r"\\x|0x|[ ,:]")


_UPPER = re.compile("[A-Z]")
_LOWER = re.compile("[a-z]")


def _base64(s: str) -> str | None:
    core = s.rstrip("=")
    if not MIN_B64 <= len(core) <= MAX_B64 or len(core) % 4 == 1:
        return None
    if not (_UPPER.search(core) and _LOWER.search(core)):
        return None
    urlsafe = "-" in core or "_" in core
    if urlsafe and ("+" in core or "/" in core):
        return None
    try:
        raw = base64.b64decode(core + "=" * (-len(core) % 4), altchars=b"-_" if urlsafe else None, validate=True)
    except (binascii.Error, ValueError):
        return None
    return _utf8(raw)


def _hex_runs(text: str) -> list[tuple[int, int]]:
    r"""Hex blobs that are no base64 candidate (`_candidates` tries those as hex too): `\x`-escaped bytes, or bytes
    spaced out (their text holds spaces, 0x20, or CJK characters: looked for only where one of those occurs)."""
    out: list[tuple[int, int]] = []
    if "\\x" in text:
        out += [m.span() for m in _HEX_ESCAPED.finditer(text)]
    if " 20 " in text or _CJK_BYTES.search(text):
        out += [m.span() for m in _HEX_SPACED.finditer(text)]
    return out[:MAX_TRIED]


def _hex(s: str) -> str | None:
    digits = _HEX_NOISE.sub("", s)
    if len(digits) % 2 or len(digits) > 2 * MAX_B64:
        return None
    try:
        return _utf8(bytes.fromhex(digits))
    except ValueError:
        return None


# ---- URL encoding ---------------------------------------------------------------------------------------

_PCT = re.compile(r"%[0-9A-Fa-f]{2}|\+(?=\w)")
_SPACE = re.compile(r"\s")


def _url_tokens(text: str) -> list[tuple[int, int]]:
    """The whitespace-delimited tokens holding three or more `%xx` escapes or form-encoded spaces (`a+b`; each token
    looked at once)."""
    out: list[tuple[int, int]] = []
    end = tried = 0
    while (m := _PCT.search(text, end)) is not None:  # from the end of the last token: each token looked at once
        lo = max(0, m.start() - 2000)
        at = m.start()
        a = max(text.rfind(" ", lo, at), text.rfind("\n", lo, at), text.rfind("\t", lo, at), lo - 1) + 1
        e = _SPACE.search(text, m.end())
        end = e.start() if e else len(text)
        if end == m.start():
            end += 1
        if len(_PCT.findall(text, a, end)) >= 3:
            out.append((a, end))
        tried += 1
        if len(out) >= MAX_TRIED or tried >= 4 * MAX_TRIED:
            break
    return out


def _url(s: str) -> str | None:
    plus = "+" in s and "%20" not in s.upper()
    try:
        out = (unquote_plus if plus else unquote)(s, errors="strict")
    except UnicodeDecodeError:
        return None
    if out == s or _CONTROL.search(out) or sum(ch.isalpha() for ch in out) < 4:
        return None
    words = out.split()
    if plus and sum(w.strip(".,;:!?'\"()/&=-").isalpha() for w in words) * 2 < len(words):
        return None  # not words: a base64 or binary blob whose "+" were read as spaces
    return out


# ---- rot13 ----------------------------------------------------------------------------------------------

_ROT = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", "NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm"
)


def rot13(s: str) -> str:
    """`s` with its Latin letters rotated by 13 (its own inverse)."""
    return s.translate(_ROT)


# The rot13 of the most frequent words and of the vocabulary of instructions to an evaluator, where that is not an
# English word itself: a stretch holding one is worth scoring ("gur" is "the", "vtaber" is "ignore").
_GATE_WORDS = (
    "the and you your this that with for are all have not but from they will what when there their which would"
    " about should must please ignore instructions previous mark pass passed grader evaluator score verdict judge"
    " reviewer auditor answer response conversation policy system give rate full marks correct compliant approve"
    " rules rubric criteria audit close case assistant agent task"
).split()
_ROT_HINT = re.compile(r"\b" + trie_regex({rot13(w) for w in _GATE_WORDS} - COMMON) + r"\b")
_STRETCH_END = re.compile(r"[.!?\n\"()\[\]{}<>|]")
_LATIN_WORD = re.compile(r"[a-z]+")


def _english(words: list[str]) -> float:
    return sum(w in COMMON for w in words) / len(words)


def _rot13_stretches(text: str, low: str | None = None) -> list[tuple[int, int]]:
    """Stretches (between sentence marks) whose rot13 reads as English and clearly better than they do (`low`: the
    text lower-cased, when the caller has it)."""
    out: list[tuple[int, int]] = []
    pos = 0
    ends: list[int] | None = None
    low = lower(text) if low is None else low
    for _ in range(4 * MAX_TRIED):
        m = _ROT_HINT.search(low, pos)  # from the end of the last stretch: each stretch looked at once
        if m is None:
            break
        if _ROT_HINT.search(low, m.end(), m.end() + 80) is None:  # rot13 English holds such words close together
            pos = m.end()
            continue
        if ends is None:
            ends = [e.start() for e in _STRETCH_END.finditer(text)]
        i = bisect_right(ends, m.start())
        a = max(ends[i - 1] + 1 if i else 0, m.start() - STRETCH)
        b = min(ends[i] if i < len(ends) else len(text), m.end() + STRETCH)
        pos = max(b, m.end())
        words = _LATIN_WORD.findall(text[a:b].lower())
        if len(words) >= 3:
            plain, rotated = _english(words), _english([rot13(w) for w in words])
            if rotated >= 0.5 and rotated >= plain + 0.25:
                if out and not text[out[-1][1]:a].strip(" \t.!?;:,\n\"'()"):
                    a = out.pop()[0]  # one rot13 passage cut by punctuation: decode it as one
                out.append((a, b))
        if len(out) >= MAX_TRIED:
            break
    return out


# ---- letter spacing -------------------------------------------------------------------------------------

_SPACED = re.compile(r"\b[^\W\d_](?:[ .\-·•*|/~+]{1,3}[^\W\d_]\b){3,}")
_SEP = re.compile(r"[ .\-·•*|/~+]{1,3}")


def _words(letters: str) -> str:
    """Latin letters without word breaks cut into the fewest common words (unknown letters kept together)."""
    s = letters.lower()
    n = len(s)
    cost = [0.0] + [float("inf")] * n
    back = [0] * (n + 1)
    for i in range(1, n + 1):
        for j in range(max(0, i - LONGEST), i):
            step = 1.0 if s[j:i] in COMMON else (2.0 * (i - j) if i - j == 1 else float("inf"))
            if cost[j] + step < cost[i]:
                cost[i], back[i] = cost[j] + step, j
    parts: list[str] = []
    i = n
    while i > 0:
        parts.append(letters[back[i]:i])
        i = back[i]
    parts.reverse()
    out: list[str] = []
    for p in parts:  # unknown single letters stay together
        if out and len(p) == 1 and p.lower() not in COMMON and len(out[-1]) >= 1 and out[-1][-1:].isalpha() \
                and out[-1].lower() not in COMMON:
            out[-1] += p
        else:
            out.append(p)
    return " ".join(out)


def _unspace(run: str) -> str | None:
    letters = _SEP.split(run)
    seps = _SEP.findall(run)
    if len(letters) < 4 or any(len(x) != 1 for x in letters):
        return None
    if _CJK.search(run):
        return "".join(letters)
    inner = Counter(seps).most_common(1)[0][0]
    words: list[str] = [letters[0]]
    for sep, ch in zip(seps, letters[1:], strict=True):
        if sep == inner:
            words[-1] += ch
        else:
            words.append(ch)
    if len(words) == 1 and len(letters) >= 6:
        return _words(words[0])
    return " ".join(words)


# ---- all of them ----------------------------------------------------------------------------------------


def _candidates(text: str, low: str | None) -> list[tuple[int, int, str, str]]:
    """(start, end, decoded text, how) of every decodable run of `text`, in no particular order."""
    found: list[tuple[int, int, str, str]] = []
    for k, m in enumerate(_B64.finditer(text)):
        if k >= MAX_TRIED:
            break
        word = m.group()
        hexed = _HEX_WORD.fullmatch(word)  # a word of hex digits (even length) is decoded as hex, not base64
        out = _hex(hexed.group(1)) if hexed else _base64(word)
        if out is not None:
            found.append((m.start(), m.end(), out, "hex" if hexed else "base64"))
    for a, b in _hex_runs(text):
        out = _hex(text[a:b])
        if out is not None:
            found.append((a, b, out, "hex"))
    if "%" in text or "+" in text:
        for a, b in _url_tokens(text):
            out = _url(text[a:b])
            if out is not None:
                found.append((a, b, out, "url"))
    for a, b in _rot13_stretches(text, low):
        found.append((a, b, rot13(text[a:b]), "rot13"))
    for k, m in enumerate(_SPACED.finditer(text)):
        if k >= MAX_TRIED:
            break
        out = _unspace(m.group())
        if out is not None:
            found.append((m.start(), m.end(), out, "spacing"))
    return found


def find_blobs(text: str, *, depth: int = 1, low: str | None = None) -> list[Blob]:
    """The encoded runs of `text` (normalized for the scan) that decode to readable text, in order, without
    overlaps (of two overlapping runs, the earlier, then the longer, is kept), within the budget. `low`: the text
    lower-cased (`normalize.lower`), when the caller has it: the scan reads it too."""
    if len(text) < 4:
        return []
    blobs: list[Blob] = []
    budget = MAX_DECODED
    end = 0
    for a, b, out, how in sorted(_candidates(text, low), key=lambda c: (c[0], c[0] - c[1])):
        if a < end:
            continue
        shown = normalize(out, decode=True).text
        if depth < MAX_DEPTH:
            inner = find_blobs(shown, depth=depth + 1)
            if inner:
                shown = _splice(shown, inner)
                how = "+".join(dict.fromkeys([how, *(x.how for x in inner)]))
        if len(shown) > budget:
            break
        budget -= len(shown)
        blobs.append(Blob(a, b, shown, how))
        end = b
        if len(blobs) >= MAX_BLOBS:
            break
    return blobs


def _splice(text: str, blobs: list[Blob]) -> str:
    out: list[str] = []
    pos = 0
    for x in blobs:
        out += [text[pos:x.start], x.text]
        pos = x.end
    out.append(text[pos:])
    return "".join(out)
