"""Trigger detectors: from a clause's condition text to a rule-checkable `ClauseCondition`.

What a rule can see in a unit is tool calls (by name), text (request, answer, span input / output) and
attributes. So the compiler looks in the trigger text, in this order, for: the agent's mode (`in concise mode`,
`简洁模式下` -> `agent.mode == simple`, see `mode_condition`); tool names the spec spells out; "actions that change
the database" (every write tool of the catalogue); actions named by verb and object that match catalogue tools
(`modifying flights` -> `update_reservation_flights`); "taking action on orders" (the write tools on orders);
"a tool call" (any tool); a handoff to a human; a tool whose verb and part of its object the text names (a weak
match the compiler narrows to the section's tools); a file upload (upload attributes); the operating company (the
pack's disclosure lexicon); quoted phrases (a regex); "replying to the user" (a non-empty answer). A clause whose
trigger names none of these falls back to its block label or section heading ("## Cancel flight" ->
`cancel_reservation`; a sentence of a section without a label: the heading's tools and those its labelled
parts name), and finally to `always`: the unit is in scope whenever it holds any text, and for a conditional
clause the condition is left to the model question.

The tool catalogue is the tools the spec names in backticks on lines that speak of tools, plus the tools the
base pack's clauses name, plus any the caller gives.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from agent_factory.evaluators.provenance.normalize import normalize
from agent_factory.factory.compile.parse import Sentence
from agent_factory.factory.compile.words import EN_MODE, ZH_MODE, mode_value
from agent_factory.knowledge_packs.model import ClauseCondition, ConditionField, LexiconCategory

DetectorHow = Literal["tool", "any_tool", "regex", "lexicon", "attribute", "answer", "context", "always"]
"""How a trigger is detected: named tools, any tool call, a regex, a pack lexicon, an attribute, any answer,
the tools of the clause's section, or always."""

WRITE_VERBS = frozenset({
    "book", "update", "cancel", "send", "create", "delete", "remove", "add", "modify", "change", "edit", "insert",
    "write", "set", "issue", "refund", "pay", "purchase", "exchange", "upgrade", "submit", "grant", "approve",
    "reset", "assign", "register", "upload", "post", "put", "patch", "transfer_funds", "return", "place", "schedule",
    "reschedule", "revoke", "activate", "deactivate", "renew", "archive", "restore", "replace", "save", "apply",
    "charge", "void", "close", "open", "enroll", "subscribe", "unsubscribe",
})
"""First words of tool names that change state (a database-changing action)."""
_FAMILIES: dict[str, tuple[str, ...]] = {
    "update": ("updat", "modif", "chang", "edit", "upgrad", "amend", "alter"),
    "book": ("book",),
    "cancel": ("cancel",),
    "send": ("send", "sent", "issu", "offer", "grant", "compensat"),
    "transfer": ("transfer", "escalat", "handoff", "hand off", "hand over"),
    "delete": ("delet", "remov"),
    "remove": ("remov", "delet"),
    "create": ("creat",),
}
for _alias in ("modify", "change", "edit"):
    _FAMILIES[_alias] = _FAMILIES["update"]
_WEAK_VERBS = frozenset({"get", "list", "search", "find", "check", "calculate", "think", "make", "do", "use", "read",
                         "fetch", "look", "query", "show", "describe"})
_STOPWORDS = frozenset("""a an the to of and or any all you your agent user users customer do not never must should
cannot can may will be is are it its their this that these those for with on in at by as if only also""".split())
_GENERIC = frozenset({"reservation", "reservations", "details", "detail", "user", "users", "all", "to", "agent",
                      "agents", "info", "information", "data", "record", "records", "by", "id", "the", "a", "of",
                      "for", "and", "item", "items"})

UPLOAD_KEYS: tuple[str, ...] = ("file.id", "file.name", "upload.id", "upload.file_id", "attachment.id", "attachments",
                                "input.files", "request_non_text_parts")
"""Attribute keys sources use to record an uploaded file on a turn or span."""
ANY_TEXT = r"\S[\s\S]*"
"""The `always` detector: any non-blank text in the unit's request or answer, matched once per text (from its
first non-blank character to its end), so the trigger cites each text it holds in and counts texts, not
characters (compiler 3's pattern, a lone non-blank class, matched every character: thousands of one-character
pointers per turn)."""
HANDOFF_REGEX = (r"\btransfer\w*\b[^.\n]{0,60}\b(?:human|live)\s+(?:agent|representative|person|staff)"
                 r"|转(?:接)?人工|人工客服")
"""A handoff to a human in the agent's reply or a tool's result."""

CONCEPTS: dict[str, re.Pattern[str]] = {
    "database": re.compile(
        r"\b(?:updat|chang|modif|writ|alter)\w*\s+(?:\w+\s+){0,3}databases?\b|\bdatabase[- ](?:changing|modifying|"
        r"writing)|\bwrite\s+(?:actions?|operations?|tools?)|\bstate[- ]changing"
        r"|(?:修改|更改|变更|写入|更新)\S{0,6}数据库|写操作", re.I),
    "tool_call": re.compile(
        r"\b(?:make|making|makes|made|send|sending)\s+(?:a\s+|one\s+|any\s+|more\s+than\s+one\s+)?tool\s+calls?\b"
        r"|\btool\s+calls?\b|\bcall(?:ing|s)?\s+(?:a|any|more\s+than\s+one)\s+tools?\b|调用(?:任何|一个|多个)?工具"
        r"|工具调用", re.I),
    "api": re.compile(r"\b(?:call\w*|us(?:e|es|ing))\s+(?:the|an|any)\s+(?:api|apis|function|functions)\b", re.I),
    "handoff": re.compile(r"\btransfer\w*\b.{0,40}\bhuman|\bhand\s*(?:off|over)\b.{0,40}\bhuman|\bescalat\w*|"
                          r"转(?:接)?人工|转给人工|人工客服", re.I),
    "reply": re.compile(r"\b(?:respond|reply|replies|answer|message|talk|writ)\w*\s+(?:back\s+)?to\s+the\s+"
                        r"(?:user|customer)|\brespond\w*\b|\breply\b|回复用户|回答用户|答复用户|回复|回答", re.I),
    "upload": re.compile(r"\bupload\w*|\battach\w*|上传|附件", re.I),
    "company": re.compile(r"\b(?:operating|parent)\s+company|\bcompany\s+(?:name|that\s+(?:operates|runs|provides))"
                          r"|\bwho\s+(?:operates|provides|runs|built|made)\s+(?:you|the\s+service)|运营公司|运营方"
                          r"|服务提供方|公司名称", re.I),
    "clarify": re.compile(r"\bclarif\w*|\bask\s+(?:the\s+(?:user|customer)\s+)?(?:which|what)\b|澄清|追问", re.I),
    "mention": re.compile(r"\b(?:mention|reveal|disclos|nam(?:e|es|ing)\b|expos|say|tell|show|print|leak|includ|"
                          r"output|display)\w*|提及|提到|透露|泄露|说出|显示|暴露|出现|包含|告诉", re.I),
    "user_side": re.compile(r"\b(?:user|customer)s?\s+(?:\w+\s+){0,2}(?:asks?|says?|writes?|types?|mentions?|"
                            r"requests?|complains?|sends?|provides?)\b|用户(?:主动)?(?:询问|提到|说|要求|输入|提问|问)",
                            re.I),
    "state": re.compile(r"\bstatus\b|\bis\s+(?:\w+\s+)?(?:\"|“)|状态", re.I),
    "action": re.compile(r"\b(?:tak(?:e|es|ing|en)|perform\w*)\s+(?:(?:an?|any|consequential|further|such)\s+)*"
                         r"actions?\b", re.I),
    "definite": re.compile(r"\b(?:the|this|that|such)\s+(?:tool\s+call|call|action|operation|tool|step)s?\b"
                           r"(?!\s+(?:that|which|to|of|on|for)\b)|该操作|此操作|这个操作|这一操作|该工具", re.I),
}
"""Key terms the detectors and checks recognise, en and zh."""
_QUOTED = re.compile(r'"([^"\n]{1,80})"|“([^”\n]{1,80})”|「([^」\n]{1,80})」|『([^』\n]{1,80})』')
_SNAKE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
_TOOL_LINE = re.compile(r"\btools?\b|\bcall|\bapi\b|\bfunctions?\b|工具|调用|接口", re.I)


@dataclass(frozen=True)
class Vocabulary:
    """What the detectors may name: the tool catalogue, the pack's lexicon categories that have patterns, the
    agent's modes, and the labels each section's blocks open with."""

    tools: tuple[str, ...] = ()
    """Tool names, in first-seen order."""
    lexicons: frozenset[str] = field(default_factory=frozenset)
    """Lexicon categories of the base pack with at least one pattern (a condition may match them)."""
    modes: tuple[str, ...] = ()
    """Mode names the base pack knows (its latency baselines): what `Turn.mode` holds."""
    mode_aliases: dict[str, str] = field(default_factory=dict)
    """Mode word (casefolded) -> recorded value, where the spec names both (`简洁模式（simple）`)."""
    section_labels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Section heading -> the labels of its blocks (`Change flights`, `Change baggage and insurance`)."""


@dataclass(frozen=True)
class Detection:
    """A condition found in a text, how, and a note for reviewers."""

    condition: ClauseCondition
    how: DetectorHow
    note: str
    partial: bool = False
    """A weak tool match (the verb and part of the object): the compiler narrows it to the section's tools."""


def catalogue(spec_identifiers: Iterable[tuple[str, str]], extra: Iterable[str]) -> tuple[str, ...]:
    """Tool names: backticked snake_case identifiers on lines (or under headings) that speak of tools, then
    `extra`, deduplicated."""
    names = [ident for ident, where in spec_identifiers if "." not in ident and _TOOL_LINE.search(where)]
    return tuple(dict.fromkeys([*names, *extra]))


def _singular(word: str) -> str:
    return word[:-1] if word.endswith("s") and not word.endswith("ss") and len(word) > 3 else word


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


def _has(words: list[str], joined: str, stem: str) -> bool:
    return stem in joined if " " in stem else any(w.startswith(stem) for w in words)


def _verb_named(verb: str, words: list[str], joined: str, head: str | None) -> bool:
    stems = _FAMILIES.get(verb, (verb,))
    if head is not None:
        return any(head.startswith(stem) for stem in stems if " " not in stem)
    return any(_has(words, joined, stem) for stem in stems)


def tools_by_terms(text: str, vocab: Vocabulary, *, verbs_only: bool = False, head: str | None = None,
                   partial: bool = False) -> tuple[str, ...]:
    """Catalogue tools whose verb (and, unless `verbs_only`, every specific object word) the text names.

    `head`: only tools whose verb is that word's (the verb of the clause, not a noun like "after booking").
    `partial`: when no tool matches fully, the tools sharing most object words with the text (at least one)."""
    words = _words(text)
    joined = " ".join(words)
    out: list[str] = []
    scored: list[tuple[int, str]] = []
    for tool in vocab.tools:
        toks = tool.lower().split("_")
        verb, objects = toks[0], [_singular(t) for t in toks[1:] if t not in _GENERIC]
        if verb in _WEAK_VERBS or not _verb_named(verb, words, joined, head):
            continue
        if verbs_only or all(_has(words, joined, o) for o in objects):
            out.append(tool)
        elif partial:
            overlap = sum(1 for t in toks[1:] if _has(words, joined, _singular(t)))
            if overlap:
                scored.append((overlap, tool))
    if out:
        return _siblings(_most_specific(out, words, joined), words, joined, vocab)
    if not scored:
        return ()
    best = max(n for n, _ in scored)
    return tuple(t for n, t in scored if n == best)


def _most_specific(tools: list[str], words: list[str], joined: str) -> tuple[str, ...]:
    """Drop a tool whose named objects another tool of the same verb names and more (`modify_user_address` when
    the text names a pending order's address, which `modify_pending_order_address` fits better)."""
    named = {t: {o for o in t.lower().split("_")[1:] if _has(words, joined, _singular(o))} for t in tools}
    return tuple(t for t in tools if not any(
        o != t and o.split("_")[0] == t.split("_")[0] and named[o] > named[t] for o in tools))


def _siblings(found: tuple[str, ...], words: list[str], joined: str, vocab: Vocabulary) -> tuple[str, ...]:
    """A text naming `modify pending order` matches `modify_pending_order_items` only because `items` is too
    generic to require; it names its siblings `modify_pending_order_address` / `_payment` just as much."""
    out = list(found)
    for tool in found:
        toks = tool.lower().split("_")
        if len(toks) < 3 or toks[-1] not in _GENERIC or _has(words, joined, _singular(toks[-1])):
            continue
        for other in vocab.tools:
            rest = other.lower().split("_")
            if rest[:-1] == toks[:-1] and other not in out and not _has(words, joined, _singular(rest[-1])):
                out.append(other)
    return tuple(out)


def _bare(text: str) -> bool:
    """A verb with no object words ("Cancel", "Do not compensate")."""
    content = [w for w in _words(text) if w not in _STOPWORDS]
    return len(content) <= 1


def action_tools(text: str, vocab: Vocabulary, *, head: str | None = None) -> tuple[str, ...]:
    """Tools an action names: fully by verb and object, else partly, else (a bare verb) by its verb alone."""
    if not text.strip():
        return ()
    return (tools_by_terms(text, vocab, head=head) or tools_by_terms(text, vocab, head=head, partial=True)
            or (tools_by_terms(text, vocab, head=head, verbs_only=True) if _bare(text) else ()))


def named_tools(text: str, sentence: Sentence, vocab: Vocabulary) -> tuple[str, ...]:
    """Tools the text spells out: catalogue names, or identifiers the spec wrote in backticks."""
    found = [n for n in _SNAKE.findall(text) if n in vocab.tools or n in sentence.code_terms]
    return tuple(dict.fromkeys(found))


def write_tools(vocab: Vocabulary) -> tuple[str, ...]:
    """Catalogue tools that change state."""
    return tuple(t for t in vocab.tools if t.split("_")[0].lower() in WRITE_VERBS)


def quoted(text: str) -> list[str]:
    """Phrases the text quotes ("...", “...”, 「...」, 『...』)."""
    return [next(g for g in m.groups() if g) for m in _QUOTED.finditer(text)]


def phrase_regex(phrases: Iterable[str]) -> str | None:
    """One case-insensitive regex alternating the phrases, as pack patterns match them (normalized text)."""
    parts = []
    for p in phrases:
        norm = normalize(p.strip()).text
        if not norm:
            continue
        body = r"\s+".join(re.escape(w) for w in norm.split())
        if re.match(r"\w", norm[0], re.ASCII):
            body = r"\b" + body
        if re.match(r"\w", norm[-1], re.ASCII):
            body += r"\b"
        parts.append(body)
    parts = list(dict.fromkeys(parts))
    return "|".join(parts) if parts else None


def _fields(text: str) -> tuple[ConditionField, ...]:
    if CONCEPTS["user_side"].search(text):
        return ("request",)
    if CONCEPTS["state"].search(text):
        return ("answer", "spans.output")
    return ("answer",)


def tool_condition(tools: Iterable[str]) -> ClauseCondition:
    """A condition that holds when the unit calls one of `tools`."""
    return ClauseCondition(tool_names=tuple(tools))


def always() -> Detection:
    """The detection of a clause that applies to every unit with a request or an answer."""
    return Detection(ClauseCondition(regex=ANY_TEXT, fields=("request", "answer")), "always",
                     "always: every unit with a request or an answer")


def mode_condition(text: str, vocab: Vocabulary) -> Detection | None:
    """`in concise mode` / `简洁模式下` -> the agent's mode equals the value the pack (or the spec) records."""
    m = EN_MODE.search(text)
    word = (m.group("m") or m.group("v")) if m else None
    if word is not None and word.lower() in ("a", "an", "any", "this", "that", "which", "what", "each", "every"):
        word = None
    if word is None:
        zh = ZH_MODE.search(text)
        word = zh.group("m") if zh else None
    if word is None:
        return None
    value = mode_value(word, modes=vocab.modes, aliases=vocab.mode_aliases)
    shown = value if isinstance(value, str) else " or ".join(value)
    return Detection(ClauseCondition(attribute_equals={"agent.mode": value}), "attribute",
                     f"the agent is in {word} mode (agent.mode == {shown})")


def _order_tools(text: str, vocab: Vocabulary) -> tuple[str, ...]:
    """"Take action on orders": the write tools sharing most words with the text, else every write tool."""
    words, tools = _words(text), write_tools(vocab)
    joined = " ".join(words)
    scored = [(sum(1 for t in tool.lower().split("_")[1:] if _has(words, joined, _singular(t))), tool)
              for tool in tools]
    best = max((n for n, _ in scored), default=0)
    return tuple(t for n, t in scored if n == best) if best else tools


def find_condition(text: str, sentence: Sentence, vocab: Vocabulary, *, head: str | None = None) -> Detection | None:
    """A rule-checkable condition for what `text` describes, or None (see the module docstring for the order).

    `head`: the text is an action whose verb is this word; only tools of that verb count."""
    if not text.strip():
        return None
    names = named_tools(text, sentence, vocab)
    if names and not CONCEPTS["mention"].search(text):
        return Detection(tool_condition(names), "tool", f"a call to {', '.join(names)}")
    if names:
        mention = r"\b(?:" + "|".join(re.escape(n) for n in names) + r")\b"
        return Detection(ClauseCondition(regex=mention, fields=("answer",)), "regex",
                         f"the answer names {', '.join(names)}")
    if CONCEPTS["database"].search(text) and write_tools(vocab):
        tools = write_tools(vocab)
        return Detection(tool_condition(tools), "tool", f"a database-changing call ({', '.join(tools)})")
    if CONCEPTS["tool_call"].search(text):
        return Detection(tool_condition(("*",)), "any_tool", "any tool call")
    if CONCEPTS["handoff"].search(text):
        tools = tuple(t for t in vocab.tools if t.split("_")[0] == "transfer")
        cond = ClauseCondition(tool_names=tools, regex=HANDOFF_REGEX, fields=("answer", "spans.output"))
        return Detection(cond, "tool" if tools else "regex",
                         "a handoff to a human" + (f" ({', '.join(tools)} or the reply says so)" if tools else ""))
    terms = tools_by_terms(text, vocab, head=head)
    if terms:
        return Detection(tool_condition(terms), "tool", f"a call to {', '.join(terms)} (named by its action)")
    if CONCEPTS["action"].search(text) and head is None and write_tools(vocab):
        tools = _order_tools(text, vocab)
        return Detection(tool_condition(tools), "tool", f"an action on the data ({', '.join(tools)})", partial=True)
    terms = tools_by_terms(text, vocab, head=head, partial=True)
    if not terms and head is not None and _bare(text):
        terms = tools_by_terms(text, vocab, head=head, verbs_only=True)
    if terms:
        return Detection(tool_condition(terms), "tool", f"a call to {', '.join(terms)} (named by its action)",
                         partial=True)
    if CONCEPTS["upload"].search(text):
        return Detection(ClauseCondition(attribute_present=UPLOAD_KEYS), "attribute", "an uploaded file")
    phrases = quoted(text)
    lexicon: LexiconCategory | None = (
        "disclosure" if CONCEPTS["company"].search(text) and "disclosure" in vocab.lexicons else None
    )
    rx = phrase_regex(phrases)
    if rx or lexicon:
        fields = _fields(text)
        what = " / ".join([*(f"'{p}'" for p in phrases), *([f"the {lexicon} lexicon"] if lexicon else [])])
        return Detection(ClauseCondition(regex=rx, lexicon=lexicon, fields=fields), "lexicon" if lexicon else "regex",
                         f"{what} in the {' or '.join(fields)}")
    if CONCEPTS["reply"].search(text):
        return Detection(ClauseCondition(regex=ANY_TEXT, fields=("answer",)), "answer", "the agent replied")
    if CONCEPTS["api"].search(text):
        return Detection(tool_condition(("*",)), "any_tool", "any tool call")
    return None


def context_tools(sentence: Sentence, vocab: Vocabulary) -> Detection | None:
    """The tools of the sentence's label, else of its section heading (`Cancel flight` -> the cancel tools), if
    any. A sentence without a label speaks for the whole section: the heading's tools and those of the section's
    labelled parts (`## Modify flight` with `Change baggage: ...` adds the baggage update)."""
    if sentence.label:
        tools = action_tools(sentence.label, vocab)
        if tools:
            return Detection(tool_condition(tools), "context",
                             f"a call to {', '.join(tools)} (the label '{sentence.label}')")
    tools = action_tools(sentence.section, vocab)
    if not tools:
        return None
    if not sentence.label:
        parts = [t for label in vocab.section_labels.get(sentence.section, ()) for t in action_tools(label, vocab)]
        tools = tuple(dict.fromkeys([*tools, *parts]))
    return Detection(tool_condition(tools), "context",
                     f"a call to {', '.join(tools)} (the section '{sentence.section}')")
