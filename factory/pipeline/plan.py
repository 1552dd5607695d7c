"""What a run recomputes: the graph's dirty nodes turned into users to rebuild and definitions to recollect."""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from agent_factory.factory.pipeline.graph import VERSION as GRAPH_VERSION
from agent_factory.factory.pipeline.graph import Dirty, TracesState, dirty
from agent_factory.factory.store import Store
from agent_factory.factory.store.pipeline import all_user_keys, load_previous, users_touched


@dataclass(frozen=True)
class Plan:
    """What this run will compute (see `factory.pipeline.graph.dirty`)."""

    trigger: str
    dirty: Dirty
    users: frozenset[str] | None
    """Users whose units are rebuilt with every definition (None: all)."""
    visit_all: bool
    """Whether every user is visited (some definitions changed, or everything is rebuilt)."""
    users_total: int


def make_plan(store: Store, graph: nx.DiGraph[str], *, traces: TracesState, horizon: float | None, full: bool) -> Plan:
    """Compare `graph` with the last complete run recorded in `store` (ignored when `full`)."""
    prev = None if full else load_previous(store, graph_version=GRAPH_VERSION)
    d = dirty(graph, prev.fingerprints if prev else None, retry=prev.retry if prev else ())
    users: frozenset[str] | None = frozenset()
    reasons: list[str] = []
    if prev is None:
        users, reasons = None, ["full" if full else "first run"]
    elif d.traces_changed:
        if prev.window_days != traces.window_days or not prev.sources <= traces.sources:
            users, reasons = None, ["engagement window or file set changed"]
        else:
            new = traces.sources - prev.sources
            users = frozenset(users_touched(store, new_sources=new, old_horizon=prev.horizon, new_horizon=horizon,
                                            window_days=traces.window_days))
            reasons.append(f"{len(new)} new trace file(s)")
    if prev is not None and d.items:
        reasons.append(f"{len(d.items)} definition(s) changed")
    elif prev is not None and d.analyses and not d.traces_changed:
        audit = "admission" in graph and prev.fingerprints.get("admission", graph.nodes["admission"]["own"]) != \
            graph.nodes["admission"]["fp"]
        why = "code, declared fields, invariants or the items an audit retired" if audit else \
            "code, declared fields or invariants"
        reasons.append(f"{len(d.analyses)} analysis(es) changed ({why})")
    return Plan(trigger="; ".join(reasons) or "nothing changed", dirty=d, users=users,
                visit_all=users is None or bool(d.items and prev is not None), users_total=all_user_keys(store))
