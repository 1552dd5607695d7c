"""Obligation checks: a registered rule, a built-in matcher, or a yes/no question for the model tiers.

Rules first, each where its form is recognised: one tool call per message (`conduct.one_tool_call_per_message`),
no reply in a message that calls a tool (`conduct.no_reply_with_tool_call`, also stated as "if you respond, make
no tool call"; its trigger is any tool call, the only messages that can break it), explicit user confirmation before
the trigger's tool calls (`conduct.confirmed_before_action`, conversation layer), numeric limits on passengers
and payment methods of the trigger's tool calls (`conduct.booking_limits`), a retrieval step in the turn
(`execution.has_retrieval`, trace layer). Then matchers, where the obligation names something a rule can see:
tool names, an uploaded file, quoted phrases, the operating company, a clarifying question. Everything else,
and every conditional clause whose condition no rule can see, becomes a question for the model tiers
(small model, then the jury) whose `yes` means the agent complied.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent_factory.factory.compile.detect import (
    CONCEPTS,
    UPLOAD_KEYS,
    Detection,
    Vocabulary,
    named_tools,
    phrase_regex,
    quoted,
    tool_condition,
)
from agent_factory.factory.compile.parse import Lang, Sentence
from agent_factory.factory.compile.patterns import MINIMUM, Form, limits
from agent_factory.factory.compile.words import CONJOIN, CONTAIN, DISJOIN, PARTS_TAIL
from agent_factory.knowledge_packs.model import (
    ClauseCondition,
    ClauseLayer,
    CollectorTier,
    ConditionField,
    LexiconCategory,
    RuleParam,
)

MODEL_TIERS: tuple[CollectorTier, ...] = ("small_model", "jury")
"""Tiers of an obligation no rule decides."""

ONE_TOOL = re.compile(
    r"\bone\s+tool\s+call\b(?=[^.;]*\b(?:at\s+a\s+time|per|each|single|same|one\s+message)\b)|\bmore\s+than\s+one\s+"
    r"tool\s+call|\bsingle\s+tool\s+call|\bmultiple\s+tool\s+calls\s+(?:at\s+once|in\s+(?:one|a\s+single|the\s+same)"
    r"\s+message)|一次只(?:能)?调用一个工具|每(?:条|个)消息(?:最多|只能)?(?:调用)?一(?:个|次)工具"
    r"|(?:同时|一次(?:性)?)调用多个工具", re.I)
SIMULTANEOUS = re.compile(r"\bsimultaneous\w*|\bat\s+the\s+same\s+time|\bsame\s+message|\bin\s+(?:one|a\s+single)\s+"
                          r"message|\btogether\s+with|\balongside|同时|同一条消息|一并", re.I)
CONFIRM = re.compile(
    r"\bconfirm\w*\b[^.;]{0,40}\b(?:user|customer)|\b(?:user|customer)(?:['’]s)?\s+(?:explicit\s+)?(?:confirmation|"
    r"approval|consent|agreement)|\bexplicit\s+(?:user\s+|customer\s+)?(?:confirmation|approval|consent|\"?yes)|"
    r"\b(?:get|obtain|ask\s+for|receive)\s+(?:an?\s+)?(?:explicit\s+)?(?:\"|“)?(?:yes|approval|consent|confirmation)"
    r"|用户(?:的)?(?:明确)?(?:确认|同意)|向用户确认|征得用户(?:的)?同意|得到用户(?:的)?(?:确认|同意)", re.I)
RETRIEVAL = re.compile(r"\bretriev\w*|\blook\s+up\s+(?:the\s+)?(?:metric|definition|data)|检索", re.I)
PAYMENT = re.compile(r"\bpa(?:y|id|ying|yment)\w*|付款|支付", re.I)
_PASSENGER = re.compile(r"\bpassengers?\b|乘客|旅客")
_GENERIC_HEADS = frozenset({"card", "account", "method", "number", "code"})

# Confirmation in Chinese chat (the rule's defaults are English).
ZH_CONFIRM = {
    "confirm_regex": r"(?:^|[。！？!?\s])(?:是的?|好的?|可以|确认|没问题|对的?|行)|确认|同意",
    "deny_regex": r"^\W*(?:不|别|先不要|等一下|等等|取消)",
    "ask_regex": r"确认|是否|要不要|可以吗|好吗|需要我|继续吗",
}


@dataclass(frozen=True)
class Check:
    """How an obligation is collected."""

    condition: ClauseCondition
    how: str
    """`rule`, `matcher` or `model`."""
    note: str
    """What is checked, for reviewers."""
    layer: ClauseLayer | None = None
    """The layer the rule needs, when it needs one."""
    trigger: Detection | None = None
    """A better trigger the rule implies (any tool call for the tool-call rules), replacing an `always` one."""
    missing_rule: str = ""
    """A rule the compiler would have used but that does not exist (the model tiers collect instead)."""
    phrases: tuple[str, ...] = ()
    """The quoted phrases a text matcher looks for (what a scope sentence may translate)."""
    parts: tuple[str, ...] = ()
    """The parts of a conjunction ("must contain A, B and C"): the compiler makes one clause of each."""


def _model(note: str, *, missing: str = "") -> Check:
    # The question depends on the clause's layer, decided once the whole spec is compiled (`question`).
    return Check(ClauseCondition(tiers=MODEL_TIERS), "model", note, missing_rule=missing)


def _limit_params(form: Form, sentence: Sentence, lang: Lang) -> dict[str, int] | None:
    """booking_limits params for every limit of the clause, or None when one is not a passenger/payment count."""
    params: dict[str, int] = {}
    paying = PAYMENT.search(sentence.text) or PAYMENT.search(sentence.label) or PAYMENT.search(form.main)
    for n, noun in limits(form.main, lang):
        if _PASSENGER.search(noun):
            params["max_passengers"] = n
            continue
        words = [w[:-1] if w.endswith("s") and len(w) > 3 else w for w in re.findall(r"[a-z]+", noun)]
        if not words or not paying:
            return None
        head = words[-1]
        kind = "_".join(words[-2:]) if head in _GENERIC_HEADS and len(words) > 1 else head
        params[f"max_{kind}"] = n
    return params or None


def _specific_tools(det: Detection) -> bool:
    names = det.condition.tool_names
    return det.how in ("tool", "context") and bool(names) and "*" not in names


def build_check(form: Form, sentence: Sentence, trigger: Detection, vocab: Vocabulary, *,
                fallback: bool, action_trigger: bool) -> Check:
    """The obligation check of a clause (see the module docstring for the order)."""
    lang = sentence.lang
    whole = f"{form.trigger} {form.main}"
    ob = form.condition if form.kind == "only_if" else form.main
    any_tool = Detection(tool_condition(("*",)), "any_tool", "any tool call")
    if form.exception:  # a rule would count the cases the exception allows as violations
        return _model(f"the obligation, unless {form.exception}: the model judges the exception too")
    if form.kind != "only_if" and ONE_TOOL.search(ob):
        return Check(ClauseCondition(rule="conduct.one_tool_call_per_message"), "rule",
                     "at most one tool call in each assistant message",
                     trigger=any_tool if trigger.how in ("always", "context") else None)
    # "If you respond to the user, do not make a tool call": either side of the condition is the other's message.
    crossed = form.kind == "if_then" and form.polarity == "avoid" and any(
        CONCEPTS[a].search(form.trigger) and CONCEPTS[b].search(form.action)
        for a, b in (("reply", "tool_call"), ("tool_call", "reply")))
    if crossed or (CONCEPTS["tool_call"].search(whole) and CONCEPTS["reply"].search(whole)
                   and SIMULTANEOUS.search(whole)):
        # Only a message with a tool call can break it: the rule is applicable where a tool was called.
        return Check(ClauseCondition(rule="conduct.no_reply_with_tool_call"), "rule",
                     "no assistant message both calls a tool and answers the user",
                     trigger=None if _specific_tools(trigger) else any_tool)
    if form.polarity == "do" and CONFIRM.search(ob):
        if _specific_tools(trigger) and form.kind in ("before", "must", "should", "if_then", "only_if"):
            confirm: dict[str, RuleParam] = dict(ZH_CONFIRM) if lang == "zh" else {}
            return Check(ClauseCondition(rule="conduct.confirmed_before_action", params=confirm), "rule",
                         "an explicit user yes, right after the agent asked, before each such call",
                         layer="conversation")
        return _model("user confirmation before an action no rule can see",
                      missing="conduct.confirmed_before_action needs the tools to confirm")
    found = limits(form.main, lang)
    if found and form.polarity == "do":
        limit = _limit_params(form, sentence, lang)
        if limit is not None and _specific_tools(trigger):
            return Check(ClauseCondition(rule="conduct.booking_limits", params=dict(limit)), "rule",
                         "limits on the call's arguments: " + ", ".join(f"{k} {v}" for k, v in limit.items()))
        what = ", ".join(f"at most {n} {noun}" for n, noun in found)
        return _model(f"a numeric limit ({what}) judged by the model",
                      missing=f"a rule counting {what}")
    least = MINIMUM.search(form.main)
    if least and form.polarity == "do":
        return _model(f"a numeric minimum ({least.group(0)}) judged by the model",
                      missing=f"a rule counting {least.group(0)}")
    if form.polarity == "do" and RETRIEVAL.search(ob) and form.kind in ("before", "must", "should"):
        return Check(ClauseCondition(rule="execution.has_retrieval"), "rule", "a retrieval step in the turn",
                     layer="trace")
    if form.kind == "before":
        return _model("order judged by the model", missing="a rule for this order")
    if fallback:
        return _model("the condition is not visible to a rule: the model judges applicability too")
    if action_trigger:
        return _model("the action is detected by rule; whether it was allowed is judged by the model")
    matcher = _matcher(ob, sentence, vocab)
    if matcher is not None:
        return matcher
    return _model("judged by the model")


_ARTICLE = re.compile(r"^(?:the|a|an|its|their|your|our)\s+", re.I)
_PART_WORDS = {"en": 4, "zh": 8}  # a section name is short; a longer item is a description, not a heading


def conjuncts(text: str, lang: Lang) -> tuple[str, ...]:
    """The parts a text must all contain: `包含「A」「B」「C」` / `包含A、B和C四个部分` / `contain "A", "B" and "C"` /
    `include the Method, Risks and Conclusion sections`; () when it names no such list (an `or` list names
    alternatives; an unquoted list counts only when the text calls its items sections or parts)."""
    m = CONTAIN.search(text)
    if m is None:
        return ()
    rest = text[m.end():].strip(" \t.,;:!?。，；：！？")
    if DISJOIN.search(rest):
        return ()
    found = quoted(rest)
    if len(found) >= 2:
        return tuple(dict.fromkeys(p.strip() for p in found if p.strip()))
    tail = PARTS_TAIL.search(rest)
    if tail is None and not re.search(r"sections?|parts?|headings?|部分|章节", m.group(0), re.I):
        return ()
    body = rest[:tail.start()] if tail is not None else rest
    if not CONJOIN.search(body):
        return ()
    parts = [_ARTICLE.sub("", p.strip(" \t.,;:!?。，；：！？「」“”\"'『』")) for p in CONJOIN.split(body)]
    parts = [p for p in parts if p]
    limit = _PART_WORDS[lang]
    if len(parts) < 2 or any((len(p.split()) if lang == "en" else len(p)) > limit for p in parts):
        return ()
    return tuple(dict.fromkeys(parts))


def _matcher(text: str, sentence: Sentence, vocab: Vocabulary) -> Check | None:
    parts = conjuncts(text, sentence.lang)
    if parts:
        # Each part is its own check: an alternation would hold when any one of them is present.
        return Check(ClauseCondition(regex=phrase_regex(parts), fields=("answer",)), "matcher",
                     "each of " + " / ".join(f"'{p}'" for p in parts) + " in the answer (one clause per part)",
                     phrases=parts, parts=parts)
    names = named_tools(text, sentence, vocab)
    if names and CONCEPTS["mention"].search(text):
        mention = r"\b(?:" + "|".join(re.escape(n) for n in names) + r")\b"
        return Check(ClauseCondition(regex=mention, fields=("answer",)), "matcher",
                     f"the answer names {', '.join(names)}")
    if names:
        return Check(tool_condition(names), "matcher", f"a call to {', '.join(names)}")
    if CONCEPTS["upload"].search(text):
        return Check(ClauseCondition(attribute_present=UPLOAD_KEYS), "matcher", "an uploaded file on the turn")
    phrases = quoted(text)
    rx = phrase_regex(phrases)
    lexicon: LexiconCategory | None = (
        "disclosure" if CONCEPTS["company"].search(text) and "disclosure" in vocab.lexicons else None
    )
    if rx or lexicon:
        fields: tuple[ConditionField, ...] = ("request",) if CONCEPTS["user_side"].search(text) else ("answer",)
        what = " / ".join([*(f"'{p}'" for p in phrases), *([f"the {lexicon} lexicon"] if lexicon else [])])
        return Check(ClauseCondition(regex=rx, lexicon=lexicon, fields=fields), "matcher",
                     f"{what} in the {' or '.join(fields)}", phrases=tuple(phrases))
    if CONCEPTS["clarify"].search(text) and "clarification" in vocab.lexicons:
        return Check(ClauseCondition(lexicon="clarification", fields=("answer",)), "matcher",
                     "a clarifying question (the clarification lexicon) in the answer")
    return None


# ---- questions -----------------------------------------------------------------------------------------

_AGENT = re.compile(r"^(?:you|the\s+agent|agent|the\s+assistant|we|你|智能体|助手|数析助手)?$", re.I)
_UNIT = {"en": {"trace": "turn", "conversation": "conversation"}, "zh": {"trace": "轮对话", "conversation": "会话"}}


def _agentive(text: str) -> str:
    text = re.sub(r"\byourself\b", "itself", text, flags=re.I)
    text = re.sub(r"\byour\b", "its", text, flags=re.I)
    return re.sub(r"\byou\b", "it", text, flags=re.I)


def question(form: Form, sentence: Sentence, layer: ClauseLayer) -> str:
    """The yes/no question the model tiers answer about one unit; `yes` means the agent complied."""
    unit = _UNIT[sentence.lang][layer]
    if sentence.lang == "zh":
        head = f"规则：「{sentence.text}」"
        agent = _AGENT.match(form.subject.strip()) is not None
        did = (f"智能体是否避免了：{form.action}" if form.polarity == "avoid" else f"智能体是否做到了：{form.action}") \
            if agent else f"是否遵守了：{form.main}"
        if form.kind == "only_if" and form.condition == form.trigger:
            return (f"{head}在本{unit}中，智能体这样做时是否遵守了限制（只能{form.trigger}）？"
                    "若没有这样做，回答 not_applicable。")
        if form.kind == "only_if":
            return (f"{head}只有在以下条件成立时才允许这样做：{form.condition}。在本{unit}中，如果智能体这样做了"
                    f"（{form.trigger}），该条件是否成立？若智能体没有这样做，回答 not_applicable。")
        if form.exception:
            return f"{head}在本{unit}中，除非{form.exception}，{did}？若例外情形成立，回答 not_applicable。"
        if form.kind == "before":
            return f"{head}在本{unit}中，在{form.trigger}之前，{did}？若没有发生，回答 not_applicable。"
        if form.trigger:
            return f"{head}在本{unit}中，当{form.trigger}时，{did}？若该情形没有出现，回答 not_applicable。"
        return f"{head}在本{unit}中，{did}？（yes = 遵守，no = 违反）"
    head = f'Policy: "{sentence.text}"'
    agent = _AGENT.match(form.subject.strip()) is not None and not re.match(r"be\s", form.action, re.I)
    action = _agentive(form.action)
    did = (f"did the agent avoid this: {action}" if form.polarity == "avoid" else f"did the agent {action}") \
        if agent else f"was this respected: {_agentive(form.main)}"
    if form.kind == "only_if" and form.condition == form.trigger:
        return (f"{head} In this {unit}, whenever the agent did this, did it stay within the restriction "
                f"(only {_agentive(form.trigger)})? Answer not_applicable if it did not do it.")
    if form.kind == "only_if":
        return (f'{head} This is allowed only when: {_agentive(form.condition)}. In this {unit}, if the agent did '
                f'this ("{form.trigger}"), did that condition hold? Answer not_applicable if it did not do it.')
    if form.exception:
        return (f'{head} In this {unit}, unless "{_agentive(form.exception)}", {did}? Answer not_applicable if '
                "that exception held.")
    if form.kind == "before":
        return (f'{head} In this {unit}, before "{form.trigger}", {did}? Answer not_applicable if that never '
                "happened.")
    if form.trigger:
        return (f'{head} In this {unit}, in the situation "{form.trigger}", {did}? Answer not_applicable if that '
                "situation never arose.")
    return f"{head} In this {unit}, {did}? (yes = complied, no = violated)"
