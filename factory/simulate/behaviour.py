"""Session-level behaviour: what a user's next message does besides asking (docs/method.md section 4, Trajectory).

After a failed turn a user may vent frustration ("怎么又报错了"), at the end of a session give up ("算了，我自己用
Excel算吧"), after an answer that missed the point correct the context the agent got wrong ("我说的是2024年第三季度，
不是上个月"), and answer the agent's clarifying question. The agent, for its part, sometimes answers with a
clarifying question instead of an analysis. Each behaviour has a rate in `SimConfig` (`draw_act` reads them).

The texts are written to be caught by the business-analysis pack's lexicons (its own patterns and those of
`default` it extends), each by the lexicon of its own behaviour and by no other; the requests of `texts` are
caught by none. Both are checked in the tests, so a truth label and what a correct rule finds agree.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import numpy as np

from agent_factory.factory.simulate.config import SimConfig
from agent_factory.factory.simulate.texts import (
    DIMS,
    METRICS,
    PERIODS,
    SCOPES,
    Lang,
    Request,
    Topic,
    new_request,
    new_topic,
    pick,
    slots,
)

Act = Literal["frustration", "abandonment", "context_repair", "clarification_reply"]
"""What a message does besides asking: the `act` of a `Request` (None for an ordinary request)."""
ACTS: tuple[Act, ...] = ("frustration", "abandonment", "context_repair", "clarification_reply")

# {m} metric, {s} scope, {p} period of the topic the message is about.
FRUSTRATION_AFTER_FAILURE = {
    "zh": ("怎么又报错了，{m}到底能不能出来", "还是不行，{s}的{m}一直没有结果", "又没反应了，我就想看{s}{p}的{m}",
           "结果怎么又是空的？{m}呢", "烦死了，{s}的{m}又没出来", "{m}报告又没生成，到底怎么回事"),
    "en": ("It failed again. I just need {m} for {s}", "Still not working - where is the {m} analysis?",
           "Are you kidding me? Nothing on {m} for {s}", "Seriously? The {m} numbers are empty again",
           "This never works. All I want is {m} for {p}", "Where is my report on {m}? It crashed again"),
}
"""The user vents after a failed turn (the agent then retries the same topic)."""
FRUSTRATION_AFTER_REPEAT_FAILURE = {
    "zh": ("我说了多少遍了，{m}怎么还是不行", "这是第三次问了，{s}的{m}到底行不行",
           "无语，一直报错，{s}{p}的{m}到底能不能算"),
    "en": ("How many times do I have to ask? {m} for {s}, please", "I'm asking for the third time: {m} for {p}",
           "What the hell, it broke again. {m} for {s}"),
}
"""The user vents after the second (or a later) failed turn of the session."""
FRUSTRATION_AFTER_SUCCESS = {
    "zh": ("这也太离谱了，{m}怎么可能是这个数", "什么玩意，{s}的{m}跟没说一样", "无语，这份{m}分析有什么用",
           "你这也太不靠谱了，{p}的{m}明显有问题"),
    "en": ("This is useless. The {m} figure for {s} can't be right", "That's ridiculous - {m} never moves that much",
           "Are you serious? That {m} answer is useless", "I'm so annoyed, you are not listening. {m} for {s}"),
}
"""The user is exasperated with a delivered answer (wrong-looking numbers, nothing usable)."""
ABANDONMENT_AFTER_FAILURE = {
    "zh": ("算了，我自己用Excel算吧", "算了，不弄了", "不指望你了，找数据组吧", "浪费我时间，我还是自己算吧"),
    "en": ("Forget it, I'll pull the numbers myself", "Never mind. I'll just ask the data team", "I give up.",
           "What a waste of time. I'll do it myself"),
}
"""The user gives up after a failed turn (the last message of the session)."""
ABANDONMENT_AFTER_SUCCESS = {
    "zh": ("算了，不用了", "行吧，我还是自己用Excel做吧", "不问了，找数据组吧"),
    "en": ("Never mind, I'll figure it out myself", "Forget it, not worth it", "I'll just ask the data team"),
}
"""The user gives up on a delivered but unhelpful answer (the last message of the session)."""
# {old} is what the agent used, {new} what the user meant (the same kind of slot).
REPAIR_ANY = {
    "zh": ("我说的是{new}，不是{old}", "不是这个意思，我要的是{new}", "你理解错了，应该是{new}",
           "我刚才说了，只看{new}", "更正一下：是{new}，不是{old}"),
    "en": ("I meant {new}, not {old}", "No, I meant {new}", "That's not what I asked about - {new}",
           "As I said, only {new}", "Let me rephrase: {new}, not {old}"),
}
"""The user restates or corrects the context the agent lost or misread, whatever slot it was."""
REPAIR_BY_SLOT = {
    "period": {"zh": "时间范围不对，我要的是{new}", "en": "Wrong period - I asked about {new}"},
    "scope": {"zh": "范围不对，我问的是{new}", "en": "That's the wrong scope - I meant {new}"},
    "metric": {"zh": "指标不对，我要看的是{new}", "en": "Wrong metric - I need {new}"},
    "dim": {"zh": "口径不对，应该{new}看", "en": "Not the right breakdown, I meant {new}"},
}
"""A correction naming the kind of slot the agent got wrong."""
CLARIFYING_QUESTIONS = {
    "zh": ("请问您想看哪个时间范围？{p}还是{p2}？", "您说的{m}是指含税口径还是不含税口径？",
           "需要您确认一下{s}的统计口径：按下单时间还是按支付时间？", "您想{d}拆开看，还是只看{s}整体？"),
    "en": ("Could you clarify which period you mean - {p} or {p2}?", "Do you mean {m} including or excluding returns?",
           "Which region should I focus on for {m}?", "Should I use order date or payment date for {s}?"),
}
"""The agent asks the user to clarify instead of answering."""
CLARIFICATION_REPLIES = {
    "zh": ("{p}，{d}", "不含税的，{p}", "按支付时间算，{s}", "看{s}整体就行，{p}"),
    "en": ("{p}, {d}", "Excluding returns, for {p}", "Payment date, {s}", "Overall for {s} is fine, {p}"),
}
"""The user answers a clarifying question with the detail asked for."""
ACKNOWLEDGEMENTS = {
    "zh": ("好的，抱歉这次没能帮上忙。", "明白，给您添麻烦了。"),
    "en": ("Understood - sorry I couldn't help with this one.", "Okay, sorry about the trouble."),
}
"""The agent's answer when the user gives up."""
SLOT_VOCAB = {"period": PERIODS, "scope": SCOPES, "metric": METRICS, "dim": DIMS}
"""The topic slots a context repair can correct, with their (zh, en) words."""
_SLOTS = tuple(SLOT_VOCAB)


def draw_act(rng: np.random.Generator, c: SimConfig, *, after_failure: bool, failures: int, last: bool,
             clarified: bool, can_repair: bool) -> Act | None:
    """The act of a later message of a session that does not resend the previous request, or None.

    `after_failure`: the previous turn failed; `failures`: failed turns so far in the session; `last`: this is
    the session's last message; `clarified`: the previous answer (as the user saw it) asked to clarify;
    `can_repair`: the previous answer was delivered about a topic the user could correct.
    """
    if last:
        rate = c.abandonment_after_failure_rate if after_failure else c.abandonment_after_success_rate
        if float(rng.random()) < rate:
            return "abandonment"
    rate = (c.frustration_after_repeat_failure_rate if after_failure and failures >= 2 else
            c.frustration_after_failure_rate if after_failure else c.frustration_after_success_rate)
    if float(rng.random()) < rate:
        return "frustration"
    if clarified:
        return "clarification_reply"
    if can_repair and float(rng.random()) < c.context_repair_rate:
        return "context_repair"
    return None


def _fill(template: str, t: Topic, lang: Lang, **extra: str) -> str:
    return template.format(**slots(t, lang), **extra)


def act_request(rng: np.random.Generator, act: Act, prev: Request, lang: Lang, *, after_failure: bool,
                failures: int) -> Request:
    """The message of `act` following `prev` (the user's previous request, whose topic it continues)."""
    if act == "clarification_reply" and prev.topic is None:
        # The agent asked what a greeting or one-word prompt was about: the user now says it in full.
        return replace(new_request(rng, lang, short=False), act=act)
    topic = prev.topic if prev.topic is not None else new_topic(rng)
    if act == "frustration":
        bank = (FRUSTRATION_AFTER_REPEAT_FAILURE if after_failure and failures >= 2 else
                FRUSTRATION_AFTER_FAILURE if after_failure else FRUSTRATION_AFTER_SUCCESS)[lang]
        return Request(_fill(bank[pick(rng, len(bank))], topic, lang), lang, topic, act)
    if act == "abandonment":
        bank = (ABANDONMENT_AFTER_FAILURE if after_failure else ABANDONMENT_AFTER_SUCCESS)[lang]
        return Request(bank[pick(rng, len(bank))], lang, topic, act)
    if act == "clarification_reply":
        bank = CLARIFICATION_REPLIES[lang]
        return Request(_fill(bank[pick(rng, len(bank))], topic, lang), lang, topic, act)
    return _repair(rng, topic, lang)


def _repair(rng: np.random.Generator, topic: Topic, lang: Lang) -> Request:
    """A correction of one slot of `topic`: the agent used `old`, the user meant `new` (the new topic)."""
    slot = _SLOTS[pick(rng, len(_SLOTS))]
    vocab = SLOT_VOCAB[slot]
    old = getattr(topic, slot)
    new = (old + 1 + pick(rng, len(vocab) - 1)) % len(vocab)  # any other value of the slot
    fixed = replace(topic, **{slot: new})
    i = 0 if lang == "zh" else 1
    bank = REPAIR_ANY[lang]
    k = pick(rng, len(bank) + 1)
    template = REPAIR_BY_SLOT[slot][lang] if k == len(bank) else bank[k]
    text = _fill(template, fixed, lang, new=vocab[new][i], old=vocab[old][i])
    return Request(text, lang, fixed, "context_repair")


def clarifying_question(rng: np.random.Generator, req: Request) -> str:
    """The agent's clarifying question about `req` (which must have a topic)."""
    assert req.topic is not None
    bank = CLARIFYING_QUESTIONS[req.lang]
    other = (req.topic.period + 1 + pick(rng, len(PERIODS) - 1)) % len(PERIODS)
    return _fill(bank[pick(rng, len(bank))], req.topic, req.lang, p2=PERIODS[other][0 if req.lang == "zh" else 1])


def acknowledgement(rng: np.random.Generator, lang: Lang) -> str:
    """The agent's answer to a user who gives up."""
    bank = ACKNOWLEDGEMENTS[lang]
    return bank[pick(rng, len(bank))]
