"""The audit's validity checks over a store: reads the last run's flags, outcomes, per-unit results and stored
audits, and hands them to the pure `evaluators.audit.validity` (criterion, discriminant, Goodhart)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from agent_factory.evaluators import kernel
from agent_factory.evaluators.audit import validity as pure
from agent_factory.evaluators.audit.model import Criterion, Discriminant, GoodhartSignal
from agent_factory.evaluators.components.execution.definitions import DELIVERED
from agent_factory.evaluators.components.results.definitions import FEEDBACK, REDO, RETURN_INTERVAL_S, RETURNED_WITHIN_T
from agent_factory.evaluators.components.substance.definitions import ITEMS as SUBSTANCE_ITEMS
from agent_factory.evaluators.components.trajectory.metrics import OUTCOME
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.core.registry import ComponentSpec, components
from agent_factory.evaluators.findings import UnitKey, unit_outcomes
from agent_factory.factory.store import Store
from agent_factory.factory.store.audit import audit_history
from agent_factory.factory.store.findings import flag_results
from agent_factory.factory.store.units import load_rows
from agent_factory.factory.views.findings import ASSOCIATION_LEVEL, read_findings
from agent_factory.factory.views.results import read_rows

NEXT_LAYER_ITEMS = (*SUBSTANCE_ITEMS, DELIVERED, REDO, RETURNED_WITHIN_T, RETURN_INTERVAL_S, FEEDBACK)
"""What the next-layer checks read of each unit: S's items and delivery (minimum S), the ending's delivery and
what followed the session (redo, return)."""


class Validity(NamedTuple):
    """What the validity checks found on a store."""

    criterion: tuple[Criterion, ...]
    """Every flag against every outcome, then flags and results against the next layer."""
    discriminant: Discriminant
    """Do the components measure different things."""
    snapshot: dict[str, float | None]
    """The population metrics now (`component/metric` -> value): the next audit's history point."""
    goodhart: tuple[GoodhartSignal, ...]
    """Metrics that improved while the next layer worsened, over the stored audits and now."""
    notes: tuple[str, ...]
    """What could not be measured, and why."""


def validity(store: Store, specs: Sequence[FlagSpec], *, label: str = "now",
             registered: Sequence[ComponentSpec] | None = None, n_boot: int = pure.N_BOOT,
             seed: int = pure.SEED) -> Validity:
    """Criterion, discriminant and Goodhart over `store`'s last run, with the flags `specs` (`Project.flags`).
    `label` names the current point in the Goodhart history (the audit's id); `registered` the components
    (default: the registry's)."""
    comps = list(registered) if registered is not None else components()
    found = read_findings(store, specs, with_associations=False)
    rows = found.at(ASSOCIATION_LEVEL)
    notes: list[str] = []
    events = [e for e in store.events() if e.is_outcome]
    outcomes = unit_outcomes(events, found.units, level=ASSOCIATION_LEVEL) if events else {}
    if not outcomes:
        notes.append("criterion: the traces carry no numeric outcome event (task reward, feedback, task success)")
    notes += [f"criterion against {kind}: {pure.bad_outcome(v.values())[1]}" for kind, v in outcomes.items()
              if pure.bad_outcome(v.values())[0] is None]
    out = pure.criterion(specs, rows, outcomes, n_boot=n_boot, seed=seed)
    out += unit_scores(store, found.units, outcomes, comps, n_boot=n_boot, seed=seed)
    outcome_of = trajectory_outcome(store)
    below = [s for s in specs if pure.before(s.component, "trajectory", comps)]
    graded = pure.trajectory_outcomes(outcome_of)  # by conversation unit id, as the rolled-up flags are
    if pure.bad_outcome(graded.values())[0] is not None:
        out += pure.criterion(below, rows, {pure.TRAJECTORY_OUTCOME: graded}, n_boot=n_boot, seed=seed)
    elif graded:
        kinds = " or ".join(sorted({str(outcome_of[c]) for c in graded}))
        notes.append(f"flags against the trajectory outcome: its graded conversations ({len(graded)}) are all "
                     f"{kinds}: no good and bad side to compare (most outcomes need a model)")
    else:
        notes.append("flags against the trajectory outcome: no conversation is smooth, struggled or blocked")
    obs = kernel.freeze(load_rows(store, items=NEXT_LAYER_ITEMS, layers=("trace", "conversation")), horizon=None)
    conversation_of = {u.unit_id: u.conversation_id or u.unit_id for u in found.units if u.layer == "conversation"}
    upper, said = pure.next_layer(obs, {conversation_of.get(u, u): x for u, x in outcome_of.items()},
                                  n_boot=n_boot, seed=seed)
    notes += said
    snap = store_snapshot(store, comps)
    return Validity(criterion=tuple(out + upper), discriminant=pure.discriminant(specs, rows), snapshot=snap,
                    goodhart=tuple(goodhart(store, snap, label=label, registered=comps)), notes=tuple(notes))


def unit_scores(store: Store, units: Sequence[UnitKey], outcomes: Mapping[str, Mapping[str, float]],
                registered: Sequence[ComponentSpec], *, n_boot: int = pure.N_BOOT,
                seed: int = pure.SEED) -> list[Criterion]:
    """Every per-unit numeric result a component declares with a direction (the session's friction) against
    every outcome (`evaluators.audit.validity.score_criterion`)."""
    user_of = {u.unit_id: u.user_id or u.unit_id for u in units}
    out: list[Criterion] = []
    for c in registered:
        if c.present is None:
            continue
        for m in c.present.metrics:
            if not m.per_unit or m.kind == "label" or m.worse is None or m.params:
                continue
            scores = {r.unit_id: float(r.value) for r in flag_results(store, metrics={(c.name, m.name)})
                      if isinstance(r.value, int | float)}
            if scores:
                out += pure.score_criterion(m.name, c.name, scores, user_of, outcomes, worse=m.worse,
                                            n_boot=n_boot, seed=seed)
    return out


def trajectory_outcome(store: Store) -> dict[str, str | float | None]:
    """Conversation unit id -> its stored trajectory outcome label (the per-unit result `trajectory/outcome`)."""
    return {r.unit_id: r.value for r in flag_results(store, metrics={("trajectory", OUTCOME.name)})}


def store_snapshot(store: Store, registered: Sequence[ComponentSpec] | None = None) -> dict[str, float | None]:
    """The store's population metrics now (`evaluators.audit.validity.snapshot`)."""
    return pure.snapshot(read_rows(store), list(registered) if registered is not None else components())


def goodhart(store: Store, current: Mapping[str, float | None], *, label: str = "now",
             registered: Sequence[ComponentSpec] | None = None) -> list[GoodhartSignal]:
    """Goodhart signals over the stored audits' snapshots (oldest first) and `current` (named `label`)."""
    comps = list(registered) if registered is not None else components()
    history = [(a.audit_id, dict(a.snapshot)) for a in audit_history(store) if a.snapshot]
    history.append((label, dict(current)))
    keys = {k for _, s in history for k in s}
    return pure.goodhart(history, worse=pure.directions(keys, comps), next_layer_of=pure.pairing(keys, comps))


__all__ = ["NEXT_LAYER_ITEMS", "Validity", "goodhart", "store_snapshot", "trajectory_outcome", "unit_scores",
           "validity"]
