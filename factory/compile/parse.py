"""A role spec (markdown) as sentences with their line, section, lead-in label and language.

Markdown is read line by line: headings set the section, list markers and blank lines start new blocks,
continuation lines join their block, fenced code and HTML comments are skipped. Inline markup is removed
(`**`, `*`, links), backticked identifiers are remembered (they name tools or fields). A block that opens
with a short label (`Passengers: ...`, `付款：...`) keeps it as context for its sentences. Sentences split at
`.`, `!`, `?` (English) and `。！？` (Chinese); a sentence's line is the line where it starts.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass
from typing import Literal

Lang = Literal["en", "zh"]

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)]|[（(]?[一二三四五六七八九十\d]{1,3}[）)、])\s+"
                     r"|^\s*[（(]?[一二三四五六七八九十]{1,3}[）)、]")
_RULE_LINE = re.compile(r"^\s*(?:[-*_]\s*){3,}$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{3,}")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_CODE = re.compile(r"`([^`]+)`")
_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[_.][A-Za-z0-9]+)+$")
_CJK = re.compile(r"[\u3400-\u9fff]")
_LABEL_EN = re.compile(r"^([A-Z][A-Za-z/&' -]{1,40}):\s+(?=\S)")
_LABEL_ZH = re.compile(r"^([\u4e00-\u9fffA-Za-z /（）()]{1,12})[：:]\s*(?=\S)")
_NOT_LABEL = re.compile(r"\b(?:must|should|never|not|if|only|before|when|can)\b|必须|不得|不要|如果|只有|之前|禁止")
# A sentence ends after . ! ? followed by space and an opening character, or after 。！？ (and ; ；? no: see
# patterns, which split clauses). Abbreviations that end with a dot do not end a sentence.
_EN_END = re.compile(r"(?<=[.!?])[\"”’')\]]*\s+(?=[A-Z0-9\"“'(\[])")
_ZH_END = re.compile(r"(?<=[。！？!?])[”’」』)）]*\s*")
_ABBREV = ("e.g.", "i.e.", "etc.", "vs.", "Mr.", "Ms.", "Dr.", "No.", "approx.", "cf.")


@dataclass(frozen=True)
class Sentence:
    """One sentence of the spec, cleaned of markdown."""

    text: str
    """The sentence without markdown and without its block's lead-in label."""
    line: int
    """1-based line of the spec where the sentence starts."""
    section: str
    """Title of the nearest heading above it ('' before any heading)."""
    label: str
    """The lead-in label of its block (`Passengers` in `Passengers: Each ...`), or ''."""
    lang: Lang
    """`zh` when the sentence is mostly Chinese, else `en`."""
    code_terms: tuple[str, ...]
    """Identifiers the spec wrote in backticks inside this sentence."""
    block: int = 0
    """Index of its block (a paragraph or list item): sentences of one block may refer to each other."""


@dataclass
class _Block:
    text: str
    starts: list[int]
    lines: list[int]
    section: str
    code: list[tuple[int, int, str]]  # (start, end, identifier) in block text


def language(text: str) -> Lang:
    """`zh` when a tenth or more of the letters are CJK ideographs."""
    cjk = len(_CJK.findall(text))
    letters = sum(1 for ch in text if ch.isalpha())
    return "zh" if letters and cjk * 10 >= letters else "en"


def _inline(text: str) -> tuple[str, list[tuple[int, int, str]]]:
    """Markup removed; backticked spans kept as text and returned with their position."""
    text = _LINK.sub(r"\1", text)
    text = text.replace("**", "").replace("__", "")
    text = re.sub(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])", r"\1", text)
    out: list[str] = []
    code: list[tuple[int, int, str]] = []
    pos = 0
    length = 0
    for m in _CODE.finditer(text):
        before = text[pos:m.start()]
        out.append(before)
        length += len(before)
        inner = m.group(1).strip()
        if _IDENT.match(inner):
            code.append((length, length + len(inner), inner))
        out.append(inner)
        length += len(inner)
        pos = m.end()
    out.append(text[pos:])
    return "".join(out), code


def _blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    current: _Block | None = None
    section = ""
    fenced = False
    in_comment = False
    for number, raw in enumerate(text.splitlines(), start=1):
        line = unicodedata.normalize("NFC", raw).rstrip()
        if _FENCE.match(line):
            fenced = not fenced
            current = None
            continue
        if fenced:
            continue
        if in_comment:
            if "-->" not in line:
                continue
            in_comment, line = False, line.split("-->", 1)[1]
        line = re.sub(r"<!--.*?-->", "", line)
        if "<!--" in line:
            in_comment, line = True, line.split("<!--", 1)[0]
        heading = _HEADING.match(line)
        if heading:
            section, _ = _inline(heading.group(2))
            current = None
            continue
        if not line.strip() or _RULE_LINE.match(line) or _TABLE_SEP.match(line):
            current = None
            continue
        bullet = _BULLET.match(line)
        body = line[bullet.end():] if bullet else line.strip()
        if line.lstrip().startswith(">"):
            body = line.lstrip().lstrip(">").strip()
        if line.lstrip().startswith("|"):
            body = " ".join(c.strip() for c in line.strip().strip("|").split("|") if c.strip())
            current = None
        cleaned, code = _inline(body.strip())
        if not cleaned:
            continue
        if current is None or bullet is not None:
            current = _Block(text="", starts=[], lines=[], section=section, code=[])
            blocks.append(current)
        elif current.text:
            joiner = "" if _CJK.match(cleaned[:1]) and _CJK.match(current.text[-1:]) else " "
            current.text += joiner
        offset = len(current.text)
        current.starts.append(offset)
        current.lines.append(number)
        current.code += [(offset + a, offset + b, ident) for a, b, ident in code]
        current.text += cleaned
    return blocks


def _split(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of a block."""
    bounds: list[int] = [0]
    for rx in (_EN_END, _ZH_END):
        for m in rx.finditer(text):
            head = text[:m.start()]
            if rx is _EN_END and any(head.endswith(a) for a in _ABBREV):
                continue
            if m.end() < len(text):
                bounds.append(m.end())
    bounds = sorted(set(bounds))
    spans = []
    for i, start in enumerate(bounds):
        end = bounds[i + 1] if i + 1 < len(bounds) else len(text)
        seg = text[start:end]
        lead = len(seg) - len(seg.lstrip())
        if seg.strip():
            spans.append((start + lead, start + len(seg.rstrip())))
    return spans


def sentences(text: str) -> list[Sentence]:
    """The sentences of a markdown spec, in order."""
    out: list[Sentence] = []
    for index, block in enumerate(_blocks(text)):
        label = ""
        body_start = 0
        m = _LABEL_ZH.match(block.text) if language(block.text) == "zh" else _LABEL_EN.match(block.text)
        if m and not _NOT_LABEL.search(m.group(1)) and len(m.group(1).split()) <= 5:
            label, body_start = m.group(1).strip(), m.end()
        for start, end in _split(block.text):
            start = max(start, body_start)
            sentence = block.text[start:end].strip()
            if not sentence:
                continue
            line = block.lines[bisect_right(block.starts, start) - 1]
            code = tuple(dict.fromkeys(ident for a, b, ident in block.code if start <= a and b <= end))
            out.append(Sentence(text=sentence, line=line, section=block.section, label=label,
                                lang=language(sentence), code_terms=code, block=index))
    return out


def code_identifiers(text: str) -> list[tuple[str, str]]:
    """(identifier, its line and the heading above it) for every backticked identifier of the spec, in order."""
    out: list[tuple[str, str]] = []
    heading = ""
    for line in text.splitlines():
        m = _HEADING.match(line)
        if m:
            heading = m.group(2)
            continue
        for m in _CODE.finditer(line):
            inner = m.group(1).strip()
            if _IDENT.match(inner):
                out.append((inner, f"{heading}\n{line}"))
    return out
