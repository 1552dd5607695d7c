"""Privacy: the default redactor's catches, what it leaves alone, cut-safe redaction, and pluggable redactors."""

from __future__ import annotations

import re

import pytest

from agent_factory.errors import SpecError
from agent_factory.evaluators.collect.redact import (
    DefaultRedactor,
    Redaction,
    Redactor,
    load_redactor,
    luhn_ok,
    redact_pieces,
    redact_text,
)
from tests.evaluators.test_collect_support import embed, secrets_corpus

R = DefaultRedactor()
PLACEHOLDER = {"email": "[EMAIL]", "phone": "[PHONE]", "api_key": "[API_KEY]", "card": "[CARD]",
               "iban": "[IBAN]", "cn_id": "[CN_ID]", "secret": "[SECRET]"}


@pytest.mark.parametrize(("kind", "secret"), secrets_corpus())
def test_every_corpus_secret_is_replaced_by_its_typed_placeholder(kind: str, secret: str) -> None:
    out = R.redact(embed(kind, secret))
    assert secret not in out
    assert PLACEHOLDER[kind] in out, out


@pytest.mark.parametrize(("text", "expected"), [
    ("mail john.doe+x@example.co.uk now", "mail [EMAIL] now"),
    ("call 13812345678 或 +86 138 1234 5678", "call [PHONE] 或 [PHONE]"),
    ("office +44 20 7946 0958, US (415) 555-0100 or 415.555.0100", "office [PHONE], US [PHONE] or [PHONE]"),
    ("Beijing 010-12345678", "Beijing [PHONE]"),
    ("keys sk-ant-api03-abcdefghijklmnopqrstu and AKIAIOSFODNN7EXAMPLE", "keys [API_KEY] and [API_KEY]"),
    ("slack xoxp-1234567890-abcdefghij; gh ghp_" + "a1" * 18, "slack [API_KEY]; gh [API_KEY]"),
    ("api_key=9f86d081884c7d659a2feaa0c55ad015", "api_key=[SECRET]"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4fwpM",
     "Authorization: Bearer [API_KEY]"),
    ("password: hunter2x!", "password: [SECRET]"),
    ("card 4111 1111 1111 1111 or 5500-0000-0000-0004", "card [CARD] or [CARD]"),
    ("ref 12 4111111111111111", "ref 12 [CARD]"),
    ("IBAN DE89 3704 0044 0532 0130 00.", "IBAN [IBAN]."),
    ("身份证 11010519491231002X", "身份证 [CN_ID]"),
])
def test_examples(text: str, expected: str) -> None:
    assert R.redact(text) == expected


@pytest.mark.parametrize("text", [
    "Took 1534 ms on 2024-05-01 12:30:45 (UTC+08:00).",
    "trace 4bf92f3577b34da6a3ce929d0e0e4736 span 00f067aa0ba902b7",
    "version 1.2.3; 45.6% of 1,234 users; order 20240501; revenue 4,200,000",
    "The key insight is that tokenization matters; our secret sauce is the tokenizer.",
    "4111 1111 1111 1112 fails the Luhn check",
    "ISBN 978-3-16-148410-0 and zip 94103",
])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert R.redact(text) == text


def test_luhn() -> None:
    assert luhn_ok("4111111111111111") and luhn_ok("378282246310005")
    assert not luhn_ok("4111111111111112")


def test_a_secret_cut_by_pieces_is_hidden_on_both_sides() -> None:
    text = "head sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX tail"
    found = R.find(text)
    start = text.index("sk-")
    cut = start + 10  # inside the key
    # contiguous pieces: one placeholder; a gap between pieces: the placeholder again after it
    assert redact_pieces(text, [(0, cut), (cut, len(text))], found) == ["head [API_KEY]", " tail"]
    assert redact_pieces(text, [(0, cut), (cut + 5, len(text))], found) == ["head [API_KEY]", "[API_KEY] tail"]
    assert all("ABCDEF"[:3] not in p for p in redact_pieces(text, [(0, cut), (cut + 5, len(text))], found))


class Upper:
    """A custom redactor: hides every run of upper-case letters."""

    version = "u1"

    def find(self, text: str) -> list[Redaction]:
        return [Redaction(m.start(), m.end(), "[UP]") for m in re.finditer(r"[A-Z]{2,}", text)]


UPPER = Upper()


def test_custom_redactor_by_module_attr() -> None:
    for ref in (f"{__name__}:Upper", f"{__name__}:UPPER"):
        r = load_redactor(ref)
        assert isinstance(r, Redactor)
        assert redact_text("say HELLO to bob@example.com", r) == "say [UP] to bob@example.com"
    assert isinstance(load_redactor(None), DefaultRedactor)
    assert isinstance(load_redactor("default"), DefaultRedactor)  # a registered name (kind `redactor`)


@pytest.mark.parametrize(
    "ref", ["nomodule", "tests.no_such_module:X", f"{__name__}:nothing", f"{__name__}:PLACEHOLDER"]
)
def test_bad_redactor_refs_are_spec_errors(ref: str) -> None:
    with pytest.raises(SpecError, match="privacy.redactor"):
        load_redactor(ref)


def test_an_unknown_redactor_name_lists_the_registered_ones() -> None:
    with pytest.raises(SpecError, match=r"^privacy.redactor: unknown redactor 'nomodule'; valid: default; or give"):
        load_redactor("nomodule")
