"""Word lists the sentence forms use: imperative verbs (en, zh), the agent-mode words, and what is no duty.

An English sentence with no modal is still a rule when it is an order: it opens with a verb in the imperative
("Tell them to call emergency services", "Be sure that ..."), alone or after its condition ("If X, tell ...").
Verbs that are also common nouns ("answer", "order", "change") count only when what follows reads as their
object or complement ("Answer the question", not "Answer quality matters"). Chinese orders open with 请 / 记得 /
确保 ..., or, after a condition, with a verb of the list below.

Mode words name an agent's mode in either language; a spec's mode and the pack's mode names are matched
through them ("concise" / 简洁 -> the pack's `simple`).
"""

from __future__ import annotations

import re

IMPERATIVE_VERBS = frozenset("""
acknowledge act add advise alert analyse analyze apologise apologize ask assess assist assure attach avoid be
behave begin calculate choose cite clarify click collect compare compose confirm consider consult continue
convert create decline delegate deny describe determine direct disclose download draft emphasize encourage ensure
enter escalate estimate evaluate explain fetch fill focus follow gather generate give greet guide handle highlight
identify ignore inform include instruct investigate keep let maintain make mention notify obtain offer omit pick
prefer prepare print proceed produce prompt protect provide read reassure recheck recommend redirect refer refrain
refuse reject remain remember remind repeat rephrase resolve respect respond restate retrieve retry reveal say
select share show skip speak specify stay stop suggest summarise summarize talk tell thank translate treat try
upload use validate verify wait warn withhold
""".split())
"""Verbs that open an order in English and are rarely a sentence's subject."""
AMBIGUOUS_VERBS = frozenset("""
answer book call cancel change charge check close contact copy display email end exchange filter flag format hand
help issue limit link list log look mark move open order place post process query quote record refund reply
report request reset return review round route save schedule search send set sign sort start transfer update write
""".split())
"""Verbs that are also common nouns: an order only when their object follows (see `OBJECT_STARTS`)."""
OBJECT_STARTS = frozenset("""
the a an them it him her me us you this that these those all any each every your their its our his my no
only both one two three some to for with about up out back down off over in on at from whether if how what
which who when where why politely clearly immediately briefly first again directly every
""".split())
"""Words that may follow an ambiguous verb used as an order."""
NEGATIVE_IMPERATIVES = frozenset({"avoid", "refrain", "stop", "cease"})
"""Orders that forbid what follows them ("Avoid jargon")."""
EN_LEAD = re.compile(
    r"^(?:(?:so|also|then|and|but|please|therefore|thus|hence|otherwise|instead|finally|first(?:ly)?|second(?:ly)?|"
    r"next|generally|usually|in\s+general|in\s+particular|in\s+addition|additionally|as\s+a\s+rule|always)\b"
    r"\s*,?\s*)+", re.I)
"""Connectives an order may open with before its verb."""

ZH_IMPERATIVE = (r"请|记得|记住|注意|确保|一定|务必|告诉|告知|提醒|询问|建议|转接|转给|拒绝|说明|"
                 r"解释|提示|引导|回复|回答|"
                 r"确认|核实|检查|提供|使用|调用|停止|避免|立即|直接|拨打|联系|通知|记录|标记|道歉|致歉|推荐|给出|生成|输出|"
                 r"列出|收集|获取|取消|安抚|改用|切换|要求|指导|先")
"""Verbs and adverbs that open an order in Chinese (after a condition)."""
ZH_ORDER_LEAD = re.compile(r"^(?:请(?!求)|记得|记住|务必|确保|切记)")
"""What opens a Chinese sentence that is an order without a modal."""

NO_DUTY = re.compile(
    r"\b(?:there\s+is\s+)?no\s+need\s+to\b|\bneed\s+not\b|\b(?:do|does|did)\s+not\s+(?:need|have)\s+to\b|"
    r"\b(?:don|doesn|didn)['’]t\s+(?:need|have)\s+to\b|\b(?:is|are)\s+not\s+(?:required|necessary|needed|mandatory)\b"
    r"|\bnot\s+required\s+to\b|无需|不需要|不必|不用", re.I)
"""Phrases that lift a duty: what they govern is allowed, not required."""

MODE_GROUPS: tuple[tuple[str, ...], ...] = (
    ("simple", "concise", "brief", "short", "lite", "简洁", "简单", "精简", "简短", "极简"),
    ("normal", "standard", "default", "regular", "普通", "标准", "常规", "默认", "正常"),
    ("deep", "detailed", "in-depth", "thorough", "深度", "深入", "详细"),
)
"""Words for the same agent mode, its canonical name first."""
EN_MODE = re.compile(
    r"\b(?:in|under|during|using|with)\s+(?:the\s+)?[\"'“]?(?P<m>[A-Za-z][\w-]*)[\"'”]?\s+mode\b"
    r"|\bmode\s+(?:is|=+)\s+[\"'“]?(?P<v>[A-Za-z][\w-]*)", re.I)
"""An English condition on the agent's mode: `in concise mode`, `when the mode is "deep"`."""
ZH_MODE = re.compile(r"(?P<m>[\u4e00-\u9fff]{2})模式")
"""A Chinese condition on the agent's mode: `简洁模式下`, `在深度模式中`."""
SPEC_MODE_ALIAS = re.compile(r"(?P<m>[\u4e00-\u9fff]{2}|[A-Za-z][\w-]*)\s*模式\s*"
                             r"[（(]\s*`?(?P<v>[A-Za-z][\w-]*)`?\s*[)）]"
                             r"|(?P<m2>[A-Za-z][\w-]*)\s+mode\s*[（(]\s*`?(?P<v2>[A-Za-z][\w-]*)`?\s*[)）]", re.I)
"""A spec naming a mode's recorded value: `简洁模式（simple）`, `Quick mode (`lite`)`."""


def is_order(text: str) -> bool:
    """Whether an English clause opens with a verb in the imperative (after connectives)."""
    rest = EN_LEAD.sub("", text.strip())
    tokens = rest[:80].split()
    # An identifier or a `name: description` line is no order ("transfer_to_human_agents: hand over ...",
    # "calculate, think: arithmetic and notes").
    if not tokens or not re.fullmatch(r"[A-Za-z][a-z'’-]*[,.;:!]?", tokens[0]):
        return False
    if re.match(r"^[\w\s,'’-]{1,40}:\s", rest):
        return False
    words = re.findall(r"[A-Za-z][A-Za-z'’-]*", rest[:80])
    first = words[0].lower()
    if first in IMPERATIVE_VERBS:
        # "Be" orders only as "be sure / be careful / be polite ...", never "Be it ..." or a subject.
        return first != "be" or (len(words) > 1 and words[1].lower() not in ("it", "they", "this", "that"))
    # Alone ("If asked, reply.") or followed by its object ("Answer the question"), not by a verb ("Answer is").
    return first in AMBIGUOUS_VERBS and (len(words) == 1 or words[1].lower() in OBJECT_STARTS)


def zh_order(text: str) -> bool:
    """Whether a Chinese clause opens as an order (请 / 记得 / 确保 ..., or a verb of the list)."""
    return re.match(rf"^\s*(?:就|则|那么|那)?\s*(?:{ZH_IMPERATIVE})", text) is not None


def mode_value(word: str, *, modes: tuple[str, ...], aliases: dict[str, str]) -> str | tuple[str, ...]:
    """The value `Turn.mode` holds for a mode a spec names: the spec's own alias, the pack's mode name of the same
    group, else the word itself (and, for a Chinese word, its group's English name too)."""
    key = word.strip().casefold()
    if key in aliases:
        return aliases[key]
    names = {m.casefold(): m for m in modes}
    if key in names:
        return names[key]
    group = next((g for g in MODE_GROUPS if key in g), None)
    if group is not None:
        for name in group:
            if name in names:
                return names[name]
        if re.search(r"[\u4e00-\u9fff]", key):
            return (group[0], word)
    return word if re.search(r"[\u4e00-\u9fff]", word) else key


# ---- conjunctions and scope sentences ----------------------------------------------------------------------

CONTAIN = re.compile(r"\b(?:contains?|includes?|cover|covers|ha(?:ve|s))\b(?:\s+(?:all\s+of\s+)?(?:the\s+)?"
                     r"(?:following\s+)?(?:sections?|parts?|headings?|elements?)?\s*:?)?"
                     r"|(?:包含|包括|含有|涵盖|具备|列出)(?:以下)?(?:几个|这些)?(?:部分|内容|章节)?[：:]?", re.I)
"""A verb saying what a text must hold ("must contain", 须包含): what follows may be a list of parts."""
CONJOIN = re.compile(r"\s*(?:,\s*(?:and\s+)?|\band\b|;\s*)\s*|\s*(?:、|，|以及|及|和|与|跟)\s*", re.I)
"""What joins the parts of a conjunction (en `A, B and C`, zh `A、B和C`)."""
DISJOIN = re.compile(r"\bor\b|\beither\b|或者?|或是|还是|之一|任一|任何一", re.I)
"""A list joined by `or` names alternatives, not parts that must all be present."""
PARTS_TAIL = re.compile(r"\s*(?:(?:这|等|共)?[一二三四五六七八九十两\d]+\s*(?:个|项|节)?\s*"
                        r"(?:部分|章节|小节|内容|方面|要素)|(?:等|这些)?(?:部分|章节|内容|要素)|(?:\b(?:as\s+)?(?:sections?|parts?|headings?|"
                        r"elements?)))\s*$", re.I)
"""The count or noun closing a list of parts (`四个部分`, `four sections`): not a part itself."""

TRANSLATIONS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("方法", "研究方法", "分析方法", "方法论"), ("method", "methods", "methodology")),
    (("细分结果", "分项结果"), ("segment results", "segmented results", "breakdown", "breakdowns")),
    (("风险", "风险提示"), ("risk", "risks")),
    (("结论", "总结"), ("conclusion", "conclusions")),
    (("摘要", "概要"), ("summary",)),
    (("建议", "下一步建议"), ("recommendation", "recommendations", "next steps")),
    (("背景",), ("background",)),
    (("数据来源", "数据源"), ("data source", "data sources")),
)
"""Report section names in Chinese and English: what a scope sentence ("these requirements apply equally to
English answers") adds to a clause that quotes a name in the other language. Small on purpose: a name missing
here keeps its clause in the spec's own language, and the clause says so."""

SCOPE = re.compile(
    r"\b(?:these|those|the\s+(?:above|preceding)|all\s+(?:of\s+)?(?:these|the\s+above))\s+(?:requirements|rules|"
    r"instructions|guidelines)\s+(?:\w+\s+){0,2}appl(?:y|ies)\s+(?:\w+\s+){0,2}to\s+(?P<en>english|chinese)\b"
    r"|(?:这些|以上|上述|前述|所有)(?:要求|规则|规范)\S{0,8}?适用于(?P<zh>英文|英语|中文|汉语)", re.I)
"""A sentence extending the rules before it to answers in another language."""


def scope_language(text: str) -> str | None:
    """The language (`en` / `zh`) a scope sentence extends the rules before it to, else None."""
    m = SCOPE.search(text)
    if m is None:
        return None
    word = (m.group("en") or m.group("zh")).casefold()
    return "en" if word in ("english", "英文", "英语") else "zh"


def translations(phrase: str, lang: str) -> tuple[str, ...]:
    """The phrase's equivalents in `lang` from `TRANSLATIONS` (none when the table does not know it)."""
    key = phrase.strip().casefold()
    for zh, en in TRANSLATIONS:
        if key in zh or key in en:
            return zh if lang == "zh" else en
    return ()
