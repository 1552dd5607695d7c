"""`RunReport`: what one `agent-factory run` did (the `--json` output, a contract: keep its keys).

Every part is a frozen model (`report.plan.trigger`, not `report.plan["trigger"]`), so that a renamed or dropped
key is a type error where it is read rather than a `KeyError` in a command. The field order of each model is the
key order of the JSON output.
"""

from __future__ import annotations

from pydantic import JsonValue

from agent_factory.frozen import Frozen


class PlanReport(Frozen):
    """What the pipeline found changed since the last complete run and therefore recomputed."""

    trigger: str
    """Why the run recomputed: first run, full, new trace files, a suite change, or nothing changed."""
    users_visited: int
    """Users whose units this run collected (0 when nothing changed)."""
    users_total: int
    """Users in the store."""
    users_rebuilt: int
    """Users whose units were rebuilt with every definition (new files touched them, or everything was)."""
    definitions_recollected: int
    """Definitions whose data were collected afresh on every unit (their v changed)."""
    definitions_total: int
    analyses_rerun: int
    """Analyses downstream of a change (they read changed data, or their own content changed)."""
    analyses_total: int
    graph: dict[str, int]
    """Nodes of the pipeline graph per kind (`graph.describe`)."""
    retry_next_run: tuple[str, ...]
    """Definitions with data a rerun could still collect (budget, provider errors), in name order: the next run
    recollects them."""
    workers: int
    """Processes that collected this run (1: this one; 0: nothing was collected)."""


class MetricReport(Frozen):
    """One population-level result of a component as stored (no unit id)."""

    metric: str
    layer: str
    stratum: str | None
    value: JsonValue
    """The stored value (JSON: a rate, a count, a list, ...)."""
    low: float | None
    """Lower end of the 95% interval; None for a value without one."""
    high: float | None
    n: int | None
    """Units (or users) the value is over."""


class ComponentReport(Frozen):
    """One component's stored data counts and population-level results after the run."""

    data: dict[str, int]
    """Its stored data (the primary rater's) by value: yes, no, not_applicable, uncollected, ..."""
    results: int
    """Its stored results, unit-level ones included."""
    metrics: tuple[MetricReport, ...]
    """Its population-level results, in (analysis, metric, layer, stratum) order."""


class RunReport(Frozen):
    """What one `agent-factory run` did (the `--json` output)."""

    run_id: str
    """Id of the run (results and data rows it wrote carry it)."""
    seconds: float
    """Wall time of the run: from the command's start (for `agent-factory run`, imports, suite loading and
    planning included; for a `Runner` built in code, from its construction) to the report."""
    plan: PlanReport
    """What the pipeline found changed since the last complete run and therefore recomputed."""
    units: dict[str, int]
    """Units collected per layer by this run (0 when nothing changed)."""
    model_calls: int
    """Model calls made (0 on a rerun with nothing changed)."""
    tokens: int
    """Model tokens spent."""
    cost_usd: float
    """Cost from litellm's local cost map."""
    items: dict[str, int]
    """Data items, each counted once: collected (a value decided by this run's rules or models), reused (a
    value found in the cache under an unchanged key), uncollected (this run's data without a value, with a
    reason, whether decided now or found so in the cache), kept (stored data of unchanged definitions on
    unchanged units, not revisited). collected + reused + uncollected are the data this run wrote; with kept,
    the data stored."""
    uncollected_reasons: dict[str, int]
    """This run's uncollected items by reason (they sum to `items.uncollected`)."""
    results: dict[str, int]
    """Stored results: added, removed, unchanged (byte-identical rows, left as they were)."""
    components: dict[str, ComponentReport]
    """Per component: stored data counts by value and the population-level results."""


__all__ = ["ComponentReport", "MetricReport", "PlanReport", "RunReport"]
