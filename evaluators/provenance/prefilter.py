r"""Where a set of case-insensitive regexes can match in a text, found cheaply: the injection scan's prefilter.

The scan runs every injection pattern on every text of real traffic (requests, answers, tool results, whole
prompts of 100,000 characters), and Python's `re` is slow on case-insensitive patterns: it tries each pattern
at every position. `Prefilter` avoids most of that work, without changing any result:

- Anchors. Each pattern is split at its top-level `|`; each alternative needs some literals
  (`literals.required_literals`), the most selective set of which is its anchor. One search over the
  lower-cased text finds every anchor; an alternative whose anchor is absent (or, in a text of up to
  `WINDOW_MIN` characters, whose other sets are absent) is not tried.
- Windows. In a longer text an alternative is tried only within `BEFORE` / `AFTER` characters of its
  anchors, since each match holds its anchor (or, for a lookaround's anchor, lies within its reach).
- First characters. Each alternative is compiled as `(?-i:[F])(?<=(?=(P))[\s\S])`: a case-sensitive class
  of the characters a match can start with (`literals.first_chars`), which `re` can skip to quickly, then
  the alternative itself, captured, from that character.

The alternatives' matches are merged as the alternation would produce them: leftmost first and, at the same
position, the earlier alternative; spans never overlap.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from agent_factory.evaluators.provenance.literals import B, Needs, first_chars, raw, raw_set, required_literals
from agent_factory.knowledge_packs import compile_pattern

WINDOW_MIN = 4000
"""Texts longer than this are searched only around the anchors."""
BEFORE, AFTER = 500, 700
"""How far a match, with its lookarounds, may start before its anchor and end after it."""
_WRAPPED = re.compile(r"\(\?([aiLmsux]+):")
_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]{2,}")


def _closing(pattern: str, at: int) -> int:
    """Index of the parenthesis closing the one at `at`, or -1."""
    depth, i, in_class = 0, at, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def top_alternatives(pattern: str) -> list[str]:
    """The pattern split at its top-level `|` (inside a flag group wrapping it all, which each part keeps)."""
    head, body, tail = "", pattern, ""
    w = _WRAPPED.match(pattern)
    if w and _closing(pattern, 0) == len(pattern) - 1:
        head, body, tail = pattern[: w.end()], pattern[w.end():-1], ")"
    verbose = w is not None and bool(head) and "x" in w.group(1)
    parts: list[str] = []
    depth, start, i, in_class = 0, 0, 0, False
    while i < len(body):
        c = body[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if body.startswith("]", i + 1) or body.startswith("^]", i + 1):  # a leading ] is a literal
                i += 2 if body[i + 1] == "]" else 3
                continue
        elif c == "#" and verbose:  # a comment, to the end of the line
            nl = body.find("\n", i)
            i = len(body) if nl < 0 else nl
            continue
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(body[start:i])
            start = i + 1
        i += 1
    parts.append(body[start:])
    return [head + part + tail for part in parts]


class _Alt:
    """One alternative of one pattern: what it needs, and its regex (compiled the first time it is tried)."""

    __slots__ = ("source", "needs", "_compiled")

    def __init__(self, source: str, needs: Needs | None) -> None:
        self.source = source
        self.needs = needs  # any of these conjunctions must hold; None: always tried
        self._compiled: tuple[re.Pattern[str], int] | None = None

    def search(self, text: str, start: int, end: int) -> tuple[int, int] | None:
        """The span of the leftmost match in text[start:end], as the pattern alternative itself would find it."""
        if self._compiled is None:
            self._compiled = _compile(self.source)
        rx, group = self._compiled
        m = rx.search(text, start, end)
        return m.span(group) if m is not None else None


def _compile(part: str) -> tuple[re.Pattern[str], int]:
    """The accelerated regex of a part and the group holding its match, or the plain regex and group 0."""
    chars = first_chars(part)
    if chars:
        try:
            return re.compile(f"(?-i:[{re.escape(''.join(sorted(chars)))}])(?<=(?=({part}))[\\s\\S])", re.IGNORECASE), 1
        except (re.error, RecursionError):
            pass
    return compile_pattern(part), 0


def _alternatives(pattern: str) -> list[_Alt]:
    needs = required_literals(pattern)
    parts = top_alternatives(pattern)
    if needs is not None and len(needs) == len(parts):  # aligned: each alternative its own needs
        return [_Alt(part, (conj,) if conj else None) for part, conj in zip(parts, needs, strict=True)]
    if needs is not None and not all(needs):  # some alternative needs nothing: so does the whole
        needs = None
    return [_Alt(part, needs) for part in parts]


_Trie = dict[str, "_Trie"]
"""A character trie: each character maps to the trie of what may follow it; `""` marks a word's end."""


def trie_regex(words: set[str]) -> str:
    """A regex matching any of `words`, longest first, branching one character at a time (fast in `re`)."""
    root: _Trie = {}
    for w in words:
        node = root
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: _Trie) -> str:
        alts = [re.escape(ch) + emit(sub) for ch, sub in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        if "" in node:
            body = (body if len(alts) == 1 and len(body) == 1 else f"(?:{body})") + "?"
        return body

    return emit(root)


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _holds(lit: str, low: str, at: int) -> bool:
    """Whether every boundary mark of `lit`, placed at `at` in `low`, falls on a word boundary."""
    i = at
    for ch in lit:
        if ch == B:
            if (i > 0 and _word(low[i - 1])) == (i < len(low) and _word(low[i])):
                return False
        else:
            i += 1
    return True


class Prefilter:
    """The matches of several case-insensitive regexes in a text, as `finditer` yields them, found cheaply."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.alts = [_alternatives(p) for p in patterns]
        anchors = {lit for alts in self.alts for a in alts for conj in a.needs or () for lit in conj[0]}
        ascii_lits = {lit for lit in anchors if lit.isascii()}
        marked: dict[str, list[str]] = {}
        for lit in ascii_lits:
            marked.setdefault(raw(lit), []).append(lit)
        # the ASCII anchors, found from every position of the lower-cased text; each hit stands for the anchors
        # (with their boundary marks) its raw form starts with
        self.finder = re.compile(trie_regex(set(marked))) if marked else None
        self.prefixes = {r: tuple(m for k in range(2, len(r) + 1) for m in marked.get(r[:k], ())) for r in marked}
        # the other anchors, by their first two characters ("" for those not starting with two non-ASCII ones)
        self.by_pair: dict[str, list[tuple[str, str]]] = {}
        for lit in sorted(anchors - ascii_lits):
            pair = raw(lit)[:2]
            self.by_pair.setdefault(pair if _NON_ASCII_RUN.fullmatch(pair) else "", []).append((lit, raw(lit)))
        # anchor -> the (pattern, alternative) it anchors; alternatives needing nothing are always tried
        self.by_anchor: dict[str, set[tuple[int, int]]] = {}
        self.always: set[tuple[int, int]] = set()
        for i, alts in enumerate(self.alts):
            for k, alt in enumerate(alts):
                if alt.needs is None:
                    self.always.add((i, k))
                for conj in alt.needs or ():
                    for lit in conj[0]:
                        self.by_anchor.setdefault(lit, set()).add((i, k))

    def _found(self, low: str, *, positions: bool) -> dict[str, list[int]]:
        """Anchor -> its positions in lower-cased `low` (with its boundary marks satisfied); without `positions`,
        the non-ASCII anchors map to no position (only whether they occur is needed)."""
        found: dict[str, list[int]] = {}
        if self.finder is not None:
            m = self.finder.search(low)
            while m is not None:  # again from the next position, not the match end: anchors may overlap
                at = m.start()
                for lit in self.prefixes[m.group()]:
                    if B not in lit or _holds(lit, low, at):
                        found.setdefault(lit, []).append(at)
                m = self.finder.search(low, at + 1)
        if self.by_pair and not low.isascii():
            pairs = {run[i:i + 2] for run in _NON_ASCII_RUN.findall(low) for i in range(len(run) - 1)} | {""}
            for pair in pairs & self.by_pair.keys():
                for lit, r in self.by_pair[pair]:
                    at = low.find(r)
                    if at >= 0 and not positions:
                        found[lit] = []
                    while at >= 0 and positions:
                        found.setdefault(lit, []).append(at)
                        at = low.find(r, at + 1)
        return found

    def matches(self, text: str) -> Iterator[tuple[int, list[tuple[int, int]]]]:
        """(pattern index, the spans its `finditer(text)` yields) for each pattern that matches, in order."""
        low = text.lower()
        if "ı" in low:  # IGNORECASE matches the dotless i with i; lower() keeps it
            low = low.replace("ı", "i")
        long = len(text) > WINDOW_MIN and len(low) == len(text)
        found = self._found(low, positions=long)
        memo: dict[frozenset[str], bool] = {}

        def present(lits: frozenset[str]) -> bool:  # a non-anchor set: raw presence anywhere in the text
            hit = memo.get(lits)
            if hit is None:
                hit = memo[lits] = any(x in low for x in raw_set(lits))
            return hit

        tried = self.always.union(*(self.by_anchor[lit] for lit in found if lit in self.by_anchor))
        by_pattern: dict[int, list[int]] = {}
        for i, k in sorted(tried):
            by_pattern.setdefault(i, []).append(k)
        for i, ks in by_pattern.items():
            alts = self.alts[i]
            ranges: list[list[tuple[int, int]] | None] = [None] * len(alts)
            for k in ks:
                alt = alts[k]
                if alt.needs is None:
                    ranges[k] = [(0, len(text))]
                    continue
                held = [conj[0] for conj in alt.needs
                        if not conj[0].isdisjoint(found) and (long or all(map(present, conj[1:])))]
                if held:
                    ranges[k] = _windows(found, held) if long else [(0, len(text))]
            if any(r is not None for r in ranges):
                spans = _merge(alts, ranges, text)
                if spans:
                    yield i, spans


def _windows(found: dict[str, list[int]], anchors: list[frozenset[str]]) -> list[tuple[int, int]]:
    """Merged ranges around every occurrence of the anchors."""
    spans = sorted((max(0, at - BEFORE), at + len(lit) + AFTER)
                   for lit in set().union(*anchors) & found.keys() for at in found[lit])
    merged: list[tuple[int, int]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _next(alt: _Alt, text: str, ranges: list[tuple[int, int]], pos: int) -> tuple[int, int] | None:
    for a, b in ranges:
        if b > pos:
            span = alt.search(text, max(a, pos), min(b, len(text)))
            if span is not None:
                return span
    return None


def _merge(alts: list[_Alt], ranges: list[list[tuple[int, int]] | None], text: str) -> list[tuple[int, int]]:
    """The alternation's matches from its alternatives' (leftmost first, then the earlier alternative)."""
    live = [(alt, r) for alt, r in zip(alts, ranges, strict=True) if r is not None]
    nxt = [_next(alt, text, r, 0) for alt, r in live]
    out: list[tuple[int, int]] = []
    while True:
        best = min((h for h in nxt if h is not None), key=lambda h: h[0], default=None)
        if best is None:
            return out
        out.append(best)
        pos = best[1] if best[1] > best[0] else best[0] + 1
        for k, hit in enumerate(nxt):
            if hit is not None and hit[0] < pos:
                nxt[k] = _next(live[k][0], text, live[k][1], pos)
