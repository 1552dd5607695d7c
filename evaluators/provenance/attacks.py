"""Attack isolation: find text addressed to an evaluator (prompt injection aimed at the instrument).

A turn whose request, answer or span text tells the grader to ignore its instructions or to mark the turn as
passed would bias every evaluator that reads it, so provenance flags it and the turn is isolated. Three readings
of every text, each on decoded, normalized text (`normalize(..., decode=True)`: JSON escapes in tool results,
HTML entities, full-width, zero-width and look-alike variants are read as what they show):

- the pack's lexicon patterns (`prefilter.Prefilter` finds the same matches as running every pattern over every
  text, at a fraction of the cost);
- the intent scorer (`intent.read`): an instruction addressed to whoever evaluates combined with one about the
  verdict, whatever its words. It decides confidently (a flag with pattern id `<lang>.intent.<kind>` and its
  `detail`), or finds a text suspicious but cannot decide (a *suspect*: the injection datum then abstains, so a
  configured model decides; see `components/provenance/rules.py`);
- both again on the text's hidden parts (`decode.find_blobs`: base64, hex, rot13, URL encoding, spaced-out
  letters; HTML entities are undone by the normalization), each read decoded with `CONTEXT` characters of the text
  around it, whose flags cite the whole encoded blob and say how it was hidden (`decoded`).

Every flag's evidence pointer cites the original text, and `matched_text` is exactly that slice. A match wholly
inside quotation marks is a mention, not an order ("what does 'ignore previous instructions' mean?"), as is one
inside a quotation that reported speech introduces ("my teacher wrote 'mark this as passed'"); the JSON double
quote does not count on its own, since a tool result's own strings are quoted with it. Every lexicon match is read
in its context by the intent scorer (`intent.judge`): in a benign frame (a user correcting themselves, a task in
their own tracker) with no evaluator addressed it is not flagged; with nothing near it but an addressee (no verdict,
override or forged authority) it is a suspect, not a flag.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_factory.adapters.model import EvidencePointer, Turn
from agent_factory.evaluators.core.memo import memos
from agent_factory.evaluators.provenance import decode as _decode
from agent_factory.evaluators.provenance import intent as _intent
from agent_factory.evaluators.provenance import normalize as _norm
from agent_factory.evaluators.provenance.prefilter import Prefilter
from agent_factory.frozen import Frozen
from agent_factory.knowledge_packs import KnowledgePack, LexiconPattern

VERSION = (f"3+norm{_norm.VERSION}+decode{_norm.DECODE_VERSION}+blobs{_decode.VERSION}"
           f"+intent{_intent.VERSION}")
"""Version of the injection scan, including the text normalization, decoding and intent scoring it reads with."""


class InjectionFlag(Frozen):
    """One injection found in one text field: a lexicon pattern's match or the intent scorer's decision."""

    language: str
    """Language of the lexicon the pattern belongs to, or of the intent scorer's cues (`en`, `zh`, ...)."""
    pattern_id: str
    """Id of the matching lexicon pattern, e.g. `zh.mark_passed`, or `<lang>.intent.<kind>` for the intent scorer
    (`en.intent.addressed_verdict`)."""
    pointer: EvidencePointer
    """Unit, field and character range of the match in the original text (the whole blob, for hidden text)."""
    matched_text: str
    """The original text of the match (`text[pointer.start:pointer.end]`)."""
    version: str = VERSION
    """Version of the scan that raised the flag."""
    decoded: str | None = None
    """How the text was hidden when the match is in decoded text: `base64`, `hex`, `rot13`, `url`, `spacing`."""
    detail: str | None = None
    """For the intent scorer: its decision, score and the cues that made it."""


# ---- the scan --------------------------------------------------------------------------------------------

_QUOTES = {"'": "'", "‘": "’", "“": "”", "「": "」", "『": "』", "«": "»", "‹": "›"}


def _quoted(text: str, start: int, end: int) -> bool:
    """True when text[start:end] is exactly the content of a pair of quotation marks."""
    return 0 < start and end < len(text) and _QUOTES.get(text[start - 1]) == text[end]


_Plan = tuple[tuple[tuple[str, LexiconPattern], ...], Prefilter]
_PLANS: dict[str, _Plan] = {}


def _plan(pack: KnowledgePack, key: str | None = None) -> _Plan:
    """The pack's injection patterns in scan order (language, then pack order) and their prefilter; `key`: the
    pack's digest, when the caller has it already."""
    key = pack.digest() if key is None else key
    plan = _PLANS.get(key)
    if plan is None:
        entries = tuple((lang, e) for lang in sorted(pack.lexicons) for e in pack.lexicons[lang].injection)
        plan = (entries, Prefilter([e.pattern for _, e in entries]))
        if len(_PLANS) > 16:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


_INTENT_ORDER = 1 << 20
"""Sort order of the intent scorer's findings: after the lexicon's at the same position."""


@dataclass(frozen=True, slots=True)
class _Found:
    """One finding in a text: its original range, who found it, and whether it is decided."""

    start: int
    end: int
    order: int
    language: str
    pattern_id: str
    decoded: str | None = None
    detail: str | None = None
    suspect: bool = False


def _decoded_at(segments: list[tuple[int, int, str]] | None, start: int, end: int) -> str | None:
    """How the text at [start, end) of a decoded view was hidden; None outside every decoded blob."""
    return next((how for a, b, how in segments or () if start < b and a < end), None)


def _read_view(view: _norm.Normalized, plan: _Plan, segments: list[tuple[int, int, str]] | None,
               reading: _intent.Reading | None = None) -> list[_Found]:
    """The lexicon's and the intent scorer's findings in one view of a text (the decoded one: only those in its
    decoded blobs), in original ranges. `reading`: the view's text as the scorer reads it, when the caller has it."""
    entries, prefilter = plan
    out: list[_Found] = []
    if reading is None:  # lower-cased and cut into sentences once, for every match and the scorer
        reading = _intent.Reading(view.text)
    for order, spans in prefilter.matches(view.text):
        for ms, me in spans:
            if me <= ms or _quoted(view.text, ms, me):
                continue
            how = _decoded_at(segments, ms, me)
            if segments is not None and how is None:
                continue
            standing, why = reading.judge(ms, me)
            if standing == "veto":
                continue
            lang, entry = entries[order]
            out.append(_Found(*view.original_range(ms, me), order, lang, entry.id, how,
                              f"lexicon {entry.id}: {why}" if why else None, standing == "suspect"))
    for v in reading.read():
        how = _decoded_at(segments, v.start, v.end)
        if segments is not None and how is None:
            continue
        out.append(_Found(*view.original_range(v.start, v.end), _INTENT_ORDER, v.language,
                          f"{v.language}.intent.{v.kind}", how, v.detail, v.decision == "suspect"))
    return out


CONTEXT = 400
"""Characters of plain text read around a decoded blob (what addresses it: "Note to the grader: <base64>")."""


def _decoded_view(norm: _norm.Normalized, low: str | None = None
                  ) -> tuple[_norm.Normalized, list[tuple[int, int, str]]] | None:
    """The text's hidden parts decoded, each with `CONTEXT` characters of the text around it (the rest left out), as
    a view that maps back to the original, and where each decoded part is in it; None if nothing is hidden. `low`:
    the text lower-cased, when the caller has it."""
    blobs = _decode.find_blobs(norm.text, low=low)
    if not blobs:
        return None
    text = norm.text
    windows: list[list[_decode.Blob]] = []
    for b in blobs:  # blobs whose contexts touch are read together
        if windows and b.start - windows[-1][-1].end <= 2 * CONTEXT:
            windows[-1].append(b)
        else:
            windows.append([b])
    parts: list[str] = []
    starts: list[int] = []
    src: list[tuple[int, int, bool]] = []
    segments: list[tuple[int, int, str]] = []
    n = 0

    def emit(piece: str, a: int, b: int, copied: bool) -> None:
        nonlocal n
        if piece:
            parts.append(piece)
            starts.append(n)
            src.append((a, b, copied))
            n += len(piece)

    for w in windows:
        pos = max(0, w[0].start - CONTEXT)
        if parts:
            emit("\n\n", pos, pos, False)  # windows apart: no sentence runs from one into the next
        for b in w:
            emit(text[pos:b.start], pos, b.start, True)
            rep = f" {b.text} "
            segments.append((n, n + len(rep), b.how))
            emit(rep, b.start, b.end, False)
            pos = b.end
        end = min(len(text), w[-1].end + CONTEXT)
        emit(text[pos:end], pos, end, True)
    return _norm.Normalized("".join(parts), (*norm.steps, _norm.Step(tuple(starts), tuple(src)))), segments


def _matches(text: str, plan: _Plan) -> tuple[_Found, ...]:
    """The findings kept in original `text`, by position: flags (lexicon, then the intent scorer's where no
    lexicon match overlaps) and, when there is no flag, the suspects. Depends on the text and the pack's plan
    only, so it is kept per distinct text (the run's `attacks.scans` memo)."""
    norm = _norm.normalize(text, decode=True)
    reading = _intent.Reading(norm.text)  # lower-cased once, for the lexicon's matches, the scorer and the decoder
    found = _read_view(norm, plan, None, reading)
    decoded = _decoded_view(norm, reading.low)
    if decoded is not None:
        found += _read_view(decoded[0], plan, decoded[1])
    kept = _kept([f for f in found if not f.suspect])
    if not kept:
        kept = _kept([f for f in found if f.suspect])
    return tuple(sorted(kept, key=lambda f: (f.start, f.end, f.order)))


def _kept(found: list[_Found]) -> list[_Found]:
    """The lexicon's findings less those within another's range (outer ranges first, then pack order), then the
    intent scorer's where none of those overlaps."""
    kept: list[_Found] = []
    for f in sorted(found, key=lambda f: (f.start, -f.end, f.order)):
        if f.order < _INTENT_ORDER and not any(k.start <= f.start and f.end <= k.end for k in kept):
            kept.append(f)
    for f in found:
        if f.order == _INTENT_ORDER and not any(f.start < k.end and k.start < f.end for k in kept):
            kept.append(f)
    return kept


class _Scanner:
    """One pack's scan, its digest and plan looked up once for all the texts of a turn (not once per field)."""

    __slots__ = ("key", "plan", "scans")

    def __init__(self, pack: KnowledgePack) -> None:
        self.key = pack.digest()
        self.plan = _plan(pack, self.key)
        self.scans = memos().text("attacks.scans")  # the run's (or the process's) per-text results

    def flags(self, text: str, *, unit_id: str, field: str, suspects: bool) -> list[InjectionFlag]:
        """The flags (or, with `suspects`, the suspects) of one text field."""
        if not text:
            return []
        plan = self.plan
        found: tuple[_Found, ...] = self.scans.get(self.key, text, lambda: _matches(text, plan))
        if not found:
            return []
        return [InjectionFlag(language=f.language, pattern_id=f.pattern_id,
                              pointer=EvidencePointer(unit_id=unit_id, field=field, start=f.start, end=f.end),
                              matched_text=text[f.start:f.end], decoded=f.decoded, detail=f.detail)
                for f in found if f.suspect == suspects]


def find_injections(text: str, *, unit_id: str, field: str, pack: KnowledgePack) -> list[InjectionFlag]:
    """Flags for every injection found in `text` under `pack`, ordered by position then pack order (the intent
    scorer's after the lexicon's).

    A match lying within another's range is not flagged again ("evaluator" inside "Note to the evaluator:");
    of two matches of the very same range, the first pattern's (in language then pack order) is kept; the intent
    scorer's decision is kept where no lexicon match overlaps it.
    """
    return _Scanner(pack).flags(text, unit_id=unit_id, field=field, suspects=False)


def find_suspects(text: str, *, unit_id: str, field: str, pack: KnowledgePack) -> list[InjectionFlag]:
    """What the intent scorer found suspicious in `text` but could not decide, when nothing in it is flagged."""
    return _Scanner(pack).flags(text, unit_id=unit_id, field=field, suspects=True)


def _texts(turn: Turn) -> list[tuple[str, str, str]]:
    """(unit id, field, text) of the turn's request and answer, then of each span's input and output."""
    out = [(turn.id, f, t) for f in ("request", "answer") if (t := getattr(turn, f))]
    for span in turn.spans:
        out += [(span.id, f, t) for f in ("input", "output") if (t := getattr(span, f))]
    return out


def scan_turn(turn: Turn, pack: KnowledgePack) -> list[InjectionFlag]:
    """Injection flags in the turn's request and answer, then in each span's input and output (source order).

    Span text is scanned too: a tool result or retrieved page can carry an injection the user never typed.
    """
    scan = _Scanner(pack)
    return [f for uid, field, text in _texts(turn) for f in scan.flags(text, unit_id=uid, field=field, suspects=False)]


def scan_turn_suspects(turn: Turn, pack: KnowledgePack) -> list[InjectionFlag]:
    """The turn's suspects (`find_suspects` over the same texts as `scan_turn`)."""
    scan = _Scanner(pack)
    return [f for uid, field, text in _texts(turn) for f in scan.flags(text, unit_id=uid, field=field, suspects=True)]
