"""Rewrites of failing data items (issue 33, point 10): the orchestrator's proposal as a new definition version.

An item the audit fails (kappa below the admission line, a rule's precision or recall too low, a flag pointing the
wrong way) is retired; with a model configured, `propose_rewrite` asks it, in one structured call, for a rewrite of
the item's question, evidence scope (projection fields), collector tiers or rule, or for a note on the metric the
item feeds. The prompt (`templates/rewrite.j2`) quotes the item, the failure's figures and a few units on which
the raters disagreed (evidence redacted) as inert JSON blocks, so nothing in a trace can instruct the model. The
call goes through the evaluators' backends and `call_model` (retries, budget, counting) and its answer is stored in
the cache under `call_key`: asking again for the same item, failure and examples calls nothing.

Every proposed part is checked before it enters the new definition (evidence fields valid for the layer, tiers
known and in cascade order, a rule registered, a rule tier with a rule); an invalid part is left out with the
reason, never silently applied. `write_proposal` writes the new version into the suite's *working* files: a run
keeps reading `approved/` until a person runs `agent-factory diff SUITE/approved SUITE` and `agent-factory approve
SUITE`; then only that item's definition digest changed, so a run recollects only that item. A conduct obligation
is generated from its policy clause, so its new question or tiers go into that clause in `pack.yaml`; the clause's
version is both of its items' version, so its trigger is recollected too (by its rule, no model call).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, TypeVar

import jinja2
from pydantic import ConfigDict, ValidationError

from agent_factory import yamlio
from agent_factory.errors import CollectionError, SpecError, UnknownNameError
from agent_factory.evaluators.audit.model import Criterion, ItemAgreement, Rating, RuleCheck
from agent_factory.evaluators.collect.backends import BackendFactory, CallCounters, backend_for, call_model
from agent_factory.evaluators.collect.budget import Budget
from agent_factory.evaluators.collect.cache import DatumCache, call_key
from agent_factory.evaluators.collect.config import BudgetLimits, ModelSpec, RetryPolicy
from agent_factory.evaluators.collect.project import (
    _VALID as EVIDENCE_FIELDS,  # the projection's own table of fields per layer: one source of truth
)
from agent_factory.evaluators.collect.prompt import (
    LAYER_NAMES,
    _json_data,  # the evaluator prompts' inert quoting: no text closes a tag
    template_digest,
    template_dir,
)
from agent_factory.evaluators.collect.redact import DefaultRedactor, Redactor, redact_text
from agent_factory.evaluators.collect.schema import json_schema
from agent_factory.evaluators.components.conduct.definitions import clause_definitions, clause_id_of
from agent_factory.evaluators.core import (
    DataDefinition,
    EvaluatorSpec,
    Projection,
    TemplateRef,
    get_component,
    get_rule,
    load_yaml_model,
)
from agent_factory.evaluators.core.model import Tier
from agent_factory.evaluators.core.registry import clause_rules, rule_names
from agent_factory.factory.compile.orchestrator import run_coroutine
from agent_factory.factory.suite.evaluator_file import (
    EVALUATORS_DIR,
    PACK_FILE,
    TEMPLATE_KINDS,
    derive,
    evaluator_yaml,
    refresh,
)
from agent_factory.factory.suite.read import SUITE_FILE, SuiteFile, read_suite_files
from agent_factory.factory.suite.write import (
    _clause_yaml,  # the build's own layout of a clause in pack.yaml: a rewritten clause reads like the others
)
from agent_factory.frozen import Frozen
from agent_factory.knowledge_packs.model import Clause

VERSION = "1"
"""Version of the rewrite (prompt, answer schema, validation), for the record: the prompt's text and the answer's
schema enter the cache key themselves."""
TEMPLATES = Path(__file__).resolve().parent / "templates"
TIERS: tuple[Tier, ...] = ("rule", "small_model", "jury")
MODEL_ERROR = "model error after retries"
Failure = ItemAgreement | RuleCheck | Criterion | str
"""What failed: an item's agreement, a rule against a model, a flag against an outcome, or a line of text."""
T = TypeVar("T")


class _Frozen(Frozen):
    # The field docstrings become the JSON schema's descriptions the model reads.
    model_config = ConfigDict(use_attribute_docstrings=True)


class RewriteAnswer(_Frozen):
    """The model's proposal for one failing data item (the call's output type). Plain values on purpose: one bad
    part must make that part invalid (reported), not the whole answer schema-invalid (retried, then lost)."""

    decision: Literal["rewrite", "keep_retired"]
    """`rewrite` when a change is proposed; `keep_retired` when no rewrite can make the item reliable."""
    changes: list[str]
    """The parts changed: question, evidence, tiers, rule, metric."""
    question: str
    """The new question; "" keeps the question."""
    evidence_fields: list[str]
    """The evidence fields the model tiers see (from the catalogue); [] keeps the evidence scope."""
    max_chars: int | None
    """Characters shown per evidence field; null for the full text."""
    tiers: list[str]
    """The collector tiers, cheapest first (from the catalogue); [] keeps the tiers."""
    rule: str
    """A registered rule from the catalogue; "" keeps the item's rule."""
    metric_note: str
    """What should change in the metric or flag the item feeds; "" for nothing."""
    rationale: str
    """For the reviewer: what the raters disagreed about and how the rewrite removes it."""


class RewriteExample(Frozen):
    """One unit on which the raters disagreed: the evidence they saw and each rater's value."""

    unit_id: str
    """The unit."""
    evidence: str
    """The evidence as the raters saw it (redacted again before it is quoted)."""
    values: dict[str, str]
    """Rater (`primary`, `audit:<model>`, `human:<name>`) -> its value."""


class RewriteProposal(Frozen):
    """What the orchestrator proposes for one failing item, checked, as a new definition version."""

    item: str
    """The data item."""
    old_version: str
    """Its version when the proposal was made."""
    model: str
    """The model asked."""
    cached: bool
    """The answer came from the cache (no call made)."""
    answer: RewriteAnswer | None
    """The model's answer; None when the call failed (`problems` says why)."""
    definition: DataDefinition | None
    """The new version of the definition; None when nothing valid was proposed (or the model kept it retired)."""
    changed: tuple[str, ...] = ()
    """Top-level fields of the definition the rewrite changes (besides `version` and `description`)."""
    metric_note: str = ""
    """A change proposed to the metric the item feeds: analyses are code, so a person makes it."""
    problems: tuple[str, ...] = ()
    """Parts of the answer left out, each with the reason; or the model error."""


def disagreements(ratings: Sequence[Rating], item: str, *, limit: int = 4) -> list[tuple[str, dict[str, str]]]:
    """Up to `limit` units on which the raters of `item` gave different values, each with rater -> value: the
    examples a proposal shows (their evidence is the caller's to read). Users are taken in turn, so one user's
    many turns do not fill the examples; the order is fixed by unit id, so the prompt (and its cache key) is too."""
    by_unit: dict[str, dict[str, str]] = {}
    users: dict[str, str] = {}
    for r in ratings:
        if r.item == item:
            by_unit.setdefault(r.unit_id, {})[r.rater] = r.value
            users[r.unit_id] = r.user
    split: dict[str, list[str]] = {}
    for unit in sorted(by_unit):
        if len(set(by_unit[unit].values())) > 1:
            split.setdefault(users[unit], []).append(unit)
    picked: list[str] = []
    queues = [split[u] for u in sorted(split)]
    while len(picked) < limit and any(queues):
        for q in queues:
            if q and len(picked) < limit:
                picked.append(q.pop(0))
    return [(unit, dict(sorted(by_unit[unit].items()))) for unit in picked]


# ---- the prompt ------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=False,
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              trim_blocks=True, lstrip_blocks=True)


def failure_data(failure: Failure) -> dict[str, Any]:
    """The failure as the prompt shows it: its kind, its figures and the line it failed."""
    if isinstance(failure, str):
        return {"kind": "other", "what": failure}
    if isinstance(failure, ItemAgreement):
        return {"kind": "agreement", "what": "the raters' agreement on this item is below the admission line",
                "line": "kappa >= 0.60 (compared at two decimals)", "method": failure.kappa_method,
                "kappa": failure.kappa, "kappa_interval": [failure.kappa_low, failure.kappa_high],
                "krippendorff_alpha": failure.alpha, "raters": list(failure.raters), "units": failure.n,
                "note": failure.reason}
    if isinstance(failure, RuleCheck):
        return {"kind": "rule", "what": "the item's rule against a model rater on the same units",
                "reference_rater": failure.rater, "positive_value": failure.positive, "units": failure.n,
                "precision": failure.precision, "precision_interval": [failure.precision_low, failure.precision_high],
                "recall": failure.recall, "recall_interval": [failure.recall_low, failure.recall_high],
                "recall_too_low": failure.collect_by_model, "note": failure.note}
    return {"kind": "criterion", "what": "a flag fed by this item against an outcome of the traces",
            "flag": failure.flag, "meaning": failure.meaning, "outcome": failure.outcome, "level": failure.level,
            "units": failure.n, "auc_for_bad_outcome": failure.auc, "auc_interval": [failure.low, failure.high],
            "outcome_with_flag_minus_without": failure.difference,
            "difference_interval": [failure.difference_low, failure.difference_high],
            "points_the_wrong_way": failure.fails, "note": failure.note}


def _rules(definition: DataDefinition) -> dict[str, str]:
    """The rules a rewrite may name: those of the item's component, each with what it decides (its docstring's
    first paragraph, a clause rule's summary, or the description of the component's item it collects)."""
    prefix = f"{definition.component}."
    collects = {d.rule: d.description for d in get_component(definition.component).definitions if d.rule}
    summaries = {r.name: r.summary for r in clause_rules()}
    out: dict[str, str] = {}
    for name in rule_names():
        if name.startswith(prefix) or name in (definition.rule, definition.applies_when):
            doc = " ".join((getattr(get_rule(name), "__doc__", None) or "").strip().split("\n\n")[0].split())
            out[name] = doc or summaries.get(name) or collects.get(name, "")
    return out


def render_prompt(definition: DataDefinition, failure: Failure, examples: Sequence[RewriteExample], *,
                  redactor: Redactor | None = None) -> str:
    """The proposal's prompt: instructions, then the item, the failure, the catalogue and each example as one inert
    JSON value; example evidence and unit ids redacted (placeholders for private data) before they leave."""
    red = redactor if redactor is not None else DefaultRedactor()
    item = definition.model_dump(mode="json", exclude={"clause", "admitted"})
    generated = get_component(definition.component).generated  # a clause states its evidence and rule
    catalogue = {"evidence_fields": [] if generated else list(EVIDENCE_FIELDS[definition.layer]),
                 "tiers": list(TIERS), "rules": {} if generated else _rules(definition)}
    shown = [{"unit_id": redact_text(e.unit_id, red), "values": dict(sorted(e.values.items())),
              "evidence": redact_text(e.evidence, red)} for e in examples]
    return _environment().get_template("rewrite.j2").render(
        layer_name=LAYER_NAMES[definition.layer], item=_json_data(item), failure=_json_data(failure_data(failure)),
        catalogue=_json_data(catalogue), examples=[_json_data(e) for e in shown])


# ---- the answer into a definition -------------------------------------------------------------------------


def next_version(version: str) -> str:
    """The version after `version`: the last number before any `+` suffix (a content digest) plus one (`1` -> `2`,
    `1.3` -> `1.4`, `4+ab12` -> `5+ab12`), or `version.2` when it has no number there."""
    head, plus, tail = version.partition("+")
    found = list(re.finditer(r"\d+", head))
    if not found:
        return f"{head}.2{plus}{tail}"
    last = found[-1]
    return f"{head[:last.start()]}{int(last.group()) + 1}{head[last.end():]}{plus}{tail}"


def _tiers(names: Sequence[str]) -> tuple[Tier, ...]:
    out: list[Tier] = []
    for name in names:
        tier = next((t for t in TIERS if t == name), None)
        if tier is None:
            raise ValueError(f"tiers: unknown tier {name!r} (tiers: {', '.join(TIERS)})")
        if tier in out:
            raise ValueError(f"tiers: {name!r} is listed twice")
        out.append(tier)
    if out != sorted(out, key=TIERS.index):
        raise ValueError(f"tiers: {', '.join(out)} is not in cascade order ({', '.join(TIERS)})")
    return tuple(out)


def _evidence(definition: DataDefinition, answer: RewriteAnswer) -> Projection | str | None:
    """The proposed projection, the reason it is invalid, or None when the answer keeps the evidence scope."""
    if not answer.evidence_fields:
        return None
    valid = EVIDENCE_FIELDS[definition.layer]
    bad = [f for f in answer.evidence_fields if f not in valid]
    if bad:
        return f"evidence: field {bad[0]!r} is not valid at layer {definition.layer!r} (valid: {', '.join(valid)})"
    try:
        projection = Projection(fields=tuple(dict.fromkeys(answer.evidence_fields)), max_chars=answer.max_chars,
                                strategy=definition.projection.strategy)
    except ValidationError as e:
        return f"evidence: max_chars {answer.max_chars!r}: {e.errors()[0]['msg']}"
    return projection if projection != definition.projection else None


def _proposed_tiers(definition: DataDefinition, answer: RewriteAnswer, rule: str | None) -> tuple[Tier, ...] | str:
    """The proposed tiers (the item's own when the answer keeps them), or the reason they are invalid."""
    if not answer.tiers:
        return definition.tiers
    try:
        tiers = _tiers(answer.tiers)
    except ValueError as e:
        return str(e)
    if "rule" in tiers and rule is None:
        return f"tiers: {', '.join(tiers)} names the rule tier, but the item has no rule"
    if definition.kind == "fact" and tiers != ("rule",):
        return f"tiers: {', '.join(tiers)}: a fact (a quantity or label) is observed by its rule; models answer checks"
    return tiers


def _generated_parts(definition: DataDefinition, answer: RewriteAnswer) -> tuple[RewriteAnswer, list[str]]:
    """`answer` without the parts a generated item's source states (a conduct obligation's evidence and rule are
    its clause's; a rule tier stays while the clause has a rule), and why each was left out."""
    if not get_component(definition.component).generated:
        return answer, []
    problems: list[str] = []
    keep: dict[str, Any] = {}
    if answer.evidence_fields:
        problems.append(f"evidence: {definition.id} sees the evidence of its clause's layer (generated)")
        keep["evidence_fields"] = []
    if answer.rule.strip() and answer.rule.strip() != definition.rule:
        problems.append(f"rule: {definition.id} is collected by its clause's rule; edit the clause in pack.yaml")
        keep["rule"] = ""
    if answer.tiers and definition.rule is not None and "rule" not in answer.tiers:
        problems.append(f"tiers: {', '.join(answer.tiers)} drops the rule tier its clause's condition needs")
        keep["tiers"] = []
    return answer.model_copy(update=keep), problems


def apply_answer(definition: DataDefinition, answer: RewriteAnswer) -> tuple[DataDefinition | None, tuple[str, ...]]:
    """The definition `answer` proposes (version bumped), or None when no valid change is left; and the parts
    left out, each with the reason. Only a conduct clause's obligation is rewritten among generated items (in its
    clause: question and tiers)."""
    if answer.decision == "keep_retired":
        return None, ()
    if get_component(definition.component).generated and not (
            definition.component == "conduct" and definition.id.endswith(".obligation")):
        return None, (f"{definition.id}: generated from the pack and decided by rules; edit its source in pack.yaml",)
    answer, problems = _generated_parts(definition, answer)
    update: dict[str, Any] = {}
    question = answer.question.strip()
    if question and question != definition.question:
        update["question"] = question
    projection = _evidence(definition, answer)
    if isinstance(projection, str):
        problems.append(projection)
    elif projection is not None:
        update["projection"] = projection
    rule = answer.rule.strip()
    if rule and rule != definition.rule:
        try:
            get_rule(rule)
        except UnknownNameError:
            problems.append(f"rule: {rule!r} is not a registered rule")
        else:
            update["rule"] = rule
    tiers = _proposed_tiers(definition, answer, update.get("rule", definition.rule))
    if isinstance(tiers, str):
        problems.append(tiers)
    elif tiers != definition.tiers:
        update["tiers"] = tiers
    if not update:
        return None, tuple(problems)
    note = " ".join(answer.rationale.split())[:400]
    version = next_version(definition.version)
    description = (f"{definition.description}\n" if definition.description else "") + \
        f"Audit rewrite: {note or 'no rationale given'}"
    try:
        new = definition.model_copy(update={**update, "version": version, "description": description})
        new = DataDefinition.model_validate(new.model_dump())  # model_copy does not validate: check the whole
    except ValidationError as e:
        return None, (*problems, f"definition: {e.errors()[0]['msg']}")
    return new, tuple(problems)


# ---- the call ----------------------------------------------------------------------------------------------


async def _answer(prompt: str, model: ModelSpec, cache: DatumCache, counters: CallCounters, *, budget: Budget,
                  retry: RetryPolicy, backend_factory: BackendFactory) -> tuple[RewriteAnswer | str, bool]:
    """The validated answer (or the error that ended its retries), and whether it came from the cache."""
    key = call_key(model.name, model.family, prompt, json_schema(RewriteAnswer))
    stored = cache.get_answer(key)
    if stored is not None:
        try:
            return RewriteAnswer.model_validate(stored), True
        except ValidationError:
            pass  # an answer stored by another version of the rewrite schema: ask again
    try:
        reply = await call_model(backend_factory(model), prompt, RewriteAnswer, budget=budget, retry=retry,
                                 counters=counters)
    except CollectionError as e:
        return f"{MODEL_ERROR}: {' '.join(str(e).split())[:300]}", False
    cache.put_answer(key, reply.data)  # at once: a proposal asked again calls nothing
    return RewriteAnswer.model_validate(reply.data), False


def propose_rewrite(
    definition: DataDefinition, failure: Failure, examples: Sequence[RewriteExample], *, model: ModelSpec,
    cache: DatumCache, counters: CallCounters, retry: RetryPolicy | None = None, budget: Budget | None = None,
    redactor: Redactor | None = None, backend_factory: BackendFactory | None = None,
) -> RewriteProposal:
    """Ask `model` for a rewrite of the failing `definition` (see the module docstring). A model failure gives a
    proposal without a definition and the error in `problems`; it never raises."""
    prompt = render_prompt(definition, failure, examples, redactor=redactor)
    answer, cached = run_coroutine(_answer(prompt, model, cache, counters,
                                  budget=budget if budget is not None else Budget(BudgetLimits()),
                                  retry=retry if retry is not None else RetryPolicy(),
                                  backend_factory=backend_factory or backend_for))
    common = {"item": definition.id, "old_version": definition.version, "model": model.name, "cached": cached}
    if isinstance(answer, str):
        return RewriteProposal(**common, answer=None, definition=None, problems=(answer,))
    new, problems = apply_answer(definition, answer)
    changed = () if new is None else tuple(
        k for k in DataDefinition.model_fields
        if k not in ("version", "description") and getattr(new, k) != getattr(definition, k))
    return RewriteProposal(**common, answer=answer, definition=new, changed=changed,
                           metric_note=answer.metric_note.strip(), problems=problems)


# ---- into the suite --------------------------------------------------------------------------------------


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_CLAUSE_FIELDS = ("question", "tiers", "version", "description")
"""What a rewrite may change of a conduct obligation: its clause states the rest (rule and params, evidence by
layer, applicability by the trigger)."""


def _pack_file(suite_dir: Path) -> Path:
    name = load_yaml_model(SuiteFile, suite_dir / SUITE_FILE).pack
    path = suite_dir / name
    if not path.is_file():
        raise SpecError(f"{suite_dir}: the suite's pack {name!r} is no file of the suite; a conduct item is "
                        f"rewritten in its clause in {PACK_FILE}")
    return path


def _clause_block(lines: Sequence[str], cid: str, path: Path) -> tuple[int, int]:
    """The lines [start, end) of clause `cid` in a pack file laid out as `build` writes it."""
    start = next((i for i, line in enumerate(lines) if line.rstrip("\n") == f"  - id: {cid}"), None)
    if start is None:
        raise SpecError(f"{path}: clause {cid!r} is not one of this pack's own clauses (a base pack's clause is "
                        f"changed by copying it into {path.name} first)")
    end = start + 1
    while end < len(lines) and (lines[end].startswith("    ") or (  # a blank line inside a folded string
            not lines[end].strip() and end + 1 < len(lines) and lines[end + 1].startswith("    "))):
        end += 1
    return start, end


def _rewritten_clause(clause: Clause, new: DataDefinition, path: Path) -> Clause | None:
    """`clause` with the obligation `new` states: its question and tiers, the version bumped, the note added; None
    when `new` states the clause's own question and tiers."""
    _, current = clause_definitions(clause)
    other = [k for k in DataDefinition.model_fields
             if k not in _CLAUSE_FIELDS and getattr(new, k) != getattr(current, k)]
    if other:
        raise SpecError(f"{path}: {new.id}: a rewrite of a conduct obligation changes its question or tiers; "
                        f"{', '.join(other)} come from clause {clause.id} (edit it in {path.name})")
    if new.question == current.question and new.tiers == current.tiers:
        return None
    note = new.description.removeprefix(current.description).strip()
    obligation = clause.obligation.model_copy(update={"question": new.question, "tiers": new.tiers})
    data = clause.model_copy(update={
        "obligation": obligation, "version": next_version(clause.version),
        # One paragraph: a blank line inside a clause would read as the end of its block in pack.yaml.
        "description": f"{clause.description} {' '.join(note.split())}".strip() if note else clause.description,
    }).model_dump(mode="json")
    try:
        return Clause.model_validate(data)
    except ValidationError as e:
        raise SpecError(f"{path}: clause {clause.id}: the rewrite of {new.id} does not make a valid clause: "
                        f"{e.errors()[0]['msg']}") from None


def _write_clause(suite_dir: Path, new: DataDefinition) -> Path:
    """Write a conduct obligation's new version into its clause in the suite's pack file, and the generated
    evaluator file after it; the pack file."""
    cid = clause_id_of(new.id)
    if cid is None or not new.id.endswith(".obligation"):
        raise SpecError(f"{suite_dir}: {new.id}: only a clause's obligation is rewritten (its trigger is decided by "
                        f"rules: edit the clause's trigger in {PACK_FILE})")
    path = _pack_file(suite_dir)
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    start, end = _clause_block(lines, cid, path)
    raw = yamlio.safe_load("".join(line[2:] for line in lines[start:end]))
    clause = Clause.model_validate(raw[0])
    fresh = _rewritten_clause(clause, new, path)
    if fresh is None:
        return path  # that version is already there: nothing to write
    written = "".join([*lines[:start], _clause_yaml(fresh), *lines[end:]])
    check = yamlio.safe_load("".join(line[2:] for line in _clause_yaml(fresh).splitlines(keepends=True)))
    if Clause.model_validate(check[0]) != fresh:  # never write a clause that would read back differently
        raise SpecError(f"{path}: clause {cid}: the rewritten clause does not read back as written")
    _write_atomic(path, written)
    refresh(suite_dir, read_suite_files(suite_dir).pack)  # the generated evaluator file follows its clauses
    return path


def write_proposal(suite_dir: Path, new_definition: DataDefinition) -> Path:
    """Write `new_definition` into the suite's working files as a new version of the definition of its id
    (version bumped when the file holds another content under the same version); the file written.

    An item of a component's own definitions goes into `evaluators/<component>.yaml`, its derived fields (rules,
    sigma, v) recomputed so the file loads as it is. A conduct obligation is generated from its clause, so its new
    question and tiers go into that clause in the suite's `pack.yaml` (the clause's version bumped; its trigger's
    version follows the clause's, so a run recollects the trigger too, by rule), and `evaluators/conduct.yaml` is
    regenerated. Runs keep reading `suite_dir/approved/` until a person approves. A `SpecError` names what is
    wrong: no such suite, evaluator file, definition or clause, or a change the rewrite may not make (component,
    layer, kind; of a conduct item, anything its clause states besides the obligation's question and tiers).
    """
    if not (suite_dir / SUITE_FILE).is_file():
        raise SpecError(f"{suite_dir}: not a suite directory (no {SUITE_FILE})")
    path = suite_dir / EVALUATORS_DIR / f"{new_definition.component}.yaml"
    if not path.is_file():
        raise SpecError(f"{path}: no evaluator file for component {new_definition.component!r}; build the suite")
    if get_component(new_definition.component).generated:
        if new_definition.component == "conduct":
            return _write_clause(suite_dir, new_definition)
        raise SpecError(f"{path}: {new_definition.id}: the {new_definition.component} definitions are generated from "
                        f"the pack; edit the pack there")
    ev = load_yaml_model(EvaluatorSpec, path)
    at = next((i for i, d in enumerate(ev.definitions) if d.id == new_definition.id), None)
    if at is None:
        raise SpecError(f"{path}: no definition {new_definition.id!r} to write a new version of")
    current = ev.definitions[at]
    for name in ("component", "layer", "kind"):
        if getattr(current, name) != getattr(new_definition, name):
            raise SpecError(f"{path}: {new_definition.id}: a rewrite keeps the {name} "
                            f"({getattr(current, name)!r}, proposed {getattr(new_definition, name)!r})")
    if new_definition.digest() == current.digest():
        return path  # that version is already there: nothing to write
    if new_definition.version == current.version:
        new_definition = new_definition.model_copy(update={"version": next_version(current.version)})
    definitions = (*ev.definitions[:at], new_definition, *ev.definitions[at + 1:])
    templates = dict(ev.templates)
    if any(t != "rule" for d in definitions for t in d.tiers):
        # A rewrite that adds a model tier to a rules-only component: the file names the templates it renders.
        own = template_dir(suite_dir)
        for kind in TEMPLATE_KINDS:
            templates.setdefault(kind, TemplateRef(file=f"templates/{kind}.j2", digest=template_digest(kind, own)))
    _write_atomic(path, evaluator_yaml(derive(ev.model_copy(update={"definitions": definitions,
                                                                    "templates": templates}))))
    return path


__all__ = ["MODEL_ERROR", "TEMPLATES", "TIERS", "VERSION", "Failure", "RewriteAnswer", "RewriteExample",
           "RewriteProposal", "apply_answer", "disagreements", "failure_data", "next_version", "propose_rewrite",
           "render_prompt", "write_proposal"]
