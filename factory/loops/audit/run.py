"""One audit (docs/method.md section 6): sample, re-collect with the audit raters, measure, retire, propose.

1. A stratified sample of (unit, component) pairs (`evaluators.audit.sample`), stored with its weights.
2. Each audit rater re-collects every judgment of the sampled components on the sampled units through the same
   cascade code (`collect.recollect`), as `audit:<model>`, its answers cached: an unchanged audit asks nothing.
3. Agreement per data item among every rater of it (the primary collector, the audit raters, people's labels),
   admission at kappa >= 0.60; rules against the model raters; score reliability; validity (criterion against
   the outcomes the traces carry, discriminant, Goodhart over the stored audits); judge-only rates beside
   prediction-powered ones wherever labels exist.
4. The inner loop: an item that fails (kappa below the line, a rule whose precision is too low, a flag reading
   it that points the wrong way) is retired in the store (the next run reruns only the analyses that read it and
   recollects nothing); with a model configured and a built suite, the orchestrator proposes a rewrite as a new
   version in the suite's working files, for a person to review (`diff`) and approve. Once approved and run, the
   new version is collected afresh, and the next audit re-audits it (only its answers are asked again) and logs
   the figures after. Every change goes into the corrections log.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from agent_factory.evaluators.audit.agreement import item_agreements
from agent_factory.evaluators.audit.corrected import corrected_rates
from agent_factory.evaluators.audit.model import (
    HUMAN_PREFIX,
    AuditReport,
    Corrected,
    Correction,
    Criterion,
    ItemAgreement,
    Rating,
    RuleCheck,
)
from agent_factory.evaluators.audit.reliability import score_reliability
from agent_factory.evaluators.audit.rules import rule_checks
from agent_factory.evaluators.audit.sample import Drawn, draw_sample
from agent_factory.evaluators.collect.backends import CallCounters
from agent_factory.evaluators.collect.cache import DatumCache
from agent_factory.evaluators.collect.cascade import audit_rater
from agent_factory.evaluators.collect.config import ModelConfig, ModelSpec
from agent_factory.evaluators.collect.redact import Redactor
from agent_factory.evaluators.core import DataDefinition
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.factory.loops.audit.collect import recollect
from agent_factory.factory.loops.audit.outcomes import ASKED_ITEMS, outcome_agreement
from agent_factory.factory.loops.audit.validity import validity
from agent_factory.factory.pipeline.engine import definitions_by_layer
from agent_factory.factory.store import Store
from agent_factory.factory.store.audit import (
    log_corrections,
    read_corrections,
    read_labels,
    read_ratings,
    record_audit,
    reinstate,
    retire,
    retired_in_force,
    retired_items,
    sample_candidates,
    write_sample,
)
from agent_factory.factory.suite.read import Suite

VERSION = "1"

DEFAULT_SAMPLE = 200
"""(unit, component) pairs an audit re-collects unless told otherwise: about 100 units a component over the
usual two or three components a model collects, enough for a kappa interval about +-0.15 wide."""
MIN_RULE_PRECISION = 0.5
"""A rule is retired when the upper end of its precision's interval against a model rater is below this: the
data cannot rule out that most of its detections are wrong."""
MIN_ITEM_UNITS = 10
"""Units an item needs rated by two raters before a kappa below the line, or a rule's precision, retires it: with
fewer, the interval spans most of [-1, 1] (or a bootstrap of two units gives one point) and the decision would be
noise (the item is reported and kept)."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _definitions(suite: Suite) -> dict[str, DataDefinition]:
    return {d.id: d for comps in definitions_by_layer(suite.components, suite.pack).values()
            for ds in comps.values() for d in ds}


def _checks(ratings: Sequence[Rating], defs: dict[str, DataDefinition]) -> list[Rating]:
    """The ratings of judgments (checks): facts are measured, not judged, and an item no definition names is
    kept only when it is a person's label set of its own (e.g. MAST's failure modes)."""
    return [r for r in ratings if (d := defs.get(r.item)) is None or d.kind == "check"]


def _rule_items(defs: dict[str, DataDefinition]) -> set[str]:
    return {i for i, d in defs.items() if d.rule is not None and d.tiers[:1] == ("rule",) and d.kind == "check"}


Figures = dict[str, float | str | None]
"""A correction's figures: name -> value."""


def _figures(a: ItemAgreement) -> Figures:
    return {"kappa": a.kappa, "kappa_low": a.kappa_low, "kappa_high": a.kappa_high, "alpha": a.alpha, "n": a.n}


def _failures(items: Sequence[ItemAgreement], rules: Sequence[RuleCheck], criterion: Sequence[Criterion],
              flags: Sequence[FlagSpec], defs: dict[str, DataDefinition]) -> dict[str, tuple[str, Figures]]:
    """Item -> (why it fails, its figures), for the suite's items only."""
    out: dict[str, tuple[str, Figures]] = {}
    for a in items:
        if a.item in defs and a.admitted is False and a.n >= MIN_ITEM_UNITS:
            out[a.item] = (f"kappa {a.kappa:.3f} (at two decimals {a.kappa:.2f}) is below the admission line 0.60 "
                           f"over {a.n} units ({', '.join(a.raters)})", _figures(a))
    for r in rules:
        if r.item in defs and r.n >= MIN_ITEM_UNITS and r.precision_high is not None and \
                r.precision_high < MIN_RULE_PRECISION:
            out.setdefault(r.item, (f"the rule's precision against {r.rater} is {r.precision:.2f} "
                                    f"[{r.precision_low:.2f}, {r.precision_high:.2f}], below {MIN_RULE_PRECISION}",
                                    {"precision": r.precision, "recall": r.recall, "n": r.n}))
    by_flag = {f.id: f for f in flags}
    for c in criterion:
        spec = by_flag.get(c.flag)
        if c.fails and spec is not None and spec.source == "datum" and spec.item in defs:
            out.setdefault(spec.item, (f"flag {c.flag} (meant as bad) goes with good {c.outcome}: "
                                       f"{c.note or 'it points the wrong way'}",
                                       {"auc": c.auc, "difference": c.difference, "n": c.n}))
    return out


def _corrected(store: Store, ratings: Sequence[Rating], audit_data: Sequence[Rating], humans: Sequence[Rating],
               drawn: Sequence[Drawn], defs: dict[str, DataDefinition]) -> list[Corrected]:
    """Judge-only and prediction-powered rates of every item a second rater or a person labelled: against the
    audit's models with the sample's weights (per component, as it was drawn), and against people unweighted."""
    judged_items = {r.item for r in ratings if r.rater != "primary"}
    if not judged_items:
        return []
    judge = read_ratings(store, raters=["primary"], items=judged_items)
    out: list[Corrected] = []
    for component in sorted({d.component for d in drawn}):
        weights = {d.unit_id: d.weight for d in drawn if d.component == component}
        mine = [r for r in audit_data if r.item.split(".", 1)[0] == component]
        if mine:
            out += corrected_rates([r for r in judge if r.item.split(".", 1)[0] == component], mine, weights=weights)
    if humans:
        out += corrected_rates(judge, [r for r in humans if r.item in defs])
    return out


def _corrections(
    store: Store, audit_id: str, *, items: Sequence[ItemAgreement], rules: Sequence[RuleCheck],
    criterion: Sequence[Criterion], flags: Sequence[FlagSpec], defs: dict[str, DataDefinition],
    ratings: Sequence[Rating], propose: Callable[[DataDefinition, str, Figures, list[Rating]], Correction | None]
    | None, retire_failing: bool,
) -> list[Correction]:
    """The inner loop's decisions: a rewrite approved and re-audited admitted is logged with its figures after;
    a failing item is retired (and a rewrite proposed); a rule whose recall is too low is marked to collect by
    model. Each (item, version, action) is logged once."""
    corrections: list[Correction] = []
    before = retired_items(store)
    logged = {(c.item, c.item_version, c.action) for c in read_corrections(store)}
    by_item: dict[str, ItemAgreement] = {}
    for a in items:
        if a.item not in by_item or by_item[a.item].admitted is None:
            by_item[a.item] = a
    for item, old in sorted(before.items()):
        d, found = defs.get(item), by_item.get(item)
        if d is not None and d.version != old and found is not None and found.admitted and \
                (item, d.version, "rewrite_approved") not in logged:
            corrections.append(Correction(at=_now(), audit_id=audit_id, item=item, item_version=d.version,
                                          action="rewrite_approved", why=f"version {d.version} re-audited: admitted",
                                          after=_figures(found)))
    failing = _failures(items, rules, criterion, flags, defs) if retire_failing else {}
    for item, old in sorted(before.items()):
        # Retired at this version, and now admitted over enough units with nothing else failing: a person's
        # labels corrected, or more labels moved the decision. The retirement is lifted and the data return.
        d, found = defs.get(item), by_item.get(item)
        if d is not None and d.version == old and item not in failing and found is not None and found.admitted \
                and found.n >= MIN_ITEM_UNITS:
            reinstate(store, item=item)
            corrections.append(Correction(at=_now(), audit_id=audit_id, item=item, item_version=d.version,
                                          action="reinstated", why=f"admitted again over {found.n} units",
                                          after=_figures(found)))
    for item, (why, figures) in sorted(failing.items()):
        d = defs[item]
        if before.get(item) == d.version:
            continue  # retired before, at this version: logged then
        retire(store, item=item, item_version=d.version, audit_id=audit_id, why=why)
        corrections.append(Correction(at=_now(), audit_id=audit_id, item=item, item_version=d.version,
                                      action="retired", why=why, before=figures))
        if propose is not None:
            proposal = propose(d, why, figures, [r for r in ratings if r.item == item])
            if proposal is not None:
                corrections.append(proposal.model_copy(update={"audit_id": audit_id}))
    for r in rules:
        if r.collect_by_model and r.item in defs and r.item not in failing and \
                (r.item, defs[r.item].version, "collect_by_model") not in logged:
            corrections.append(Correction(
                at=_now(), audit_id=audit_id, item=r.item, item_version=defs[r.item].version,
                action="collect_by_model", why=r.note or f"the rule's recall against {r.rater} is too low",
                before={"precision": r.precision, "recall": r.recall, "n": r.n}))
    return corrections


def run_audit(
    store: Store, *, suite: Suite, flags: Sequence[FlagSpec], raters: Sequence[ModelSpec], config: ModelConfig,
    cache: DatumCache, redactor: Redactor, templates: Path | None, size: int = DEFAULT_SAMPLE, seed: int = 0,
    n_boot: int = 1000, retire_failing: bool = True,
    propose: Callable[[DataDefinition, str, Figures, list[Rating]], Correction | None] | None = None,
    counters: CallCounters | None = None, on_step: Callable[[str], None] | None = None,
) -> AuditReport:
    """Audit the store (open for writing) with `suite`: see the module docstring. `propose(definition, why,
    figures, disagreements)`, when given, proposes a rewrite of a retired item and returns its correction (None:
    nothing proposed); `counters` counts its model calls, which the report adds to the re-collection's. `on_step`
    hears each step's name."""
    say = on_step or (lambda _s: None)
    started, t0 = _now(), time.perf_counter()
    audit_id = f"audit-{uuid.uuid4().hex[:10]}"
    defs = _definitions(suite)
    notes: list[str] = []
    sample, model_calls, drawn = None, 0, list[Drawn]()
    rater_names = tuple(audit_rater(s) for s in raters)
    if raters:
        say("sample")
        drawn, sample = draw_sample(sample_candidates(store, components=[c.name for c in suite.components]),
                                    size=size, seed=seed)
        say("re-collect")
        rec = recollect(store, specs=suite.components, pack=suite.pack,
                        sample=[(d.unit_id, d.component) for d in drawn], raters=raters, config=config,
                        cache=cache, redactor=redactor, templates=templates, run_id=audit_id)
        # Stored once the raters were accepted (a refused rater, or a model of the primary's family, leaves
        # nothing behind); a killed re-collection draws the same sample again from the same seed.
        write_sample(store, audit_id, [(d.unit_id, d.user, d.layer, d.component, d.stratum, d.weight)
                                       for d in drawn])
        model_calls = rec.model_calls
        notes += [f"not re-collected ({why}): {len(what)}" for why, what in sorted(rec.not_collected.items())]
    else:
        notes.append("no audit rater configured (--rater, [models] audit, AGENT_FACTORY_AUDIT_MODELS): nothing was "
                     "re-collected; agreement reads people's labels only")

    say("agreement")
    humans = read_labels(store)
    sampled = {d.unit_id for d in drawn}
    labelled = {r.unit_id for r in humans}
    audit_data = [r for r in read_ratings(store, raters=rater_names, units=sampled)
                  if r.item not in ASKED_ITEMS] if sampled else []  # the outcome labels asked are compared apart
    primary_on = read_ratings(store, raters=["primary"], units=sampled | labelled) if sampled | labelled else []
    # A label's unit keeps the store's user (cluster) where a run gave it one: a label file may name none.
    user_of = {r.unit_id: r.user for r in (*primary_on, *audit_data)}
    humans = [r._replace(user=user_of.get(r.unit_id, r.user)) for r in humans]
    others = {r.item for r in (*audit_data, *humans)}
    ratings = _checks([r for r in (*primary_on, *audit_data, *humans) if r.item in others], defs)
    # The suite's collector against the audit's models on the sample, and against people where they labelled:
    # two comparisons, each its own row, since people label other units than the sample (Fleiss' kappa over the
    # three would need units all of them rated, and would be undefined for most items).
    by_models, by_people = {r.item for r in audit_data}, {r.item for r in humans}
    items = [*item_agreements([r for r in ratings if r.item in by_models and not r.rater.startswith(HUMAN_PREFIX)],
                              seed=seed, n_boot=n_boot),
             *item_agreements([r for r in ratings if r.item in by_people and not r.rater.startswith("audit:")],
                              seed=seed, n_boot=n_boot)]
    if raters and drawn:
        say("outcome labels")
        outcome = outcome_agreement(
            store, conversations={d.unit_id for d in drawn if d.layer == "conversation"}, raters=raters,
            pack=suite.pack, config=config, cache=cache, redactor=redactor, templates=templates, run_id=audit_id,
            seed=seed, n_boot=n_boot)
        model_calls += outcome.model_calls
        if outcome.agreement is not None:
            items.append(outcome.agreement)
        notes.append(outcome.note())
    rules = rule_checks(ratings, _rule_items(defs) & others, seed=seed, n_boot=n_boot,
                        references=set(rater_names) | {r.rater for r in humans})
    reliability = score_reliability([r for r in ratings if r.unit_id in sampled and not
                                     r.rater.startswith(HUMAN_PREFIX)]) if raters else []

    say("validity")
    found = validity(store, flags, label=audit_id)
    notes += found.notes

    say("corrected")
    corrected = _corrected(store, ratings, audit_data, humans, drawn, defs)

    say("corrections")
    corrections = _corrections(store, audit_id, items=items, rules=rules, criterion=found.criterion, flags=flags,
                               defs=defs, ratings=ratings, propose=propose if retire_failing else None,
                               retire_failing=retire_failing)
    log_corrections(store, corrections)
    report = AuditReport(
        audit_id=audit_id, started_at=started, seconds=round(time.perf_counter() - t0, 3),
        raters=tuple(sorted({*rater_names, *(r.rater for r in humans)})),
        model_calls=model_calls + (counters.model_calls if counters is not None else 0), sample=sample,
        items=tuple(items), retired=tuple(sorted(retired_in_force(store))), corrections=tuple(corrections),
        rules=tuple(rules), criterion=found.criterion, discriminant=found.discriminant, goodhart=found.goodhart,
        reliability=tuple(reliability), corrected=tuple(corrected), snapshot=found.snapshot, notes=tuple(notes))
    record_audit(store, report, finished=datetime.now(UTC))
    return report


__all__ = ["DEFAULT_SAMPLE", "MIN_ITEM_UNITS", "MIN_RULE_PRECISION", "run_audit"]
