r"""The shapes `DefaultRedactor` hides that are written as text: keys, secrets, emails, account and id numbers.

Every pattern runs on the matching view of a text (`redact_view.matching_view`: compatibility forms of ASCII as
ASCII, JSON escapes blanked, one character for one, so offsets are the original's), is compiled with `re.ASCII`
and bounded by ASCII letters and digits, never by `\w`: a secret written against Chinese text
(`邮箱alice@example.com`) is found. Each pattern is linear: it starts only at the start of a run of the
characters it consumes (a look-behind, placed after the first character so the scan skips at C speed to where a
match can start), and what it looks ahead is bounded. A pattern runs only on a text holding one of its needles.

Shapes are written from their definitions (vendor documentation, the standards), not tuned to a corpus:

- `[PRIVATE_KEY]`: PEM and OpenSSH private keys, PGP private key blocks and PuTTY key files, to their END line;
  a block cut before it is hidden over its key text (to a second blank line or a character no key holds).
- `[API_KEY]`: vendor key shapes (OpenAI / Anthropic / OpenRouter `sk-`, Stripe, AWS key ids, GitHub, GitLab,
  Slack, Google, Hugging Face, JWTs, SendGrid, Twilio, Aliyun `LTAI`, Tencent `AKID`, Mailgun, Mailchimp, npm,
  PyPI, Shopify, DigitalOcean, Groq, Replicate, Perplexity, Square), and detect-secrets' own regex detectors.
- `[SECRET]`: the value of an assignment whose name says secret (`AWS_SECRET_ACCESS_KEY=`, `"apiKey": "..."`,
  `X-Api-Key:`, `?access_token=`), a long value after a key word in prose (en, zh), one-time codes, bearer and
  basic credentials, the user and password of a URL of any scheme (`scheme://[user]:password@host`, the user
  possibly empty: `redis://:secret@host`; the password may hold `@`), a bare 40-character AWS secret key, and
  passwords: after `password` / `passwd` / `pwd` / `passcode` / `passphrase` / `pin` / `密码` / `口令` and `:`,
  `=`, `is`, `was` (not a word about the password: `the password is incorrect`); right after the keyword and a
  blank (`password hunter2!x`); within 40 characters after it, no sentence end between, quoted or after `is` /
  `was` / `'s` / `:` / `为` / `是` (`the temp password they emailed me was "..."`). A value of these prose forms
  has 6+ characters with a digit or symbol and is no URL, email, path, date, version, amount, requirement
  (`pin numpy==1.26`), file or host name, nor code (`pin the tab`, `password reset link` are left alone).
- `[EMAIL]` (the @ plain or URL-encoded), `[IBAN]` (ISO 13616 shape, 15-34 characters), `[CN_ID]` (GB 11643:
  region, birth date, sequence, check character; the check itself is not required), `[SSN]` (US, written
  `123-45-6789`: the SSA's never-issued areas, groups and serials excluded).
- After their labels (`redact_labels`, run from `shape_ranges`): phone numbers in any national format (`[PHONE]`),
  SSNs with any separator or none (`[SSN]`), passport, driver's licence and national id numbers (`[ID_NUMBER]`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import cache
from typing import NamedTuple

from agent_factory.evaluators.collect.redact_labels import label_ranges

_F = re.ASCII
_VALUE = r"[^\s\"'`,;&<>(){}\[\]]"
"""A character of an unquoted secret value: it ends at whitespace, quotes and the punctuation around values."""


# --- shapes ------------------------------------------------------------------------------------------------


class Shape(NamedTuple):
    """A pattern and what it hides: group `v` (or another named value group) if matched, else the whole match."""

    pattern: re.Pattern[str]
    placeholder: str
    check: Callable[[re.Match[str]], bool] | None = None
    needles: tuple[str, ...] = ()
    """The pattern runs only on a text holding one of these (empty: always)."""
    lower: bool = False
    """The needles are looked for in the lower-cased text."""
    guard: frozenset[str] = frozenset()
    """A match right after one of these characters is dropped (for patterns that cannot say so themselves)."""
    lowered: bool = False
    """The pattern reads the view with ASCII letters lower-cased (`_lowered`)."""


def _rx(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, _F | flags)


def _first(atom: str, guard: str) -> str:
    """`atom` (one character) not preceded by a character of `guard`: the look-behind comes after the atom, so
    the scan skips at C speed to the characters that can start a match (a leading look-behind would not)."""
    return f"{atom}(?<![{guard}].)"


_TOKEN = r"A-Za-z0-9_\-"
_GUARD_TOKEN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _key(prefix: str, rest: str) -> str:
    """A vendor key: a literal prefix at the start of a token, then its body."""
    lit = re.escape(prefix)
    return lit + f"(?<![{_TOKEN}]{lit})" + rest


_PRIVATE_KEY_HEAD = _rx(r"-{4,5} ?BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)? ?-{4,5}|PuTTY-User-Key-File-[0-9]+:")
_PRIVATE_KEY_END = _rx(r"-{4,5} ?END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)? ?-{4,5}")
_KEY_LINE = r"[A-Za-z0-9+/=:,.\- \t\\]"
# A key block cut before its END line: its lines of key text (newlines real or JSON-escaped; one blank line
# allowed, as after PGP armour headers), to a second blank line or a character no key block holds.
_PRIVATE_KEY_BODY = _rx(_KEY_LINE + r"*(?:(?:\r?\n){1,2}" + _KEY_LINE + "+)*")


def private_key_ranges(view: str) -> Iterator[tuple[int, int]]:
    """Private key blocks: from a BEGIN line to the first END line before the next BEGIN, else over the cut
    block's key text. One pass over the heads and one over the END lines (linear however many are unpaired)."""
    if "PRIVATE KEY" not in view and "PuTTY-User-Key-File-" not in view:
        return
    ends = [(m.start(), m.end()) for m in _PRIVATE_KEY_END.finditer(view)]
    heads = list(_PRIVATE_KEY_HEAD.finditer(view))
    e = covered = 0
    for i, head in enumerate(heads):
        if head.start() < covered:
            continue
        while e < len(ends) and ends[e][0] < head.end():
            e += 1
        following = heads[i + 1].start() if i + 1 < len(heads) else len(view)
        if e < len(ends) and ends[e][0] < following:
            covered = ends[e][1]
        else:
            body = _PRIVATE_KEY_BODY.match(view, head.end())
            covered = body.end() if body else head.end()
        yield head.start(), covered


_AWS_ID = r"[A-Z0-9]{16}(?![A-Za-z0-9])"
# One pattern: every alternative begins with a literal, so the scan skips to the characters that can start one
# (one pass costs less than a pass per prefix on all but long runs of lower-case letters, and far less on short
# texts).
_VENDOR_KEYS = (
    _key("sk-", r"[A-Za-z0-9_\-]{16,}"),                     # OpenAI, Anthropic sk-ant-, OpenRouter sk-or-, DeepSeek
    *(_key(p, r"(?:live|test)_[A-Za-z0-9]{16,}") for p in ("sk_", "rk_", "pk_")),  # Stripe
    _key("whsec_", r"[A-Za-z0-9]{24,}"),
    _key("A3T", "[A-Z0-9]" + _AWS_ID),                         # AWS access key ids
    *(_key(p, _AWS_ID) for p in ("AKIA", "ASIA", "ABIA", "ACCA", "AIDA", "AROA", "AGPA", "ANPA", "ANVA", "AIPA")),
    *(_key(f"gh{c}_", r"[A-Za-z0-9]{30,}") for c in "pousr"),  # GitHub
    _key("github_pat_", r"[A-Za-z0-9_]{20,}"),
    _key("gl", r"(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-[A-Za-z0-9_\-]{20,}"),  # GitLab
    _key("xox", r"[abposre]-[A-Za-z0-9\-]{10,}"),               # Slack
    _key("https://hooks.slack.com/services/", r"[A-Za-z0-9_/]+"),
    _key("AIza", r"[0-9A-Za-z_\-]{35}"),                        # Google
    _key("GOCSPX-", r"[A-Za-z0-9_\-]{20,}"),
    _key("ya29.", r"[0-9A-Za-z_\-]{20,}"),
    _key("hf_", r"[A-Za-z0-9]{30,}"),                           # Hugging Face
    _key("eyJ", r"[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"),  # JWT (payload a JSON object)
    _key("SG.", r"[A-Za-z0-9_\-]{20,24}\.[A-Za-z0-9_\-]{40,46}"),  # SendGrid
    _key("AC", r"[0-9a-f]{32}(?![A-Za-z0-9])"),                 # Twilio account and API key SIDs
    _key("SK", r"[0-9a-f]{32}(?![A-Za-z0-9])"),
    _key("LTAI", r"[A-Za-z0-9]{12,30}"),                        # Aliyun AccessKey ID
    _key("AKID", r"[A-Za-z0-9]{13,40}"),                        # Tencent Cloud SecretId
    _key("key-", r"[0-9a-z]{32}(?![A-Za-z0-9])"),               # Mailgun
    _key("npm_", r"[A-Za-z0-9]{36}"),                           # npm
    _key("pypi-", r"[A-Za-z0-9_\-]{50,}"),                      # PyPI
    _key("shp", r"(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),            # Shopify
    _key("do", r"[por]_v1_[a-f0-9]{64}"),                       # DigitalOcean
    _key("gsk_", r"[A-Za-z0-9]{40,}"),                          # Groq
    _key("r8_", r"[A-Za-z0-9]{30,}"),                           # Replicate
    _key("pplx-", r"[A-Za-z0-9]{40,}"),                         # Perplexity
    _key("sq0", r"(?:atp|csp)-[0-9A-Za-z_\-]{22,43}"),          # Square
)
_KEYS = (
    Shape(_rx("|".join(_VENDOR_KEYS)), "[API_KEY]"),
    # Mailchimp (a data-centre suffix), Telegram bots (bot id, colon, 35 characters), Discord bots (three parts).
    Shape(_rx(_first("[0-9a-f]", _TOKEN) + r"[0-9a-f]{31}-us[0-9]{1,2}(?![0-9])"), "[API_KEY]", needles=("-us",)),
    Shape(_rx(_first("[0-9]", _TOKEN) + r"[0-9]{7,9}:[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"), "[API_KEY]",
          needles=(":",)),
    Shape(_rx(_first("[MNO]", _TOKEN) + r"[A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27}"), "[API_KEY]",
          needles=(".",)),
)

# Names of an assignment: the value is hidden when the name's last part says secret.
_NAME_ENDS = ("pass", "word", "passwd", "pwd", "phrase", "code", "secret", "token", "key", "credential", "credentials",
              "cookie", "sig", "signature", "dsn", "sessionid", "keyid", "key_id", "secretid", "secret_id")
"""How a name that says secret ends (`_assignment_secret` decides): only those reach Python."""
_ASSIGNMENT = _rx(
    r"(?P<name>" + _first("[A-Za-z_]", r"A-Za-z0-9_.\-") + r"[A-Za-z0-9_.\-]{0,79})"
    r"(?=[\"']?[ \t]*(?:=>|:=|=|:))(?i:" + "|".join(f"(?<={e})" for e in _NAME_ENDS) + r")"
    r"[\"']?[ \t]*(?:=>|:=|=|:)[ \t]*"
    r"(?:\"(?P<dq>[^\"\n]{1,512})\"|'(?P<sq>[^'\n]{1,512})'|(?P<v>" + _VALUE + r"{1,512}))")
_NAME_PARTS = re.compile(r"[_.\-]+|(?<=[a-z0-9])(?=[A-Z])")
_PASSWORD_WORDS = frozenset({"password", "passwd", "pwd", "passphrase", "passcode", "pass"})
_SECRET_WORDS = frozenset({"secret", "token", "credential", "credentials", "apikey", "secretkey", "accesskey",
                           "privatekey", "authtoken", "sessionid", "cookie", "signature", "sig", "dsn"})
_KEY_QUALIFIERS = frozenset({"api", "access", "secret", "private", "auth", "signing", "encryption", "master",
                             "app", "client", "license", "account", "service", "subscription", "session"})
_PLAIN_WORD = re.compile(r"[A-Za-z]+|[0-9]{1,7}|true|false|null|none", _F | re.IGNORECASE)


def _assignment_secret(m: re.Match[str]) -> bool:
    """The name says password (any value) or secret (a value of 8+ characters that is not a plain word or a
    small number: `max_tokens: 512` and `token: expired` are left alone)."""
    parts = [p.lower() for p in _NAME_PARTS.split(m.group("name")) if p]
    if not parts:
        return False
    last, prev = parts[-1], parts[-2] if len(parts) > 1 else ""
    value = m.group("dq") or m.group("sq") or m.group("v") or ""
    if last in _PASSWORD_WORDS:
        return len(value) >= 3 and value.lower() not in ("none", "null", "true", "false")
    if last == "id" and prev in ("secret", "key"):
        last = prev + last
    elif last == "key" and prev in _KEY_QUALIFIERS:
        last = prev + last
    elif last not in _SECRET_WORDS and not last.endswith(("password", "secret", "token", "apikey", "secretkey")):
        if last != "key":
            return False
        return len(value) >= 12 and any(c.isdigit() for c in value) and _PLAIN_WORD.fullmatch(value) is None
    return len(value) >= 8 and _PLAIN_WORD.fullmatch(value) is None


# The patterns of words in prose run on the view with ASCII letters lower-cased (`_lowered`, the same length):
# without IGNORECASE each alternative begins with a literal character, and the scan skips at C speed to those.


def _words(words: tuple[str, ...], tail: str = "") -> str:
    """Alternatives for `words` (regex text, each beginning with a plain ASCII letter or digit, or a Chinese
    word), each not inside an ASCII word nor a base64 run (`+Key` in a blob), each followed by `tail`."""
    return "|".join((w[0] + f"(?<![a-z0-9+/]{w[0]})" + w[1:] if w[0].isascii() else w) + tail for w in words)


_SEP = r"[_\- ]?"
# A value after a secret word in prose: long, with a digit (so English words are left alone).
_KEYWORD_SECRET = _rx(
    "(?:" + _words((f"api{_SEP}key", f"access{_SEP}key(?:{_SEP}id)?", f"secret(?:{_SEP}(?:access{_SEP})?key)?",
                    f"client{_SEP}secret", "auth(?:orization)?", "token", *(f"{w}{_SEP}token" for w in (
                        "access", "refresh", "auth", "api", "session")), "key",
                    "密钥", "秘钥", "私钥", "令牌", "口令", "授权码", "访问密钥")) + ")"
    r"[\"']?[ \t]*(?:[:=：]|:=|is|为|是)?[ \t]*(?:bearer[ \t]+)?[\"']?"
    r"(?P<v>(?=[a-z0-9+/_\-.]{0,80}[0-9])[a-z0-9+/_\-.]{16,}={0,2})")
_PASSWORD = _rx(
    "(?:" + _words(("p(?:assword|asswd|wd|asscode|assphrase|in)",), r"(?![a-z0-9])[ \t]*(?P<sep>[:=：]|is|was)")
    + "|" + _words(("密码", "口令")) + r")[ \t]*(?:[:=：]|是|为)?[ \t]*[\"']?"
    r"(?P<v>[!#-&(-~]{3,128})")


_NOT_A_PASSWORD = frozenset({
    "incorrect", "correct", "wrong", "invalid", "valid", "required", "optional", "expired", "missing", "empty",
    "too", "not", "the", "a", "an", "your", "my", "case", "different", "same", "weak", "strong", "set", "reset",
    "changed", "being", "now", "still", "needed", "sensitive", "hidden", "stored", "encrypted", "visible",
    "short", "long", "blank", "unknown", "known", "protected", "saved", "shown", "sent", "no", "also", "only",
    "in", "on", "at", "for", "of", "to", "and", "or", "already", "incorrectly", "never", "always", "locked"})
"""Words after `password is` that say something about a password rather than give one."""


def _password(m: re.Match[str]) -> bool:
    """After `is` / `was` the value must not be a word that talks about the password (`the password is
    wrong`, `... is too short`); any other value is hidden (`my password is sunshine`)."""
    sep = (m.group("sep") or "").lower()
    word = m.group("v").rstrip(".,;:!?)'\"").lower()
    return sep not in ("is", "was") or word not in _NOT_A_PASSWORD


# A password in prose: the keyword (not inside a word or a snake_case name: `_PASSWORD_WORDS` is code), then a
# value right after it (`password hunter2!x`), or within a bounded window (at most 40 characters, no sentence
# end) a quoted value or one after `is` / `was` / `'s` / `:` (not a time's) / `为` / `是` (`the temp password
# they emailed me was "..."`). A quote may be a blanked JSON escape (two blanks in the view). The window is
# lazy: at each of its characters the value forms are tried, each bounded, so a keyword costs bounded work.
_PW_STRONG = r"(?=[^\s\"“”'‘’「」]{0,63}?[0-9#$%&*+/<=>@\\^_|~\-])"
"""The value ahead holds a digit or a symbol other than trailing punctuation (so `emailed,` is passed over)."""
_PW_TOKEN = _PW_STRONG + r"[!#-&(-~]{6,64}+(?![!#-&(-~])"
"""A value: 6-64 printable ASCII characters but blanks and quotes."""
_PASSWORD_PROSE = _rx(
    r"(?:p(?<![a-z0-9+/_]p)(?:assword|asswd|wd|asscode|assphrase|in)(?![a-z0-9_])|密码|口令)"
    r"(?:[ \t]++[\"“'‘]?(?P<d>" + _PW_TOKEN + ")"
    r"|(?:[^\n.!?。！？;；]|[.!?](?=[^\s.!?])){0,40}?"
    r"(?:(?<=[ \t])(?:[\"“'‘「]|[ \t]{2})" + _PW_STRONG + r"(?P<q>[^\s\"“”'‘’「」]{6,64})(?=[\"”'’」]|[ \t]{2}|$)"
    r"|(?:(?<=[ \t])(?:is|was)[ \t]++|'s[ \t]++|(?<![0-9]):[ \t]*+|[为是][ \t]*+)[\"“'‘]?(?P<t>" + _PW_TOKEN + ")))")
_NOT_A_PASSWORD_VALUE = _rx(
    r"[a-z][a-z0-9+.\-]*://\S*|www\.\S*"                               # a URL
    r"|[^@\s]+@[a-z0-9\-]+(?:\.[a-z0-9\-]+)*\.[a-z]{2,63}"                # an email
    r"|(?:[/~]|\.{1,2}/|[a-z]:\\)\S*"                                  # a path
    r"|[$€£¥]?v?[0-9]+(?:[.,:/\-_][0-9]+)+(?:[\-+][a-z][a-z0-9.]*)?%?"   # a date, time, version, amount
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2}t[0-9:.]+(?:z|[+\-][0-9:]+)?"           # a timestamp
    r"|[a-z0-9_.\-\[\]]+(?:==|>=|<=|~=|!=|<|>)\S*"                      # a requirement (`pin numpy==1.26`)
    r"|[a-z0-9_\-]+(?:\.[a-z0-9_\-]+)*\.[a-z]{2,5}"                     # a file or host name
    r"|.*[`()\[\]{}].*")                                                # code
_SYMBOL = re.compile(r"[^A-Za-z]", _F)


def _password_prose(m: re.Match[str]) -> bool:
    """A value of 6+ characters (trailing punctuation aside) with a digit or symbol, not a word about passwords
    nor a URL, email, path, date, version, amount, requirement, file or host name, nor code."""
    group = next(g for g in ("d", "q", "t") if m.start(g) >= 0)
    value = m.group(group).rstrip(".,;:!?'\"”’")
    return (len(value) >= 6 and _SYMBOL.search(value) is not None and value not in _NOT_A_PASSWORD
            and _NOT_A_PASSWORD_VALUE.fullmatch(value) is None)


_ONE_TIME_CODE = _rx(
    "(?:" + _words(("verification", "security", "one[- ]time", "otp", "auth(?:entication)?", "login", "2fa", "sms"),
                   r"[ \t]*(?:code|passcode|pin)(?![a-z0-9])")
    + "|" + _words(("验证码", "校验码", "动态码", "动态密码"))
    + r")[ \t]*(?:[:=：]|is|是|为)?[ \t]*(?P<v>[0-9]{4,8})(?![0-9])")
_BEARER = _rx(
    _words(("bearer",), r"[ \t]+(?P<v>[a-z0-9\-._~+/]{8,}=*)") + "|"
    + _words(("authorization",), r"[\"']?[ \t]*[:=][ \t]*[\"']?basic[ \t]+(?P<b>[a-z0-9+/]{8,}=*)"))
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _lowered(view: str) -> str:
    """`view` with its letters lower-cased, the same length (`str.lower` lengthens a few non-ASCII letters:
    then ASCII letters only)."""
    low = view.lower()
    return low if len(low) == len(view) else view.translate(_LOWER)


# `scheme://[user]:password@host`, any scheme, the user possibly empty (`redis://:secret@host`); the password
# may hold `@` (the last one before the host ends it).
_URL_CREDENTIALS = _rx(r"://(?P<v>[^\s:/?#@\"'<>\[\]]{0,256}:[^\s/?\"'<>\[\]]{1,256})@")
_NPM_AUTH = _rx(r":_auth(?:Token)?=[ \t]*(?P<v>" + _VALUE + r"{8,512})")
_AZURE = _rx(r"(?:AccountKey|SharedAccessKey)=(?P<v>[A-Za-z0-9+/=]{20,120})|[?&]sig=(?P<s>[A-Za-z0-9%+/=]{30,})")
# A bare AWS secret access key: 40 characters of base64's alphabet with upper, lower case and a digit.
_AWS_SECRET = _rx(_first("[A-Za-z0-9+/]", "A-Za-z0-9+/=") + r"[A-Za-z0-9+/]{39}(?![A-Za-z0-9+/=])")


def _mixed(m: re.Match[str]) -> bool:
    v = m.group()
    return any(c.isupper() for c in v) and any(c.islower() for c in v) and any(c.isdigit() for c in v)


_EMAIL = _rx(_first(r"[A-Za-z0-9._%+\-]", r"A-Za-z0-9._%+\-")  # the @ may be URL-encoded (%40)
             + r"[A-Za-z0-9._%+\-]*(?:@|%40)[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,63}(?![A-Za-z0-9\-])")
_IBAN = _rx(_first("[A-Z]", "A-Za-z0-9") + r"[A-Z][0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])")
_CN_ID = _rx(
    _first("[1-9]", "0-9A-Za-z") + r"[0-9]{5}(?:18|19|20)[0-9]{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12][0-9]|3[01])"
    r"[0-9]{3}[0-9Xx](?![0-9A-Za-z])")
_SSN = _rx(_first("[0-8]", r"0-9A-Za-z\-") + r"[0-9]{2}-[0-9]{2}-[0-9]{4}(?![0-9A-Za-z\-])")


def _iban(m: re.Match[str]) -> bool:
    compact = m.group().replace(" ", "")
    return 15 <= len(compact) <= 34 and sum(c.isdigit() for c in compact[4:]) >= 6


def _ssn(m: re.Match[str]) -> bool:
    """The SSA never issues area 000, 666 or 900-999, group 00 or serial 0000."""
    area, group, serial = m.group().split("-")
    return area not in ("000", "666") and group != "00" and serial != "0000"


SHAPES: tuple[Shape, ...] = (
    *_KEYS,
    Shape(_BEARER, "[SECRET]", needles=("bearer", "basic"), lower=True, lowered=True),
    Shape(_URL_CREDENTIALS, "[SECRET]", needles=("://",)),
    Shape(_NPM_AUTH, "[SECRET]", needles=(":_auth",)),
    Shape(_AZURE, "[SECRET]", needles=("Key=", "sig=")),
    Shape(_ASSIGNMENT, "[SECRET]", _assignment_secret, needles=(
        "pass", "pwd", "secret", "token", "key", "credential", "cookie", "sig", "dsn", "session"), lower=True),
    Shape(_KEYWORD_SECRET, "[SECRET]", needles=(
        "key", "secret", "token", "auth", "密钥", "秘钥", "私钥", "令牌", "口令", "授权码"), lower=True, lowered=True),
    Shape(_PASSWORD, "[SECRET]", _password, needles=("pass", "pwd", "pin", "密码", "口令"), lower=True, lowered=True),
    Shape(_PASSWORD_PROSE, "[SECRET]", _password_prose, needles=("pass", "pwd", "pin", "密码", "口令"), lower=True,
          lowered=True),
    Shape(_ONE_TIME_CODE, "[SECRET]", needles=("code", "pin", "验证码", "校验码", "动态码", "动态密码"), lower=True,
          lowered=True),
    Shape(_AWS_SECRET, "[SECRET]", _mixed),
    Shape(_EMAIL, "[EMAIL]", needles=("@", "%40")),
    Shape(_IBAN, "[IBAN]", _iban),
    Shape(_CN_ID, "[CN_ID]"),
    Shape(_SSN, "[SSN]", _ssn, needles=("-",)),
)
"""The shapes in priority order: where two overlap, the hidden range is their union, named by the first."""


@cache
def detect_secrets_shapes() -> tuple[Shape, ...]:
    """detect-secrets' regex detectors for key shapes with a fixed prefix or length (its keyword, entropy and
    IP detectors are left out: they are line-oriented and imprecise in prose). A match inside a token is
    dropped; the JWT pattern, whose body can run on without end, is made to start only at a token's start."""
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.jwt import JwtTokenDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.slack import SlackDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector
    from detect_secrets.plugins.stripe import StripeDetector
    from detect_secrets.plugins.twilio import TwilioKeyDetector

    # Its Mailchimp, Telegram and Discord patterns start a match at every letter or digit of a long word (costly
    # on digit-heavy text): `_KEYS` has them, starting at a token's start only.
    needles: dict[type, tuple[str, ...]] = {
        AWSKeyDetector: ("A3T", "ABIA", "ACCA", "AKIA", "ASIA"), AzureStorageKeyDetector: ("AccountKey=",),
        GitHubTokenDetector: ("gh",), GitLabTokenDetector: ("gl", "GR1348941"), JwtTokenDetector: ("eyJ",),
        PypiTokenDetector: ("pypi-",), SendGridDetector: ("SG.",), SlackDetector: ("xox", "hooks.slack.com"),
        SquareOAuthDetector: ("sq0csp-",), StripeDetector: ("k_live_",), TwilioKeyDetector: ("AC", "SK"),
    }
    out: list[Shape] = []
    for detector, words in needles.items():
        for rx in detector().denylist:
            pattern = rx.pattern
            if detector is AWSKeyDetector and "aws" in pattern:
                continue  # its secret-after-a-keyword form is `_ASSIGNMENT`'s and `_AWS_SECRET`'s
            if detector is JwtTokenDetector and pattern.startswith("eyJ"):
                pattern = r"eyJ(?<![A-Za-z0-9_\-=.]eyJ)" + pattern[3:]
            flags = (rx.flags & ~re.UNICODE) | _F
            out.append(Shape(re.compile(pattern, flags), "[API_KEY]", needles=words, guard=_GUARD_TOKEN))
    return tuple(out)


_VALUE_GROUPS = ("v", "dq", "sq", "b", "s", "d", "q", "t")


@cache
def _all_shapes() -> tuple[tuple[int, Shape, tuple[str, ...]], ...]:
    """(priority, shape, its value groups) of every shape, ours then detect-secrets' (after the labelled
    numbers: `LABEL_PRIORITY`)."""
    shapes = (*enumerate(SHAPES, 1), *enumerate(detect_secrets_shapes(), LABEL_PRIORITY + 1))
    return tuple((priority, shape, tuple(g for g in _VALUE_GROUPS if g in shape.pattern.groupindex))
                 for priority, shape in shapes)


LABEL_PRIORITY = len(SHAPES) + 1
"""The priority of the numbers found after their labels (`redact_labels`): after our shapes (an SSN's shape,
a Chinese id's, named so, win), before detect-secrets'."""


def shape_ranges(view: str) -> Iterator[tuple[int, int, int, str]]:
    """(start, end, priority, placeholder) of every shape found in `view` (a `matching_view`)."""
    for start, end in private_key_ranges(view):
        yield start, end, 0, "[PRIVATE_KEY]"
    low = ""
    present: dict[tuple[str, bool], bool] = {}  # each needle looked for once
    for priority, shape, groups in _all_shapes():
        pattern, _, check, needles, lower, guard, lowered = shape
        if (lower or lowered) and not low:
            low = _lowered(view)
        if needles:
            hay = low if lower else view
            for n in needles:
                if (n, lower) not in present:
                    present[(n, lower)] = n in hay
            if not any(present[(n, lower)] for n in needles):
                continue
        for m in pattern.finditer(low if lowered else view):
            if guard and m.start() > 0 and view[m.start() - 1] in guard:
                continue
            if check is not None and not check(m):
                continue
            group = next((g for g in groups if m.start(g) >= 0), None) if groups else None
            start, end = (m.start(group), m.end(group)) if group else m.span()
            if end > start:
                yield start, end, priority, shape.placeholder
    for start, end, placeholder in label_ranges(low or _lowered(view)):
        yield start, end, LABEL_PRIORITY, placeholder
