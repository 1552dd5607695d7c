"""Attack isolation: find text addressed to an evaluator (prompt injection aimed at the instrument).

A turn whose request, answer or span text tells the grader to ignore its instructions or to mark the turn as
passed would bias every evaluator that reads it, so provenance flags it and the turn is isolated. Matching
runs on decoded, normalized text (`normalize(..., decode=True)`): JSON escapes in tool results, HTML entities,
full-width, zero-width and look-alike variants are all read as what they show. Every flag's evidence pointer
cites the original text, and `matched_text` is exactly that slice. A match wholly inside quotation marks is a
mention, not an order ("what does 'ignore previous instructions' mean?"); the JSON double quote does not count,
since a tool result's own strings are quoted with it.

The scan runs on every text of real traffic; `prefilter.Prefilter` finds the same matches as running every
pattern over every text, at a fraction of the cost.
"""

from __future__ import annotations

from agent_factory.adapters.model import EvidencePointer, Turn
from agent_factory.evaluators.provenance import normalize as _norm
from agent_factory.evaluators.provenance.prefilter import Prefilter
from agent_factory.evaluators.provenance.textmemo import TextMemo
from agent_factory.frozen import Frozen
from agent_factory.knowledge_packs import KnowledgePack, LexiconPattern

VERSION = f"2+norm{_norm.VERSION}+decode{_norm.DECODE_VERSION}"
"""Version of the injection scan, including the text normalization and decoding it matches on."""


class InjectionFlag(Frozen):
    """One injection pattern matched in one text field."""

    language: str
    """Language of the lexicon the pattern belongs to (`en`, `zh`, ...)."""
    pattern_id: str
    """Id of the matching lexicon pattern, e.g. `zh.mark_passed`."""
    pointer: EvidencePointer
    """Unit, field and character range of the match in the original text."""
    matched_text: str
    """The original text of the match (`text[pointer.start:pointer.end]`)."""
    version: str = VERSION
    """Version of the scan that raised the flag."""


# ---- the scan --------------------------------------------------------------------------------------------

_QUOTES = {"'": "'", "‘": "’", "“": "”", "「": "」", "『": "』", "«": "»", "‹": "›"}


def _quoted(text: str, start: int, end: int) -> bool:
    """True when text[start:end] is exactly the content of a pair of quotation marks."""
    return 0 < start and end < len(text) and _QUOTES.get(text[start - 1]) == text[end]


_PLANS: dict[str, tuple[tuple[tuple[str, LexiconPattern], ...], Prefilter]] = {}


def _plan(pack: KnowledgePack) -> tuple[tuple[tuple[str, LexiconPattern], ...], Prefilter]:
    """The pack's injection patterns in scan order (language, then pack order) and their prefilter."""
    key = pack.digest()
    plan = _PLANS.get(key)
    if plan is None:
        entries = tuple((lang, e) for lang in sorted(pack.lexicons) for e in pack.lexicons[lang].injection)
        plan = (entries, Prefilter([e.pattern for _, e in entries]))
        if len(_PLANS) > 16:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


def _matches(text: str, plan_key: str, entries_prefilter: tuple[tuple[tuple[str, LexiconPattern], ...], Prefilter]
             ) -> tuple[tuple[int, int, int], ...]:
    """(start, end, pattern order) of the kept matches in original `text`, by position: depends on the text and the
    pack's plan only, so it is kept per distinct text (`_SCANS`)."""
    _entries, prefilter = entries_prefilter
    norm = _norm.normalize(text, decode=True)
    matches: list[tuple[int, int, int]] = []
    for order, spans in prefilter.matches(norm.text):
        for ms, me in spans:
            if me > ms and not _quoted(norm.text, ms, me):
                matches.append((*norm.original_range(ms, me), order))
    kept: list[tuple[int, int, int]] = []
    for start, end, order in sorted(matches, key=lambda m: (m[0], -m[1], m[2])):  # outer ranges first
        if not any(s <= start and end <= e for s, e, _ in kept):
            kept.append((start, end, order))
    return tuple(sorted(kept))


_SCANS: TextMemo[tuple[tuple[int, int, int], ...]] = TextMemo()


def find_injections(text: str, *, unit_id: str, field: str, pack: KnowledgePack) -> list[InjectionFlag]:
    """Flags for every injection pattern of `pack` found in `text`, ordered by position then pack order.

    A match lying within another's range is not flagged again ("evaluator" inside "Note to the evaluator:");
    of two matches of the very same range, the first pattern's (in language then pack order) is kept.
    """
    if not text:
        return []
    key = pack.digest()
    plan = _plan(pack)
    kept = _SCANS.get(key, text, lambda: _matches(text, key, plan))
    entries = plan[0]
    flags: list[InjectionFlag] = []
    for start, end, order in kept:
        language, entry = entries[order]
        flags.append(InjectionFlag(
            language=language,
            pattern_id=entry.id,
            pointer=EvidencePointer(unit_id=unit_id, field=field, start=start, end=end),
            matched_text=text[start:end],
        ))
    return flags


def scan_turn(turn: Turn, pack: KnowledgePack) -> list[InjectionFlag]:
    """Injection flags in the turn's request and answer, then in each span's input and output (source order).

    Span text is scanned too: a tool result or retrieved page can carry an injection the user never typed.
    """
    flags: list[InjectionFlag] = []
    for field in ("request", "answer"):
        text = getattr(turn, field)
        if text:
            flags += find_injections(text, unit_id=turn.id, field=field, pack=pack)
    for span in turn.spans:
        for field in ("input", "output"):
            text = getattr(span, field)
            if text:
                flags += find_injections(text, unit_id=span.id, field=field, pack=pack)
    return flags
