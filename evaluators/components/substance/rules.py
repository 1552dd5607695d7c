"""Substance's rules: when each checklist item applies, and the one cheap case a rule can decide.

Applicability is decided here, not by a model, so the denominator of every pass rate is checkable: a delivered
turn (the delivery state `execution.delivered` uses), a request stating a constraint, a turn with retrieved or
tool-supplied context, a request with several parts. The constraint and multi-part cues are generic English and
Chinese phrasing (lists, several questions, "and explain", "以及", "不超过", "用表格"), matched on normalized
text; they are versioned through `RULES_DIGEST`, which enters every definition's description and so its digest.

The only judgment a rule makes: an answer that ends in one of the pack's truncation markers does not close
properly (C2 = no). Everything else abstains for the model tiers.
"""

from __future__ import annotations

import re

from agent_factory.adapters.model import EvidencePointer, Turn
from agent_factory.digest import stable_id
from agent_factory.evaluators.components.substance.definitions import (
    APPLIES_CONSTRAINTS,
    APPLIES_CONTEXT,
    APPLIES_DELIVERED,
    APPLIES_MULTIPART,
    C2,
)
from agent_factory.evaluators.core.registry import RuleAnswer, RuleContext, rule
from agent_factory.evaluators.provenance import normalize as _norm
from agent_factory.knowledge_packs import KnowledgePack

_NUM = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|a\s+few)"
_ZH_NUM = r"[\d一二两三四五六七八九十百]+"
CONSTRAINT_PATTERNS: tuple[str, ...] = (
    # English: limits, formats, inclusions and exclusions.
    rf"\b(?:at\s+most|no\s+more\s+than|not\s+more\s+than|up\s+to|at\s+least|maximum|max\.?|under|within|exactly)"
    rf"\s+{_NUM}\b",
    rf"\b{_NUM}\s+(?:words?|sentences?|paragraphs?|bullets?|bullet\s+points?|points?|lines?|pages?|items?|rows?|"
    r"charts?|slides?|decimals?)\b",
    r"\b(?:in|as|into|with)\s+(?:a\s+|one\s+)?(?:table|chart|graph|list|bullet\s+points?|bullets|json|csv|markdown|"
    r"english|chinese|plain\s+text)\b",
    r"\bonly\b",
    r"\b(?:do\s+not|don't|dont|without|exclude|excluding|except|never)\s+\w+",
    r"\b(?:must|make\s+sure|be\s+sure\s+to|state\s+your\s+assumptions|keep\s+it\s+(?:short|brief))\b",
    # Chinese.
    rf"(?:不超过|不要超过|不多于|最多|至多|至少|限制在|控制在){_ZH_NUM}?",
    rf"(?<!第){_ZH_NUM}\s*(?:字|句话?|段|条|点|页|行|个要点)(?:以内|之内|左右)?",
    r"(?:以内|之内)",
    r"(?:用|以|做成|整理成|画成|输出成?|附)(?:一个|一张)?(?:表格|图表|图|列表|清单|要点|JSON|Markdown|英文|中文)",
    r"(?:只|仅|不要|不需要|不包括|排除|除了|必须|务必|一定要)",
)
"""A request matching any of these states a constraint (I2 applies)."""

MULTIPART_PATTERNS: tuple[str, ...] = (
    # Two or more questions.
    r"\?[^?]*\S[^?]*\?",
    # An enumeration: two list markers.
    r"(?:^|[\s,;:])(?:\d{1,2}[.)、](?!\d)|\(\d{1,2}\)|[①-⑩]|[一二三四五六七八九十][、])[\s\S]*?"
    r"(?:^|[\s,;:])(?:\d{1,2}[.)、](?!\d)|\(\d{1,2}\)|[①-⑩]|[一二三四五六七八九十][、])",
    # English: a second directive joined to the first.
    r"\b(?:and|then|also|plus|as\s+well\s+as)\s+(?:also\s+|then\s+)?(?:explain|list|show|give|flag|state|compare|"
    r"tell|find|identify|describe|summari[sz]e|recommend|suggest|include|add|highlight|mark|estimate|forecast|"
    r"calculate|plot|draw|rank|break|output|write|propose|check)\b",
    r"\b(?:additionally|in\s+addition|as\s+well\s+as|also\s*,)\b",
    # Chinese.
    r"(?:并且|以及|同时|另外|此外|然后|还要|还需要|顺便)",
    r"(?:(?<!合)并|再|,)(?:给出|说明|列出|标出|找出|分析|解释|输出|比较|对比|预测|总结|推荐|建议|画|写)",
)
"""A request matching any of these asks for several things (C1 applies)."""

RULES_DIGEST = stable_id(CONSTRAINT_PATTERNS, MULTIPART_PATTERNS, _norm.VERSION, prefix="r")
"""Digest of the applicability cues and the normalization they match on."""

_CONSTRAINT = re.compile("|".join(f"(?:{p})" for p in CONSTRAINT_PATTERNS), re.IGNORECASE)
_MULTIPART = re.compile("|".join(f"(?:{p})" for p in MULTIPART_PATTERNS), re.IGNORECASE)


def is_delivered(turn: Turn) -> bool:
    """The answer reached the user (the delivery state `execution.delivered` reads)."""
    return turn.delivery == "delivered"


def _not_delivered(turn: Turn) -> RuleAnswer:
    return RuleAnswer("no", reason=f"not a delivered answer ({turn.delivery})")


def _cue(rx: re.Pattern[str], turn: Turn) -> EvidencePointer | None:
    if not turn.request:
        return None
    norm = _norm.normalize(turn.request)
    m = rx.search(norm.text)
    if m is None or m.end() <= m.start():
        return None
    start, end = norm.original_range(m.start(), m.end())
    return EvidencePointer(unit_id=turn.id, field="request", start=start, end=end)


def states_constraint(turn: Turn) -> EvidencePointer | None:
    """Where the request states a constraint, or None."""
    return _cue(_CONSTRAINT, turn)


def has_several_parts(turn: Turn) -> EvidencePointer | None:
    """Where the request shows it asks for several things, or None."""
    return _cue(_MULTIPART, turn)


def context_span(turn: Turn) -> EvidencePointer | None:
    """The output of the first retrieval span, or of the first tool span with an output, or None."""
    for s in turn.spans:
        if s.kind == "retrieval" or (s.kind == "tool" and s.output):
            return EvidencePointer(unit_id=s.id, field="output", start=0, end=len(s.output or ""))
    return None


@rule(APPLIES_DELIVERED)
def applies_delivered(turn: Turn, ctx: RuleContext) -> RuleAnswer:
    if not is_delivered(turn):
        return _not_delivered(turn)
    return RuleAnswer("yes", reason="a delivered answer")


@rule(APPLIES_CONSTRAINTS)
def applies_constraints(turn: Turn, ctx: RuleContext) -> RuleAnswer:
    if not is_delivered(turn):
        return _not_delivered(turn)
    cue = states_constraint(turn)
    if cue is None:
        return RuleAnswer("no", reason="the request states no constraint")
    return RuleAnswer("yes", evidence=(cue,), reason="the request states a constraint")


@rule(APPLIES_CONTEXT)
def applies_context(turn: Turn, ctx: RuleContext) -> RuleAnswer:
    if not is_delivered(turn):
        return _not_delivered(turn)
    span = context_span(turn)
    if span is None:
        return RuleAnswer("no", reason="no retrieval step or tool result in the turn")
    return RuleAnswer("yes", evidence=(span,), reason="the turn retrieved or was given context")


@rule(APPLIES_MULTIPART)
def applies_multipart(turn: Turn, ctx: RuleContext) -> RuleAnswer:
    if not is_delivered(turn):
        return _not_delivered(turn)
    cue = has_several_parts(turn)
    if cue is None:
        return RuleAnswer("no", reason="the request asks for one thing")
    return RuleAnswer("yes", evidence=(cue,), reason="the request has several parts")


def truncation_at_end(text: str | None, *, pack: KnowledgePack, unit_id: str, field: str) -> EvidencePointer | None:
    """Where `text` ends in one of the pack's truncation markers (trailing whitespace ignored), or None."""
    if not text:
        return None
    norm = _norm.normalize(text)
    body = norm.text.rstrip()
    for marker in pack.truncation_markers():
        m = _norm.normalize(marker).text
        if m and len(body) >= len(m) and body[-len(m):].lower() == m.lower():
            start, end = norm.original_range(len(body) - len(m), len(body))
            return EvidencePointer(unit_id=unit_id, field=field, start=start, end=end)
    return None


@rule(C2)
def closes_properly(turn: Turn, ctx: RuleContext) -> RuleAnswer:
    cut = truncation_at_end(turn.answer, pack=ctx.pack, unit_id=turn.id, field="answer")
    if cut is not None:
        return RuleAnswer("no", evidence=(cut,), reason="the answer ends in a truncation marker")
    return RuleAnswer(None, reason="whether the answer closes properly needs a model")
