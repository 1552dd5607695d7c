r"""Payment card numbers for `DefaultRedactor` (Luhn), in time linear in the text.

They are found on the matching view (`redact_view.matching_view`: full-width digits are digits), bounded by
ASCII letters and digits, not by `\w` (a number written against Chinese text is found, one inside a hex id is
not), and not after a decimal point: a run of 13-19 digits, or consecutive
groups of 3-6 digits joined by single spaces, dashes or dots (how cards are printed: 4-4-4-4, 4-6-5,
4-4-4-4-3), Luhn-valid. Dates, times and decimals never form such a run. In a run of groups the windows are
tried from each group, longest first (at most 7 lengths a start, 4 for groups of 4), each checked in O(1)
from prefix sums of the Luhn terms (built by C loops over the run's digits): O(n) for the run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import accumulate

WINDOWS_TRIED = 0
"""Card windows checked since import (the tests read it: the work is linear in the text)."""

_F = re.ASCII
# Not within a word (a hex id holds digit runs) nor after a decimal point. A leading look-behind would make the
# scan try every position: it comes after the first digit instead.
_CARD_RUN = re.compile(r"[0-9](?<![0-9A-Za-z].)(?<![0-9]\.[0-9])(?:[0-9]{12,18}|[0-9]{2,5}(?:[ .\-][0-9]{3,6})+)"
                       r"(?![0-9A-Za-z])", _F)
_DIGITS = re.compile(r"[0-9]{3}", _F)
_GROUP = re.compile(r"[0-9]+", _F)
_DOUBLED = (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)


def luhn_ok(digits: str) -> bool:
    """The Luhn checksum of a string of digits (payment card numbers)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        total += _DOUBLED[d] if i % 2 else d
    return total % 10 == 0


_DOUBLE = str.maketrans("0123456789", "0246813579")
"""Each digit as its doubled Luhn term (its double, less 9 above 9)."""


def _luhn_prefix(digits: str, last_even: bool) -> list[int]:
    """Prefix sums of the Luhn terms of `digits` for numbers whose last digit sits at an even (else odd)
    position: that position and every other one plain, the rest doubled. Built by C loops over the string."""
    terms = list(digits)
    doubled = digits.translate(_DOUBLE)
    if last_even:
        terms[1::2] = doubled[1::2]
    else:
        terms[0::2] = doubled[0::2]
    return list(accumulate("".join(terms).encode("ascii"), initial=0))


def card_ranges(view: str) -> Iterator[tuple[int, int]]:
    """Luhn-valid card numbers: a whole 13-19 digit run, or whole groups of a grouped run, leftmost-longest."""
    global WINDOWS_TRIED
    if _DIGITS.search(view) is None:
        return
    for m in _CARD_RUN.finditer(view):
        run = m.group()
        if len(run) <= 19 and run.isdigit():
            WINDOWS_TRIED += 1
            if luhn_ok(run):
                yield m.span()
            continue
        base = m.start()
        strs = _GROUP.findall(run)
        digits = "".join(strs)
        # starts[k]: digits before group k; pos[k]: where group k starts in the run (one separator between)
        starts = list(accumulate(map(len, strs), initial=0))
        sums = (_luhn_prefix(digits, True), _luhn_prefix(digits, False))  # byte sums: 48 a digit over the terms
        i, tried, n = 0, 0, len(strs)
        while i < n:
            j = i + 1
            while j < n and starts[j + 1] - starts[i] <= 19:
                j += 1
            k = j
            while k > i:  # groups i..k-1, longest first
                s, e = starts[i], starts[k]
                if e - s < 13:
                    k = i
                    break
                tried += 1
                table = sums[(e - 1) % 2]
                if (table[e] - table[s] - 48 * (e - s)) % 10 == 0:
                    yield base + s + i, base + e + k - 1
                    break
                k -= 1
            i = k if k > i else i + 1
        WINDOWS_TRIED += tried
