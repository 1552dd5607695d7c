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

from agent_factory.factory.compile import grammar as gr
from agent_factory.factory.compile.parse import Lang
from agent_factory.factory.compile.words import NEGATIVE_IMPERATIVES, NO_DUTY, ZH_ORDER_LEAD, is_order, zh_order

FormKind = Literal["must", "must_not", "never", "only_if", "should", "if_then", "before"]
"""How a spec sentence binds, as the compiler recognised it."""
Polarity = Literal["do", "avoid"]
"""Whether the obligation asks the agent to do something or to avoid it."""

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
    m = gr.ZH_IF.match(text) or gr.ZH_SCOPE.match(text)
    return m is not None and zh_order(m.group("m"))


def _en_conditional_order(text: str) -> bool:
    """`If X, tell ...` / `In concise mode, skip ...` / `Unless X, send ...`: an order after the condition."""
    scoped = gr.EN_MODE_LEAD.match(text) or gr.EN_UNLESS_LEAD.match(text)
    if scoped is not None:
        return is_order(scoped.group("m" if scoped.re is gr.EN_MODE_LEAD else "b"))
    lead = gr.EN_IF_LEAD.match(text)
    return lead is not None and any(is_order(piece) for piece in re.split(r",\s*", text[lead.end():])[1:])


def normative(text: str, lang: Lang) -> bool:
    """Whether a sentence states a rule: a modal, a limit, an only-form, or an order in the imperative."""
    text = _duties(text)
    if lang == "zh":
        return bool(gr.ZH_MODAL.search(text) or gr.ZH_ONLY.search(text) or gr.ZH_ONLY_WHEN.search(text)
                    or gr.ZH_ONLY_VERB.search(text)
                    or re.search(r"(?:之前|以前).{0,40}(?:先|必须|需要|要)", text)
                    or re.search(r"^(?:如果|若(?!干)|假如|一旦).+?(?:就|则|那么)", text)
                    or ZH_ORDER_LEAD.match(text) or _zh_conditional_order(text))
    return bool(gr.EN_MODAL.search(text) or gr.EN_ONLY.search(text) or gr.EN_BUT_NOT.search(text)
                or gr.EN_NOTHING_ELSE.search(text) or is_order(text) or _en_conditional_order(text))


def _modal_rule(text: str, lang: Lang) -> bool:
    """Whether a clause states a rule with a modal of its own (not only an order's verb)."""
    text = _duties(text)
    return bool((gr.ZH_MODAL if lang == "zh" else gr.EN_MODAL).search(text))


def _depth0(text: str, index: int) -> bool:
    depth = 0
    for ch in text[:index]:
        depth += ch in "([（【「"
        depth -= ch in ")]）】」"
    return depth <= 0


def _first_modal(text: str, lang: Lang) -> re.Match[str] | None:
    rx = gr.ZH_MODAL if lang == "zh" else gr.EN_MODAL
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
        return _clean(gr.ZH_LEAD.sub("", main))
    so = gr.EN_SO.match(main)
    if so and _first_modal(main, lang) and _first_modal(main, lang).start() > so.end():  # type: ignore[union-attr]
        main = main[so.end():]
    for _ in range(3):
        lead = gr.EN_CONNECTOR.match(main)
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
        m = gr.EN_COND_END.search(text)
        if m:
            text = text[:m.start()]
    return _clean(text)


def _only_if(behaviour: str, condition: str, lang: Lang) -> Form | Unparsed:
    behaviour, condition = _clean(behaviour), _condition(condition, lang)
    if not behaviour or not condition:
        return Unparsed("only-if form without both a behaviour and a condition")
    group, _pol, subject, action, main = _main(behaviour, lang)
    if lang == "en":
        main = gr.EN_CONNECTOR.sub("", main)
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
    if head in ("be", "been", "get", "got") or (head in gr.LIGHT_VERBS and len(words) > 1):
        n = 2
        if head in gr.LIGHT_VERBS and words[n:n + 1] == ["to"] and len(words) > n + 1:
            n += 2  # "take actions to modify | its address"
    if n < len(words) and words[n].lower() in gr.PARTICLES and head not in ("be", "been"):
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


def parse_en(text: str) -> list[Form | Unparsed]:  # noqa: C901 - the grammar's patterns, tried in precedence order
    """The forms of one English clause."""
    t = _clean(text)
    if text.rstrip().endswith("?"):
        return [Unparsed("a question, not a rule")]
    m = gr.EN_IFF.search(t)
    if m:  # both directions: only when the condition holds, and whenever it holds
        return [_only_if(t[:m.start()], t[m.end():], "en"), _form("if_then", t[m.end():], t[:m.start()], "en")]
    m = gr.EN_NOTHING_ELSE.search(t)
    if m:
        head = gr.EN_MAY.search(t[:m.start()])
        if head is not None:
            return [_can_only(t[:head.start()], t[head.end():m.start()], t, "en")]
    m = gr.EN_UNLESS_LEAD.match(t) or gr.EN_UNLESS.search(t)
    if m:
        body, cond = (m.group("b"), m.group("c")) if m.re is gr.EN_UNLESS_LEAD else (t[:m.start()], t[m.end():])
        head = _first_modal(body, "en")
        if head is not None and head.lastgroup in ("never", "neg", "shouldnot"):
            return [_only_if(body, cond, "en")]
        if head is not None or is_order(body):
            return [_form("must", "", body, "en", exception=cond)]
    m = gr.EN_WITHOUT.search(t)
    head = _first_modal(t[:m.start()], "en") if m else None
    if m and head is not None and head.lastgroup in ("never", "neg", "shouldnot"):
        # "Do not cancel an order without the user's confirmation": cancelling is allowed only with it.
        return [_only_if(t[:m.start()], t[m.end():], "en")]
    m = gr.EN_ONLY_LEAD.match(t)
    if m:
        return [_only_if(m.group("b"), m.group("c"), "en")]
    m = gr.EN_ONLY_COND.search(t)
    if m:
        return [_only_if(t[:m.start()], t[m.end():], "en")]
    m = gr.EN_CAN_ONLY.search(t)
    if m:
        return [_can_only(t[:m.start()], t[m.end():], t, "en")]
    m = gr.EN_BUT_NOT.match(t)
    if m and _first_modal(m.group("x"), "en") is None:
        # A pronoun ("never remove them") is left as written: the compiler reports it rather than guess.
        forbidden = _clean(m.group("y"))
        never = m.group("neg").lower() == "never"
        return [Form(kind="never" if never else "must_not", polarity="avoid", trigger="", condition="", main=t,
                     subject=_strip_lead(m.group("s"), "en"), action=forbidden)]
    m = gr.EN_MODE_LEAD.match(t)
    if m:
        return [_form("if_then", m.group("c"), m.group("m"), "en")]
    if gr.EN_BEFORE_LEAD.match(t):
        rest = t[gr.EN_BEFORE_LEAD.match(t).end():]  # type: ignore[union-attr]
        split = _split_main(rest, "en")
        if split is None:
            return [Unparsed("'before' form without a main clause")]
        return [_form("before", split[0], split[1], "en")]
    if gr.EN_IF_LEAD.match(t):
        rest = t[gr.EN_IF_LEAD.match(t).end():]  # type: ignore[union-attr]
        split = _split_main(rest, "en")
        if split is None:
            return [Unparsed("could not separate the condition from the obligation")]
        return [_form("if_then", split[0], split[1], "en")]
    m = gr.EN_MODE_TAIL.match(t)
    if m and normative(m.group("m"), "en"):
        return [_form("if_then", m.group("c"), m.group("m"), "en")]
    modal = _first_modal(t, "en")
    start = modal.end() if modal is not None else (0 if is_order(t) else None)
    if start is not None:
        m = gr.EN_BEFORE.search(t, start)
        if m:
            return [_form("before", t[m.end():], t[:m.start()], "en")]
        for m in gr.EN_IF.finditer(t, start):
            relative = re.search(r",\s+(?:which|that|who|where)\b", t[start:m.start()], re.I)
            if not gr.ASKING.search(t[:m.start()]) and _depth0(t, m.start()) and not relative:
                return [_form("if_then", t[m.end():], t[:m.start()], "en")]
    return [_form("must", "", t, "en")]


def parse_zh(text: str) -> list[Form | Unparsed]:
    """The forms of one Chinese clause."""
    t = _clean(text)
    if re.search(r"[？?]\s*$", text):
        return [Unparsed("问句，不是规则")]
    for rx in (gr.ZH_UNLESS_LEAD, gr.ZH_UNLESS_TAIL):
        m = rx.match(t)
        if m:
            head = _first_modal(m.group("b"), "zh")
            if head is not None and head.lastgroup in ("never", "neg", "shouldnot"):
                return [_only_if(m.group("b"), m.group("c"), "zh")]
            return [_form("must", "", m.group("b"), "zh", exception=m.group("c"))]
    for rx in (gr.ZH_ONLY, gr.ZH_ONLY_WHEN):
        m = rx.match(t)
        if m:
            return [_only_if(m.group("b"), m.group("c"), "zh")]
    m = gr.ZH_ONLY_CAN.match(t)
    if m:
        return [_only_if(m.group("s") + m.group("b"), m.group("c"), "zh")]
    m = gr.ZH_ONLY_VERB.match(t)
    if m and _first_modal(t, "zh") is None:
        subject = _clean(m.group("s"))
        return [Form(kind="only_if", polarity="do", trigger=m.group("v"), condition=_clean(m.group("o")), main=t,
                     subject=subject, action=_clean(f"{subject}{m.group('v')}{m.group('o')}"))]
    m = gr.ZH_BEFORE.match(t)
    if m and _first_modal(t[:m.end("c")], "zh") is None:
        return [_form("before", m.group("c"), m.group("m"), "zh")]
    m = gr.ZH_IF.match(t) or gr.ZH_IF_JIU.match(t)
    if m:
        return [_form("if_then", m.group("c"), m.group("m"), "zh")]
    m = gr.ZH_SCOPE.match(t)
    if m and _first_modal(m.group("c"), "zh") is None and (normative(m.group("m"), "zh") or zh_order(m.group("m"))):
        return [_form("if_then", m.group("c"), m.group("m"), "zh")]
    return [_form("must", "", t, "zh")]


def _two_obligations(form: Form, lang: Lang) -> list[Form | Unparsed]:
    """A conditional main clause that states two obligations (`X cannot help and transfer is needed`) as two
    forms with the same condition."""
    if form.kind != "if_then" or lang != "en":
        return [form]
    for m in gr.EN_AND.finditer(form.main):
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
        for m in gr.ZH_LIMIT.finditer(text):
            n = m.group("n")
            out.append((int(n) if n.isdigit() else gr.NUMBERS[n], m.group("noun") or ""))
        return out
    for m in gr.EN_LIMIT.finditer(text):
        n = re.sub(r"\s+", " ", m.group("n").lower())
        out.append((int(n) if n.isdigit() else gr.NUMBERS[n], " ".join(m.group("noun").split()).lower()))
    return out


MINIMUM = re.compile(rf"\b(?:at\s+least|a\s+minimum\s+of|no\s+fewer\s+than|no\s+less\s+than)\s+{gr.EN_NUM}\b"
                     rf"|(?:至少|最少|不少于){gr.ZH_NUM}", re.I)
"""A lower limit (`at least N`, `至少N`): no rule counts it; the model judges it."""
