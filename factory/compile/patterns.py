"""The sentence forms of a rule, in English and Chinese: which sentences are normative, and how one splits.

A normative clause becomes one or more `Form`s: its kind (must / must_not / never / only_if / should / if_then /
before), whether the obligation asks to do or to avoid something, the trigger text (the condition, or for
`only_if` the behaviour that needs the condition), the main clause and its verb phrase, and an exception
(`unless ...`). A normative clause whose parts cannot be told apart becomes an `Unparsed` with the reason.

English forms: `must`, `shall`, `need(s) to`, `have to`, `is required to`, `require(s)`, `X is needed`,
sentence-initial `Always`; `must not`, `do not`, `don't`, `cannot`, `may not`, `is not allowed to`; `never`;
`should (not)`; `at most N`, `no more than N`, `at least N`; orders in the imperative (`Tell them ...`,
`Be sure that ...`), alone or after a condition; `if and only if` (both directions), `only if / when / after`,
`Only X when Y`, `can only X` (X's verb is the behaviour, the rest what it is restricted to), `can X, but nothing
else`, `can X but not Y` (Y is forbidden), `do not X unless Y` (only if), `must X unless Y` (an exception);
`if X, Y`, `Y if X`, `when X, Y`, `In X mode, Y`, `Y in X mode`; `before X, Y`, `Y before X`. A conditional main
clause with two obligations (`X cannot help and transfer is needed`) gives one form for each.
`no need to` / `need not` / `do not have to` lift a duty: such a sentence states no rule.
Chinese forms: 必须 / 务必 / 一定要; 不得 / 不要 / 不可 / 不能 / 禁止 / 严禁 / 切勿; 永远不要 / 绝不; 应当 / 应该;
最多 / 至多 / 不超过 / 至少 N; 请 / 记得 / 确保 (orders); 只有(当/在)…才, 仅当…(时), 只能在…时, 除非…否则不得 (only if),
除非…否则必须 (an exception); 如果 / 若 / 当…(时)，(就/则)… (with an order after the condition too); …模式下，…;
在…之前，…
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from factory.compile.parse import Lang
from factory.compile.words import NEGATIVE_IMPERATIVES, NO_DUTY, ZH_ORDER_LEAD, is_order, zh_order

FormKind = Literal["must", "must_not", "never", "only_if", "should", "if_then", "before"]
"""How a spec sentence binds, as the compiler recognised it."""
Polarity = Literal["do", "avoid"]
"""Whether the obligation asks the agent to do something or to avoid it."""

NUMBERS = {
    "one": 1, "a single": 1, "single": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "twenty": 20,
    "一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10,
}
_EN_NUM = r"(?:\d+|a\s+single|single|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty)"
_ZH_NUM = r"(?:\d+|[一两二三四五六七八九十])"

# ---- English ---------------------------------------------------------------------------------------------

_EN_NEVER = r"never|must\s+never|should\s+never|shall\s+never"
_EN_SHOULD_NOT = r"should\s+not|shouldn['’]t|ought\s+not\s+to"
_EN_NEG = (r"must\s+not|mustn['’]t|shall\s+not|cannot|can\s+not|can['’]t|may\s+not|"
           r"do\s+not|don['’]t|(?:is|are)\s+not\s+(?:allowed|permitted)\s+to|(?:is|are)\s+(?:forbidden|prohibited)"
           r"\s+(?:to|from)")
_EN_SHOULD = r"should|ought\s+to"
_EN_MUST = (r"must|shall|needs?\s+to|ha(?:ve|s)\s+to|(?:is|are)\s+required\s+to|requires?|"
            r"(?:is|are)\s+(?:needed|required|mandatory)|^\W*always")
_EN_LIMIT = (rf"(?:at\s+most|no\s+more\s+than|not\s+more\s+than|a\s+maximum\s+of|up\s+to|at\s+least|"
             rf"a\s+minimum\s+of|not\s+exceed(?:ing)?)\s+{_EN_NUM}\b")
EN_MODAL = re.compile(
    rf"(?P<never>\b(?:{_EN_NEVER})\b)|(?P<shouldnot>\b(?:{_EN_SHOULD_NOT})\b)|(?P<neg>\b(?:{_EN_NEG})\b)"
    rf"|(?P<should>\b(?:{_EN_SHOULD})\b)|(?P<must>\b(?:{_EN_MUST})\b)|(?P<limit>\b{_EN_LIMIT})",
    re.IGNORECASE,
)
EN_LIMIT = re.compile(
    rf"\b(?:at\s+most|no\s+more\s+than|not\s+more\s+than|a\s+maximum\s+of|up\s+to|not\s+exceed(?:ing)?)\s+"
    rf"(?P<n>{_EN_NUM})\s+"
    r"(?P<noun>(?:(?!(?:and|or|per|in|for|on|each|at|of|to|with)\b)[A-Za-z-]+\s*){1,3})",
    re.IGNORECASE,
)
_EN_ONLY = re.compile(r"\b(?:can|may|could)\s+only\b|^\W*only\b|\bonly\s+(?:if|when|after|once|while)\b", re.I)
_EN_BUT_NOT = re.compile(r"^(?P<s>.*?)\b(?:can|may|could)\s+(?P<x>(?:(?!\bbut\b).)+?)\s*,?\s+but\s+(?P<neg>never|not|"
                         r"cannot|can['’]t|may\s+not|must\s+not)\s+(?P<y>.+)$", re.I)
_EN_NOTHING_ELSE = re.compile(r"\s*,?\s+but\s+nothing\s+(?:else|more)\W*$", re.I)
_EN_MAY = re.compile(r"\b(?:can|may|could)\s+", re.I)
_EN_UNLESS_LEAD = re.compile(r"^\W*unless\s+(?P<c>[^,]+?)\s*,\s*(?P<b>.+)$", re.I)
_EN_MODE_LEAD = re.compile(r"^\W*(?P<c>(?:in|under|during)\s+(?:the\s+)?[\"'“]?[A-Za-z][\w-]*[\"'”]?\s+mode)\s*,\s*(?P<m>.+)$",
                           re.I)
_EN_MODE_TAIL = re.compile(r"^(?P<m>.+?)\s*,?\s+(?P<c>(?:(?:when|while)\s+)?(?:in|under|during)\s+(?:the\s+)?"
                           r"[\"'“]?[A-Za-z][\w-]*[\"'”]?\s+mode)\s*$", re.I)
# A condition ends where a new clause with its own modal starts ("..., and business flights can always ...").
_EN_COND_END = re.compile(r"\s*;|,\s+(?:and|but)\s+(?=(?:[\w'’-]+\s+){0,4}?(?:can|could|may|will|would|must|should|"
                          r"cannot|can['’]t|won['’]t|shall)\b)", re.I)
_EN_AND = re.compile(r"\s*,?\s+and\s+", re.I)
_LIGHT_VERBS = frozenset({"take", "make", "do", "give", "have", "get", "pay", "place", "put"})
_PARTICLES = frozenset({"up", "out", "off", "back", "over", "down", "away", "in", "on"})
_EN_IFF = re.compile(r"\s*,?\s*\bif\s+and\s+only\s+if\b\s*", re.I)
_EN_UNLESS = re.compile(r"\s*,?\s*\bunless\b\s*", re.I)
_EN_ONLY_COND = re.compile(r"\s*,?\s*\bonly\s+(?:if|when|after|once|while)\b\s*", re.I)
_EN_ONLY_LEAD = re.compile(r"^\W*only\s+(?P<b>.+?)\s*,?\s+\b(?:if|when|after|once|while)\s+(?P<c>.+)$", re.I)
_EN_CAN_ONLY = re.compile(r"\b(?:can|may|could)\s+only\s+", re.I)
_EN_BEFORE_LEAD = re.compile(r"^\W*before\s+", re.I)
_EN_BEFORE = re.compile(r"\s+\bbefore\s+", re.I)
_EN_IF_LEAD = re.compile(r"^\W*(?:if|when|whenever|once|in\s+case)\s+", re.I)
_EN_IF = re.compile(r"\s*,?\s+\b(?:if|when|whenever)\s+", re.I)
_ASKING = re.compile(r"\b(?:ask|asks|asking|asked|whether|know|check|see|tell|find\s+out|confirm|wonder)\s*$", re.I)
_EN_CONNECTOR = re.compile(r"^(?:otherwise|also|however|then|and|but|so|therefore|thus|hence|in\s+addition|"
                           r"additionally|instead|generally|usually|in\s+general|in\s+particular|finally|please|"
                           r"as\s+an?\s+[^,]{1,40},|for\s+[^,]{1,40},|in\s+[^,]{1,40},|at\s+[^,]{1,40},)\s*,?\s+",
                           re.I)
_EN_SO = re.compile(r"^.*?,\s+(?:so|therefore|thus|hence)\s+", re.I)

# ---- Chinese ---------------------------------------------------------------------------------------------

_ZH_NEVER = r"永远不要|永远不得|绝不|绝对不要|绝对不能|从不|决不"
_ZH_LIMIT = rf"(?:最多|至多|不得超过|不能超过|不超过|最多只能|至少|最少|不少于)(?:调用|使用|包含|提供|添加|选择)?{_ZH_NUM}"
_ZH_SHOULD_NOT = r"不应该|不应当|不应|最好不要|尽量不要|尽量避免"
_ZH_NEG = r"不得|不要|不可以|不可|不准|不许|禁止|严禁|切勿|不能|勿"
_ZH_SHOULD = r"应当|应该|最好|尽量"
_ZH_MUST = r"必须|务必|一定要|需要先|需先|总是|始终"
ZH_MODAL = re.compile(
    rf"(?P<limit>{_ZH_LIMIT})|(?P<never>{_ZH_NEVER})|(?P<shouldnot>{_ZH_SHOULD_NOT})|(?P<neg>{_ZH_NEG})"
    rf"|(?P<should>{_ZH_SHOULD})|(?P<must>{_ZH_MUST})"
)
ZH_LIMIT = re.compile(
    rf"(?:最多|至多|不得超过|不能超过|不超过|最多只能)\s*(?P<verb>调用|使用|包含|提供|添加|选择)?\s*(?P<n>{_ZH_NUM})\s*"
    r"(?P<noun>(?:个|名|位|张|次|条|句|段|项|份)?[\u4e00-\u9fff]{0,6})"
)
_ZH_ONLY = re.compile(
    r"^(?:只有当|只有在|只有|仅当|仅在|仅有)(?P<c>.+?)(?:的时候|时|之后|后)?[，,]?\s*(?:才能|才可以|才可|才|方可)(?P<b>.+)$"
)
_ZH_ONLY_WHEN = re.compile(r"^(?:仅当|只有当|仅在|只有在)(?P<c>.+?)(?:的时候|时)[，,]\s*(?P<b>.+)$")
_ZH_ONLY_CAN = re.compile(r"^(?P<s>.*?)(?:只能|只可以|仅能|仅可)在(?P<c>.+?)(?:的时候|时|之后|后)(?P<b>.+)$")
_ZH_UNLESS_LEAD = re.compile(r"^除非(?P<c>.+?)[，,]\s*否则(?P<b>.+)$")
_ZH_UNLESS_TAIL = re.compile(r"^(?P<b>.+?)[，,]\s*除非(?P<c>.+)$")
_ZH_BEFORE = re.compile(r"^(?:在)?(?P<c>.+?)(?:之前|以前)[，,]?\s*(?P<m>.+)$")
_ZH_IF = re.compile(r"^(?:如果|若是|若(?!干)|假如|一旦|当(?![前天日月年中然地初时]))(?P<c>.+?)(?:的时候|的话|时)?[，,]\s*(?:那么|就|则|那)?(?P<m>.+)$")
_ZH_SCOPE = re.compile(r"^(?P<c>[^，,。]{1,20}?(?:模式下|情况下|下|时|的时候|中))[，,]\s*(?P<m>.+)$")
_ZH_IF_JIU = re.compile(r"^(?:如果|若(?!干)|假如|一旦)(?P<c>.+?)(?:就|则)(?P<m>.+)$")
_ZH_LEAD = re.compile(r"^(?:否则|另外|此外|同时|并且|而且|并|且|就|则|那么)[，,]?\s*")

_TRAIL = " \t.,;:!?。，；：！？、"


@dataclass(frozen=True)
class Form:
    """One normative clause, split into its parts."""

    kind: FormKind
    polarity: Polarity
    trigger: str
    """The condition (`if_then`, `before`), the behaviour that needs a condition (`only_if`), or '' when the
    obligation is unconditional."""
    condition: str
    """For `only_if`: the condition the behaviour needs; '' otherwise."""
    main: str
    """The main clause: the obligation as stated (with its subject and modal)."""
    subject: str
    """Who the main clause binds ('' for an imperative or the agent addressed as 'you')."""
    action: str
    """The main clause's verb phrase after its modal (what must be done or avoided); for `only_if`, the
    restricted behaviour with its object (what a detector looks for)."""
    exception: str = ""
    """`must X unless Y`: Y, when the obligation does not apply; '' otherwise."""


@dataclass(frozen=True)
class Unparsed:
    """A normative clause the compiler could not split."""

    reason: str


def _clean(text: str) -> str:
    return text.strip(_TRAIL + "\u3000").strip()


def _duties(text: str) -> str:
    """The text without the phrases that lift a duty (`no need to ...` states no rule)."""
    return NO_DUTY.sub(" may ", text)  # a permission: neither a modal nor an order's verb


def _zh_conditional_order(text: str) -> bool:
    m = _ZH_IF.match(text) or _ZH_SCOPE.match(text)
    return m is not None and zh_order(m.group("m"))


def _en_conditional_order(text: str) -> bool:
    lead = _EN_IF_LEAD.match(text) or _EN_MODE_LEAD.match(text)
    if lead is None:
        return False
    rest = text[lead.end():] if _EN_IF_LEAD.match(text) else lead.group("m")
    return any(is_order(piece) for piece in re.split(r",\s*", rest)[1 if _EN_IF_LEAD.match(text) else 0:])


def normative(text: str, lang: Lang) -> bool:
    """Whether a sentence states a rule: a modal, a limit, an only-form, or an order in the imperative."""
    text = _duties(text)
    if lang == "zh":
        return bool(ZH_MODAL.search(text) or _ZH_ONLY.search(text) or _ZH_ONLY_WHEN.search(text)
                    or re.search(r"(?:之前|以前).{0,40}(?:先|必须|需要|要)", text)
                    or re.search(r"^(?:如果|若(?!干)|假如|一旦).+?(?:就|则|那么)", text)
                    or ZH_ORDER_LEAD.match(text) or _zh_conditional_order(text))
    return bool(EN_MODAL.search(text) or _EN_ONLY.search(text) or _EN_BUT_NOT.search(text)
                or _EN_NOTHING_ELSE.search(text) or is_order(text) or _en_conditional_order(text))


def _modal_rule(text: str, lang: Lang) -> bool:
    """Whether a clause states a rule with a modal of its own (not only an order's verb)."""
    text = _duties(text)
    return bool((ZH_MODAL if lang == "zh" else EN_MODAL).search(text))


def _depth0(text: str, index: int) -> bool:
    depth = 0
    for ch in text[:index]:
        depth += ch in "([（【「"
        depth -= ch in ")]）】」"
    return depth <= 0


def _first_modal(text: str, lang: Lang) -> re.Match[str] | None:
    rx = ZH_MODAL if lang == "zh" else EN_MODAL
    for m in rx.finditer(text):
        if _depth0(text, m.start()):
            return m
    return None


def split_parts(text: str, lang: Lang) -> list[str]:
    """A sentence as its clauses: split at `;` / `；` and at `, and` when each side states a rule."""
    seps = (r"\s*[;；]\s*" if lang == "zh" else
            r"\s*;\s*|,\s+and\s+(?=(?:if|when|you|the\s+agent|never|do\s+not|must|should|shall|cannot|may\s+not)\b)")
    pieces = [p for p in re.split(seps, text) if p and p.strip()]
    out: list[str] = []
    for piece in pieces:
        if out and not normative(piece, lang):
            out[-1] = f"{out[-1]}{'；' if lang == 'zh' else '; '}{piece}"
        else:
            out.append(piece)
    if out and not normative(out[0], lang) and len(out) > 1:
        out[1] = f"{out[0]}{'；' if lang == 'zh' else '; '}{out[1]}"
        out.pop(0)
    return [_clean(p) for p in out if _clean(p)]


def _split_main(rest: str, lang: Lang) -> tuple[str, str] | None:
    """(condition, main clause) of `X, Y` where Y holds the first modal (or opens with an order); None when
    there is no such split."""
    m = _first_modal(rest, lang)
    commas = [c for c in re.finditer(r"[,，]\s*", rest) if _depth0(rest, c.start())]
    if m is not None:
        before = [c for c in commas if c.start() < m.start()]
        if before:
            return rest[:before[-1].start()], rest[before[-1].end():]
        then = re.search(r"\s+then\s+|就|则", rest[:m.start()])
        if then:
            return rest[:then.start()], rest[then.end():]
    for c in commas:  # no modal: the main clause is an order ("If X, tell them ...")
        if (zh_order if lang == "zh" else is_order)(rest[c.end():]):
            return rest[:c.start()], rest[c.end():]
    return None


def _strip_lead(text: str, lang: Lang) -> str:
    main = _clean(text)
    if lang == "zh":
        return _clean(_ZH_LEAD.sub("", main))
    so = _EN_SO.match(main)
    if so and _first_modal(main, lang) and _first_modal(main, lang).start() > so.end():  # type: ignore[union-attr]
        main = main[so.end():]
    for _ in range(3):
        lead = _EN_CONNECTOR.match(main)
        if not lead or _first_modal(main[:lead.end()], lang):
            break
        main = main[lead.end():]
    return _clean(main)


def _main(text: str, lang: Lang) -> tuple[str, Polarity, str, str, str]:
    """(modal group, polarity, subject, action, main clause) of a main clause; group '' when it has no modal
    (an order's group is `must`, or `neg` for `avoid ...`)."""
    main = _strip_lead(text, lang)
    m = _first_modal(main, lang)
    comma_before = m is not None and re.search(r"[,，]", main[:m.start()]) is not None
    if m is None or comma_before:
        order = zh_order(main) if lang == "zh" else is_order(main)
        if order and lang == "en":
            verb = main.split()[0].lower().strip(",")
            if verb in NEGATIVE_IMPERATIVES:
                action = re.sub(r"^\w+\s+(?:from\s+)?", "", main)
                return "neg", "avoid", "", _clean(action), main
            return "must", "do", "", main, main
        if order:
            return "must", "do", "", re.sub(r"^(?:请|记得|记住|务必|确保|切记)", "", main) or main, main
        return "", "do", "", main, main
    group = m.lastgroup or ""
    subject = _clean(main[:m.start()])
    action = _clean(main[m.end():]) if group != "limit" else main
    if lang == "zh" and group == "limit":
        action = _clean(main[m.start():])
    if not action and group == "must" and subject:
        action, subject = subject, ""  # "transfer is needed": what is needed is the obligation
    polarity: Polarity = "avoid" if group in ("never", "neg", "shouldnot") else "do"
    return group, polarity, subject, action, main


def _kind(group: str, polarity: Polarity) -> FormKind:
    if group == "never":
        return "never"
    if group in ("should", "shouldnot"):
        return "should"
    return "must_not" if polarity == "avoid" else "must"


def _form(kind: FormKind, trigger: str, main_text: str, lang: Lang, *, condition: str = "",
          exception: str = "") -> Form | Unparsed:
    group, polarity, subject, action, main = _main(main_text, lang)
    if not action:
        return Unparsed("no obligation after the modal")
    if kind in ("must", "should", "must_not", "never"):
        if not group:
            return Unparsed("no modal verb in the main clause")
        kind = _kind(group, polarity)
    return Form(kind=kind, polarity=polarity, trigger=_clean(trigger), condition=_clean(condition), main=main,
                subject=subject, action=action, exception=_clean(exception))


def _condition(text: str, lang: Lang) -> str:
    """A condition up to where a new clause with its own modal starts."""
    if lang == "en":
        m = _EN_COND_END.search(text)
        if m:
            text = text[:m.start()]
    return _clean(text)


def _only_if(behaviour: str, condition: str, lang: Lang) -> Form | Unparsed:
    behaviour, condition = _clean(behaviour), _condition(condition, lang)
    if not behaviour or not condition:
        return Unparsed("only-if form without both a behaviour and a condition")
    group, _pol, subject, action, main = _main(behaviour, lang)
    if lang == "en":
        main = _EN_CONNECTOR.sub("", main)
        action = re.sub(r"^(?:(?:can|may|could)\s+)?(?:only\s+)?", "", action, flags=re.I)
    return Form(kind="only_if", polarity="do", trigger=action or main, condition=condition, main=main,
                subject=subject, action=action or main)


def _verb_split(phrase: str) -> tuple[str, str]:
    """(verb group, the rest) of a verb phrase: `take action | on pending orders`, `be called | once`."""
    words = phrase.split()
    if not words:
        return "", ""
    n = 1
    head = words[0].lower()
    if head in ("be", "been", "get", "got") or (head in _LIGHT_VERBS and len(words) > 1):
        n = 2
        if head in _LIGHT_VERBS and words[n:n + 1] == ["to"] and len(words) > n + 1:
            n += 2  # "take actions to modify | its address"
    if n < len(words) and words[n].lower() in _PARTICLES and head not in ("be", "been"):
        n += 1
    return " ".join(words[:n]), " ".join(words[n:])


def _can_only(subject: str, rest: str, original: str, lang: Lang) -> Form:
    """`S can only V X`: the behaviour is V (what a rule can see), X what it is restricted to."""
    scope = _clean(subject)  # "For a pending order, you": the lead names what the behaviour acts on
    subject = _strip_lead(subject, lang) if subject.strip() else ""
    rest = _clean(rest)
    verb, obj = _verb_split(rest)
    obj = _condition(re.sub(r"^(?:if|when|once|after|while)\s+", "", obj, flags=re.I), lang)
    passive = verb.lower().startswith(("be ", "been "))
    behaviour = f"{subject} being {verb.split(' ', 1)[1]}" if passive and subject else verb
    return Form(kind="only_if", polarity="do", trigger=behaviour if obj else rest, condition=obj or rest,
                main=_clean(original), subject=subject, action=_clean(f"{scope} {verb} {obj}"))


def parse_en(text: str) -> list[Form | Unparsed]:
    """The forms of one English clause."""
    t = _clean(text)
    if text.rstrip().endswith("?"):
        return [Unparsed("a question, not a rule")]
    m = _EN_IFF.search(t)
    if m:  # both directions: only when the condition holds, and whenever it holds
        return [_only_if(t[:m.start()], t[m.end():], "en"), _form("if_then", t[m.end():], t[:m.start()], "en")]
    m = _EN_NOTHING_ELSE.search(t)
    if m:
        head = _EN_MAY.search(t[:m.start()])
        if head is not None:
            return [_can_only(t[:head.start()], t[head.end():m.start()], t, "en")]
    m = _EN_UNLESS.search(t) or _EN_UNLESS_LEAD.match(t)
    if m:
        body, cond = (m.group("b"), m.group("c")) if m.re is _EN_UNLESS_LEAD else (t[:m.start()], t[m.end():])
        head = _first_modal(body, "en")
        if head is not None and head.lastgroup in ("never", "neg", "shouldnot"):
            return [_only_if(body, cond, "en")]
        if head is not None or is_order(body):
            return [_form("must", "", body, "en", exception=cond)]
    m = _EN_ONLY_LEAD.match(t)
    if m:
        return [_only_if(m.group("b"), m.group("c"), "en")]
    m = _EN_ONLY_COND.search(t)
    if m:
        return [_only_if(t[:m.start()], t[m.end():], "en")]
    m = _EN_CAN_ONLY.search(t)
    if m:
        return [_can_only(t[:m.start()], t[m.end():], t, "en")]
    m = _EN_BUT_NOT.match(t)
    if m and _first_modal(m.group("x"), "en") is None:
        # A pronoun ("never remove them") is left as written: the compiler reports it rather than guess.
        forbidden = _clean(m.group("y"))
        never = m.group("neg").lower() == "never"
        return [Form(kind="never" if never else "must_not", polarity="avoid", trigger="", condition="", main=t,
                     subject=_strip_lead(m.group("s"), "en"), action=forbidden)]
    m = _EN_MODE_LEAD.match(t)
    if m:
        return [_form("if_then", m.group("c"), m.group("m"), "en")]
    if _EN_BEFORE_LEAD.match(t):
        rest = t[_EN_BEFORE_LEAD.match(t).end():]  # type: ignore[union-attr]
        split = _split_main(rest, "en")
        if split is None:
            return [Unparsed("'before' form without a main clause")]
        return [_form("before", split[0], split[1], "en")]
    if _EN_IF_LEAD.match(t):
        rest = t[_EN_IF_LEAD.match(t).end():]  # type: ignore[union-attr]
        split = _split_main(rest, "en")
        if split is None:
            return [Unparsed("could not separate the condition from the obligation")]
        return [_form("if_then", split[0], split[1], "en")]
    m = _EN_MODE_TAIL.match(t)
    if m and normative(m.group("m"), "en"):
        return [_form("if_then", m.group("c"), m.group("m"), "en")]
    modal = _first_modal(t, "en")
    start = modal.end() if modal is not None else (0 if is_order(t) else None)
    if start is not None:
        m = _EN_BEFORE.search(t, start)
        if m:
            return [_form("before", t[m.end():], t[:m.start()], "en")]
        for m in _EN_IF.finditer(t, start):
            relative = re.search(r",\s+(?:which|that|who|where)\b", t[start:m.start()], re.I)
            if not _ASKING.search(t[:m.start()]) and _depth0(t, m.start()) and not relative:
                return [_form("if_then", t[m.end():], t[:m.start()], "en")]
    return [_form("must", "", t, "en")]


def parse_zh(text: str) -> list[Form | Unparsed]:
    """The forms of one Chinese clause."""
    t = _clean(text)
    if re.search(r"[？?]\s*$", text):
        return [Unparsed("问句，不是规则")]
    for rx in (_ZH_UNLESS_LEAD, _ZH_UNLESS_TAIL):
        m = rx.match(t)
        if m:
            head = _first_modal(m.group("b"), "zh")
            if head is not None and head.lastgroup in ("never", "neg", "shouldnot"):
                return [_only_if(m.group("b"), m.group("c"), "zh")]
            return [_form("must", "", m.group("b"), "zh", exception=m.group("c"))]
    for rx in (_ZH_ONLY, _ZH_ONLY_WHEN):
        m = rx.match(t)
        if m:
            return [_only_if(m.group("b"), m.group("c"), "zh")]
    m = _ZH_ONLY_CAN.match(t)
    if m:
        return [_only_if(m.group("s") + m.group("b"), m.group("c"), "zh")]
    m = _ZH_BEFORE.match(t)
    if m and _first_modal(t[:m.end("c")], "zh") is None:
        return [_form("before", m.group("c"), m.group("m"), "zh")]
    m = _ZH_IF.match(t) or _ZH_IF_JIU.match(t)
    if m:
        return [_form("if_then", m.group("c"), m.group("m"), "zh")]
    m = _ZH_SCOPE.match(t)
    if m and _first_modal(m.group("c"), "zh") is None and normative(m.group("m"), "zh"):
        return [_form("if_then", m.group("c"), m.group("m"), "zh")]
    return [_form("must", "", t, "zh")]


def _two_obligations(form: Form, lang: Lang) -> list[Form | Unparsed]:
    """A conditional main clause that states two obligations (`X cannot help and transfer is needed`) as two
    forms with the same condition."""
    if form.kind != "if_then" or lang != "en":
        return [form]
    for m in _EN_AND.finditer(form.main):
        left, right = form.main[:m.start()], form.main[m.end():]
        if _depth0(form.main, m.start()) and _modal_rule(left, lang) and _modal_rule(right, lang):
            return [_form("if_then", form.trigger, left, lang), _form("if_then", form.trigger, right, lang)]
    return [form]


def parse_all(text: str, lang: Lang) -> list[Form | Unparsed]:
    """Every form of one clause in its language: one, or two for `if and only if` and for a condition with
    two obligations."""
    out: list[Form | Unparsed] = []
    for form in parse_zh(text) if lang == "zh" else parse_en(text):
        out.extend(_two_obligations(form, lang) if isinstance(form, Form) else [form])
    return out


def parse(text: str, lang: Lang) -> Form | Unparsed:
    """The first form of one clause in its language."""
    return parse_all(text, lang)[0]


def limits(text: str, lang: Lang) -> list[tuple[int, str]]:
    """(N, noun phrase) of every upper limit in a clause: `at most N <noun>` / `最多N<量词><名词>`."""
    out: list[tuple[int, str]] = []
    if lang == "zh":
        for m in ZH_LIMIT.finditer(text):
            n = m.group("n")
            out.append((int(n) if n.isdigit() else NUMBERS[n], m.group("noun") or ""))
        return out
    for m in EN_LIMIT.finditer(text):
        n = re.sub(r"\s+", " ", m.group("n").lower())
        out.append((int(n) if n.isdigit() else NUMBERS[n], " ".join(m.group("noun").split()).lower()))
    return out


MINIMUM = re.compile(rf"\b(?:at\s+least|a\s+minimum\s+of|no\s+fewer\s+than|no\s+less\s+than)\s+{_EN_NUM}\b"
                     rf"|(?:至少|最少|不少于){_ZH_NUM}", re.I)
"""A lower limit (`at least N`, `至少N`): no rule counts it; the model judges it."""
