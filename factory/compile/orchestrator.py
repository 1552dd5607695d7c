"""The orchestrator: a model compiles the normative sentences the deterministic compiler could not.

The deterministic compiler runs first (stable and free); what it leaves in `CompiledSpec.uncompiled` goes to
the small model in one structured call per batch of sentences (`Proposals`). The prompt quotes the sentences
and the catalogue (tools, lexicon categories, rules) as JSON data. Every proposal is checked by building a
real `Clause` (rules registered, tools in the catalogue or the spec, regexes valid, lexicons non-empty); an
invalid proposal or a skip stays uncompiled with its reason, never dropped. Calls go through the evaluators'
backends and `call_model` (same retries, budget and counting), and each answer is stored in the cache under
`call_key`, so rebuilding the same spec with the same model calls nothing and writes the same bytes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

import jinja2
from pydantic import ConfigDict, ValidationError

from agent_factory.errors import CollectionError
from agent_factory.evaluators.collect.backends import CallCounters, backend_for, call_model
from agent_factory.evaluators.collect.budget import Budget
from agent_factory.evaluators.collect.cache import DatumCache, call_key
from agent_factory.evaluators.collect.config import ModelConfig, ModelSpec
from agent_factory.evaluators.collect.prompt import (
    _json_data,  # the evaluator prompts' inert quoting: no text closes a tag
)
from agent_factory.evaluators.collect.redact import Redactor, load_redactor, redact_text
from agent_factory.evaluators.collect.schema import json_schema
from agent_factory.evaluators.core.registry import ClauseRule, rule_names
from agent_factory.evaluators.core.registry import clause_rules as registered_clause_rules
from agent_factory.factory.compile.checks import MODEL_TIERS
from agent_factory.factory.compile.compiler import _clause_id
from agent_factory.factory.compile.detect import DetectorHow, always
from agent_factory.factory.compile.model import Check, CompiledClause, CompiledSpec, Detector, Uncompiled
from agent_factory.factory.compile.parse import Sentence, language, sentences
from agent_factory.factory.compile.patterns import Form, FormKind, Polarity
from agent_factory.frozen import Frozen
from agent_factory.knowledge_packs.model import Clause, ClauseCondition, ClauseKind, ClauseLayer, ConditionField
from agent_factory.validation import describe_error

VERSION = "1"
"""Version of the orchestrator (prompt, output schema, validation); the prompt text enters every cache key."""
TEMPLATES = Path(__file__).resolve().parent / "templates"
BATCH_SIZE = 20
MODEL_ERROR = "model error after retries"
T = TypeVar("T")

_LEXICONS = {
    "injection": "text addressed to an evaluator rather than the agent",
    "frustration": "the user expressing frustration",
    "abandonment": "the user giving up on the agent",
    "disclosure": "unprompted disclosure, e.g. of the operating company",
    "clarification": "the agent asking the user to clarify",
    "context_repair": "the user restating or correcting context the agent lost",
}
_FIELDS: tuple[str, ...] = get_args(ConditionField)


class _Frozen(Frozen):
    # The field docstrings become the JSON schema's descriptions the orchestrator model reads.
    model_config = ConfigDict(use_attribute_docstrings=True)


class ParamProposal(_Frozen):
    """One parameter of a rule."""

    name: str
    """Parameter name, as the rule documents it (e.g. `max_passengers`)."""
    value: str | int | float | bool | list[str]
    """Its value."""


class ConditionProposal(_Frozen):
    """A trigger or an obligation as the model proposes it. Plain strings on purpose: one bad value must make
    one proposal invalid (reported), not the whole answer schema-invalid (retried, then lost)."""

    rule: str | None
    """A rule from the catalogue (obligations only); null otherwise."""
    params: list[ParamProposal]
    """Parameters of `rule`; empty without a rule."""
    tool_names: list[str]
    """Tool names from the catalogue; `*` means any tool call."""
    regex: str | None
    """A case-insensitive Python regex searched in `fields`; null for none."""
    lexicon: str | None
    """A lexicon category from the catalogue, searched in `fields`; null for none."""
    attribute_present: list[str]
    """Attribute keys whose presence satisfies the condition."""
    fields: list[str]
    """Where `regex` and `lexicon` search: request, answer, spans.input, spans.output (empty: answer)."""
    question: str
    """For an obligation no rule or condition can check: a yes/no question about one unit, yes = complied."""


class Proposal(_Frozen):
    """The model's decision about one sentence (a sentence stating two rules gets two proposals)."""

    line: int
    """The sentence's line, as given."""
    decision: Literal["compile", "skip"]
    """`compile`, or `skip` when the rule cannot be checked from traces."""
    reason: str
    """For a skip, why; for a compile, a short note for the reviewer."""
    kind: FormKind
    """must, must_not, never, only_if, should, if_then or before."""
    polarity: Polarity
    """do or avoid."""
    layer: ClauseLayer
    """span, trace or conversation."""
    trigger_text: str
    """The situation in a few words ("" when the rule always applies)."""
    obligation_text: str
    """The obligation in a few words."""
    trigger: ConditionProposal
    """When the clause applies (rules alone: tools, regex, lexicon, attribute; all empty: always)."""
    obligation: ConditionProposal
    """What must hold once the trigger holds."""


class Proposals(_Frozen):
    """The orchestrator's answer for one batch of sentences."""

    proposals: list[Proposal]
    """At least one proposal per sentence."""


@dataclass(frozen=True)
class Pending:
    """An uncompiled sentence with the context the model needs."""

    item: Uncompiled
    section: str
    previous: str


@dataclass(frozen=True)
class Catalogue:
    """What proposals may name."""

    tools: tuple[str, ...]
    lexicons: tuple[str, ...]
    rules: dict[str, str]
    default_layer: ClauseLayer

    def data(self) -> dict[str, Any]:
        """The catalogue as the proposal prompt shows it."""
        return {
            "tools": list(self.tools),
            "lexicons": {c: _LEXICONS.get(c, "") for c in self.lexicons},
            "rules": {n: d + (f" Layers: {', '.join(_rule_layers(n))}." if _rule_layers(n) else "")
                      for n, d in self.rules.items()},
            "fields": list(_FIELDS),
            "default_layer": self.default_layer,
        }


@dataclass(frozen=True)
class OrchestratorResult:
    """The spec with the model's clauses merged in, and what the calls cost."""

    spec: CompiledSpec
    model: str
    batches: int
    cached: int
    """Batches answered from the cache."""
    counters: CallCounters


def clause_rules() -> dict[str, str]:
    """Rules a compiled clause may name -> one line of description: those declaring their layers in the registry
    (`@rule(..., layers=...)`); the generic rules are implied by the built-in conditions, so they declare none."""
    return {r.name: r.summary for r in registered_clause_rules()}


def _clause_rule(name: str) -> ClauseRule | None:
    return next((r for r in registered_clause_rules() if r.name == name), None)


def _rule_layers(name: str) -> tuple[str, ...]:
    r = _clause_rule(name)
    return r.layers if r is not None else ()


def pending(text: str, uncompiled: Sequence[Uncompiled]) -> list[Pending]:
    """Each uncompiled sentence with its section and the sentence before it."""
    parsed: list[Sentence] = sentences(text)
    out: list[Pending] = []
    for u in uncompiled:
        at = next((i for i, s in enumerate(parsed) if s.line == u.line and u.sentence in s.text), None)
        if at is None:
            at = next((i for i, s in enumerate(parsed) if s.line == u.line), None)
        section = parsed[at].section if at is not None else ""
        previous = parsed[at - 1].text if at else ""
        out.append(Pending(u, section, previous))
    return out


def batches(items: Sequence[Pending], size: int = BATCH_SIZE) -> list[list[Pending]]:
    """Batches of at most `size` in spec order; two sentences of one line never share a batch, so a proposal's
    line names its sentence."""
    out: list[list[Pending]] = []
    for p in items:
        target = next((b for b in out if len(b) < size and all(q.item.line != p.item.line for q in b)), None)
        if target is None:
            out.append([p])
        else:
            target.append(p)
    return out


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=False,
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              trim_blocks=True, lstrip_blocks=True)


def render_prompt(batch: Sequence[Pending], catalogue: Catalogue, *, redactor: Redactor | None = None) -> str:
    """The prompt of one batch: instructions, then the catalogue and the sentences as inert JSON. With a
    redactor, secrets a system prompt may hold (keys, emails, phone numbers) are replaced before they leave."""
    def clean(text: str | None) -> str | None:
        return redact_text(text, redactor) if redactor is not None and text else text

    items = [{"line": p.item.line, "section": clean(p.section), "sentence": clean(p.item.sentence),
              "previous": clean(p.previous), "not_compiled_because": p.item.reason} for p in batch]
    # One item per line: a reviewer diffing two prompts sees which sentence changed.
    body = "[\n" + ",\n".join(_json_data(i) for i in items) + "\n]"
    return _environment().get_template("orchestrator.j2").render(
        catalogue=_json_data(catalogue.data()), sentences=body, count=len(items))


# ---- validation --------------------------------------------------------------------------------------------


def _first_error(e: ValidationError) -> str:
    return describe_error(e).removeprefix("(top level): ")


def _condition(p: ConditionProposal, part: str, cat: Catalogue, text: str) -> ClauseCondition | None:
    """A built condition, None when nothing is stated; ValueError naming the problem otherwise."""
    if part == "trigger" and (p.rule or p.params or p.question.strip()):
        raise ValueError("trigger: a trigger is decided by tools, a regex, a lexicon or an attribute "
                         "(no rule, params or question)")
    if p.rule is not None:
        if p.rule not in rule_names():
            raise ValueError(f"{part}: unknown rule {p.rule!r} (rules: {', '.join(cat.rules)})")
        if p.rule not in cat.rules:
            raise ValueError(f"{part}: rule {p.rule!r} is registered but cannot check a clause "
                             f"(rules: {', '.join(cat.rules)})")
    for name in p.tool_names:
        if name != "*" and name not in cat.tools and not re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text):
            raise ValueError(f"{part}: tool {name!r} is neither in the catalogue nor in the spec")
    if p.lexicon is not None and p.lexicon not in cat.lexicons:
        raise ValueError(f"{part}: lexicon {p.lexicon!r} has no patterns in the base pack "
                         f"(lexicons: {', '.join(cat.lexicons) or 'none'})")
    bad = [f for f in p.fields if f not in _FIELDS]
    if bad:
        raise ValueError(f"{part}: unknown field {bad[0]!r} (fields: {', '.join(_FIELDS)})")
    raw: dict[str, Any] = {
        "rule": p.rule, "params": {q.name: tuple(q.value) if isinstance(q.value, list) else q.value for q in p.params},
        "tool_names": tuple(p.tool_names), "regex": p.regex or None, "lexicon": p.lexicon,
        "attribute_present": tuple(p.attribute_present),
    }
    if p.fields:
        raw["fields"] = tuple(p.fields)
    if not (p.rule or raw["tool_names"] or raw["regex"] or p.lexicon or raw["attribute_present"]):
        return None
    try:
        return ClauseCondition.model_validate({k: v for k, v in raw.items() if v not in (None, (), {})})
    except ValidationError as e:
        raise ValueError(f"{part}: {_first_error(e)}") from None


def _detector(cond: ClauseCondition) -> DetectorHow:
    if cond.tool_names:
        return "any_tool" if cond.tool_names == ("*",) else "tool"
    if cond.lexicon is not None:
        return "lexicon"
    return "regex" if cond.regex is not None else "attribute"


def _question(sentence: str, layer: ClauseLayer) -> str:
    unit = {"span": "call", "trace": "turn", "conversation": "conversation"}[layer]
    return f'Policy: "{sentence}" In this {unit}, did the agent comply? (yes = complied, no = violated)'


def accept(p: Proposal, pend: Pending, *, cat: Catalogue, text: str, source: str, seen: set[str],
           layer: ClauseLayer | None) -> CompiledClause:
    """The clause a proposal states; ValueError with the reason when it is not valid."""
    u = pend.item
    clause_layer: ClauseLayer = layer or p.layer
    trig = _condition(p.trigger, "trigger", cat, text)
    detection = always() if trig is None else None
    trigger = trig if trig is not None else detection.condition  # type: ignore[union-attr]
    how: DetectorHow = "always" if trig is None else _detector(trig)
    note = detection.note if detection is not None else trigger.describe()
    ob = _condition(p.obligation, "obligation", cat, text)
    if ob is not None and ob.rule is not None:
        declared = _clause_rule(ob.rule)
        layers = declared.layers if declared is not None else ()
        if layers and clause_layer not in layers:
            raise ValueError(f"obligation: rule {ob.rule} works on the {' or '.join(layers)} layer, "
                             f"not {clause_layer}")
        if declared is not None and declared.needs_trigger_tools and not any(t != "*" for t in trigger.tool_names):
            raise ValueError(f"obligation: rule {ob.rule} needs a trigger naming the tools it checks")
    if ob is None:
        check = Check(how="model", note="judged by the model")
        obligation = ClauseCondition(tiers=MODEL_TIERS,
                                     question=p.obligation.question.strip() or _question(u.sentence, clause_layer))
    else:
        check = Check(how="rule" if ob.rule else "matcher", note=ob.describe(), rule=ob.rule)
        obligation = ob
    polarity: Polarity = "avoid" if p.kind in ("must_not", "never") else "do" if p.kind in ("must", "should") \
        else p.polarity
    kind: ClauseKind = ("only_if" if p.kind == "only_if" else "before" if p.kind == "before" and check.how != "matcher"
                        else "must_not" if polarity == "avoid" else "must")
    form = Form(kind=p.kind, polarity=polarity, trigger=p.trigger_text, condition="", main=p.obligation_text,
                subject="", action=p.obligation_text)
    # Ids as the deterministic compiler makes them, unique across both compilers' clauses.
    cid = _clause_id(form, u.sentence)
    if cid in seen:
        cid = _clause_id(form, f"{pend.section}\x1f{u.sentence}")
    n = 2
    while cid in seen:
        cid, n = f"{_clause_id(form, u.sentence)}_{n}", n + 1
    invariant = p.kind in ("must_not", "never")
    try:
        clause = Clause(
            id=cid, text=u.sentence, source=f"§ {pend.section}" if pend.section else "", kind=kind,
            layer=clause_layer, trigger=trigger, obligation=obligation, invariant=invariant,
            description=(f"Compiled by the model orchestrator ({p.kind}, {polarity}): {p.trigger_text or 'always'} -> "
                         f"{p.obligation_text or u.sentence}. Trigger: {note}. "
                         f"Obligation: {check.note}." + (f" Note: {p.reason.strip()}" if p.reason.strip() else "")),
        )
    except ValidationError as e:
        raise ValueError(f"clause: {_first_error(e)}") from None
    seen.add(cid)
    return CompiledClause(
        id=cid, kind=p.kind, polarity=polarity, trigger=p.trigger_text or ("always" if how == "always" else note),
        obligation=p.obligation_text or u.sentence, sentence=u.sentence, source_line=u.line, section=pend.section,
        language=language(u.sentence), layer=clause_layer, invariant=invariant, detector=Detector(how=how, note=note),
        check=check, clause=clause, compiled_by="model",
    )


# ---- the calls ---------------------------------------------------------------------------------------------


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to its end from synchronous code, in a thread of its own when called under a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:  # called from async code: its loop cannot be re-entered
        return pool.submit(asyncio.run, coro).result()


async def _answers(prompts: Sequence[str], spec: ModelSpec, config: ModelConfig, cache: DatumCache,
                   counters: CallCounters) -> tuple[list[Proposals | str], int]:
    """Per prompt, the validated answer or the error that ended its retries; and how many came from the cache."""
    backend = backend_for(spec)
    budget = Budget(config.budget)
    schema = json_schema(Proposals)
    out: list[Proposals | str] = []
    hits = 0
    for prompt in prompts:
        key = call_key(spec.name, spec.family, prompt, schema)
        stored = cache.get_answer(key)
        if stored is not None:
            try:
                out.append(Proposals.model_validate(stored))
                hits += 1
                continue
            except ValidationError:
                pass  # an answer stored by another orchestrator version: ask again
        try:
            reply = await call_model(backend, prompt, Proposals, budget=budget, retry=config.retry, counters=counters)
        except CollectionError as e:
            out.append(f"{MODEL_ERROR}: {' '.join(str(e).split())[:300]}")
            continue
        cache.put_answer(key, reply.data)
        out.append(Proposals.model_validate(reply.data))
    return out, hits


def _later(reason: str, earlier: str) -> str:
    return f"{reason} (deterministic compiler: {earlier})"


def orchestrate(
    spec: CompiledSpec, text: str, *, model: ModelConfig, cache: DatumCache | None = None,
    lexicons: Sequence[str] = (), layer: ClauseLayer | None = None, counters: CallCounters | None = None,
    batch_size: int = BATCH_SIZE,
) -> OrchestratorResult:
    """Compile `spec.uncompiled` with `model.small` and merge the accepted clauses into the spec.

    `text` is the spec's text (sections, context, tool names written in it); `lexicons` the base pack's
    non-empty lexicon categories; `layer` a forced layer, as for `compile_spec`. A model failure leaves its
    sentences uncompiled with the error; it never fails the build.
    """
    if model.small is None:
        raise ValueError("orchestrate needs a small model (ModelConfig.small)")
    counters = counters if counters is not None else CallCounters()
    whole = any(c.layer == "conversation" for c in spec.clauses)
    cat = Catalogue(tools=spec.tools, lexicons=tuple(lexicons), rules=clause_rules(),
                    default_layer=layer or ("conversation" if whole else "trace"))
    groups = batches(pending(text, spec.uncompiled), batch_size)
    redactor = load_redactor(model.redactor)
    prompts = [render_prompt(b, cat, redactor=redactor) for b in groups]
    store = cache if cache is not None else DatumCache(None)
    answers, hits = run_coroutine(_answers(prompts, model.small, model, store, counters)) \
        if prompts else ([], 0)
    seen = {c.id for c in spec.clauses}
    clauses: list[CompiledClause] = list(spec.clauses)
    left: list[Uncompiled] = []
    for group, answer in zip(groups, answers, strict=True):
        for pend in group:
            u = pend.item
            if isinstance(answer, str):
                left.append(Uncompiled(line=u.line, sentence=u.sentence, reason=_later(answer, u.reason)))
                continue
            mine = [p for p in answer.proposals if p.line == u.line]
            if not mine:
                left.append(Uncompiled(line=u.line, sentence=u.sentence,
                                       reason=_later("the model made no proposal for it", u.reason)))
            problems: list[str] = []
            for p in mine:
                if p.decision == "skip":
                    problems.append(f"model skipped it: {p.reason.strip() or 'no reason given'}")
                    continue
                try:
                    clauses.append(accept(p, pend, cat=cat, text=text, source=spec.source, seen=seen, layer=layer))
                except ValueError as e:
                    problems.append(f"model proposal invalid: {e}")
            if problems:
                left.append(Uncompiled(line=u.line, sentence=u.sentence, reason=_later("; ".join(problems), u.reason)))
    merged = spec.model_copy(update={
        "clauses": tuple(sorted(clauses, key=lambda c: c.source_line)),  # stable: the rules' order is kept
        "uncompiled": tuple(sorted(left, key=lambda u: u.line)),
    })
    return OrchestratorResult(spec=merged, model=model.small.name, batches=len(groups), cached=hits,
                              counters=counters)


__all__ = ["BATCH_SIZE", "MODEL_ERROR", "VERSION", "Catalogue", "OrchestratorResult", "Pending", "Proposal",
           "Proposals", "accept", "batches", "clause_rules", "orchestrate", "pending", "render_prompt", "run_coroutine"]
