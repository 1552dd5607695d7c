r"""Numbers `DefaultRedactor` hides because a label says what they are: phones, SSNs, passports, ids.

A number alone is often ambiguous (`0612345678` may be an order, `123456789` a count); right after a label that
names it (`tel:`, `SSN`, `passport no.`, `护照号码`) it is not. Each rule is a label, then a bounded connector
(blanks or the joiners of a key name, a qualifier such as `number` / `no.` / `#` / `号码`, a closing and an
opening quote, one of `:` `=` `#` `-` `is` `was` `为` `是`), then the value, which must start there: nothing else may
come between, so `call us about tracking 123...`, `passport photo requirements` and `SSN field is required` are
left alone. They run on the lower-cased matching view (`redact_shapes.shape_ranges`) of a text holding a digit,
bounded by ASCII letters and digits (a number written against Chinese text is found): a regex pass finds the
labels (one for the ASCII labels, each after a character that is no ASCII letter or digit, one for the Chinese
ones), then the value is matched at the label's end, with bounded or possessive repetitions only, so a label
costs bounded work.

- `[PHONE]`: after a phone label (tel, telephone, phone, mobile, cell, fax, hotline, WhatsApp, contact number;
  call / text / ring / reach / sms (me|us) at / on; 电话, 手机, 手机号, 联系电话, 联系方式, 座机, 致电, 拨打, 传真,
  热线, ...), a number in any national or international format (whatever the region): whole digit groups
  joined by single spaces, dots, dashes or slashes or not at all, an area code or the `(0)` trunk in
  parentheses, an optional `+`, as many groups as hold at most 15 digits, if they hold 7 or more and are not a
  date (`phone: 2024-05-01`); up to three more numbers listed after it (`tel: 0612345678 / 0698765432`).
- `[SSN]`: after `ssn` / `social security (number|no|#)` / `社会安全号(码)`, 9 digits written `123-45-6789`,
  `123 45 6789` or `123456789` (also as the JSON value of a key named ssn).
- `[ID_NUMBER]`: after `passport (no|number|#)` / `护照(号|号码)`, 6-9 letters and digits with at least 5 digits;
  after a driver's licence or national id label (driver's license, driving licence, DL#, license number,
  national id / insurance (number), id card, identity number, Aadhaar, social insurance number, NRIC; 身份证,
  证件号码, 驾驶证, 驾照, ...), 5-20 letters and digits, 3 or more of them digits (groups joined by `-`, or by a
  space before a group holding a digit).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

_F = re.ASCII


_GAP = r"[ \t_\-]*+"
"""Blanks (JSON escapes are blanks in the view) or the joiners of a key name (`phone_number`, `ssn-no`)."""
_QUALIFIER = r"(?:" + _GAP + r"(?:numbers?|num|no\.?|nr\.?|#))?(?![a-z])"
"""`number`, `no.`, `#` after a label (`ssn#`, `passport no.`, `phone_number`); the label ends a word."""
_ZH_QUALIFIER = r"(?:号码|号|编号)?"
_CONNECT = r"[\"'`]?[ \t]*+(?:(?:[:=#\-–]|is(?![a-z])|was(?![a-z])|为|是)[ \t]*+)?[\"'`]?[ \t]*+"
"""Between a label and its value: a closing quote (a JSON key), blanks, one of `: = # - – is was 为 是` (the
view has full-width `：` as `:`), blanks, an opening quote. Possessive: blanks are taken once."""

# (kind, label): each label begins with a literal ASCII letter or a Chinese character. Of two labels beginning
# alike the first that matches is taken (`whatsapp me at` before `whatsapp`).
_LABELS: tuple[tuple[str, str], ...] = (
    ("ssn", "ssn" + _QUALIFIER), ("ssn", f"social{_GAP}security" + _QUALIFIER),
    *(("ssn", w) for w in ("社会安全号码", "社会安全号", "社安号")),
    ("passport", "passport" + _QUALIFIER), ("passport", "护照" + _ZH_QUALIFIER),
    *(("id", w + _QUALIFIER) for w in (
        f"driv(?:er['\u2019]?s?|ing){_GAP}licen[cs]e", "dl(?=[ \t]*+(?:#|no|num))",
        f"licen[cs]e(?={_GAP}(?:numbers?|no|#))", f"national{_GAP}(?:id(?:entity|entification)?|insurance)"
        f"(?:{_GAP}card)?", f"id{_GAP}card", f"identity{_GAP}card",
        f"identity(?={_GAP}(?:numbers?|no|#|document))(?:{_GAP}document)?", "aadhaar", f"social{_GAP}insurance",
        "nric")),
    *(("id", w + _ZH_QUALIFIER) for w in (
        "居民身份证", "身份证", "身份号码", "证件号码", "证件号", "驾驶证", "驾驶执照", "驾照")),
    *(("phone", w + r"(?:[ \t]*+(?:/|or)[ \t]*+(?:call|text))?(?:[ \t]++(?:me|us))?[ \t]++(?:at|on)(?![a-z])")
      for w in ("call", "text", "ring", "reach", "sms", "whatsapp")),
    *(("phone", w + _QUALIFIER + r"(?:[ \t]*+\((?:[a-z]{1,10}|[^\x00-\x7f]{1,4})\))?") for w in (
        r"tel(?:ephone)?\.?", "phone", f"mobile(?:{_GAP}phone)?", f"cell(?:{_GAP}phone)?", "fax", "hotline",
        "whats ?app", f"contact{_GAP}(?:phone|number)")),
    *(("phone", w + _ZH_QUALIFIER) for w in (
        "电话", "電話", "手机", "手機", "座机", "联系电话", "联系方式", "联系手机", "致电", "拨打", "撥打", "传真",
        "热线")),
)


def _label_patterns() -> tuple[re.Pattern[str], re.Pattern[str], dict[str, str]]:
    """The labels as two patterns, alternatives sharing a first character written after it once, a named group
    per label saying its kind (`{group: kind}`): the ASCII ones each after a character that is no ASCII letter,
    digit, `+` or `/` (not inside a word nor a base64 run; the scan skips at C speed to such characters), the
    Chinese ones anywhere."""
    by_first: dict[str, list[str]] = {}
    kinds: dict[str, str] = {}
    for i, (kind, label) in enumerate(_LABELS):
        kinds[f"l{i}"] = kind
        by_first.setdefault(label[0], []).append(f"(?P<l{i}>{label[1:]})")
    ascii_alts = [c + "(?:" + "|".join(rest) + ")" for c, rest in by_first.items() if c.isascii()]
    other_alts = [c + "(?:" + "|".join(rest) + ")" for c, rest in by_first.items() if not c.isascii()]
    return (re.compile("[^a-z0-9+/](?:" + "|".join(ascii_alts) + ")", _F), re.compile("|".join(other_alts), _F),
            kinds)


_ASCII_LABEL, _OTHER_LABEL, _KIND = _label_patterns()
_NUMBER_SEP = r"(?:[ .\-/]| / )"
_PHONE_DIGITS = (r"\+?\(?[0-9](?:[0-9]|" + _NUMBER_SEP + r"\(?[0-9]|\)" + _NUMBER_SEP
                 + r"?\(?[0-9]){0,24}+")
"""Digit groups: one separator between groups (` / ` too), an area code or trunk in parentheses, an optional
`+`; at most 25 digits (taken once: possessive)."""
_VALUES = {
    "phone": re.compile(_CONNECT + r"(?:(?:at|on)(?![a-z])[ \t]*+)?(?P<v>" + _PHONE_DIGITS + ")", _F),
    "ssn": re.compile(_CONNECT + r"(?P<v>[0-9]{3}[ .\-]?[0-9]{2}[ .\-]?[0-9]{4})(?![a-z0-9])", _F),
    "passport": re.compile(_CONNECT + r"(?P<v>[a-z0-9]{6,9})(?![a-z0-9])", _F),
    "id": re.compile(
        _CONNECT + r"(?P<v>[a-z0-9]++(?:-(?=[a-z0-9])[a-z0-9]++| (?=[a-z]{0,20}[0-9])[a-z0-9]++){0,4}+)", _F),
}
"""The value after a label of each kind (a phone's digit groups are cut to a number by `_phone`)."""
_MORE_PHONE = re.compile(r"[ \t]*+(?:/|,|;|or|或|、)[ \t]*+(?P<v>" + _PHONE_DIGITS + ")", _F)
"""Another number after a labelled one (`tel: 0612345678 / 0698765432`)."""
_GROUP = re.compile(r"[0-9]+", _F)
_ALNUM = frozenset("0123456789abcdefghijklmnopqrstuvwxyz")
_DATE = re.compile(r"[0-9]{4}[.\-/][0-9]{1,2}[.\-/][0-9]{1,2}|[0-9]{1,2}[.\-/][0-9]{1,2}[.\-/][0-9]{4}", _F)


def _phone(low: str, m: re.Match[str]) -> int:
    """Where the phone number that `m`'s digit groups begin ends (-1: none): its whole groups (a group running
    on into a word or more digits is not whole), as many as hold at most 15 digits, if they hold 7 or more and
    are not a date."""
    start, end = m.span("v")
    groups = [(g.end(), g.end() - g.start()) for g in _GROUP.finditer(low, start, end)]
    if end < len(low) and low[end] in _ALNUM:
        groups.pop()
    best, digits, total = -1, 0, 0
    for group_end, n in groups:
        total += n
        if total > 15:
            break
        best, digits = group_end, total
    if digits < 7 or _DATE.fullmatch(low, start, best):
        return -1
    return best


def _digits(value: str) -> int:
    return sum(c.isdigit() for c in value)


_CHECKS: dict[str, Callable[[str], bool]] = {
    "ssn": lambda v: True,
    "passport": lambda v: _digits(v) >= 5,
    "id": lambda v: 5 <= sum(c.isalnum() for c in v) <= 20 and _digits(v) >= 3,
}
PLACEHOLDERS = {"phone": "[PHONE]", "ssn": "[SSN]", "passport": "[ID_NUMBER]", "id": "[ID_NUMBER]"}
_ANY_DIGIT = re.compile(r"[0-9]", _F)
_ANY_LETTER = re.compile(r"[a-z]", _F)
_MORE = 3
"""Numbers taken after a labelled phone number, joined by `/`, `,`, `;`, `or` (a label may list a few)."""


def label_ranges(low: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, placeholder) of each value after its label in `low` (the lower-cased matching view)."""
    if _ANY_DIGIT.search(low) is None:
        return
    ends: list[tuple[int, str]] = []
    if _ANY_LETTER.search(low) is not None:  # a blank before the text: a label may begin it
        ends += [(m.end() - 1, m.lastgroup or "") for m in _ASCII_LABEL.finditer(" " + low)]
    ends += [(m.end(), m.lastgroup or "") for m in _OTHER_LABEL.finditer(low)]
    for end, group in ends:
        kind = _KIND[group]
        v = _VALUES[kind].match(low, end)
        if v is None:
            continue
        if kind != "phone":
            if _CHECKS[kind](v.group("v")):
                yield v.start("v"), v.end("v"), PLACEHOLDERS[kind]
            continue
        for _ in range(_MORE + 1):
            number_end = _phone(low, v)
            if number_end < 0:
                break
            yield v.start("v"), number_end, "[PHONE]"
            v = _MORE_PHONE.match(low, number_end)
            if v is None:
                break
