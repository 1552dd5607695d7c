r"""Phone numbers for `DefaultRedactor`, in time linear in the text.

They are found on the matching view (`redact_view.matching_view`: full-width digits are digits), bounded by
ASCII letters and digits, not by `\w` (a number written against Chinese text is found, one in a hex id not):

- Formatted shapes, by pattern: Chinese mobiles (`13800138000`, `138 0013 8000`), North American `(415)
  555-0100`, `415-555-0100`, `415 555 0100`, numbers with a trunk `0`.
- International forms of any country, whatever the phone regions: `+` or `00`, a country code, then digit
  groups of any size joined by blanks, dots, dashes or slashes, an area code or the `(0)` trunk in parentheses
  (`+33 (0)6 12 34 56 78`, `+49 30 / 901820`, `0091 98765 43210`). The country code names the region: the
  longest run of whole groups from the start (7-15 digits, four tried at most) that is a valid number of that
  region is hidden (its metadata first, then libphonenumber's `parse` without a default region and
  `is_valid_number`, answers remembered), so `+1 2024-05-01` and `UTC+08:00` are not.
- Every other run of digit groups that libphonenumber's matcher finds valid for one of the phone regions
  (`Leniency.VALID`: a number of a real range, so `415 555 0132` and `13800138000` are found, and ISO dates,
  order numbers and card-like runs are not; `POSSIBLE` would take any number of the right length). The
  matcher costs tens of microseconds a call, so a candidate reaches it only when its digits pass the region's
  own metadata first (the national number patterns of its number types: what `VALID` tests), and the matcher's
  answers are remembered. Candidates: a whole run of 7-13 digits (the matcher sees it with its context, which
  can rule it out: a timestamp's `:30`); in a run of several groups, each lone group of 7-13 digits and each
  window of 2-5 whole groups joined by one separator in a grouping the regions write numbers in (the matcher
  itself finds no number among other groups; a window mixing separators, `2024-05-01 2024`, crosses from one
  number into the next). Windows are found by one regex pass over the run's shape (`_window_pattern`); deep
  inside a list of numbers joined by one separator (`_EDGE` groups either side) none starts: phones listed in
  the usual shapes are found by the shapes. A run within what is already hidden (by the shapes here, or by the
  other finders: a number after its label) is not checked again.

A number right after a phone label (`tel:`, `call me at`, `电话`) is hidden whatever its region by
`redact_labels`.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from functools import cache, lru_cache
from itertools import accumulate, product
from operator import add

import phonenumbers
from phonenumbers import COUNTRY_CODE_TO_REGION_CODE, Leniency, PhoneMetadata

_F = re.ASCII
_DIGITS = re.compile(r"[0-9]{3}", _F)
_PAIR = re.compile(r"[0-9]{2}", _F)
_SPLIT = re.compile(r"([^0-9]+)", _F)
# Each look-behind comes after the first character, so the scan skips at C speed to where a number can start.
_SHAPES = (
    # Chinese mobile, optionally grouped 3-4-4 (with +86 / 0086 it is an international form, below).
    re.compile(r"1(?<![0-9A-Za-z+].)[3-9][0-9](?:[ \-]?[0-9]{4}){2}(?![0-9A-Za-z])", _F),
    # North American: (415) 555-0100, (415) 555 0100, 415-555-0100, 415.555.0100.
    re.compile(r"\((?<![0-9A-Za-z(].)[0-9]{3}\) ?[0-9]{3}[ .\-][0-9]{4}(?![0-9A-Za-z])", _F),
    re.compile(r"[0-9](?<![0-9A-Za-z(].)[0-9]{2}[.\-][0-9]{3}[.\-][0-9]{4}(?![0-9A-Za-z])", _F),
    # ... and 415 555 0100: area code and exchange begin with 2-9 (the North American Numbering Plan).
    re.compile(r"[2-9](?<![0-9A-Za-z(].)[0-9]{2} [2-9][0-9]{2} [0-9]{4}(?![0-9A-Za-z])", _F),
    # Local numbers with a trunk 0: 020 7946 0958, 010-12345678, 0755-8888 6666.
    re.compile(r"0(?<![0-9A-Za-z].)[0-9]{1,4}[ \-][0-9]{3,4}[ \-]?[0-9]{3,4}(?![0-9A-Za-z])", _F),
)
# Any international form: + or 00 (a blank may follow 00), a country code, then digits one at a time, a group
# joined to the next by up to 3 separators (`/` and ` / ` too), a closing parenthesis, or an opening one (`(0)`,
# `(415)`); at most 18 digits (possessive: taken once). Its whole groups are checked against the country code's
# region (`_international`).
_INTERNATIONAL_ANY = re.compile(
    r"(?:\+(?<![0-9A-Za-z+].)|0(?<![0-9A-Za-z+].)0 ?)[1-9]"
    r"(?:[0-9]|(?:[ .\-/]{1,3}\(?|\)[ .\-/]{0,3}\(?|\()[0-9]){5,17}+", _F)
_ALNUM = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_GROUP_OR_TRUNK = re.compile(r"\(0\)|[0-9]+", _F)
_PREFIXES = 4
"""Runs of whole groups tried per international form, longest first (one may have taken a following number)."""
# Digit groups joined by one separator (or a closing parenthesis and one), not after `+` (the shapes take
# international forms) nor inside a decimal or a word (a hex id holds digit runs).
_RUN = re.compile(r"[(0-9](?<![0-9A-Za-z+.].)[0-9]*(?:(?:[ .\-/]|\)[ .\-]?)\(?[0-9]+)*\)?(?![0-9A-Za-z])", _F)
_MIN_DIGITS = 7
_NATIONAL_MAX = 13
"""Most digits of a national number with its trunk prefix (China: 12 and the 0)."""
_CONTEXT = 12
"""Characters either side of a whole run given to the matcher: it rejects a number by what follows it (a
timestamp's `:30`) or precedes it."""
_EDGE = 4
"""Groups at each end of a list of numbers where windows still start."""
_TYPES = ("fixed_line", "mobile", "toll_free", "premium_rate", "shared_cost", "personal_number", "voip", "pager",
          "uan", "voicemail")
Region = tuple[str, Callable[..., "re.Match[str] | None"], Callable[..., "re.Match[str] | None"], frozenset[str],
               frozenset[int]]


@cache
def _national(region: str) -> tuple[Callable[..., "re.Match[str] | None"], frozenset[int]]:
    """The region's valid national numbers (every number type's pattern, `fullmatch`) and their lengths."""
    md = PhoneMetadata.metadata_for_region(region)
    if md is None:
        raise ValueError(f"unknown phone region {region!r}")
    patterns = [d.national_number_pattern for t in _TYPES if (d := getattr(md, t, None)) is not None
                and d.national_number_pattern]
    valid = re.compile("(?:" + "|".join(patterns) + ")" if patterns else "(?!)")
    general = md.general_desc.possible_length if md.general_desc is not None else ()
    return valid.fullmatch, frozenset(n for n in general if n > 0) or frozenset(range(1, 18))


@cache
def _region(region: str) -> Region:
    """The region's code, valid national numbers (`_national`), national prefix (`match`), the digits that
    prefix can begin with, and the lengths of its national numbers."""
    full, lengths = _national(region)
    md = PhoneMetadata.metadata_for_region(region)
    prefix = re.compile((md.national_prefix_for_parsing if md is not None else None) or "(?!)")
    first = frozenset(d for d in "0123456789" if any(
        (m := prefix.match(f"{d}{t:03d}000000000000")) is not None and m.end() > 0 for t in range(1000)))
    return region, full, prefix.match, first, lengths


def check_regions(regions: Sequence[str]) -> tuple[str, ...]:
    """`regions` upper-cased, each known to libphonenumber (else ValueError naming it)."""
    out = tuple(r.upper() for r in regions)
    for r in out:
        _region(r)
    return out


def _maybe_valid(digits: str, s: int, e: int, regions: Sequence[Region]) -> tuple[str, ...]:
    """The regions whose `VALID` could accept `digits[s:e]`: the digits, or the digits after the national
    prefix, are a valid national number of one of the region's types (the library decides after this)."""
    out: tuple[str, ...] = ()
    n, lead = e - s, digits[s]
    for code, full, prefix, first, lengths in regions:
        if n in lengths and full(digits, s, e):
            out += (code,)
        elif lead in first and (m := prefix(digits, s, e)) is not None:
            after = m.end()
            if after > s and e - after in lengths and full(digits, after, e):
                out += (code,)
    return out


@lru_cache(maxsize=4096)
def _matched(snippet: str, regions: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    """Spans of `snippet` libphonenumber's matcher finds valid in one of `regions`."""
    out = {(m.start, m.end) for region in regions
           for m in phonenumbers.PhoneNumberMatcher(snippet, region, leniency=Leniency.VALID)}
    return tuple(sorted(out))


def _confirmed(view: str, a: int, b: int, lo: int, hi: int, regions: tuple[str, ...]) -> Iterator[tuple[int, int]]:
    """The numbers the matcher finds within `view[a:b]`, shown it with `view[lo:hi]` around it."""
    for s, e in _matched(view[lo:hi], regions):
        if lo + s >= a and lo + e <= b:
            yield lo + s, lo + e


_FORMAT_GROUP = re.compile(r"\(\\d(?:\{(\d+)(?:,(\d+))?\})?\)")


@cache
def _groupings(regions: tuple[str, ...]) -> dict[tuple[int, ...], frozenset[str]]:
    """The group sizes the regions write their national numbers in (libphonenumber's number formats, e.g. US
    3-3-4, CN 3-4-4, GB 2-4-4), also with the national prefix joined to the first group (`0755`) or before it
    (`1 415 ...`), each with the digits such a number must begin with (`""`: any)."""
    out: dict[tuple[int, ...], set[str]] = {}
    for region in regions:
        md = PhoneMetadata.metadata_for_region(region)
        prefix = (md.national_prefix or "") if md is not None else ""
        for f in (list(md.number_format) + list(md.intl_number_format)) if md is not None else []:
            pattern = f.pattern or ""
            ranges = [(int(a or 1), int(b or a or 1)) for a, b in _FORMAT_GROUP.findall(pattern)]
            if len(ranges) < 2 or len(ranges) != pattern.count("("):
                continue
            for sizes in product(*(range(a, b + 1) for a, b in ranges)):
                if len(sizes) < 5 and sum(sizes) <= _NATIONAL_MAX:
                    out.setdefault(sizes, set()).add("")
                if prefix and len(sizes) < 5 and sum(sizes) + len(prefix) <= _NATIONAL_MAX:
                    out.setdefault((sizes[0] + len(prefix), *sizes[1:]), set()).add(prefix)
                    out.setdefault((len(prefix), *sizes), set()).add(prefix)
    return {k: frozenset(v) for k, v in out.items()}


def _trie(paths: dict[tuple[str, ...], bool]) -> str:
    """One pattern for sequences of regex atoms, shared leading atoms written once: after an atom that ends a
    sequence (`paths[seq]` True) what follows is optional, so the match ends at the longest sequence the text
    gives and the shorter ones on its way are found by the caller."""
    firsts: dict[str, dict[tuple[str, ...], bool]] = {}
    ends: set[str] = set()
    for seq, _ in paths.items():
        if len(seq) == 1:
            ends.add(seq[0])
        else:
            firsts.setdefault(seq[0], {})[seq[1:]] = True
    alts = []
    for atom in sorted(ends | set(firsts)):
        rest = firsts.get(atom)
        if rest is None:
            alts.append(atom)
        else:
            alts.append(atom + "(?:" + _trie(rest) + ")" + ("?" if atom in ends else ""))
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


_DIGIT = "[zodZOD]"
_CLASS = {"0": "z", "1": "o"}


@cache
def _window_pattern(regions: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern over a run's shape matching, at the start of a group, the longest window from there of 2-5
    groups joined by one separator in one of the regions' groupings, beginning as it must (a national prefix's
    first digit). The shape: digits as `z` (0), `o` (1), `d`, upper case deep in a list (where no window
    starts), separators as they are. A match begins with the character before its group (so the scan stops
    once a group, not once a digit); the shape begins with one such character for the run's first group."""
    paths: dict[tuple[str, ...], bool] = {}
    for sizes, leads in _groupings(regions).items():
        for cls in [""] if "" in leads else sorted({_CLASS.get(p[0], "d") for p in leads}):
            head = (f"(?<={cls})" if cls else "") + f"{_DIGIT}{{{sizes[0] - 1}}}(?!{_DIGIT})"
            paths[(head, *(f"(?P=s){_DIGIT}{{{z}}}(?!{_DIGIT})" for z in sizes[1:]))] = True
    return re.compile(f"[^zodZOD][zod](?={_DIGIT}*(?P<s>[^zodZOD]+))" + _trie(paths), _F)


_SHAPE_OF = str.maketrans("0123456789", "zodddddddd")
_LIST = re.compile(r"(.)\1{%d,}" % (2 * _EDGE), re.DOTALL)
"""More than 2 x `_EDGE` separators alike in a row: a list of numbers."""


_LONE = re.compile(r"(?<![0-9])[0-9]{%d,%d}(?![0-9])" % (_MIN_DIGITS, _NATIONAL_MAX), _F)


def _windows(run: str, strs: list[str], seps: list[str], digits: str,
             regions: tuple[str, ...]) -> list[tuple[int, int, int, int]]:
    """The run's windows to check (module docstring), lone groups included: (where its digits start and end
    among the run's digits, where it starts and ends in the run). The scans are regex passes over the run's
    shape; the run's groups are laid out (Python work a group) only when one of them finds something."""
    codes = "".join(seps)  # one character a separator (a longer one, such as ") ", as \x01)
    if len(codes) != len(seps):
        codes = "".join(x if len(x) == 1 else "\x01" for x in seps)
    lists = list(_LIST.finditer(codes))  # groups m.start()..m.end() joined by one separator
    lone = [m.start() for m in _LONE.finditer(run)]
    shape, pattern = " " + run.translate(_SHAPE_OF), _window_pattern(regions)
    matches = [] if lists else list(pattern.finditer(shape))
    if not (lists or lone or matches):
        return []
    sizes = list(map(len, strs))
    lead = len(run) - len(run.lstrip("("))
    pos = list(map(add, accumulate(sizes, initial=0), accumulate(map(len, seps), initial=lead)))
    if lists:
        for m in lists:  # no window starts deep inside a list of numbers
            a, b = pos[m.start() + _EDGE] + 1, pos[m.end() - _EDGE] + 2
            shape = shape[:a] + shape[a:b].upper() + shape[b:]
        matches = list(pattern.finditer(shape))
    at = list(accumulate(sizes, initial=0))
    windows = [(i, i) for i in (bisect_left(pos, o) for o in lone) if len(strs) > 1]
    ends = [p + z for p, z in zip(pos, sizes, strict=True)]
    last, groupings = len(strs) - 1, _groupings(regions)
    for m in matches:
        i = bisect_left(pos, m.start())  # the match begins a character before the group (the shape's too)
        deepest = bisect_left(ends, m.end() - 1)  # the longest window ends with this group
        for k in range(i + 1, deepest + 1):  # it and the shorter ones on its way that are groupings too
            leads = groupings.get(tuple(sizes[i:k + 1]))
            if leads is None or (i, k) == (0, last):
                continue
            if "" in leads or any(digits.startswith(p, at[i]) for p in leads):
                windows.append((i, k))
    return [(at[i], at[k + 1], pos[i], ends[k]) for i, k in windows]


@lru_cache(maxsize=4096)
def _valid_international(number: str) -> bool:
    """Whether `+digits` is a valid number of the region its country code names: the region's metadata first
    (its national numbers, also after a trunk `0`), then libphonenumber (`parse` without a default region)."""
    cc = next((k for k in (1, 2, 3) if int(number[1:k + 1]) in COUNTRY_CODE_TO_REGION_CODE), 0)
    if not cc:
        return False
    national = number[cc + 1:]
    regions = COUNTRY_CODE_TO_REGION_CODE[int(number[1:cc + 1])]
    if "001" not in regions:
        tails = (national, national[1:]) if national.startswith("0") else (national,)
        if not any(len(t) in lengths and full(t) for r in regions for full, lengths in (_national(r),)
                   for t in tails):
            return False
    try:
        return phonenumbers.is_valid_number(phonenumbers.parse(number, None))
    except phonenumbers.NumberParseException:
        return False


def _international(view: str) -> Iterator[tuple[int, int]]:
    """`+` or `00`, a country code and digit groups (a `(0)` trunk, an area code in parentheses, groups of any
    size): the longest run of whole groups from the start (7-15 digits, `_PREFIXES` tried at most) that is a
    valid number of the country code's region."""
    for m in _INTERNATIONAL_ANY.finditer(view):
        text = m.group()
        skip = 1 if text[0] == "+" else 2  # `00 33`: the blank is no group
        digits, ends = "", []
        for g in _GROUP_OR_TRUNK.finditer(text, skip):
            if g.group() != "(0)":
                digits += g.group()
                ends.append((len(digits), g.end()))
        if m.end() < len(view) and view[m.end()] in _ALNUM:
            ends.pop()  # the last group runs on into a word or more digits: not a whole group
        tried = 0
        for n, end in reversed(ends):
            if n > 15:
                continue
            if n < _MIN_DIGITS or tried == _PREFIXES:
                break
            tried += 1
            if _valid_international("+" + digits[:n]):
                yield m.start(), m.start() + end
                break


def _covering(spans: list[tuple[int, int]]) -> Callable[[int, int], bool]:
    """Whether a range lies within one of `spans` (merged, then found by bisection)."""
    starts: list[int] = []
    ends: list[int] = []
    for a, b in sorted(spans):
        if ends and a <= ends[-1]:
            ends[-1] = max(ends[-1], b)
        else:
            starts.append(a)
            ends.append(b)

    def covered(a: int, b: int) -> bool:
        i = bisect_right(starts, a) - 1
        return i >= 0 and ends[i] >= b

    return covered


def phone_ranges(view: str, regions: Sequence[str], found: Sequence[tuple[int, int]] = ()) -> Iterator[tuple[int, int]]:
    """Phone numbers in `view` (a matching view): the shapes, international forms valid for their country code,
    then what libphonenumber's matcher finds valid for `regions` among the runs of digit groups (module
    docstring). A run within a range already `found` (by the other finders) or found here is not checked."""
    if _PAIR.search(view) is None:
        return
    own: list[tuple[int, int]] = []
    for pattern in _SHAPES:
        for m in pattern.finditer(view):
            if _MIN_DIGITS <= sum(c.isdigit() for c in m.group()) <= 15:
                own.append(m.span())
    if "+" in view or "00" in view:
        own += _international(view)
    yield from own
    if not regions or _DIGITS.search(view) is None:
        return
    codes = tuple(regions)
    key = [_region(r) for r in codes]
    covered = _covering([*found, *own])
    for m in _RUN.finditer(view):
        run = m.group()
        if len(run) < _MIN_DIGITS:
            continue
        start, end = m.span()
        if covered(start, end):
            continue
        parts = _SPLIT.split(run.strip("()"))  # groups and the separators between them, in one pass
        strs, seps = parts[0::2], parts[1::2]
        digits = "".join(strs)
        n = len(digits)
        if n < _MIN_DIGITS or (len(strs) == 1 and n > _NATIONAL_MAX):
            continue
        if n <= _NATIONAL_MAX and (valid := _maybe_valid(digits, 0, n, key)):
            yield from _confirmed(view, start, end, max(0, start - _CONTEXT), end + _CONTEXT, valid)
        if len(strs) < 2:
            continue
        for ds, de, a, b in _windows(run, strs, seps, digits, codes):
            if valid := _maybe_valid(digits, ds, de, key):
                yield from _confirmed(view, start + a, start + b, start + a, start + b, valid)
