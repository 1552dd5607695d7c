from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_factory.evaluators.stats import bigram_jaccard, char_bigrams, normalize_text
from agent_factory.evaluators.stats.text import VERSION


def test_module_is_versioned() -> None:
    assert VERSION == "1"


def test_chinese_near_repeat_is_a_redo() -> None:
    # 8 bigrams vs 9 (the second adds 周的, 的销 and loses 周销), 7 shared: 7 / (8 + 9 - 7) = 0.7
    assert bigram_jaccard("帮我分析上周销售额", "帮我分析上周的销售额") == pytest.approx(0.7)


def test_unrelated_requests_are_not_redos() -> None:
    assert bigram_jaccard("帮我分析上周销售额", "写一首关于秋天的诗") == 0.0
    assert bigram_jaccard("show me last week's sales", "what's the weather in Paris") < 0.6
    assert bigram_jaccard("帮我分析上周销售额", "帮我写一封邮件") < 0.6


def test_english_pairs() -> None:
    # {ab, bc, cd} vs {ab, bc, ce}: 2 / 4
    assert bigram_jaccard("abcd", "abce") == 0.5
    assert bigram_jaccard("show me last week's sales", "show me last weeks sales") >= 0.6
    assert bigram_jaccard("Show me  the\tSALES ", "show me the sales") == 1.0


def test_full_width_input_compares_equal() -> None:
    assert normalize_text("ＡＢＣ　１２３") == "abc 123"
    assert bigram_jaccard("ＡＢＣ", "abc") == 1.0


def test_bigram_sets() -> None:
    assert char_bigrams("ab c") == frozenset({"ab", "b ", " c"})
    assert char_bigrams("帮我") == frozenset({"帮我"})
    assert char_bigrams("  a ") == frozenset({"a"})
    assert char_bigrams(" \n") == frozenset()


def test_empty_and_single_character_texts() -> None:
    assert bigram_jaccard("", "") == 1.0
    assert bigram_jaccard("  ", "") == 1.0
    assert bigram_jaccard("", "hello") == 0.0
    assert bigram_jaccard("a", "A") == 1.0
    assert bigram_jaccard("a", "b") == 0.0
    assert bigram_jaccard("a", "ab") == 0.0


@settings(derandomize=True, database=None)  # same examples every run, nothing written to disk
@given(st.text(max_size=40), st.text(max_size=40))
def test_jaccard_is_a_symmetric_similarity(a: str, b: str) -> None:
    j = bigram_jaccard(a, b)
    assert 0.0 <= j <= 1.0
    assert j == bigram_jaccard(b, a)
    assert bigram_jaccard(a, a) == 1.0
