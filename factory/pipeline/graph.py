"""The orchestrator's pipeline (docs/method.md section 8) as an explicit networkx graph, and what a change dirties.

Nodes, each with the step of section 8 it belongs to and a fingerprint:

    traces                     (2 ingest)   the ingested files (their sha256 ids) and the engagement window
    knowledge                  (2 ingest)   the pack without its clauses (what rules read)
    clause:<id>                (3 collect)  one policy clause of the pack
    definition:<item>          (3 collect)  rho and the collector identity: v of the definition in this cascade
    data:<item>                (3 collect)  the atomic data of one definition over every unit
    analysis:<name>            (3 analyze)  f (its content version: code and declared fields), reading the data
                                            of its own and its declared components
    component:<name>           (3 analyze)  the component's stored results
    audit                      (4)          the inner loop: `factory/loops/audit` samples, re-collects, retires
    admission                  (4)          the items an audit retired (what the analyses no longer read), alone,
                                            so a run can say that a retirement is why analyses rerun
    act                        (5)          the outer loop's entry point (the gate runs apart, `agent-factory gate`,
                                            on the data a run leaves; the node holds no work)

A node's fingerprint hashes its own content with its parents' fingerprints, so comparing them with the last
complete run's gives exactly the descendants of what changed. Pure: no I/O, same inputs, same graph.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import networkx as nx

from agent_factory.digest import digest
from agent_factory.evaluators.core import ComponentSpec, DataDefinition
from agent_factory.knowledge_packs import KnowledgePack

VERSION = "2"
"""Version of the graph's shape and fingerprints (2: fingerprints over `agent_factory.digest`): a change here
makes the next run a full one."""

STEPS: tuple[str, ...] = ("trigger", "ingest", "collect", "analyze", "audit", "act")
"""Section 8's five steps; step 3 (collect and analyze) is split in two for reporting."""


def _h(*parts: object) -> str:
    return digest(parts, n=24)


@dataclass(frozen=True)
class TracesState:
    """What the `traces` node stands for."""

    sources: frozenset[str]
    """Ids (sha256) of the ingested files."""
    window_days: float
    """The engagement window that groups a user's sessions into units."""

    def digest(self) -> str:
        return _h("traces", sorted(self.sources), self.window_days)


def reads_component(analysis_reads: Sequence[str], own: str, component: str) -> bool:
    """Whether an analysis of component `own` declaring `analysis_reads` reads `component`'s data."""
    return component == own or "*" in analysis_reads or component in analysis_reads


def build_graph(
    *, specs: Sequence[ComponentSpec], definitions: Mapping[str, Sequence[DataDefinition]],
    versions: Mapping[str, str], pack: KnowledgePack, traces: TracesState, retired: Collection[str] = (),
) -> nx.DiGraph[str]:
    """The pipeline graph. `definitions`: component -> its definitions (as the runner collects them);
    `versions`: item id -> v of the definition in the run's cascade; `retired`: the items an audit retired, which
    the analyses no longer read (an analysis's own content names those of the items it would read, so retiring
    one reruns exactly those analyses and leaves its definition and data nodes, and so its data, as they are)."""
    g: nx.DiGraph[str] = nx.DiGraph()
    g.add_node("trigger", step="trigger", own=_h(VERSION))
    g.add_node("traces", step="ingest", own=traces.digest())
    g.add_node("knowledge", step="ingest", own=pack.knowledge_digest())
    g.add_edge("trigger", "traces")
    g.add_edge("trigger", "knowledge")
    for clause in pack.clauses:
        g.add_node(f"clause:{clause.id}", step="collect", own=clause.digest())
        g.add_edge("trigger", f"clause:{clause.id}")
    for component, defs in definitions.items():
        for d in defs:
            dn, data = f"definition:{d.id}", f"data:{d.id}"
            g.add_node(dn, step="collect", own=versions[d.id], component=component, item=d.id)
            g.add_node(data, step="collect", own=_h("data"), component=component, item=d.id)
            if d.rule or d.applies_when:  # rules read the pack; model tiers see only the projected evidence
                g.add_edge("knowledge", dn)
            if d.clause is not None and g.has_node(f"clause:{d.clause}"):
                g.add_edge(f"clause:{d.clause}", dn)
            g.add_edge(dn, data)
            g.add_edge("traces", data)
    g.add_node("audit", step="audit", own=_h("audit", sorted(retired)))
    g.add_node("admission", step="audit", own=_h("admission", sorted(retired)))
    g.add_edge("trigger", "admission")
    g.add_node("act", step="act", own=_h("act", "not built"))
    g.add_edge("audit", "act")
    for spec in specs:
        cn = f"component:{spec.name}"
        g.add_node(cn, step="analyze", own=_h("component", spec.name))
        for a in spec.analyses:
            an = f"analysis:{a.name}"
            # Which clauses are invariants changes how a clause-reading analysis reads the data, not the data
            # (Clause.digest leaves the flag out), so the flag enters the analysis node only.
            flags = sorted(c.id for c in pack.clauses if c.invariant) if a.reads_clauses else []
            out = sorted(d.id for component, defs in definitions.items() for d in defs
                         if d.id in retired and reads_component(a.reads, spec.name, component))
            own = _h(a.name, a.content_version, flags, out) if out else _h(a.name, a.content_version, flags)
            g.add_node(an, step="analyze", own=own, component=spec.name)
            g.add_edge("knowledge", an)
            g.add_edge("traces", an)  # the horizon and the population are the traces'
            if a.reads_clauses:
                for clause in pack.clauses:
                    g.add_edge(f"clause:{clause.id}", an)
            for component, defs in definitions.items():
                if reads_component(a.reads, spec.name, component):
                    for d in defs:
                        g.add_edge(f"data:{d.id}", an)
            g.add_edge(an, cn)
        g.add_edge(cn, "audit")
    for n in nx.topological_sort(g):
        parents = sorted(g.nodes[p]["fp"] for p in g.predecessors(n))
        g.nodes[n]["fp"] = _h(n, g.nodes[n]["own"], parents)
    return g


def fingerprints(g: nx.DiGraph[str]) -> dict[str, str]:
    """Node -> fingerprint."""
    return {n: g.nodes[n]["fp"] for n in g.nodes}


@dataclass(frozen=True)
class Dirty:
    """What a run must recompute, from the graph and the last complete run's fingerprints."""

    first: bool
    """No complete run before (or a graph version change): everything is computed."""
    traces_changed: bool
    """New files, or a changed engagement window."""
    items: frozenset[str]
    """Definitions whose data must be recollected on every unit (new or changed v)."""
    analyses: frozenset[str]
    """Analyses to rerun (their fingerprint changed)."""
    components: frozenset[str]
    """Components with at least one analysis rerun."""
    unchanged_items: int
    """Definitions whose stored data are kept as they are (apart from units of new traces)."""

    @property
    def nothing(self) -> bool:
        return not (self.first or self.traces_changed or self.items or self.analyses)


def dirty(g: nx.DiGraph[str], previous: Mapping[str, str] | None, *, retry: Collection[str] = ()) -> Dirty:
    """Compare with `previous` (node -> fingerprint of the last complete run; None: there is none). The
    definitions `retry` (data that run could not collect but a rerun could) count as changed, with everything
    downstream of them, whatever their fingerprints."""
    defs = [n for n in g.nodes if n.startswith("definition:")]
    analyses = [n for n in g.nodes if n.startswith("analysis:")]
    if previous is None:
        return Dirty(first=True, traces_changed=True, items=frozenset(g.nodes[n]["item"] for n in defs),
                     analyses=frozenset(n.split(":", 1)[1] for n in analyses),
                     components=frozenset(g.nodes[n]["component"] for n in analyses), unchanged_items=0)
    changed = {n for n in g.nodes if previous.get(n) != g.nodes[n]["fp"]}
    for node in (f"definition:{item}" for item in retry):
        if node in g:  # a definition since removed has nothing left to retry
            changed |= {node, *nx.descendants(g, node)}
    items = frozenset(g.nodes[n]["item"] for n in defs if n in changed)
    rerun = [n for n in analyses if n in changed]
    return Dirty(
        first=False, traces_changed="traces" in changed, items=items,
        analyses=frozenset(n.split(":", 1)[1] for n in rerun),
        components=frozenset(g.nodes[n]["component"] for n in rerun), unchanged_items=len(defs) - len(items),
    )


def describe(g: nx.DiGraph[str]) -> dict[str, int]:
    """Node counts per kind, for reports."""
    out: dict[str, int] = {}
    for n in g.nodes:
        kind = n.split(":", 1)[0]
        out[kind] = out.get(kind, 0) + 1
    return out
