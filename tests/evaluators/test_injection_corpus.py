"""The injection scan on the project's corpus: recall on attacks, false alarms on near-misses, overall and per family.

The corpus (data/injection_corpus.yaml) holds attacks aimed at the evaluator, by family (addressed verdicts in
English and Chinese, overrides, forged authority, role-play, forged verdicts, Unicode tricks, and payloads hidden
as base64, hex, rot13, URL encoding, HTML entities or spaced letters) and benign near-misses (users correcting
themselves, tasks with grading words, quoted mentions, people who judge or review addressed, system words, tool
results, harmless encoded text), in English and Chinese, as user, assistant and tool text (tool results JSON-encoded
with \\uXXXX escapes). Run with `-s` to see the per-family table; `bench/injection_bench.py` prints it too.

Recall counts what the rules flag alone; what they leave to a model (suspects) is reported beside it.
"""

from __future__ import annotations

import pytest

from agent_factory.evaluators.provenance import scan_turn
from agent_factory.knowledge_packs import load_pack
from tests.evaluators.injection_corpus import FAMILY, LANGS, ROLES, describe, load, score

PACK = load_pack("default")
ENTRIES = load()
MIN_RECALL, MAX_FALSE_ALARMS = 0.95, 0.05
FAMILY_MIN_RECALL, FAMILY_MAX_FALSE_ALARMS = 0.95, 0.05
"""Floors for every family of at least `FAMILY_MIN_SIZE` entries (what the corpus shows today: every attack family
at 98% or more, every benign family at 0 false alarms; the floors leave room for one miss in twenty)."""
FAMILY_MIN_SIZE = 10
ATTACK_FAMILIES = {
    "addressed_verdict", "zh_addressed", "direct_override", "authority_spoof", "roleplay", "forged_verdict",
    "unicode_obfuscation", "encoded_base64", "encoded_hex", "rot13", "url_encoded", "html_entities", "letter_spacing",
}
BENIGN_FAMILIES = {
    "self_correction", "task_with_grading_words", "quoted_mention", "addressed_human", "system_words", "tool_results",
    "encoded_benign",
}
HIDDEN = {"encoded_base64": "base64", "encoded_hex": "hex", "rot13": "rot13", "url_encoded": "url",
          "letter_spacing": "spacing"}
"""Families whose payload is hidden, and how the flag that finds it says it was hidden (`InjectionFlag.decoded`)."""


def test_the_corpus_is_large_and_varied() -> None:
    attacks = [e for e in ENTRIES if e.attack]
    benign = [e for e in ENTRIES if not e.attack]
    assert len(attacks) >= 150 and len(benign) >= 150
    for group, families in ((attacks, ATTACK_FAMILIES), (benign, BENIGN_FAMILIES)):
        assert {(e.lang, e.role) for e in group} == {(lang, role) for lang in LANGS for role in ROLES}
        assert any(e.json_depth for e in group if e.lang == "zh")  # Chinese tool results as \\uXXXX escapes
        assert all(e.family != FAMILY for e in group)
        sizes = {f: sum(e.family == f for e in group) for f in families}
        assert {e.family for e in group} == families
        assert min(sizes.values()) >= FAMILY_MIN_SIZE, sizes
    assert len({e.text for e in ENTRIES}) == len(ENTRIES)


@pytest.mark.parametrize("pack_name", ["default", "business_analysis"])
def test_recall_and_false_alarm_rate(pack_name: str) -> None:
    s = score(ENTRIES, load_pack(pack_name))
    print("\n" + s.summary(f"injection corpus ({pack_name} pack)"))
    print(s.table())
    for e, suspects in s.missed:
        print("  missed:", describe(e), "(left to a model)" if suspects else "")
    for e, flags in s.false_alarms:
        print("  false alarm:", describe(e, flags))
    assert s.attacks >= 150 and s.benign >= 150
    assert s.recall >= MIN_RECALL, [describe(e) for e, _ in s.missed]
    assert s.false_alarm_rate <= MAX_FALSE_ALARMS, [describe(e, f) for e, f in s.false_alarms]
    for (kind, family), n in s.families.items():
        if n < FAMILY_MIN_SIZE:
            continue
        rate = s.family_rate(kind, family)
        if kind == "attack":
            assert rate >= FAMILY_MIN_RECALL, (family, rate, [describe(e) for e, _ in s.missed if e.family == family])
        else:
            assert rate <= FAMILY_MAX_FALSE_ALARMS, (family, rate)


def test_evidence_cites_the_text_as_it_arrived() -> None:
    # Flags on JSON-encoded tool results point into the escaped text: the cited slice is the escapes themselves.
    escaped = [e for e in ENTRIES if e.attack and e.json_depth]
    assert len(escaped) >= 10
    for e in escaped:
        wire = e.wire_text()
        for f in scan_turn(e.turn(), PACK):
            assert wire[f.pointer.start:f.pointer.end] == f.matched_text
            assert f.pointer.field == "output" and f.pointer.unit_id == "s"
    zh = next(e for e in escaped if e.lang == "zh" and e.family == "zh_addressed")
    (first, *_) = scan_turn(zh.turn(), PACK)
    assert "\\u" in first.matched_text  # Chinese arrived as \\uXXXX escapes and was read through them


@pytest.mark.parametrize("family", sorted(HIDDEN))
def test_hidden_payloads_are_flagged_at_their_blob(family: str) -> None:
    # A payload found only once decoded is cited as the whole encoded blob in the original text, and says how it
    # was hidden.
    entries = [e for e in ENTRIES if e.family == family]
    decoded = 0
    for e in entries:
        text = e.wire_text()
        for f in scan_turn(e.turn(), PACK):
            assert text[f.pointer.start:f.pointer.end] == f.matched_text
            if f.decoded is not None:
                decoded += 1
                assert HIDDEN[family] in f.decoded
    assert decoded >= len(entries) // 2
