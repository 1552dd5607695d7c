"""The sentence forms of a rule, in English and Chinese: which sentences are normative, and how one splits.

A normative clause becomes a `Form`: its kind (must / must_not / never / only_if / should / if_then /
before), whether the obligation asks to do or to avoid something, the trigger text (the condition, or for
`only_if` the behaviour that needs the condition), the main clause and its verb phrase. A normative clause
whose parts cannot be told apart becomes an `Unparsed` with the reason.

English forms: `must`, `shall`, `need(s) to`, `have to`, `is required to`, `require(s)`, sentence-initial
`Always`; `must not`, `do not`, `don't`, `cannot`, `may not`, `is not allowed to`; `never`; `should (not)`;
`at most N`, `no more than N`; `if and only if`, `only if / when / after`, `Only X when Y`, `can only X`,
`do not X unless Y`; `if X, Y`, `Y if X`, `when X, Y`; `before X, Y`, `Y before X`.
Chinese forms: 必须 / 务必 / 一定要; 不得 / 不要 / 不可 / 不能 / 禁止 / 严禁 / 切勿; 永远不要 / 绝不; 应当 / 应该;
最多 / 至多 / 不超过 N; 只有(当/在)…才, 仅当…(时), 只能在…时, 除非…否则不得; 如果 / 若 / 当…(时)，(就/则)…;
在…之前，…
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from factory.compile.parse import Lang

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
_EN_LIMIT = rf"(?:at\s+most|no\s+more\s+than|a\s+maximum\s+of|up\s+to)\s+{_EN_NUM}\b"
EN_MODAL = re.compile(
    rf"(?P<never>\b(?:{_EN_NEVER})\b)|(?P<shouldnot>\b(?:{_EN_SHOULD_NOT})\b)|(?P<neg>\b(?:{_EN_NEG})\b)"
    rf"|(?P<should>\b(?:{_EN_SHOULD})\b)|(?P<must>\b(?:{_EN_MUST})\b)|(?P<limit>\b{_EN_LIMIT})",
    re.IGNORECASE,
)
EN_LIMIT = re.compile(
    rf"\b(?:at\s+most|no\s+more\s+than|a\s+maximum\s+of|up\s+to)\s+(?P<n>{_EN_NUM})\s+"
    r"(?P<noun>(?:(?!(?:and|or|per|in|for|on|each|at|of|to|with)\b)[A-Za-z-]+\s*){1,3})",
    re.IGNORECASE,
)
_EN_ONLY = re.compile(r"\b(?:can|may|could)\s+only\b|^\W*only\b|\bonly\s+(?:if|when|after|once|while)\b", re.I)
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
                           r"additionally|instead|as\s+an?\s+[^,]{1,40}|for\s+[^,]{1,40}|in\s+[^,]{1,40})\s*,?\s+",
                           re.I)
_EN_SO = re.compile(r"^.*?,\s+(?:so|therefore|thus|hence)\s+", re.I)

# ---- Chinese ---------------------------------------------------------------------------------------------

_ZH_NEVER = r"永远不要|永远不得|绝不|绝对不要|绝对不能|从不|决不"
_ZH_LIMIT = rf"(?:最多|至多|不得超过|不能超过|不超过|最多只能)(?:调用|使用|包含|提供|添加|选择)?{_ZH_NUM}"
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
    """The main clause's verb phrase after its modal (what must be done or avoided)."""


@dataclass(frozen=True)
class Unparsed:
    """A normative clause the compiler could not split."""

    reason: str


def _clean(text: str) -> str:
    return text.strip(_TRAIL + "\u3000").strip()


def normative(text: str, lang: Lang) -> bool:
    """Whether a sentence states a rule (it has a modal, a limit, or an only-form)."""
    if lang == "zh":
        return bool(ZH_MODAL.search(text) or _ZH_ONLY.search(text) or _ZH_ONLY_WHEN.search(text)
                    or re.search(r"(?:之前|以前).{0,40}(?:先|必须|需要|要)", text)
                    or re.search(r"^(?:如果|若(?!干)|假如|一旦).+?(?:就|则|那么)", text))
    return bool(EN_MODAL.search(text) or _EN_ONLY.search(text))


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
    seps = r"\s*[;；]\s*" if lang == "zh" else r"\s*;\s*|,\s+and\s+(?=(?:if|when|you|the\s+agent|never|do\s+not)\b)"
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
    """(condition, main clause) of `X, Y` where Y holds the first modal; None when there is no such split."""
    m = _first_modal(rest, lang)
    if m is None:
        return None
    commas = [c.start() for c in re.finditer(r"[,，]\s*", rest[:m.start()]) if _depth0(rest, c.start())]
    if commas:
        cut = commas[-1]
        tail = re.match(r"[,，]\s*", rest[cut:])
        assert tail is not None
        return rest[:cut], rest[cut + tail.end():]
    then = re.search(r"\s+then\s+|就|则", rest[:m.start()])
    if then:
        return rest[:then.start()], rest[then.end():]
    return None


def _main(text: str, lang: Lang) -> tuple[str, Polarity, str, str, str]:
    """(modal group, polarity, subject, action, main clause) of a main clause; group '' when it has no modal."""
    main = _clean(text)
    if lang == "en":
        so = _EN_SO.match(main)
        if so and _first_modal(main, lang) and _first_modal(main, lang).start() > so.end():  # type: ignore[union-attr]
            main = main[so.end():]
        for _ in range(3):
            lead = _EN_CONNECTOR.match(main)
            if not lead or _first_modal(main[:lead.end()], lang):
                break
            main = main[lead.end():]
    else:
        main = _ZH_LEAD.sub("", main)
    main = _clean(main)
    m = _first_modal(main, lang)
    comma_before = m is not None and re.search(r"[,，]", main[:m.start()]) is not None
    if m is None or comma_before:
        return "", "do", "", main, main
    group = m.lastgroup or ""
    subject = _clean(main[:m.start()])
    action = _clean(main[m.end():]) if group != "limit" else main
    if lang == "zh" and group == "limit":
        action = _clean(main[m.start():])
    polarity: Polarity = "avoid" if group in ("never", "neg", "shouldnot") else "do"
    return group, polarity, subject, action, main


def _kind(group: str, polarity: Polarity) -> FormKind:
    if group == "never":
        return "never"
    if group in ("should", "shouldnot"):
        return "should"
    return "must_not" if polarity == "avoid" else "must"


def _form(kind: FormKind, trigger: str, main_text: str, lang: Lang, *, condition: str = "") -> Form | Unparsed:
    group, polarity, subject, action, main = _main(main_text, lang)
    if not action:
        return Unparsed("no obligation after the modal")
    if kind in ("must", "should", "must_not", "never"):
        if not group:
            return Unparsed("no modal verb in the main clause")
        kind = _kind(group, polarity)
    return Form(kind=kind, polarity=polarity, trigger=_clean(trigger), condition=_clean(condition), main=main,
                subject=subject, action=action)


def _only_if(behaviour: str, condition: str, lang: Lang) -> Form | Unparsed:
    behaviour, condition = _clean(behaviour), _clean(condition)
    if not behaviour or not condition:
        return Unparsed("only-if form without both a behaviour and a condition")
    group, _pol, subject, action, main = _main(behaviour, lang)
    if lang == "en":
        main = _EN_CONNECTOR.sub("", main)
        action = re.sub(r"^(?:(?:can|may|could)\s+)?(?:only\s+)?", "", action, flags=re.I)
    return Form(kind="only_if", polarity="do", trigger=action or main, condition=condition, main=main,
                subject=subject, action=action or main)


def parse_en(text: str) -> Form | Unparsed:
    """The form of one English clause."""
    t = _clean(text)
    if text.rstrip().endswith("?"):
        return Unparsed("a question, not a rule")
    m = _EN_IFF.search(t)
    if m:
        return _only_if(t[:m.start()], t[m.end():], "en")
    m = _EN_UNLESS.search(t)
    if m:
        head = _first_modal(t[:m.start()], "en")
        if head is not None and head.lastgroup in ("never", "neg", "shouldnot"):
            return _only_if(t[:m.start()], t[m.end():], "en")
    m = _EN_ONLY_LEAD.match(t)
    if m:
        return _only_if(m.group("b"), m.group("c"), "en")
    m = _EN_ONLY_COND.search(t)
    if m:
        return _only_if(t[:m.start()], t[m.end():], "en")
    m = _EN_CAN_ONLY.search(t)
    if m:
        rest = _clean(t[m.end():])
        return Form(kind="only_if", polarity="do", trigger=rest, condition=rest, main=_clean(t),
                    subject=_clean(t[:m.start()]), action=rest)
    if _EN_BEFORE_LEAD.match(t):
        rest = t[_EN_BEFORE_LEAD.match(t).end():]  # type: ignore[union-attr]
        split = _split_main(rest, "en")
        if split is None:
            return Unparsed("'before' form without a main clause")
        return _form("before", split[0], split[1], "en")
    if _EN_IF_LEAD.match(t):
        rest = t[_EN_IF_LEAD.match(t).end():]  # type: ignore[union-attr]
        split = _split_main(rest, "en")
        if split is None:
            return Unparsed("could not separate the condition from the obligation")
        return _form("if_then", split[0], split[1], "en")
    modal = _first_modal(t, "en")
    if modal is not None:
        m = _EN_BEFORE.search(t, modal.end())
        if m:
            return _form("before", t[m.end():], t[:m.start()], "en")
        for m in _EN_IF.finditer(t, modal.end()):
            relative = re.search(r",\s+(?:which|that|who|where)\b", t[modal.end():m.start()], re.I)
            if not _ASKING.search(t[:m.start()]) and _depth0(t, m.start()) and not relative:
                return _form("if_then", t[m.end():], t[:m.start()], "en")
    return _form("must", "", t, "en")


def parse_zh(text: str) -> Form | Unparsed:
    """The form of one Chinese clause."""
    t = _clean(text)
    if re.search(r"[？?]\s*$", text):
        return Unparsed("问句，不是规则")
    for rx in (_ZH_UNLESS_LEAD, _ZH_UNLESS_TAIL):
        m = rx.match(t)
        if m:
            return _only_if(m.group("b"), m.group("c"), "zh")
    for rx in (_ZH_ONLY, _ZH_ONLY_WHEN):
        m = rx.match(t)
        if m:
            return _only_if(m.group("b"), m.group("c"), "zh")
    m = _ZH_ONLY_CAN.match(t)
    if m:
        return _only_if(m.group("s") + m.group("b"), m.group("c"), "zh")
    m = _ZH_BEFORE.match(t)
    if m and _first_modal(t[:m.end("c")], "zh") is None:
        return _form("before", m.group("c"), m.group("m"), "zh")
    m = _ZH_IF.match(t) or _ZH_IF_JIU.match(t)
    if m:
        return _form("if_then", m.group("c"), m.group("m"), "zh")
    m = _ZH_SCOPE.match(t)
    if m and _first_modal(m.group("c"), "zh") is None and _first_modal(m.group("m"), "zh") is not None:
        return _form("if_then", m.group("c"), m.group("m"), "zh")
    return _form("must", "", t, "zh")


def parse(text: str, lang: Lang) -> Form | Unparsed:
    """The form of one clause in its language."""
    return parse_zh(text) if lang == "zh" else parse_en(text)


def limits(text: str, lang: Lang) -> list[tuple[int, str]]:
    """(N, noun phrase) of every `at most N <noun>` / `最多N<量词><名词>` in a clause."""
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
