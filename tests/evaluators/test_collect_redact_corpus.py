"""The default redactor on the secret corpus (data/secret_corpus.yaml): every planted value is hidden, as
written and as tools return it (JSON with ASCII escapes); the benign look-alikes are left as they are."""

from __future__ import annotations

import json
import re

import pytest

from agent_factory.evaluators.collect.redact import DefaultRedactor, redact_text
from tests.evaluators.secret_corpus import LANGS, ROLES, Secret, leaked, load, readable

R = DefaultRedactor()
SECRETS, BENIGN = load()


def test_the_corpus_is_what_it_claims() -> None:
    assert len(SECRETS) >= 150 and len({s.shape for s in SECRETS}) >= 100 and len(BENIGN) >= 50
    assert {s.lang for s in SECRETS} == set(LANGS) and {s.role for s in SECRETS} == set(ROLES)
    assert len({s.value for s in SECRETS}) >= 100


@pytest.mark.parametrize("secret", SECRETS, ids=lambda s: f"{s.shape}-{s.lang}-{s.role}")
def test_every_planted_value_is_hidden(secret: Secret) -> None:
    """Whole, and in part: no group of 4+ letters and digits of the value is left (a number cut short)."""
    rest = secret.text.replace("{v}", " ")
    parts = [p for p in re.split(r"[^0-9A-Za-z]+", secret.value) if len(p) >= 4 and p not in rest]
    for wire in (secret.planted(), json.dumps({"content": secret.planted()}, ensure_ascii=True),
                 json.dumps(json.dumps({"q": secret.planted()}, ensure_ascii=False))):
        out = redact_text(wire, R)
        assert leaked(out, [secret]) == [], out
        assert [p for p in parts if p in readable(out)] == [], out


def test_benign_text_is_left_alone() -> None:
    """Privacy wins over precision for ambiguous shapes; these are not ambiguous. The count is reported."""
    changed = [(b.shape, redact_text(b.text, R)) for b in BENIGN if redact_text(b.text, R) != b.text]
    print(f"\nfalse redactions: {len(changed)} of {len(BENIGN)} benign texts", *changed, sep="\n  ")
    assert changed == []
