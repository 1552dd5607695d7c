"""`compile_spec`: a role spec (markdown system prompt) -> clauses r = (trigger, obligation), deterministically.

Sentence by sentence: skip what states no rule; split a sentence into its clauses; recognise each clause's
form (`patterns`: one clause may give two forms, `if and only if` or a condition with two obligations); detect
its trigger (`detect`) and choose its obligation check (`checks`); build the pack clause. A normative sentence
always ends up a clause or in `uncompiled` with the reason, never dropped. A trigger that refers to an action
named before ("before taking the action", "the tool call") takes the tools of the block's previous clause, else
of its section. A clause whose rule needs the conversation (confirmation before an action) makes the whole spec
conversation-layer (one denominator for every clause); other specs are judged per turn.

A conjunction ("must contain A, B and C", 「A」「B」「C」四个部分, A、B和C) becomes one clause per part, each its own
check with its own datum: the sentence holds where all its parts hold (an alternation would hold where any one
did). A scope sentence ("these requirements apply equally to English answers", 这些要求必须同样适用于英文回答)
makes no clause of its own: the text matchers of the clauses before it gain the other language's phrasing of the
phrases they quote, from the bilingual table in `words.TRANSLATIONS`, and each clause's description says what it
gained, or that it checks the spec's language only (a phrase the table does not know). When no clause gains
anything the sentence is listed uncompiled with that reason.
Pure: the same text and options give the same output.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Sequence

from agent_factory.factory.compile import checks as _checks
from agent_factory.factory.compile.checks import Check, build_check, question
from agent_factory.factory.compile.detect import (
    CONCEPTS,
    Detection,
    Vocabulary,
    always,
    catalogue,
    context_tools,
    find_condition,
    mode_condition,
    phrase_regex,
    tool_condition,
)
from agent_factory.factory.compile.model import Check as CheckModel
from agent_factory.factory.compile.model import CompiledClause, CompiledSpec, Detector, Uncompiled
from agent_factory.factory.compile.parse import Sentence, code_identifiers, sentences
from agent_factory.factory.compile.patterns import Form, Unparsed, normative, parse_all, split_parts
from agent_factory.factory.compile.words import SPEC_MODE_ALIAS, scope_language, translations
from agent_factory.knowledge_packs.model import Clause, ClauseCondition, ClauseKind, ClauseLayer

_ANAPHOR_SUBJECT = re.compile(r"^(?:this|these|that|those|it|they|such)\b|^(?:这|此|该|它)", re.I)
_ANAPHOR_OBJECT = re.compile(r"\b(?:these|those|them|this|it)\s*$|(?:这些|那些|它们|此类)$", re.I)
# "This action can only be called once" at the top of `### Modify items`: the section's own action.
_DEICTIC = re.compile(r"^(?:this|that|the)\s+(?:action|tool|operation|function|api|call|step)s?$"
                      r"|^(?:该|此|这个)(?:操作|工具)$", re.I)
_PERSONAL = re.compile(r"^(?:it|they)$|^它们?$", re.I)
_RULES_BACK = re.compile(r"\b(?:the|these|those|such|above|preceding|previous)\s+(?:above\s+|preceding\s+|previous\s+)?"
                         r"(?:rules|requirements|conditions|restrictions)\b(?!\s+(?:of|for|in|on|that|which)\b)"
                         r"|(?:上述|以上|前述|这些)(?:规则|要求|条件)", re.I)
_STOP = frozenset("""a an the to of and or any all you your agent agents user users customer customers that this it
is are be in on for with at by as if only should must not never do does make sure can cannot first then each every
from into than when before after may will would their its our we they them also other some such one two three
have has need needs""".split())
_CONDITIONAL = ("if_then", "before", "only_if")
_STRONG = ("tool", "any_tool", "attribute", "context")
_SKIP_HEAD = frozenset({"be", "been", "being", "get", "got", "any", "ever", "also", "even", "just", "there", "is",
                        "are", "the", "a", "an"})


def _normalized(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def _slug(form: Form, kind: str) -> str:
    words = list(dict.fromkeys(
        w for w in re.findall(r"[a-z][a-z0-9]*", f"{form.action} {form.trigger}".lower()) if w not in _STOP
    ))
    slug = "_".join(words[:4])[:40].strip("_")
    return slug if slug else kind


def _clause_id(form: Form, text: str) -> str:
    return f"{_slug(form, form.kind)}_{hashlib.sha256(_normalized(text).encode()).hexdigest()[:6]}"


def _pack_kind(form: Form, check: Check) -> ClauseKind:
    if form.kind == "only_if":
        return "only_if"
    if form.kind == "before" and check.how != "matcher":
        return "before"
    return "must_not" if form.polarity == "avoid" else "must"


def _head_verb(action: str) -> str | None:
    """The verb of an action phrase (`be any change of ...` -> `change`), for matching tools by their verb."""
    words: list[str] = re.findall(r"[a-z]+", action.lower())
    for word in words:
        if word not in _SKIP_HEAD and not word.endswith("ly"):
            return word
    return None


def _narrowed(found: Detection, sentence: Sentence, vocab: Vocabulary) -> Detection:
    """A weak tool match narrowed to the section's tools, when they share some."""
    if not found.partial:
        return found
    ctx = context_tools(sentence, vocab)
    if ctx is None:
        return found
    both = tuple(t for t in found.condition.tool_names if t in ctx.condition.tool_names)
    if not both:
        return found
    return Detection(tool_condition(both), "tool", f"a call to {', '.join(both)} (named by its action, in the "
                                                   f"{'label' if sentence.label else 'section'}'s scope)")


def _situation(text: str, sentence: Sentence, vocab: Vocabulary, previous: Detection | None, *,
               mode: bool) -> Detection | None:
    """What a rule can see of a condition or a restricted behaviour (see `detect` for the order)."""
    if mode:
        found = mode_condition(text, vocab)
        if found is not None:
            return found
    if CONCEPTS["definite"].search(text) or CONCEPTS["api"].search(text):
        # "before taking the action", "the tool call": the action of the sentence before, else of the section.
        if previous is not None:
            return Detection(previous.condition, previous.how, f"{previous.note}; the action the text refers to")
        ctx = context_tools(sentence, vocab)
        if ctx is not None:
            return ctx
    found = find_condition(text, sentence, vocab)
    return _narrowed(found, sentence, vocab) if found is not None else None


def _forbidden_action(form: Form, sentence: Sentence, vocab: Vocabulary) -> Detection | None:
    """The tool call an avoid-obligation forbids, found by the obligation's own verb."""
    found = find_condition(f"{form.subject} {form.action}".strip(), sentence, vocab, head=_head_verb(form.action))
    if found is None or found.how not in ("tool", "any_tool"):
        return None
    return _narrowed(found, sentence, vocab)


def _trigger(form: Form, sentence: Sentence, vocab: Vocabulary,
             previous: Detection | None) -> tuple[Detection, bool, bool]:
    """(trigger detection, fell back to always for a condition, trigger is the forbidden action itself)."""
    if form.kind in _CONDITIONAL:
        text = form.action if form.kind == "only_if" else form.trigger
        found = _situation(text, sentence, vocab, previous, mode=form.kind != "only_if")
        if form.kind == "if_then" and form.polarity == "avoid" and (found is None or found.how not in _STRONG):
            # The condition is invisible to rules (or only a weak text match) but the forbidden action is not:
            # watch the action and let the model judge whether the condition held.
            action = _forbidden_action(form, sentence, vocab) or (context_tools(sentence, vocab) if found is None
                                                                   else None)
            if action is not None:
                return action, False, True
        if found is not None:
            return found, False, False
        if form.kind == "only_if":
            ctx = context_tools(sentence, vocab)
            if ctx is not None:
                return ctx, False, False
        return always(), True, False
    if form.polarity == "avoid":
        found = _forbidden_action(form, sentence, vocab)
        if found is not None and found.how == "tool":
            return found, False, True
    if form.exception:  # no rule can see that an exception did not hold: the model judges applicability
        ctx = context_tools(sentence, vocab)
        return ctx or always(), True, False
    ctx = context_tools(sentence, vocab)
    return (ctx, False, False) if ctx is not None else (always(), False, False)


def _anaphora(form: Form, detection: Detection) -> str | None:
    subject = form.subject.strip()
    if _ANAPHOR_SUBJECT.match(subject):
        section_action = _DEICTIC.match(subject) is not None and detection.how in ("context", "tool")
        # "If the user provides a gift card, it must ...": the pronoun names what the condition introduced.
        own_condition = form.kind == "if_then" and _PERSONAL.match(subject) is not None
        if not (section_action or own_condition):
            return f"refers back to an earlier sentence ('{subject.split()[0] if ' ' in subject else subject}')"
    rules = _RULES_BACK.search(f"{form.main} {form.condition}")
    if rules:
        return f"refers back to earlier sentences ('{rules.group(0)}'), which are compiled on their own"
    if form.kind in ("if_then", "before"):
        return None  # a pronoun in the obligation names what the sentence's own condition introduced
    behaviour = form.trigger if form.kind == "only_if" else form.action
    m = _ANAPHOR_OBJECT.search(behaviour)
    if m and detection.how in ("always", "context"):
        return f"what it restricts refers back to an earlier sentence ('{m.group(0).strip()}')"
    return None


def _labels(all_sentences: Sequence[Sentence]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for s in all_sentences:
        if s.label and s.label not in out.setdefault(s.section, []):
            out[s.section].append(s.label)
    return {k: tuple(v) for k, v in out.items()}


def _aliases(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in SPEC_MODE_ALIAS.finditer(text):
        word, value = (m.group("m"), m.group("v")) if m.group("m") else (m.group("m2"), m.group("v2"))
        out.setdefault(word.casefold(), value)
    return out


def _unique_clause_id(form: Form, part: str, section: str, seen: set[str]) -> str:
    # The same sentence under two headings is two clauses: the heading tells them apart, not the order.
    cid = _clause_id(form, part)
    if cid in seen:
        cid = _clause_id(form, f"{section}\x1f{part}")
    n = 2
    while cid in seen:
        cid, n = f"{_clause_id(form, part)}_{n}", n + 1
    return cid


def _trigger_text(form: Form, detection: Detection) -> str:
    if form.exception:
        return f"unless {form.exception}"
    return form.trigger or ("always" if detection.how == "always" else detection.note)


def compile_spec(
    text: str, *, source: str, tools: Sequence[str] = (), lexicons: Iterable[str] = (),
    layer: ClauseLayer | None = None, modes: Sequence[str] = (),
) -> CompiledSpec:
    """Compile a role spec into clauses.

    `source` names the spec in clauses (`airline_en.md`); `tools` adds tool names to the catalogue the spec's
    own backticked names start; `lexicons` are the base pack's lexicon categories that have patterns (a clause
    may use them); `modes` the agent modes the base pack knows (what a mode condition compares with); `layer`
    forces every clause onto one layer (default: see the module docstring). Every normative sentence ends up a
    clause or in `uncompiled` with the reason.
    """
    all_sentences = sentences(text)
    vocab = Vocabulary(tools=catalogue(code_identifiers(text), tools), lexicons=frozenset(lexicons),
                       modes=tuple(modes), mode_aliases=_aliases(text), section_labels=_labels(all_sentences))
    drafts: list[tuple[Sentence, str, Form, Detection, Check]] = []
    uncompiled: list[Uncompiled] = []
    previous: tuple[int, Detection] | None = None
    # A scope sentence makes no clause of its own: it is applied to the clauses before it (`_expand`).
    scopes = [(s, lang) for s in all_sentences if normative(s.text, s.lang)
              for lang in (scope_language(s.text),) if lang is not None]
    scoped = {id(s) for s, _ in scopes}
    rules = len(scopes)
    for sentence in all_sentences:
        if id(sentence) in scoped or not normative(sentence.text, sentence.lang):
            continue
        rules += 1
        if re.search(r"[?？]\W*$", sentence.text):
            uncompiled.append(Uncompiled(line=sentence.line, sentence=sentence.text, reason="a question, not a rule"))
            continue
        accounted = False
        for part in split_parts(sentence.text, sentence.lang):
            if not normative(part, sentence.lang):
                continue
            for form in parse_all(part, sentence.lang):
                accounted = True
                if isinstance(form, Unparsed):
                    uncompiled.append(Uncompiled(line=sentence.line, sentence=part, reason=form.reason))
                    continue
                before = previous[1] if previous is not None and previous[0] == sentence.block else None
                detection, fallback, action_trigger = _trigger(form, sentence, vocab, before)
                reason = _anaphora(form, detection)
                if reason is not None:
                    uncompiled.append(Uncompiled(line=sentence.line, sentence=part, reason=reason))
                    continue
                check = build_check(form, sentence, detection, vocab, fallback=fallback,
                                    action_trigger=action_trigger)
                if check.trigger is not None:
                    detection = check.trigger
                if detection.how in ("tool", "context") and "*" not in detection.condition.tool_names:
                    previous = (sentence.block, detection)
                drafts.append((sentence, part, form, detection, check))
        if not accounted:  # never silently: a rule sentence the forms do not cover is reported
            uncompiled.append(Uncompiled(line=sentence.line, sentence=sentence.text,
                                         reason="states a rule in a form the compiler does not know"))
    # One clause that needs the conversation (confirmation before an action) puts every clause there: one
    # denominator for all of them; clauses whose rule needs a turn keep the trace layer.
    whole = any(c.layer == "conversation" for *_, c in drafts)
    default: ClauseLayer = layer or ("conversation" if whole else "trace")
    clauses: list[CompiledClause] = []
    seen: set[str] = set()
    expanded, unscoped = _expand(drafts, scopes)
    uncompiled += unscoped
    for sentence, part, form, detection, check, suffix, scope_note in expanded:
        clause_layer: ClauseLayer = layer or check.layer or default
        if layer is not None and check.layer is not None and check.layer != layer:
            check = _checks._model(f"{check.note} (its rule needs the {check.layer} layer)",
                                   missing=f"{check.condition.rule} on the {layer} layer")
        cond = check.condition
        if check.how == "model":
            cond = ClauseCondition(tiers=_checks.MODEL_TIERS, question=question(form, sentence, clause_layer))
        cid = _part_id(form, part, suffix, sentence.section, seen)
        seen.add(cid)
        kind = _pack_kind(form, check)
        invariant = form.kind in ("must_not", "never")
        # The section, not the file: a copy of the spec under another name compiles to the same clauses (the
        # file is named in the pack's header and the manifest).
        where = f"§ {sentence.section}" if sentence.section else ""
        pack_clause = Clause(
            id=cid, text=_shown(part, check, sentence.lang), source=where, kind=kind, layer=clause_layer,
            trigger=detection.condition, obligation=cond, invariant=invariant,
            description=(f"Compiled ({form.kind}, {form.polarity}). Trigger: {detection.note}. "
                         f"Obligation: {check.note}." + (f" {scope_note}" if scope_note else "")),
        )
        clauses.append(CompiledClause(
            id=cid, kind=form.kind, polarity=form.polarity, trigger=_trigger_text(form, detection),
            obligation=form.condition if form.kind == "only_if" else form.action if form.exception else form.main,
            sentence=part, source_line=sentence.line, section=sentence.section, language=sentence.lang,
            layer=clause_layer, invariant=invariant, detector=Detector(how=detection.how, note=detection.note),
            check=CheckModel(how=check.how, note=check.note, rule=check.condition.rule,
                             missing_rule=check.missing_rule),
            clause=pack_clause,
        ))
    return CompiledSpec(
        source=source, sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(), tools=vocab.tools,
        clauses=tuple(clauses), uncompiled=tuple(uncompiled), sentences=rules,
    )


_Draft = tuple[Sentence, str, Form, Detection, Check]


def _expand(drafts: Sequence[_Draft], scopes: Sequence[tuple[Sentence, str]],
            ) -> tuple[list[tuple[Sentence, str, Form, Detection, Check, str, str]], list[Uncompiled]]:
    """Each draft as the clauses it becomes (`_variants`: with its id suffix and review note), and the scope
    sentences that changed no clause, listed uncompiled with that reason."""
    gained: set[int] = set()
    expanded: list[tuple[Sentence, str, Form, Detection, Check, str, str]] = []
    for draft in drafts:
        # A scope sentence names the rules before it, in another language than its own.
        scoped = [(s.line, lang) for s, lang in scopes if draft[0].line < s.line and draft[0].lang != lang]
        for suffix, check, note in _variants(draft[4], scoped):
            expanded.append((*draft[:4], check, suffix, note))
            if "The phrasing of line" in note:
                gained.update(line for line, _ in scoped)
    unscoped = [Uncompiled(line=s.line, sentence=s.text, reason=(
        f"a scope sentence (the rules before it apply to {'English' if lang == 'en' else 'Chinese'} answers too): "
        "no clause before it quotes a phrase the compiler can translate, so they check the spec's language only"))
        for s, lang in scopes if s.line not in gained]
    return expanded, unscoped


def _part_id(form: Form, part: str, suffix: str, section: str, seen: set[str]) -> str:
    """A clause's id; a conjunction part's (`suffix`): the sentence's id and the part's name."""
    if not suffix:
        return _unique_clause_id(form, part, section, seen)
    cid, n = f"{_clause_id(form, part)}_{suffix}", 2
    while cid in seen:
        cid, n = f"{_clause_id(form, part)}_{suffix}_{n}", n + 1
    return cid


def _shown(part: str, check: Check, lang: str) -> str:
    """A clause's text: the sentence, with the part a conjunction's clause checks."""
    if not check.parts:
        return part
    return f"{part}（{check.parts[0]}）" if lang == "zh" else f"{part} ({check.parts[0]})"


def _ascii_slug(text: str) -> str:
    return "_".join(re.findall(r"[a-z0-9]+", text.lower()))[:24].strip("_")


def _variants(check: Check, scopes: Sequence[tuple[int, str]]) -> list[tuple[str, Check, str]]:
    """(id suffix, check, note) of each clause a draft becomes: one per part of a conjunction (the part named in
    the suffix), else the draft itself; with the phrasing of the scope sentences after it (`scopes`: their line and
    the language they extend the rules to)."""
    langs = tuple(dict.fromkeys(lang for _, lang in scopes))
    lines = ", ".join(str(line) for line, _ in scopes)

    def widened(phrases: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
        extra = tuple(t for p in phrases for lang in langs for t in translations(p, lang) if t not in phrases)
        if not langs:
            return phrases, ""
        names = " and ".join("English" if lang == "en" else "Chinese" for lang in langs)
        if extra:
            return (*phrases, *dict.fromkeys(extra)), (
                f"The phrasing of line {lines} ({names} answers too): also {', '.join(dict.fromkeys(extra))}.")
        return phrases, (f"Line {lines} extends it to {names} answers, but the compiler knows no translation of "
                         f"{', '.join(repr(p) for p in phrases)}: it checks the spec's language only.")

    if check.parts:
        out: list[tuple[str, Check, str]] = []
        for k, part in enumerate(check.parts, start=1):
            phrases, note = widened((part,))
            named = next((t for t in translations(part, "en")), part)
            suffix = _ascii_slug(named) or f"part{k}"
            part_note = (f"Part {k} of {len(check.parts)} ({', '.join(check.parts)}): the sentence holds where "
                         "every part holds. " + note).strip()
            cond = ClauseCondition(regex=phrase_regex(phrases), fields=check.condition.fields)
            out.append((suffix, Check(cond, check.how, f"'{part}' in the answer", check.layer, check.trigger,
                                      check.missing_rule, phrases=phrases, parts=(part,)), part_note))
        return out
    if check.how != "matcher" or not check.phrases or not langs:
        return [("", check, "")]
    phrases, note = widened(check.phrases)
    if check.condition.lexicon is not None and phrases == check.phrases:
        return [("", check, "")]  # the lexicon has every language's patterns
    cond = check.condition.model_copy(update={"regex": phrase_regex(phrases)})
    return [("", Check(cond, check.how, check.note, check.layer, check.trigger, check.missing_rule,
                       phrases=phrases), note)]
