"""Rule-derived outcome labels against the same label asked of a model directly (docs/method.md section 6, score
reliability; issue 33 point 6).

Trajectory derives each session's outcome by rule from its atomic data (`components.trajectory.analysis
.session_outcome`): blocked when the user gave up or showed frustration, else struggled when any recovery event
occurred, else smooth (censored and undetermined sessions are no judgment and are left out). The audit asks an
audit rater the label itself, on the sample's conversations, and measures how far the two agree.

How the model is asked: a model tier answers checks (yes / no / not applicable), so the label is asked as one check
per label (`ASKED`), written from the label's meaning, through the same re-collection path as every audited item
(`collect.recollect`: the suite's prompts, projection, redaction and cache, rater `audit:<model>`; an unchanged
audit asks nothing again). The model's label is the worst one it said yes to, in the rule's own precedence
(blocked over struggled over smooth: a blocked session is blocked whatever its friction); a model that said yes
to none gave no label (a missing label, counted, never guessed).

How agreement is measured: `evaluators.audit.agreement.item_agreements` over ratings of one item,
`OUTCOME_ITEM`, by the primary (the rule's label) and each audit rater: Cohen's kappa for one rater, Fleiss' for
more, Krippendorff's alpha, user-clustered intervals. That function reads three nominal categories, the names of
a check's values; the three labels are carried in them one to one (`CODES`), which leaves every nominal
coefficient unchanged (they depend on which units fall in the same category, not on the categories' names). The
confusion table (rule label x model label) is given per rater in the labels' own names.

`outcome_agreement` does the I/O; `model_labels` and `compare_outcomes` are pure.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from pydantic import Field

from agent_factory.evaluators.audit.agreement import item_agreements
from agent_factory.evaluators.audit.model import ItemAgreement, Rating
from agent_factory.evaluators.collect import DatumCache, ModelConfig, ModelSpec, audit_rater
from agent_factory.evaluators.collect.backends import BackendFactory
from agent_factory.evaluators.collect.redact import Redactor
from agent_factory.evaluators.components.trajectory.definitions import BLOCKING_EVENTS, RECOVERY_EVENTS
from agent_factory.evaluators.components.trajectory.metrics import OUTCOME
from agent_factory.evaluators.core import ComponentSpec, DataDefinition, Projection
from agent_factory.evaluators.core.model import PRIMARY_RATER
from agent_factory.factory.loops.audit.collect import check_families, recollect
from agent_factory.factory.store import Store
from agent_factory.factory.store.audit import primary_collectors, read_ratings
from agent_factory.factory.store.lookup import unit_results
from agent_factory.frozen import Frozen
from agent_factory.knowledge_packs import KnowledgePack

VERSION = "1"

OUTCOME_ITEM = "trajectory.outcome_label"
"""The item the rule's label and the model's are compared on (no stored datum has it: it is the comparison's)."""
LABELS: tuple[str, ...] = ("blocked", "struggled", "smooth")
"""The outcome labels compared, in the rule's precedence (the first that holds is the label)."""
CODES: dict[str, str] = {"smooth": "yes", "struggled": "no", "blocked": "not_applicable"}
"""Each label carried as one of the three nominal categories `item_agreements` reads (one to one)."""
_PROJECTION = Projection(fields=("turns",))
"""What the model sees of a session: its turns, as Trajectory's own items do."""


def _asked(label: str, question: str, description: str) -> DataDefinition:
    return DataDefinition(id=f"trajectory.outcome_asked.{label}", question=question, component="trajectory",
                          layer="conversation", tiers=("small_model",), projection=_PROJECTION,
                          description=description)


ASKED: dict[str, DataDefinition] = {
    "blocked": _asked(
        "blocked", "Was the user blocked in this session: did the user give up on the agent, or express "
                   "frustration with it?",
        "The outcome `blocked`, asked directly (the rule derives it from abandonment and frustration)."),
    "struggled": _asked(
        "struggled", "Did the user struggle in this session: did the user have to repeat or rephrase a request, "
                     "restate or correct something the agent lost or misunderstood, answer the agent's "
                     "clarifying questions more than once, or did the session end right after an answer that "
                     "failed to reach the user?",
        "The outcome `struggled`, asked directly (the rule derives it from the recovery events)."),
    "smooth": _asked(
        "smooth", "Did this session go smoothly: the user never had to repeat, rephrase or correct a request, "
                  "was not asked to clarify again and again, did not give up and showed no frustration?",
        "The outcome `smooth`, asked directly (the rule derives it from no recovery or blocking event)."),
}
"""One check per label, asked of the audit rater on each sampled conversation."""
ASKED_ITEMS: frozenset[str] = frozenset(d.id for d in ASKED.values())
"""The ids the model's answers are stored under (rater `audit:<model>`): other agreement reads leave them out."""
_LABEL_OF = {d.id: label for label, d in ASKED.items()}


class Confusion(Frozen):
    """Rule label x model label counts for one audit rater, on the conversations both labelled."""

    rater: str
    """The audit rater (`audit:<model>`)."""
    counts: dict[str, dict[str, int]]
    """rule label -> model label -> conversations (every label of `LABELS` on both sides, zeros included)."""
    agree: int = Field(ge=0)
    """Conversations on the diagonal."""
    n: int = Field(ge=0)
    """Conversations both labelled."""


class OutcomeAgreement(Frozen):
    """The rule's outcome labels against the same labels asked of the audit raters."""

    agreement: ItemAgreement | None
    """Agreement on `OUTCOME_ITEM` among the rule (`primary`) and the raters; None when no conversation had a
    rule label of `LABELS` and a model label."""
    confusion: tuple[Confusion, ...] = ()
    """Per rater, in rater order."""
    conversations: int = Field(ge=0)
    """Conversations of the sample with a rule label of `LABELS` (those asked)."""
    left_out: dict[str, int] = Field(default_factory=dict)
    """Conversations left out, by why (the rule's label is censored or undetermined, or none is stored)."""
    unlabelled: dict[str, int] = Field(default_factory=dict)
    """Per rater, asked conversations it gave no label (it said yes to no label)."""
    model_calls: int = Field(default=0, ge=0)
    """Model calls the asking made (cached answers are none)."""

    def note(self) -> str:
        """The comparison in one line (the confusion as `rule->model:count` off the diagonal), for an audit's
        notes."""
        a = self.agreement
        head = (f"outcome labels, rule vs asked directly: kappa {a.kappa:.3f} over {a.n} conversations"
                if a is not None and a.kappa is not None else "outcome labels, rule vs asked directly: no kappa")
        parts = [head]
        for c in self.confusion:
            off = ", ".join(f"{r}->{m} {k}" for r, row in c.counts.items() for m, k in row.items() if r != m and k)
            none = self.unlabelled.get(c.rater, 0)
            parts.append(f"{c.rater}: {c.agree} of {c.n} agree" + (f" (disagree: {off})" if off else "")
                         + (f", {none} given no label" if none else ""))
        return "; ".join(parts)


def model_labels(answers: Sequence[Rating]) -> dict[tuple[str, str], str | None]:
    """(rater, unit) -> the label a rater gave a conversation from its answers to `ASKED` (the first of `LABELS`
    it said yes to; None when it said yes to none). Answers of other items are ignored."""
    said: dict[tuple[str, str], set[str]] = {}
    for r in answers:
        label = _LABEL_OF.get(r.item)
        if label is None:
            continue
        yes = said.setdefault((r.rater, r.unit_id), set())
        if r.value == "yes":
            yes.add(label)
    return {key: next((lab for lab in LABELS if lab in yes), None) for key, yes in said.items()}


def compare_outcomes(rule: Mapping[str, tuple[str, str]], model: Mapping[tuple[str, str], str | None], *,
                     raters: Sequence[str], seed: int = 0, n_boot: int = 1000) -> OutcomeAgreement:
    """Agreement and confusion of the rule's labels (`rule`: unit -> (user, label)) and the raters' (`model`:
    (rater, unit) -> label or None). Units whose rule label is not one of `LABELS` are left out and counted."""
    left: Counter[str] = Counter()
    kept: dict[str, tuple[str, str]] = {}
    for unit, (user, label) in sorted(rule.items()):
        if label in LABELS:
            kept[unit] = (user, label)
        else:
            left[f"the rule's label is {label}"] += 1
    ratings = [Rating(u, user, OUTCOME_ITEM, PRIMARY_RATER, CODES[label]) for u, (user, label) in kept.items()]
    confusion, unlabelled = [], {}
    for rater in raters:
        counts = {r: dict.fromkeys(LABELS, 0) for r in LABELS}
        missing = 0
        for u, (user, label) in kept.items():
            got = model.get((rater, u))
            if got is None:
                missing += 1
                continue
            counts[label][got] += 1
            ratings.append(Rating(u, user, OUTCOME_ITEM, rater, CODES[got]))
        n = sum(sum(row.values()) for row in counts.values())
        confusion.append(Confusion(rater=rater, counts=counts, agree=sum(counts[lab][lab] for lab in LABELS), n=n))
        if missing:
            unlabelled[rater] = missing
    found = [a for a in item_agreements(ratings, seed=seed, n_boot=n_boot) if a.item == OUTCOME_ITEM]
    agreement = found[0] if found and found[0].n else None
    if agreement is not None:
        why = (f"the rule's outcome label ({', '.join(LABELS)}) against the same label asked of the model directly, "
               "three nominal categories")
        agreement = agreement.model_copy(update={"reason": "; ".join(p for p in (why, agreement.reason) if p)})
    return OutcomeAgreement(agreement=agreement, confusion=tuple(confusion), conversations=len(kept),
                            left_out=dict(sorted(left.items())), unlabelled=unlabelled)


def rule_labels(store: Store, conversations: Collection[str]) -> dict[str, tuple[str, str]]:
    """unit -> (user, the stored outcome label) of `conversations` (Trajectory's per-session result of the last
    run); the user is the one the audit's ratings name (`read_ratings`), so both raters' ratings share it."""
    users = {r.unit_id: r.user for r in read_ratings(store, raters=[PRIMARY_RATER], units=conversations)}
    out: dict[str, tuple[str, str]] = {}
    for r in unit_results(store, sorted(conversations)):
        if r.component == "trajectory" and r.metric == OUTCOME.name and r.value is not None and r.unit_id in users:
            value = json.loads(r.value)
            if isinstance(value, str):
                out[r.unit_id] = (users[r.unit_id], value)
    return out


def outcome_agreement(
    store: Store, *, conversations: Collection[str], raters: Sequence[ModelSpec], pack: KnowledgePack,
    config: ModelConfig, cache: DatumCache, redactor: Redactor, templates: Path | None, run_id: str | None = None,
    seed: int = 0, n_boot: int = 1000, backend_factory: BackendFactory | None = None,
) -> OutcomeAgreement:
    """Ask each rater the outcome label of every sampled conversation whose rule label is one of `LABELS`, and
    compare (`compare_outcomes`). `store` is open for writing (the answers are stored as rater `audit:<model>`
    under `ASKED_ITEMS`, and cached); `conversations` are the sample's conversation ids (others are ignored by
    the store's reads); `config`, `cache`, `redactor`, `templates` as `collect.recollect` takes them. A rater of
    the family of a model that collected the data the rule reads is refused (`SpecError`) before any call."""
    rule = rule_labels(store, conversations)
    asked = sorted(u for u, (_user, label) in rule.items() if label in LABELS)
    names = sorted({audit_rater(s) for s in raters})
    calls = 0
    if asked and raters:
        # The rule's label stands on Trajectory's data: a rater of the family that collected them would judge its
        # own family's reading again.
        check_families(raters, primary_collectors(store, units=asked, items=(*RECOVERY_EVENTS, *BLOCKING_EVENTS)))
        spec = ComponentSpec(name="trajectory", definitions=tuple(ASKED.values()), analyses=())
        done = recollect(store, specs=[spec], pack=pack, sample=[(u, "trajectory") for u in asked], raters=raters,
                         config=config, cache=cache, redactor=redactor, templates=templates, run_id=run_id,
                         backend_factory=backend_factory)
        calls = done.model_calls
    answers = [r for r in read_ratings(store, raters=names, units=asked) if r.item in ASKED_ITEMS] if asked else []
    result = compare_outcomes(rule, model_labels(answers), raters=names, seed=seed, n_boot=n_boot)
    unstored = len(set(conversations) - set(rule))
    left = {**result.left_out, **({"no outcome stored (not a conversation of the last run)": unstored}
                                  if unstored else {})}
    return result.model_copy(update={"model_calls": calls, "left_out": left})


__all__ = ["ASKED", "ASKED_ITEMS", "CODES", "LABELS", "OUTCOME_ITEM", "Confusion", "OutcomeAgreement",
           "compare_outcomes", "model_labels", "outcome_agreement", "rule_labels"]
