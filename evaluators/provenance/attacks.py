"""Attack isolation: find text addressed to an evaluator (prompt injection aimed at the instrument).

A turn whose request, answer or span text tells the grader to ignore its instructions or to mark the turn as
passed would bias every evaluator that reads it, so provenance flags it and the turn is isolated. Matching
runs on normalized text (`normalize`) so full-width, upper-case and zero-width variants are caught; every
flag's evidence pointer cites the original text, and `matched_text` is exactly that slice.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from adapters.model import EvidencePointer, Turn
from evaluators.provenance import normalize as _norm
from knowledge_packs import KnowledgePack, compile_pattern

VERSION = f"1+norm{_norm.VERSION}"
"""Version of the injection scan, including the text normalization it matches on."""


class InjectionFlag(BaseModel):
    """One injection pattern matched in one text field."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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


def find_injections(text: str, *, unit_id: str, field: str, pack: KnowledgePack) -> list[InjectionFlag]:
    """Flags for every injection pattern of `pack` found in `text`, ordered by position then pack order.

    When two patterns match the very same range, only the first (in language then pack order) is kept.
    """
    if not text:
        return []
    norm = _norm.normalize(text)
    if pack.injection_prefilter().search(norm.text) is None:
        return []
    found: list[tuple[int, int, int, InjectionFlag]] = []
    seen: set[tuple[int, int]] = set()
    order = 0
    for language in sorted(pack.lexicons):
        for entry in pack.lexicons[language].injection:
            for m in compile_pattern(entry.pattern).finditer(norm.text):
                if m.end() <= m.start():
                    continue
                start, end = norm.original_range(m.start(), m.end())
                order += 1
                if (start, end) in seen:
                    continue
                seen.add((start, end))
                flag = InjectionFlag(
                    language=language,
                    pattern_id=entry.id,
                    pointer=EvidencePointer(unit_id=unit_id, field=field, start=start, end=end),
                    matched_text=text[start:end],
                )
                found.append((start, end, order, flag))
    return [f for *_, f in sorted(found, key=lambda t: t[:3])]


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
