r"""Privacy: secrets and personal data are replaced before any text leaves for a model provider or a report.

A redactor finds ranges to replace (`find(text) -> [Redaction]`) rather than returning new text, so the
prompt builder can cut and mark evidence (projection cuts, injection-flag boundaries) without ever splitting a
secret into parts that no longer match: the ranges are found on the whole field first, then every shown piece
is rewritten from them (`redact_pieces`).

`DefaultRedactor` replaces, with typed placeholders, what `redact_shapes` finds written as text (private key
blocks, whole or cut -> `[PRIVATE_KEY]`; vendor key shapes, its own and detect-secrets' -> `[API_KEY]`; values of
secret assignments (`AWS_SECRET_ACCESS_KEY=`, `"apiKey":`), passwords (after `password:` / `is`, after a blank,
or quoted or after `is` / `was` shortly after the keyword in prose), one-time codes, bearer credentials and the
password of a URL of any scheme (an empty user too: `redis://:secret@host`) -> `[SECRET]`; emails, IBANs,
Chinese resident ids, US social security numbers), what `redact_labels` finds right after a label naming it
(phone numbers in any national format -> `[PHONE]`, SSNs written with any separator or none -> `[SSN]`, passport,
driver's licence and national id numbers -> `[ID_NUMBER]`), Luhn-valid card numbers (`redact_numbers` ->
`[CARD]`) and phone numbers (`redact_phones`: by shape; `+` or `00` international forms of any country, valid
for the region their country code names; and by libphonenumber's matcher for the phone regions -> `[PHONE]`).
Everything is matched on a view of the text (`redact_view`) where full-width and other compatibility forms of
ASCII are ASCII and JSON escapes are blanked, one character for one (offsets are the original's), with ASCII
boundaries, so what is written against Chinese text is found; text with `\uXXXX` escapes is also read decoded.
The work is linear in the text's length (`bench/redact_bench.py` measures it). Where two findings overlap their
union is hidden, named by the first finding's kind.

A custom redactor is configured as `[privacy] redactor = "module:attr"`, or by a name registered under the
entry-point group `agent_factory.redactors` (`default`: this one).
"""

from __future__ import annotations

import importlib
from bisect import bisect_right
from collections.abc import Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from agent_factory import plugins
from agent_factory.errors import SpecError
from agent_factory.evaluators.collect.redact_numbers import card_ranges, luhn_ok
from agent_factory.evaluators.collect.redact_phones import check_regions, phone_ranges
from agent_factory.evaluators.collect.redact_shapes import shape_ranges
from agent_factory.evaluators.collect.redact_view import decoded_view, has_unicode_escapes, matching_view

__all__ = ["DEFAULT_PHONE_REGIONS", "VERSION", "DefaultRedactor", "Redaction", "Redactor", "load_redactor",
           "luhn_ok", "merge", "redact_id", "redact_pieces", "redact_text"]

VERSION = "3"
"""Version of `DefaultRedactor`'s patterns: it enters the cache key of every model-collected datum."""
DEFAULT_PHONE_REGIONS = ("US", "CN", "GB")
"""Regions whose national phone numbers are looked for when a knowledge pack names none."""
_CARD_PRIORITY = 90
_PHONE_PRIORITY = 91


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


def merge(found: list[tuple[int, int, int, str]]) -> list[Redaction]:
    """(start, end, priority, placeholder) findings as sorted, non-overlapping redactions: overlapping ones
    become their union, with the placeholder of the lowest priority number among them."""
    found.sort()
    out: list[Redaction] = []
    cur_start, cur_end, cur_priority, cur_placeholder = -1, -1, 0, ""
    for start, end, priority, placeholder in found:
        if start < cur_end:
            if end > cur_end:
                cur_end = end
            if priority < cur_priority:
                cur_priority, cur_placeholder = priority, placeholder
            continue
        if cur_end > cur_start >= 0:
            out.append(Redaction(cur_start, cur_end, cur_placeholder))
        cur_start, cur_end, cur_priority, cur_placeholder = start, end, priority, placeholder
    if cur_end > cur_start >= 0:
        out.append(Redaction(cur_start, cur_end, cur_placeholder))
    return out


class DefaultRedactor:
    """Keys, secrets, emails, phones, cards, IBANs, Chinese ids, SSNs, passport and id numbers -> typed
    placeholders (module docstring).

    `phone_regions` are ISO 3166 region codes whose national phone numbers (written without `+`) are looked
    for; international forms, and numbers after a phone label, are found whatever the regions. A knowledge pack
    may name them (`phone_regions`).
    """

    name = "default"

    def __init__(self, phone_regions: Sequence[str] | None = None) -> None:
        regions = check_regions(phone_regions if phone_regions is not None else DEFAULT_PHONE_REGIONS)
        self.phone_regions = regions
        self.version = VERSION if regions == DEFAULT_PHONE_REGIONS else f"{VERSION}+{','.join(regions)}"

    def find(self, text: str) -> list[Redaction]:
        """What `text` holds to hide, as sorted, non-overlapping ranges of the original text."""
        if not text:
            return []
        found = self._found(matching_view(text))
        if has_unicode_escapes(text):  # JSON with ASCII escapes: also read decoded, ranges mapped back
            decoded, starts, ends = decoded_view(text)
            found += [(starts[s], ends[e - 1], p, h) for s, e, p, h in self._found(matching_view(decoded))]
        return merge(found)

    def _found(self, view: str) -> list[tuple[int, int, int, str]]:
        found = list(shape_ranges(view))
        found += [(s, e, _CARD_PRIORITY, "[CARD]") for s, e in card_ranges(view)]
        hidden = [(s, e) for s, e, _, _ in found]  # runs within these need no phone check
        found += [(s, e, _PHONE_PRIORITY, "[PHONE]") for s, e in phone_ranges(view, self.phone_regions, hidden)]
        return found

    def redact(self, text: str) -> str:
        """`text` with what `find` finds replaced by placeholders."""
        return redact_text(text, self)


def redact_text(text: str, redactor: Redactor) -> str:
    """`text` with every range the redactor finds replaced by its placeholder."""
    return redact_pieces(text, [(0, len(text))], redactor.find(text))[0]


def redact_id(value: str | None, redactor: Redactor) -> str | None:
    """An id taken from a trace (a user, conversation or unit id), redacted like text (None stays None)."""
    return None if value is None else redact_text(value, redactor)


def redact_pieces(
    text: str, pieces: Sequence[tuple[int, int]], redactions: Sequence[Redaction]
) -> list[str]:
    """The redacted text of each piece `text[a:b]` (pieces in order, non-overlapping).

    A redaction crossing a piece boundary is hidden in every piece it touches; its placeholder appears once
    per contiguous run of pieces (so a secret cut by a projection shows `[TYPE]` on both sides of the cut).
    Overlapping redactions (a custom redactor's) are hidden as their union. O((pieces + redactions) log).
    """
    ordered = merge([(r.start, r.end, i, r.placeholder) for i, r in enumerate(redactions) if r.end > r.start])
    ends = [r.end for r in ordered]
    out: list[str] = []
    prev_end: int | None = None
    for a, b in pieces:
        parts: list[str] = []
        pos = a
        for i in range(bisect_right(ends, a), len(ordered)):
            r = ordered[i]
            if r.start >= b:
                break
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


REDACTOR_KIND = plugins.KindSpec(builtins=lambda: (("default", DefaultRedactor, {}),))
"""The `redactor` kind (`plugins.KIND_SPECS` names it): `default` built in, others from entry points."""


def load_redactor(ref: str | None, *, phone_regions: Sequence[str] | None = None) -> Redactor:
    """The redactor named `module:attr`, or a registered name (`default`, or one a package registers under the
    entry-point group `agent_factory.redactors`): an instance, or a class / factory called without arguments.
    `phone_regions` (a knowledge pack's) go to the default redactor; None: `DEFAULT_PHONE_REGIONS`."""
    if not ref or ref == "default":
        return DefaultRedactor(phone_regions)
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

