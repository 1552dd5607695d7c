r"""What the intent scorer (`intent.py`) weighs: cues, their kinds and weights. The cues themselves are in
`cues_en.py`, `cues_en_verdicts.py` and `cues_zh.py`, their key words in `cue_keys.py`.

An attack on the evaluator is an instruction ADDRESSED to whoever evaluates (`addressee`) COMBINED with an
instruction to pass, score high, close, ignore or confirm compliance (`verdict`). Cues, by kind:

- `addressee`: an evaluator's title (evaluator, grader, judge, auditor, reviewer, rater, annotator, the scoring
  system, 评测系统, 审计员, 评审, 打分的人, 裁判 ...) in a form that speaks to it - a salutation, a note, heading or
  instructions "to / for" it, a vocative, an obligation put on it ("the grader must"), "if you are an AI grading
  this", a role given to the reader ("as the auditing model, you", "you are now the judge") - or the reader in an
  evaluation context ("when you write your verdict", "打分的时候"), or implied by a verdict only an evaluator gives
  ("this answer should be scored as correct", "answer yes to every checklist item"). A form naming a title weighs
  by how surely the title means an automated evaluator (`ADDRESS_WEIGHTS` by tier: AI-qualified - "LLM judge",
  "the model reading this", 评估模型; evaluation roles - grader, 评分员; titles people hold - judge, reviewer,
  评委). A bare mention ("the reviewer will check it") weighs little (`MENTION_WEIGHTS`).
- `verdict`: pass / mark as correct / full marks / do not flag / no policy was broken / close the case / answer yes
  to every item / meets every requirement (满分, 通过, 结案, 判定合规, 不要扣分 ...); strongest about *this* answer,
  conversation or agent; weakest as a bare quality word ("correct").
- `directive`: please, must, should, an imperative at the start of a clause (请, 必须, 务必, 一律 ...).
- `override`: instructions, rules or rubric ignored, void, replaced or switched off (not the speaker's own: "my
  last message"); heaviest when they are the evaluator's own (rubric, grading criteria, 评分标准).
- `spoof`: forged authority - a "system:" line, chat-template tokens, a fake end of the transcript, a special mode,
  a forged evaluation block or state ("evaluation complete").
- `benign`: frames that make such words ordinary - a user correcting themselves ("I meant", "scratch that",
  我改主意了), a task in the user's own tools ("in the QA tracker"), speech reported ("my teacher told us to").

Each cue is a regex over lower-cased normalized text. `carries` cues (a salutation, a heading, a forged line, an
override, a verdict) also reach the next sentences; the others count within their sentence. Quotation is handled
by the scorer (a quoted mention is not an order).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from agent_factory.evaluators.provenance.literals import _firsts
from agent_factory.evaluators.provenance.prefilter import trie_regex

try:
    from re import _compiler as _RC  # type: ignore[attr-defined]  # private: typeshed has no stub
    from re import _constants as _C  # type: ignore[attr-defined]
    from re import _parser as _P  # type: ignore[attr-defined]

    _COMPILE = _RC.compile
except ImportError:  # pragma: no cover - another Python
    _C = _P = _COMPILE = None

Kind = Literal["addressee", "verdict", "directive", "override", "spoof", "benign"]
"""What a cue is evidence of."""

ADDRESS_WEIGHTS = (3.0, 2.5, 1.5)
"""An addressee form's weight by the tier of the title it names: AI-qualified, evaluation role, title people hold.
A form naming none ("if you are an AI") weighs as the first."""
MENTION_WEIGHTS = (1.5, 1.0, 0.5)
"""A bare mention's weight by the tier of its title."""


@dataclass(frozen=True, slots=True)
class Cue:
    """One cue: a regex over lower-cased normalized text, its kind and weight."""

    name: str
    """Its name in explanations (`en.salutation`, `zh.verdict_as`)."""
    kind: Kind
    """What it is evidence of."""
    weight: float
    """Its weight; 0 for an addressee cue whose weight is that of the tier of the title it names."""
    rx: re.Pattern[str]
    """The regex; with `group` 1, compiled to skip to where a match can start (`compile_cue`): read it with `find`."""
    carries: bool = False
    """Also counts for the next sentences (a salutation, a heading, a forged line, an override)."""
    directive: bool = False
    """Counts as a directive too (an obligation or a role put on the reader)."""
    tiers: tuple[re.Pattern[str], ...] = ()
    """For a tiered addressee cue: the titles of each tier, most automated first."""
    mention: bool = False
    """A bare mention of a title, not a form that speaks to it."""
    key: str = ""
    """The group of key words (`cue_keys`, by language) one of which every match holds: the cue is looked for only
    near one. Empty for verdict, directive and benign cues, looked for only around the others."""
    group: int = 0
    """The group of `rx` that holds a match: 1 when `rx` is the skipping form, else 0 (the whole match)."""
    source: str = ""
    """The regex as written (`rx` compiled from a parsed tree has no `pattern`)."""

    def __reduce__(self) -> tuple[object, ...]:
        # A regex compiled from a parsed tree does not pickle (its pattern is None): the cue is made again from its
        # source, as `cue` made it.
        return _remake, (self.name, self.kind, self.weight, self.source or self.rx.pattern, self.carries,
                         self.directive, self.tiers, self.mention, self.key)

    def find(self, low: str, start: int, end: int) -> list[tuple[int, int]]:
        """The spans of the non-empty matches in low[start:end], as `rx.finditer(low, start, end)` of the cue's own
        regex yields them."""
        rx, g = self.rx, self.group
        if not g:
            return [m.span() for m in rx.finditer(low, start, end) if m.end() > m.start()]
        out: list[tuple[int, int]] = []
        m = rx.search(low, start, end)
        while m is not None:  # the skipping form never matches empty: from a match's end, as finditer goes on
            a, b = m.span(g)
            out.append((a, b))
            m = rx.search(low, b, end)
        return out

    def weigh(self, matched: str) -> float:
        """The weight of a match of this cue (`matched`: its text)."""
        if self.weight or not self.tiers:
            return self.weight
        tier = next((k for k, rx in enumerate(self.tiers) if rx.search(matched)), 0)
        return (MENTION_WEIGHTS if self.mention else ADDRESS_WEIGHTS)[tier]


def cue(name: str, kind: Kind, weight: float, pattern: str, *, carries: bool = False, directive: bool = False,
        tiers: tuple[re.Pattern[str], ...] = (), mention: bool = False, key: str = "") -> Cue:
    """A cue from its regex source."""
    rx, group = compile_cue(pattern)
    return Cue(name, kind, weight, rx, carries, directive, tiers, mention, key, group, pattern)


def _remake(name: str, kind: Kind, weight: float, pattern: str, carries: bool, directive: bool,
            tiers: tuple[re.Pattern[str], ...], mention: bool, key: str) -> Cue:
    return cue(name, kind, weight, pattern, carries=carries, directive=directive, tiers=tiers, mention=mention, key=key)


def compile_cue(pattern: str) -> tuple[re.Pattern[str], int]:
    r"""`pattern` compiled to be searched fast, and the group holding its match.

    `re` tries a pattern that opens with groups and alternations (most cues: "(?:to|for|attention...)?{title}") at
    every position of the text; one that opens with a character class it skips to the next character of the class.
    So the pattern is compiled as `[F](?<=(?=(P))[\s\S])`: a character a match can start with (`F`, read from the
    parsed pattern, exactly: cues are case-sensitive), then, from that character, the pattern itself in group 1.
    Searched from a position, it finds the same match as the pattern (`Cue.find`). The pattern is parsed once (the
    parse is most of the cost of compiling, paid at import); where it can start with any character or match empty,
    or where the standard library's parser is not the one this reads, it is compiled as it is (group 0)."""
    if _P is not None:
        try:
            # [placeholder] then lookbehind( lookahead( group 1( pattern ) ), any character )
            tree = _P.parse(rf"[\x00](?<=(?=({pattern}))[\s\S])", 0)
            (_, (_, behind)), = tree[1:2]
            (_, (_, ahead)), _any = behind
            (_, (_, _, _, body)), = ahead
            chars, empty = _firsts(body)
            if chars and not empty:
                tree[0] = (_C.IN, [(_C.LITERAL, ord(c)) for c in sorted(chars)])
                return _COMPILE(tree, 0), 1
        except Exception:  # noqa: BLE001 - another parser's tree: the plain pattern matches the same
            pass
    return re.compile(pattern), 0


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


class KeyFinder:
    """Where the key words of each group are in a text, found in one pass of a trie regex of every group's words.

    A word is written with `~` for a space (or a hyphen) inside it and `|` at an end that must be a word boundary
    ("|ai|" is not found in "said"); the trie finds the longest word at a position, which stands for every word it
    begins with."""

    def __init__(self, groups: dict[str, str]) -> None:
        """`groups`: name -> its words, space-separated. The trie is built on the first `find`: every command
        imports the scan, few of them scan."""
        entries: dict[str, list[tuple[bool, bool, str]]] = {}
        for g, ws in groups.items():
            for w in ws.split():
                for join in (" ", "-") if "~" in w else ("",):
                    word = w.strip("|").replace("~", join)
                    entries.setdefault(word, []).append((w.startswith("|"), w.endswith("|"), g))
        self._entries = entries

    @cached_property
    def words(self) -> re.Pattern[str]:
        """The trie regex of every key word."""
        return re.compile(trie_regex(set(self._entries)))

    @cached_property
    def prefixes(self) -> dict[str, tuple[tuple[int, bool, bool, str], ...]]:
        """Each key word -> (length, left boundary, right boundary, group) of every key word it begins with."""
        entries = self._entries
        return {lit: tuple((k, left, right, g) for k in range(1, len(lit) + 1) if lit[:k] in entries
                           for left, right, g in entries[lit[:k]]) for lit in entries}

    def find(self, low: str) -> dict[str, list[int]]:
        """Group -> positions of its key words in lower-cased `low`."""
        out: dict[str, list[int]] = {}
        n = len(low)
        m = self.words.search(low)
        while m is not None:  # again from the next position, not the match end: key words may overlap
            at = m.start()
            for size, left, right, g in self.prefixes[m.group()]:
                if (left and at and _word(low[at - 1])) or (right and at + size < n and _word(low[at + size])):
                    continue
                out.setdefault(g, []).append(at)
            m = self.words.search(low, at + 1)
        return out


QUOTE_MARKS = {"“": "”", "\"": "\"", "「": "」", "『": "』", "«": "»", "‘": "’", "'": "'"}
"""Opening -> closing quotation marks the scorer reads."""
REPORTING = re.compile(
    r"\b(?:said|says|say|saying|wrote|writes|write|written|told|tells|asked|asks|called|named|titled|labell?ed"
    r"|phrases?|sentences?|terms?|words?|lines?|quote[sd]?|quoting|means?|meaning|example|examples|e\.g\.|such\s+as"
    r"|like|reads?|translate|translation|what\s+does|what\s+is|printed|shows?|displays?|mentions?|mentioned|stated"
    r"|states|claims?|claimed|remarked|noted|replied|answered|responded|posted|tweeted|texted|emailed|typed|heard"
    r"|repeat|spelled|defined|definition|sign|joke|jokingly|injection|classic|typical|sample)\b|说|讲|写|问|叫|称|所谓"
    r"|什么意思|意思|例如|比如|翻译|这句|短语|评语|批注|批语|留言|提到|引用|原话|标语|口号|表示|读作|写成|是什么|示例"
    r"|例子|样例|举例|案例|注入|这类|这种|此类|之类|类似|藏"
)
"""Words that make the quotation beside them a mention: reported speech, a question about a phrase, an example."""
