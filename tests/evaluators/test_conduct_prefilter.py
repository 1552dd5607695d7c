"""The one-pass test that none of a condition's patterns matches a text gives the same ranges as matching each."""

from __future__ import annotations

from agent_factory.evaluators.components.conduct.rules import _combined, _text_ranges, match_ranges

TEXTS = ("Please upload the FILE first", "没有上传文件就用了文件摘要模板", "nothing here", "abab", "",
         "ＵＰＬＯＡＤ in full width", "file  summary")
PATTERNS = (("upload", "文件摘要"), ("(a)b\\1", "xyz"), ("(?P<w>ab)(?P=w)", "zz"), ("file\\s+summary", "(?i)x"),
            ("nomatch", "alsono"), ("上传", "upload(ed)?"))


def _each(patterns: tuple[str, ...], text: str) -> tuple[tuple[int, int], ...]:
    return tuple(dict.fromkeys(sorted(r for p in patterns for r in match_ranges(p, text))))


def test_prefilter_gives_the_ranges_of_matching_each_pattern() -> None:
    for patterns in PATTERNS:
        for text in TEXTS:
            _text_ranges.cache_clear()
            assert _text_ranges(patterns, text) == _each(patterns, text), (patterns, text)


def test_patterns_whose_meaning_joining_would_change_are_not_joined() -> None:
    assert _combined(("(a)b\\1", "xyz")) is None  # \1 would count groups across the joined patterns
    assert _combined(("(?P<w>ab)(?P=w)", "zz")) is None
    assert _combined(("file", "(?i)x")) is None  # a global flag cannot sit inside a group
    assert _combined(("upload",)) is None  # one pattern: nothing to join
    rx = _combined(("upload", "文件摘要"))
    assert rx is not None and rx.search("UPLOAD") is not None  # compiled as packs compile theirs
