"""The redactor's label-driven and international rules (issue: misses on unseen data), each class by cases written
from its definition, its near-misses, and the work it does on adversarial input (linear in the text's length)."""

from __future__ import annotations

import time

import pytest

from agent_factory.evaluators.collect import redact_phones
from agent_factory.evaluators.collect.redact import VERSION, DefaultRedactor, redact_text

R = DefaultRedactor()


def _hidden(text: str, secret: str, placeholder: str) -> None:
    out = redact_text(text, R)
    assert secret not in out and placeholder in out, out
    for part in secret.replace("-", " ").replace(".", " ").split():  # no group of the value left behind
        if len(part) >= 3 and part not in text.replace(secret, " "):
            assert part not in out, (part, out)


# 1. International numbers of any country: + or 00 and the country code, checked against that region.
@pytest.mark.parametrize("number", [
    "+33 6 12 34 56 78", "+33 (0)6 12 34 56 78", "+33.1.99.00.12.34", "0033 1 99 00 45 67", "00 33 1 99 00 45 67",
    "+49 (0)30 901820", "+49 151 23456789", "+49 (0)30 / 23125678", "+81 3-1234-5678", "+81 90-1234-5678",
    "+91 98765 43210", "+91-98765-43210", "+61 2 9374 4000", "+34 612 34 56 78", "+39 06 6982 1234",
    "+7 (495) 123-45-67", "+55 11 91234-5678", "+31 (0)20 123 4567", "+46 (0)8 123 456 78", "+82.10.1234.5678",
    "+852 9123 4567", "+353 (0)87 123 4567", "+27 (0)82 123 4567", "+972-3-123-4567", "+41 44 668 18 00",
    "+44 (0) 7911 123456", "+1 (415) 555-0100", "+86-10-6234-5678",
])
def test_international_numbers_of_any_country(number: str) -> None:
    _hidden(f"you can reach her on {number} after six", number, "[PHONE]")
    _hidden(f"她的号码是{number}。", number, "[PHONE]")


@pytest.mark.parametrize("text", [
    "Took 1534 ms on 2024-05-01 12:30:45 (UTC+08:00).",
    "delta +1 2024-05-01, score +3 4 5 6 7 8 9, temps +21 22 23 24 25 26 27 28",
    "build 0012345678 ok; version +1.2.3.4.5.6.7.8",
])
def test_plus_and_00_forms_that_are_no_valid_number_are_left(text: str) -> None:
    assert redact_text(text, R) == text


def test_an_international_number_is_cut_at_its_last_whole_group() -> None:
    assert redact_text("Paris: +33 (0)1 99 00 12 34 (9h-18h)", R) == "Paris: [PHONE] (9h-18h)"
    assert redact_text("call +33 6 12 34 56 78 2024 edition", R) == "call [PHONE] 2024 edition"


# 2. A number right after a phone label, any national format, whatever the region.
@pytest.mark.parametrize(("text", "number"), [
    ("tel: 06 12 34 56 78", "06 12 34 56 78"), ("Tel.: 030 901820", "030 901820"),
    ("phone: 0612345678", "0612345678"), ("Phone number: 98765 43210", "98765 43210"),
    ("Mobile No.: 0412-345-678", "0412-345-678"), ("cell: 0412 345 678", "0412 345 678"),
    ("call me at 06.12.34.56.78 tonight", "06.12.34.56.78"), ("text me on 0470 12 34 56", "0470 12 34 56"),
    ("Phone (home): 06 12 34 56 78", "06 12 34 56 78"), ("my phone number is (089) 1234-5678.", "(089) 1234-5678"),
    ('{"phone_number": "0612345678"}', "0612345678"), ('{"mobilePhone": "06 12 34 56 78"}', "06 12 34 56 78"),
    ('{"fax": "0639981234"}', "0639981234"), ("WhatsApp: +34 612 34 56 78", "+34 612 34 56 78"),
    ("电话：06 12 34 56 78", "06 12 34 56 78"), ("手机号 0612345678", "0612345678"),
    ("联系电话：030 23125678（柏林）", "030 23125678"), ("门店座机：6123 4567，营业到九点", "6123 4567"),
    ("请拨打0312345678预约", "0312345678"), ("请致电 03-1234-5678", "03-1234-5678"),
    ("手机号码是 0612345678", "0612345678"), ("联系方式：+33 6 12 34 56 78", "+33 6 12 34 56 78"),
])
def test_a_number_after_a_phone_label(text: str, number: str) -> None:
    _hidden(text, number, "[PHONE]")


def test_numbers_listed_after_one_label_are_all_hidden() -> None:
    assert redact_text("Tel: 0612345678 / 0698765432", R) == "Tel: [PHONE] / [PHONE]"
    assert redact_text("tel 06 12 34 56 78, 06 98 76 54 32 or 01 99 00 12 34", R) == "tel [PHONE], [PHONE] or [PHONE]"


@pytest.mark.parametrize("text", [
    "call us about tracking 123456789012", "Please call us about tracking 1Z999AA10123456784.",
    "phone battery at 85% after 12 hours", "my phone died on 2024-05-01", "phone: 2024-05-01",
    "Mobile app version 3.0.0-rc.1 (build 20240501.4)", "the fax machine is broken since 2023",
    "Tel Aviv office opens 2025", "text on page 12 of 300", "tel: 12345678901234567890",
    "电话会议定在2024年5月1日 14:30", "手机壳价格 3999元", "联系方式见附件",
])
def test_phone_labels_without_a_phone_number_are_left(text: str) -> None:
    assert redact_text(text, R) == text


# 3. Identity numbers after their labels, any separator or none.
@pytest.mark.parametrize(("text", "value", "placeholder"), [
    ("SSN: 123 45 6789", "123 45 6789", "[SSN]"), ("ssn 123456789", "123456789", "[SSN]"),
    ('{"ssn": "123456789"}', "123456789", "[SSN]"), ('{"customer_ssn":123456789}', "123456789", "[SSN]"),
    ("SSN#123.45.6789", "123.45.6789", "[SSN]"), ("social security number is 901-23-4567", "901-23-4567", "[SSN]"),
    ("social security no. 401 55 2368", "401 55 2368", "[SSN]"), ("社会安全号：123456789", "123456789", "[SSN]"),
    ("passport no. E12345678", "E12345678", "[ID_NUMBER]"), ("Passport number: 123456789", "123456789", "[ID_NUMBER]"),
    ("passport # K7260193", "K7260193", "[ID_NUMBER]"), ("护照号码：E23918476，有效期", "E23918476", "[ID_NUMBER]"),
    ("我的护照号G39104857", "G39104857", "[ID_NUMBER]"),
    ("driver's license no. D4821-5573-0912", "D4821-5573-0912", "[ID_NUMBER]"),
    ("driving licence number MORGA753116SM9IJ", "MORGA753116SM9IJ", "[ID_NUMBER]"),
    ("DL# D1234567", "D1234567", "[ID_NUMBER]"), ("national insurance number: QQ123456C", "QQ123456C", "[ID_NUMBER]"),
    ("National ID No.: 123-4567-8901", "123-4567-8901", "[ID_NUMBER]"),
    ("ID card number: 1234567890", "1234567890", "[ID_NUMBER]"), ("NRIC: S1234567D", "S1234567D", "[ID_NUMBER]"),
    ("Aadhaar 4821 5573 0912 is linked", "4821 5573 0912", "[ID_NUMBER]"),
    ("驾照号码：B72910384", "B72910384", "[ID_NUMBER]"), ('{"证件号码": "M1234567A"}', "M1234567A", "[ID_NUMBER]"),
])
def test_identity_numbers_after_their_labels(text: str, value: str, placeholder: str) -> None:
    _hidden(text, value, placeholder)


def test_a_chinese_id_after_an_id_label_keeps_its_own_placeholder() -> None:
    assert redact_text("驾驶证号 110105198504121375", R) == "驾驶证号 [CN_ID]"


@pytest.mark.parametrize("text", [
    "SSN field is required", "The ssn column is empty for 1234 rows", "SSN (last 4): 6789",
    "passport photo requirements: 2x2 inches", "Passport renewal takes 6-8 weeks; apply before 2024-05-01",
    "护照照片要求：白底，2寸", "driver's license renewal fee is $35.00", "national id card required for entry",
    "license number format: letters then digits", "ID card template v1.2.3", "DL 4567 departs at 10:30",
    "social security benefits rose 3.2% in 2024", "身份证复印件 1 份，驾驶证照片 2 张",
])
def test_identity_labels_without_a_number_are_left(text: str) -> None:
    assert redact_text(text, R) == text


# 4. Passwords in prose: after whitespace, or a quoted / connected value shortly after the keyword.
@pytest.mark.parametrize(("text", "value"), [
    ('the temp password they emailed me was "Xk#29fLq7" but it expired', "Xk#29fLq7"),
    ("login admin password hunter2!x9 accepted", "hunter2!x9"), ("pwd Abc12345", "Abc12345"),
    ("passcode 4829135", "4829135"), ("my card pin 739201 never works", "739201"),
    ("The wifi passcode for guests is Qz8-44k1 until Friday.", "Qz8-44k1"),
    ('I set the router password to "Zq7!mR2w" for now.', "Zq7!mR2w"), ("my password's Xk29fLq!", "Xk29fLq!"),
    ("mysql -u root --passwd R00t!pass -h 10.0.0.5", "R00t!pass"),
    ("我刚改的邮箱密码忘了告诉你，新的是Mima@2024x", "Mima@2024x"), ("把临时口令设置为“pW9#kt2z”", "pW9#kt2z"),
    ("口令为 zX9!kk22", "zX9!kk22"),
])
def test_passwords_in_prose(text: str, value: str) -> None:
    _hidden(text, value, "[SECRET]")


@pytest.mark.parametrize("text", [
    "pin the tab so it stays open", "Pin numpy==1.26.4 in requirements.txt", "pin it to v2.14.3 for now",
    "The password is incorrect; please reset your password from the login page.", "password reset link",
    "Your password was changed on 2024-05-01 at 10:30.", "Password must be 8-64 characters long.",
    "the passcode expired at 2024-05-01T12:30:45Z", "password protected file report_2024.zip",
    "$ pwd && ls build2", "pwd /home/alice/project1", "password reset link: https://example.com/reset?id=12345",
    "_PASSWORD_WORDS = frozenset({", "密码错误，请重新输入密码。",
])
def test_password_talk_is_left(text: str) -> None:
    assert redact_text(text, R) == text


# 5. URL credentials: an empty user name, any scheme.
@pytest.mark.parametrize(("text", "secret"), [
    ("redis://:s3cretPw@cache.internal:6379/0", "s3cretPw"), ("amqp://:pw@h", ":pw@"),
    ("REDIS_URL=rediss://:Zx9kLm2Q@redis.example.com:6380", "Zx9kLm2Q"),
    ("connect couchbase://admin:Cb!8812pass@cb1.example.net", "Cb!8812pass"),
    ("use postgres://app:p@ss2024@db.example.com/app", "p@ss2024"), ("本地测试用 amqp://guest:s3cr3t@mq/ 即可", "s3cr3t"),
])
def test_url_credentials_of_any_scheme_and_an_empty_user(text: str, secret: str) -> None:
    out = redact_text(text, R)
    assert secret not in out and "[SECRET]" in out, out


def test_the_version_says_what_it_finds_changed() -> None:
    assert VERSION == "3"


def _seconds(text: str) -> float:
    best = float("inf")
    for _ in range(3):
        redact_phones._matched.cache_clear()
        redact_phones._valid_international.cache_clear()
        t0 = time.perf_counter()
        redact_text(text, R)
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("unit", [
    "tel ", "tel: 06 12 34 ", "phone number is (", "password ", "the password they gave me was ", 'password "',
    "pin 1a! ", "+33 1 2 3 4 5 6 7 8 9 0 ", "0033 ", "+49 (0)30 / ", "ssn 123 ", "passport no. 12345 ",
    "call me at ", "密码", "密码是 ", "电话：1", "://a:b@", "driver's license no. a1", "aadhaar 1234 ",
])
def test_label_and_prose_rules_cost_work_linear_in_the_text(unit: str) -> None:
    """A ratio with a wide margin (10x the text, under 40x the time), never an absolute bound."""
    small, large = _seconds(unit * (300 // len(unit) + 1)), _seconds(unit * (3000 // len(unit) + 1))
    assert large < 40 * max(small, 1e-4), (unit, small, large)
