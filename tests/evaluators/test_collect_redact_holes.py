"""The default redactor's holes found by an adversarial tester (issue 30), each as a minimal case, and the
work it does on adversarial input: linear in the text's length (counted, not timed, where a count exists)."""

from __future__ import annotations

import time

import pytest

from agent_factory.evaluators.collect import redact_numbers
from agent_factory.evaluators.collect.redact import DefaultRedactor, redact_text

R = DefaultRedactor()


@pytest.mark.parametrize(("text", "secret", "placeholder"), [
    # written against Chinese characters: no word boundary between CJK and ASCII
    ("我的邮箱是alice@example.com", "alice@example.com", "[EMAIL]"),
    ("电话13800138000", "13800138000", "[PHONE]"),
    ("卡号4111111111111111", "4111111111111111", "[CARD]"),
    ("密钥sk-proj-Abcdefghijklmnopqrstuvwxyz0123", "sk-proj-Abcdefghijklmnopqrstuvwxyz0123", "[API_KEY]"),
    ("密码：hunter2!x", "hunter2!x", "[SECRET]"),
    # env-style keys
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "[SECRET]"),
    ("export SENDGRID_API_KEY=abc123def456ghi789", "abc123def456ghi789", "[SECRET]"),
    ("DB_PASSWORD='s3cr3t pass'", "s3cr3t pass", "[SECRET]"),
    ('{"apiKey": "Zx81kQ0pLm2nB7vC4xZ9"}', "Zx81kQ0pLm2nB7vC4xZ9", "[SECRET]"),
    # vendor shapes
    ("aws secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY ok", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "[SECRET]"),
    ("aliyun LTAI5tQ2x8Kx9Yz3AbCdEfGh", "LTAI5tQ2x8Kx9Yz3AbCdEfGh", "[API_KEY]"),
    ("tencent AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE", "AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE", "[API_KEY]"),
    ("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", "SG.ngeVfQFYQlKU0ufo8x5d1A", "[API_KEY]"),
    ("the key: 9f86d081884c7d659a2feaa0c55ad015", "9f86d081884c7d659a2feaa0c55ad015", "[SECRET]"),
    # private key blocks, whole and cut before their END line
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0AAAABCADJ\nxyzw=\n-----END PGP PRIVATE KEY BLOCK-----",
     "lQOYBF0AAAABCADJ", "[PRIVATE_KEY]"),
    ("key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM\nk9pRE8Bb0ZfNnGxk", "k9pRE8Bb0ZfNnGxk",
     "[PRIVATE_KEY]"),
    # phones and cards in the forms the tester used
    ("call 415 555 0132 now", "415 555 0132", "[PHONE]"),
    ("卡号４１１１１１１１１１１１１１１１", "４１１１１１１１１１１１１１１１", "[CARD]"),
    ("card 4111.1111.1111.1111 ok", "4111.1111.1111.1111", "[CARD]"),
])
def test_each_hole_is_closed(text: str, secret: str, placeholder: str) -> None:
    out = redact_text(text, R)
    assert secret not in out, out
    assert placeholder in out, out


def _seconds(text: str) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        redact_text(text, R)
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("unit", ["1 ", "2024-05-01 ", "1234 ", "12 34 ", "4111111111111111 ", "1-"])
def test_digit_runs_cost_work_linear_in_their_length(unit: str) -> None:
    """The card search's window count grows as the text does (at most 7 lengths per start group)."""
    counts = []
    for n in (200, 2000):
        redact_numbers.WINDOWS_TRIED = 0
        redact_text(unit * n, R)
        counts.append(redact_numbers.WINDOWS_TRIED)
    assert counts[1] <= 11 * counts[0] + 50, counts


def test_time_grows_linearly_on_digit_runs_and_dates() -> None:
    """A ratio with a wide margin (10x the text, under 40x the time), never an absolute bound."""
    for unit in ("1 ", "2024-05-01 "):
        small, large = _seconds(unit * 300), _seconds(unit * 3000)
        assert large < 40 * max(small, 1e-4), (unit, small, large)


def _cards_by_brute_force(text: str) -> list[tuple[int, int]]:
    """The same rule as `card_ranges`, the slow way: every window joined and checked."""
    import re

    out = []
    rule = r"(?<![0-9A-Za-z])(?<![0-9]\.)(?:[0-9]{13,19}|[0-9]{3,6}(?:[ .\-][0-9]{3,6})+)(?![0-9A-Za-z])"
    for m in re.finditer(rule, text):
        groups = [(g.start() + m.start(), g.end() + m.start()) for g in re.finditer(r"[0-9]+", m.group())]
        i = 0
        while i < len(groups):
            for k in range(len(groups), i, -1):
                digits = "".join(text[a:b] for a, b in groups[i:k])
                if 13 <= len(digits) <= 19 and redact_numbers.luhn_ok(digits):
                    out.append((groups[i][0], groups[k - 1][1]))
                    i = k
                    break
            else:
                i += 1
    return out


def test_card_windows_agree_with_brute_force() -> None:
    import random

    rng = random.Random(3)
    for _ in range(300):
        parts = []
        for _ in range(rng.randint(1, 12)):
            parts.append("".join(rng.choice("0123456789") for _ in range(rng.choice([3, 4, 4, 5, 6, 13, 16]))))
            parts.append(rng.choice([" ", "-", ".", " ", ", ", "x"]))
        text = "".join(parts)
        assert list(redact_numbers.card_ranges(text)) == _cards_by_brute_force(text), text


def test_phone_regions_choose_the_national_numbers_looked_for() -> None:
    india = DefaultRedactor(phone_regions=("in",))
    assert india.phone_regions == ("IN",) and india.version != R.version  # enters cache keys
    assert redact_text("call 98765 43210 today", india) == "call [PHONE] today"  # an Indian mobile
    assert redact_text("call 98765 43210 today", R) == "call 98765 43210 today"  # not a number of US, CN, GB
    assert redact_text("call 415 555 0132 now", india) == "call [PHONE] now"  # the North American shape
    assert redact_text("电话 010 6234 5678", DefaultRedactor(phone_regions=())) == "电话 [PHONE]"  # trunk-0 shape
    with pytest.raises(ValueError, match="XX"):
        DefaultRedactor(phone_regions=("XX",))


def test_a_pack_may_name_its_phone_regions_and_its_digest_is_unchanged_without() -> None:
    from pydantic import ValidationError

    from agent_factory.knowledge_packs import load_pack
    from agent_factory.knowledge_packs.model import KnowledgePack

    pack = load_pack("default")
    assert pack.phone_regions is None and "phone_regions" not in pack.model_dump()
    named = KnowledgePack.model_validate({**pack.model_dump(), "phone_regions": ["JP", "US"]})
    assert named.phone_regions == ("JP", "US") and named.digest() != pack.digest()
    with pytest.raises(ValidationError, match="unknown phone regions: XX"):
        KnowledgePack.model_validate({**pack.model_dump(), "phone_regions": ["XX"]})


@pytest.mark.parametrize(("text", "expected"), [
    ("trace d9c84b4111111111111111ca8b19e862 ok", "trace d9c84b4111111111111111ca8b19e862 ok"),  # a hex id
    ('{"msg": "Phone:\\n13800138000"}', '{"msg": "Phone:\\n[PHONE]"}'),  # JSON escapes glue no letter
    ('{"k": "\\u7535\\u8bdd13800138000"}', '{"k": "\\u7535\\u8bdd[PHONE]"}'),
    ('{"card": "\\uff14\\uff11\\uff11\\uff11\\uff11\\uff11\\uff11\\uff11\\uff11\\uff11\\uff11\\uff11\\uff11\\uff11'
     '\\uff11\\uff11"}', '{"card": "[CARD]"}'),  # full-width digits, escaped
    ("q?email=alice%40example.com&x=1", "q?email=[EMAIL]&x=1"),
    ("my password is sunshine", "my password is [SECRET]"),
    ("the password is too short", "the password is too short"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabcd\n-----END RSA PRIVATE KEY-----\nbye", "[PRIVATE_KEY]\nbye"),
])
def test_more_cases(text: str, expected: str) -> None:
    assert redact_text(text, R) == expected


def test_a_key_head_repeated_without_end_costs_linear_work() -> None:
    for unit in ("-----BEGIN RSA PRIVATE KEY-----\n\n", "eyJa=", "sk-", "a@", "1 (", "+1 "):
        small, large = _seconds(unit * 500), _seconds(unit * 5000)
        assert large < 40 * max(small, 1e-4), (unit, small, large)
