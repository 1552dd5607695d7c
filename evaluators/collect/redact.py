"""Privacy: secrets and personal data are replaced before any text leaves for a model provider.

A redactor finds ranges to replace (`find(text) -> [Redaction]`) rather than returning new text, so the
prompt builder can cut and mark evidence (projection cuts, injection-flag boundaries) without ever splitting a
secret into parts that no longer match: the ranges are found on the whole field first, then every shown piece
is rewritten from them (`redact_pieces`).

`DefaultRedactor` replaces, with typed placeholders: private-key blocks and API keys (`sk-...`, `AKIA...`,
`ghp_...`, `xox?-...`, `AIza...`, JWTs, ...) -> `[API_KEY]`; long secrets after key / token / secret / password
-> `[SECRET]`; emails -> `[EMAIL]`; IBAN-like account numbers -> `[IBAN]`; Chinese resident ID numbers
(region, plausible birth date, sequence, check character; the check itself is not required, so a mistyped
number is still hidden) -> `[CN_ID]`; card numbers (13-19 digits, separators allowed, Luhn-verified) ->
`[CARD]`; phone numbers (Chinese mobiles, `+`/`00` international forms, North American and 0-prefixed local
forms) -> `[PHONE]`. A custom redactor is configured as `[privacy] redactor = "module:attr"`, or by a name
registered under the entry-point group `agent_factory.redactors` (`default`: this one).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from agent_factory import plugins
from agent_factory.errors import SpecError

VERSION = "1"
"""Version of `DefaultRedactor`'s patterns: it enters the cache key of every model-collected datum."""


class Redaction(NamedTuple):
    """Replace `text[start:end]` with `placeholder`."""

    start: int
    end: int
    placeholder: str


@runtime_checkable
class Redactor(Protocol):
    """Finds what must not leave: non-overlapping ranges, each with its placeholder."""

    version: str
    """Changes whenever what it finds changes (enters cache keys)."""

    def find(self, text: str) -> Sequence[Redaction]:
        """The ranges of `text` to hide, with their placeholders."""


def luhn_ok(digits: str) -> bool:
    """The Luhn checksum of a string of digits (payment card numbers)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


_API_KEY = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"
    r"|\bsk-(?:proj-|ant-|live-|test-|or-)?[A-Za-z0-9_\-]{16,}"
    r"|\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|\b(?:AKIA|ASIA|AIDA|AROA|AGPA)[0-9A-Z]{16}\b"
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bglpat-[A-Za-z0-9_\-]{20,}"
    r"|\bxox[abposre]-[A-Za-z0-9\-]{10,}"
    r"|\bAIza[0-9A-Za-z_\-]{35}"
    r"|\bhf_[A-Za-z0-9]{30,}"
    r"|\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"
)
# A value after a secret-ish keyword: long, with at least one digit (so English words are left alone).
_KEYWORD_SECRET = re.compile(
    r"(?i)\b(?:api[_\- ]?key|access[_\- ]?key(?:[_\- ]?id)?|secret(?:[_\- ]?(?:access[_\- ]?)?key)?"
    r"|client[_\- ]?secret|auth(?:orization)?|bearer|(?:access|refresh|auth|api|session)?[_\- ]?token"
    r"|key|密钥|令牌)"
    r"[\"']?\s*(?:[:=：]|:=|\bis\b|为|是)?\s*(?:bearer\s+)?[\"']?"
    r"(?P<v>(?=[A-Za-z0-9+/_\-.]*\d)[A-Za-z0-9+/_\-.]{16,}={0,2})"
)
_PASSWORD = re.compile(r"(?i)(?:\b(?:password|passwd|pwd|passcode)|密码)\s*[:=：]\s*[\"']?(?P<v>[^\s\"']{4,})")
_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
_CN_ID = re.compile(
    r"(?<![0-9A-Za-z])[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx]"
    r"(?![0-9A-Za-z])"
)
_DIGIT_RUN = re.compile(r"(?<![\w+])\d+(?:[ \-]\d+)*(?![\w])")
_PHONES = (
    # Chinese mobile, optionally with +86 / 0086, optionally grouped 3-4-4.
    re.compile(r"(?<![\d\w+])(?:(?:\+|00)86[ \-]?)?1[3-9]\d(?:[ \-]?\d{4}){2}(?!\d)"),
    # International: + or 00, country code, then groups (optionally one parenthesized).
    re.compile(r"(?<![\w+])(?:\+|00)[1-9]\d{0,2}(?:[ .\-]?\(?\d{1,4}\)?){2,6}(?!\d)"),
    # North American: (415) 555-0100, 415-555-0100, 415.555.0100.
    re.compile(r"(?<![\w(])(?:\(\d{3}\)\s?|\d{3}[.\-])\d{3}[.\-]\d{4}(?!\d)"),
    # Local numbers with a trunk 0: 020 7946 0958, 010-12345678, 0755-8888 6666.
    re.compile(r"(?<![\d\w])0\d{1,4}[ \-]\d{3,4}[ \-]?\d{3,4}(?!\d)"),
)


def _count_digits(s: str) -> int:
    return sum(c.isdigit() for c in s)


def _cards(text: str) -> Iterable[tuple[int, int]]:
    """Luhn-valid 13-19 digit numbers, whole groups of a digit run separated by single spaces or dashes."""
    for m in _DIGIT_RUN.finditer(text):
        groups = [(g.start() + m.start(), g.end() + m.start()) for g in re.finditer(r"\d+", m.group())]
        i = 0
        while i < len(groups):
            for j in range(len(groups), i, -1):
                digits = "".join(text[a:b] for a, b in groups[i:j])
                if 13 <= len(digits) <= 19 and luhn_ok(digits):
                    yield groups[i][0], groups[j - 1][1]
                    i = j
                    break
            else:
                i += 1


class DefaultRedactor:
    """Emails, phones, API keys and secrets, cards, IBANs, Chinese ID numbers -> typed placeholders."""

    name = "default"
    version = VERSION

    def find(self, text: str) -> list[Redaction]:
        """Secrets in `text` (keys, secrets, emails, IBANs, Chinese ids, cards, phones), non-overlapping, in order."""
        found: list[Redaction] = []
        if not text:
            return found
        taken: list[tuple[int, int]] = []

        def add(start: int, end: int, placeholder: str) -> None:
            if end > start and all(end <= a or start >= b for a, b in taken):
                taken.append((start, end))
                found.append(Redaction(start, end, placeholder))

        for m in _API_KEY.finditer(text):
            add(m.start(), m.end(), "[API_KEY]")
        for pattern in (_KEYWORD_SECRET, _PASSWORD):
            for m in pattern.finditer(text):
                add(m.start("v"), m.end("v"), "[SECRET]")
        for m in _EMAIL.finditer(text):
            add(m.start(), m.end(), "[EMAIL]")
        for m in _IBAN.finditer(text):
            compact = m.group().replace(" ", "")
            if 15 <= len(compact) <= 34 and _count_digits(compact[4:]) >= 6:
                add(m.start(), m.end(), "[IBAN]")
        for m in _CN_ID.finditer(text):
            add(m.start(), m.end(), "[CN_ID]")
        for start, end in _cards(text):
            add(start, end, "[CARD]")
        for pattern in _PHONES:
            for m in pattern.finditer(text):
                if 7 <= _count_digits(m.group()) <= 15:
                    add(m.start(), m.end(), "[PHONE]")
        found.sort()
        return found

    def redact(self, text: str) -> str:
        """`text` with what `find` finds replaced by placeholders."""
        return redact_text(text, self)


def redact_text(text: str, redactor: Redactor) -> str:
    """`text` with every range the redactor finds replaced by its placeholder."""
    return redact_pieces(text, [(0, len(text))], redactor.find(text))[0]


def redact_pieces(
    text: str, pieces: Sequence[tuple[int, int]], redactions: Sequence[Redaction]
) -> list[str]:
    """The redacted text of each piece `text[a:b]` (pieces in order, non-overlapping).

    A redaction crossing a piece boundary is hidden in every piece it touches; its placeholder appears once
    per contiguous run of pieces (so a secret cut by a projection shows `[TYPE]` on both sides of the cut).
    """
    ordered = sorted(redactions)
    out: list[str] = []
    prev_end: int | None = None
    for a, b in pieces:
        parts: list[str] = []
        pos = a
        for r in ordered:
            if r.end <= a or r.start >= b:
                continue
            start = max(r.start, a)
            if start > pos:
                parts.append(text[pos:start])
            if r.start >= a or prev_end != a:
                parts.append(r.placeholder)
            pos = max(pos, min(r.end, b))
        if pos < b:
            parts.append(text[pos:b])
        out.append("".join(parts))
        prev_end = b
    return out


plugins.register("redactor", "default", DefaultRedactor)


def load_redactor(ref: str | None) -> Redactor:
    """The redactor named `module:attr`, or a registered name (`default`, or one a package registers under the
    entry-point group `agent_factory.redactors`): an instance, or a class / factory called without arguments."""
    if not ref:
        return DefaultRedactor()
    module_name, _, attr = ref.partition(":")
    obj: object
    if ":" not in ref:
        try:
            obj = plugins.lookup("redactor", ref)
        except SpecError as e:  # an unknown name lists the registered ones
            raise SpecError(f"privacy.redactor: {e}; or give 'module:attr'") from None
    elif not module_name or not attr:
        raise SpecError(f"privacy.redactor: expected 'module:attr' or a registered name, got {ref!r}")
    else:
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as e:
            raise SpecError(f"privacy.redactor: cannot load {ref!r}: {e}") from None
    if isinstance(obj, type) or (not isinstance(obj, Redactor) and callable(obj)):
        obj = obj()
    if not isinstance(obj, Redactor):
        raise SpecError(f"privacy.redactor: {ref!r} has no `find(text)` and `version`; see evaluators.collect.redact")
    return obj

