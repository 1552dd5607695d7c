"""`compile_spec`: a role spec (markdown system prompt) -> clauses r = (trigger, obligation), deterministically.

Sentence by sentence: skip what states no rule; split a sentence into its clauses; recognise each clause's
form (`patterns`); detect its trigger (`detect`) and choose its obligation check (`checks`); build the pack
clause. A clause whose rule needs the conversation (confirmation before an action) makes the whole spec
conversation-layer (one denominator for every clause); other specs are judged per turn.
Pure: the same text and options give the same output.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Sequence

from factory.compile import checks as _checks
from factory.compile.checks import Check, build_check, question
from factory.compile.detect import CONCEPTS, Detection, Vocabulary, always, catalogue, context_tools, find_condition
from factory.compile.model import (
    Check as CheckModel,
    CompiledClause,
    CompiledSpec,
    Detector,
    Uncompiled,
)
from factory.compile.parse import Sentence, code_identifiers, sentences
from factory.compile.patterns import Form, Unparsed, normative, parse, split_parts
from knowledge_packs.model import Clause, ClauseCondition, ClauseKind, ClauseLayer

_ANAPHOR_SUBJECT = re.compile(r"^(?:this|these|that|those|it|they|such)\b|^(?:这|此|该|它)", re.I)
_ANAPHOR_OBJECT = re.compile(r"\b(?:these|those|them|this|it)\s*$|(?:这些|那些|它们|此类)$", re.I)
_STOP = frozenset("""a an the to of and or any all you your agent agents user users customer customers that this it
is are be in on for with at by as if only should must not never do does make sure can cannot first then each every
from into than when before after may will would their its our we they them also other some such one two three
have has need needs""".split())
_CONDITIONAL = ("if_then", "before", "only_if")


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


def _trigger(form: Form, sentence: Sentence, vocab: Vocabulary) -> tuple[Detection, bool, bool]:
    """(trigger detection, fell back to always for a condition, trigger is the forbidden action itself)."""
    if form.kind in _CONDITIONAL:
        if CONCEPTS["api"].search(form.trigger):
            ctx = context_tools(sentence, vocab)
            if ctx is not None:
                return ctx, False, False
        found = find_condition(form.trigger, sentence, vocab)
        if found is not None:
            return found, False, False
        if form.kind == "if_then" and form.polarity == "avoid":
            # The condition is invisible to rules but the forbidden action is not: watch the action and
            # let the model judge whether the condition held.
            action = find_condition(form.main, sentence, vocab)
            if action is not None and action.how == "tool":
                return action, False, True
        return always(), True, False
    if form.polarity == "avoid":
        found = find_condition(form.main, sentence, vocab)
        if found is not None and found.how == "tool":
            return found, False, True
    ctx = context_tools(sentence, vocab)
    return (ctx, False, False) if ctx is not None else (always(), False, False)


def _anaphora(form: Form, detection: Detection) -> str | None:
    subject = form.subject.strip()
    if _ANAPHOR_SUBJECT.match(subject):
        return f"refers back to an earlier sentence ('{subject.split()[0] if ' ' in subject else subject}')"
    if form.kind in ("if_then", "before"):
        return None  # a pronoun in the obligation names what the sentence's own condition introduced
    behaviour = form.trigger if form.kind == "only_if" else form.action
    m = _ANAPHOR_OBJECT.search(behaviour)
    if m and detection.how in ("always", "context"):
        return f"what it restricts refers back to an earlier sentence ('{m.group(0).strip()}')"
    return None


def compile_spec(
    text: str, *, source: str, tools: Sequence[str] = (), lexicons: Iterable[str] = (),
    layer: ClauseLayer | None = None,
) -> CompiledSpec:
    """Compile a role spec into clauses.

    `source` names the spec in clauses (`airline_en.md`); `tools` adds tool names to the catalogue the spec's
    own backticked names start; `lexicons` are the base pack's lexicon categories that have patterns (a clause
    may use them); `layer` forces every clause onto one layer (default: see the module docstring).
    """
    vocab = Vocabulary(tools=catalogue(code_identifiers(text), tools), lexicons=frozenset(lexicons))
    drafts: list[tuple[Sentence, str, Form, Detection, Check]] = []
    uncompiled: list[Uncompiled] = []
    for sentence in sentences(text):
        if not normative(sentence.text, sentence.lang):
            continue
        if re.search(r"[?？]\W*$", sentence.text):
            uncompiled.append(Uncompiled(line=sentence.line, sentence=sentence.text, reason="a question, not a rule"))
            continue
        for part in split_parts(sentence.text, sentence.lang):
            if not normative(part, sentence.lang):
                continue
            form = parse(part, sentence.lang)
            if isinstance(form, Unparsed):
                uncompiled.append(Uncompiled(line=sentence.line, sentence=part, reason=form.reason))
                continue
            detection, fallback, action_trigger = _trigger(form, sentence, vocab)
            reason = _anaphora(form, detection)
            if reason is not None:
                uncompiled.append(Uncompiled(line=sentence.line, sentence=part, reason=reason))
                continue
            check = build_check(form, sentence, detection, vocab, fallback=fallback, action_trigger=action_trigger)
            if check.trigger is not None:
                detection = check.trigger
            drafts.append((sentence, part, form, detection, check))
    # One clause that needs the conversation (confirmation before an action) puts every clause there: one
    # denominator for all of them; clauses whose rule needs a turn keep the trace layer.
    whole = any(c.layer == "conversation" for *_, c in drafts)
    default: ClauseLayer = layer or ("conversation" if whole else "trace")
    clauses: list[CompiledClause] = []
    seen: set[str] = set()
    for sentence, part, form, detection, check in drafts:
        clause_layer: ClauseLayer = layer or check.layer or default
        if layer is not None and check.layer is not None and check.layer != layer:
            check = _checks._model(f"{check.note} (its rule needs the {check.layer} layer)",
                                   missing=f"{check.condition.rule} on the {layer} layer")
        cond = check.condition
        if check.how == "model":
            cond = ClauseCondition(tiers=_checks.MODEL_TIERS, question=question(form, sentence, clause_layer))
        # The same sentence under two headings is two clauses: the heading tells them apart, not the order.
        cid = _clause_id(form, part)
        if cid in seen:
            cid = _clause_id(form, f"{sentence.section}\x1f{part}")
        n = 2
        while cid in seen:
            cid, n = f"{_clause_id(form, part)}_{n}", n + 1
        seen.add(cid)
        kind = _pack_kind(form, check)
        invariant = form.kind in ("must_not", "never")
        # The section, not the file: a copy of the spec under another name compiles to the same clauses (the
        # file is named in the pack's header and the manifest).
        where = f"§ {sentence.section}" if sentence.section else ""
        pack_clause = Clause(
            id=cid, text=part, source=where, kind=kind, layer=clause_layer, trigger=detection.condition,
            obligation=cond, invariant=invariant,
            description=(f"Compiled ({form.kind}, {form.polarity}). Trigger: {detection.note}. "
                         f"Obligation: {check.note}."),
        )
        trigger_text = form.trigger or ("always" if detection.how == "always" else detection.note)
        clauses.append(CompiledClause(
            id=cid, kind=form.kind, polarity=form.polarity, trigger=trigger_text,
            obligation=form.condition if form.kind == "only_if" else form.main, sentence=part,
            source_line=sentence.line, section=sentence.section, language=sentence.lang, layer=clause_layer,
            invariant=invariant, detector=Detector(how=detection.how, note=detection.note),
            check=CheckModel(how=check.how, note=check.note, rule=check.condition.rule,  # type: ignore[arg-type]
                             missing_rule=check.missing_rule),
            clause=pack_clause,
        ))
    return CompiledSpec(
        source=source, sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(), tools=vocab.tools,
        clauses=tuple(clauses), uncompiled=tuple(uncompiled),
    )
