"""`Normalized.original_ranges` (per-position maps built in numpy for many ranges) gives exactly what
`original_range` gives one range at a time, on texts every rewrite touches."""

from __future__ import annotations

import random

import pytest

from agent_factory.evaluators.provenance import normalize as N

ALPHABET = [*"ab 数据分析　，ＩＧ。&;\\u\"*", "\u200b", "\n", "\u0430", "&lt;", "\\u5ffd"]


@pytest.mark.parametrize("decode", [False, True])
def test_many_ranges_map_as_one_range_at_a_time(decode: bool) -> None:
    rng = random.Random(7)
    checked = 0
    for _ in range(400):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 50)))
        norm = N.normalize(text, decode=decode)
        n = len(norm.text)
        spans = [(a, b) for a in range(n) for b in range(a + 1, n + 1)]
        if len(spans) < 32 or not norm.steps:
            continue
        checked += 1
        assert norm.original_ranges(spans) == [norm.original_range(a, b) for a, b in spans]
    assert checked > 100  # the maps, not the one-at-a-time path, were compared


def test_an_unchanged_text_maps_to_itself() -> None:
    norm = N.normalize("plain ascii")
    assert not norm.steps and norm.original_ranges([(0, 5), (6, 11)]) == [(0, 5), (6, 11)]
