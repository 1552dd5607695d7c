"""The injection scan on the project's corpus: recall on attacks, false alarms on near-misses (reported).

The corpus (data/injection_corpus.yaml) holds attacks aimed at the evaluator and benign near-misses - users
correcting themselves, grading at school, a developer's debug mode, "ignore the previous chart", text that
mentions the system - in English and Chinese, as user, assistant and tool text (tool results JSON-encoded
with \\uXXXX escapes). Run with `-s` to see the figures; `bench/injection_bench.py` prints them too.
"""

from __future__ import annotations

import pytest

from agent_factory.evaluators.provenance import scan_turn
from agent_factory.knowledge_packs import load_pack
from tests.evaluators.injection_corpus import LANGS, ROLES, describe, load, score

PACK = load_pack("default")
ENTRIES = load()
MIN_RECALL, MAX_FALSE_ALARMS = 0.95, 0.05


def test_the_corpus_is_large_and_varied() -> None:
    attacks = [e for e in ENTRIES if e.attack]
    benign = [e for e in ENTRIES if not e.attack]
    assert len(attacks) >= 60 and len(benign) >= 60
    for group in (attacks, benign):
        assert {(e.lang, e.role) for e in group} == {(lang, role) for lang in LANGS for role in ROLES}
        assert any(e.json_depth for e in group if e.lang == "zh")  # Chinese tool results as \\uXXXX escapes
    assert len({e.text for e in ENTRIES}) == len(ENTRIES)


@pytest.mark.parametrize("pack_name", ["default", "business_analysis"])
def test_recall_and_false_alarm_rate(pack_name: str) -> None:
    s = score(ENTRIES, load_pack(pack_name))
    print("\n" + s.summary(f"injection corpus ({pack_name} pack)"))
    for e in s.missed:
        print("  missed:", describe(e))
    for e, flags in s.false_alarms:
        print("  false alarm:", describe(e, flags))
    assert s.attacks >= 60 and s.benign >= 60
    assert s.recall >= MIN_RECALL, [describe(e) for e in s.missed]
    assert s.false_alarm_rate <= MAX_FALSE_ALARMS, [describe(e, f) for e, f in s.false_alarms]


def test_evidence_cites_the_text_as_it_arrived() -> None:
    # Flags on JSON-encoded tool results point into the escaped text: the cited slice is the escapes themselves.
    escaped = [e for e in ENTRIES if e.attack and e.json_depth]
    assert len(escaped) >= 10
    for e in escaped:
        wire = e.wire_text()
        for f in scan_turn(e.turn(), PACK):
            assert wire[f.pointer.start:f.pointer.end] == f.matched_text
            assert f.pointer.field == "output" and f.pointer.unit_id == "s"
    zh = next(e for e in escaped if e.lang == "zh")
    (first, *_) = scan_turn(zh.turn(), PACK)
    assert "\\u" in first.matched_text  # Chinese arrived as \\uXXXX escapes and was read through them
