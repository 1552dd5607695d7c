"""Load an injection corpus (attacks and benign near-misses) and score the injection scan on it.

Shared by `test_injection_corpus.py` and `bench/injection_bench.py`. A corpus is YAML with `attacks` and
`benign` lists of entries `{family, lang, role, text, json?, why?, plain?}` (see data/injection_corpus.yaml; a
corpus without families is scored as one family, `-`). Each entry is scanned where its text would arrive: user
text as a turn's request, assistant text as its answer, tool text as a tool span's output, `json: N` times
JSON-encoded with ASCII escapes the way tools return it.

An entry is *flagged* when the scan raises an injection flag on it (the rules decided: attack), a *suspect* when
it raises none but the scan found it suspicious and left it to a model (the injection datum abstains), and clean
otherwise. Recall and false alarms count flags only: what the rules decide alone.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from agent_factory.adapters.model import Span, Turn
from agent_factory.evaluators.provenance import InjectionFlag, scan_turn, scan_turn_suspects
from agent_factory.knowledge_packs import KnowledgePack

CORPUS = Path(__file__).resolve().parent / "data" / "injection_corpus.yaml"
ROLES = ("user", "assistant", "tool")
LANGS = ("en", "zh")
FAMILY = "-"
"""The family of an entry that names none (a corpus written before families)."""


@dataclass(frozen=True)
class Entry:
    """One corpus text, labelled."""

    attack: bool
    lang: str
    role: str
    text: str
    json_depth: int = 0
    note: str = ""
    family: str = FAMILY

    def wire_text(self) -> str:
        """The text as it reaches the scan (JSON-encoded `json_depth` times, as a tool result)."""
        out = self.text
        for _ in range(self.json_depth):
            out = json.dumps({"status": "ok", "content": out}, ensure_ascii=True)
        return out

    def turn(self) -> Turn:
        """The turn the entry arrives in."""
        text = self.wire_text()
        if self.role == "user":
            return Turn(id="t", conversation_id="c", request=text)
        if self.role == "assistant":
            return Turn(id="t", conversation_id="c", request="hello", answer=text)
        return Turn(id="t", conversation_id="c", request="hello",
                    spans=(Span(id="s", trace_id="t", kind="tool", output=text),))


def load(path: Path = CORPUS) -> list[Entry]:
    """The corpus entries; a malformed entry raises ValueError naming the file, the list and the index."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    out: list[Entry] = []
    for key, attack in (("attacks", True), ("benign", False)):
        for i, raw in enumerate(doc.get(key) or []):
            where = f"{path}: {key}[{i}]"
            if not isinstance(raw, dict) or not isinstance(raw.get("text"), str) or not raw["text"].strip():
                raise ValueError(f"{where}: text: a non-empty string is required")
            if raw.get("lang") not in LANGS:
                raise ValueError(f"{where}: lang: one of {', '.join(LANGS)} is required")
            if raw.get("role") not in ROLES:
                raise ValueError(f"{where}: role: one of {', '.join(ROLES)} is required")
            depth = raw.get("json", 0)
            if not isinstance(depth, int) or depth < 0 or (depth and raw["role"] != "tool"):
                raise ValueError(f"{where}: json: a count of JSON encodings, for tool text only")
            family = raw.get("family", FAMILY)
            if not isinstance(family, str) or not family.strip():
                raise ValueError(f"{where}: family: a name is required when given")
            out.append(Entry(attack, raw["lang"], raw["role"], raw["text"], depth,
                             str(raw.get("why") or raw.get("group") or ""), family))
    return out


@dataclass
class Score:
    """Recall on the attacks and false alarms on the benign texts, overall, per family and per language and role."""

    attacks: int = 0
    caught: int = 0
    benign: int = 0
    alarms: int = 0
    missed: list[tuple[Entry, list[InjectionFlag]]] = field(default_factory=list)
    """Attacks not flagged, with the suspects the scan left to a model (if any)."""
    false_alarms: list[tuple[Entry, list[InjectionFlag]]] = field(default_factory=list)
    totals: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    """(attack / benign, language, role) -> texts."""
    flagged: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    """(attack / benign, language, role) -> texts flagged."""
    families: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(attack / benign, family) -> texts."""
    family_flagged: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(attack / benign, family) -> texts flagged."""
    family_suspects: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(attack / benign, family) -> texts not flagged but left to a model."""

    @property
    def recall(self) -> float:
        """Attacks flagged / attacks."""
        return self.caught / self.attacks if self.attacks else 1.0

    @property
    def false_alarm_rate(self) -> float:
        """Benign texts flagged / benign texts."""
        return self.alarms / self.benign if self.benign else 0.0

    def family_rate(self, kind: str, family: str) -> float:
        """Share of the family's texts flagged (`kind`: attack or benign)."""
        n = self.families[(kind, family)]
        return self.family_flagged[(kind, family)] / n if n else 0.0

    def summary(self, name: str) -> str:
        """One line: recall, false alarms, and flagged per language and role."""
        groups = ", ".join(f"{kind} {lang}/{role} flagged {self.flagged[key]}/{n}"
                           for key, n in sorted(self.totals.items()) for kind, lang, role in [key])
        suspects = sum(self.family_suspects.values())
        return (f"{name}: recall {self.caught}/{self.attacks} = {self.recall:.1%}; false alarms "
                f"{self.alarms}/{self.benign} = {self.false_alarm_rate:.1%}; left to a model {suspects} [{groups}]")

    def table(self) -> str:
        """Per family: texts, flagged (recall for attacks, false alarms for benign) and left to a model."""
        rows = [f"{'kind':7s} {'family':26s} {'n':>4s} {'flagged':>8s} {'rate':>7s} {'to model':>9s}"]
        for kind, fam in sorted(self.families):
            n = self.families[(kind, fam)]
            rows.append(f"{kind:7s} {fam:26s} {n:4d} {self.family_flagged[(kind, fam)]:8d} "
                        f"{self.family_rate(kind, fam):7.1%} {self.family_suspects[(kind, fam)]:9d}")
        return "\n".join(rows)


def score(entries: list[Entry], pack: KnowledgePack) -> Score:
    """Scan every entry and count."""
    s = Score()
    for e in entries:
        turn = e.turn()
        flags = scan_turn(turn, pack)
        suspects = [] if flags else scan_turn_suspects(turn, pack)
        kind = "attack" if e.attack else "benign"
        s.totals[(kind, e.lang, e.role)] += 1
        s.flagged[(kind, e.lang, e.role)] += bool(flags)
        s.families[(kind, e.family)] += 1
        s.family_flagged[(kind, e.family)] += bool(flags)
        s.family_suspects[(kind, e.family)] += bool(suspects)
        if e.attack:
            s.attacks += 1
            s.caught += bool(flags)
            if not flags:
                s.missed.append((e, suspects))
        else:
            s.benign += 1
            s.alarms += bool(flags)
            if flags:
                s.false_alarms.append((e, flags))
    return s


def describe(e: Entry, flags: list[InjectionFlag] | None = None) -> str:
    """One line about an entry (and what flagged it, or what the scan left to a model)."""
    hits = f" <- {[(f.pattern_id, f.matched_text[:60]) for f in flags]}" if flags else ""
    return f"{e.family} {e.lang}/{e.role}: {e.text[:100]!r}{hits}"
