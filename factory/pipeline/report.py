"""`RunReport`: what one `agent-factory run` did (the `--json` output, a contract: keep its keys)."""

from __future__ import annotations

from typing import Any

from agent_factory.frozen import Frozen


class RunReport(Frozen):
    """What one `agent-factory run` did (the `--json` output)."""

    run_id: str
    """Id of the run (results and data rows it wrote carry it)."""
    seconds: float
    """Wall time of the run: from the command's start (for `agent-factory run`, imports, suite loading and
    planning included; for a `Runner` built in code, from its construction) to the report."""
    plan: dict[str, Any]
    """What the pipeline found changed since the last complete run and therefore recomputed: `trigger`
    (first run / full / new traces / suite change / nothing changed), users visited of all, definitions
    recollected of all, analyses rerun of all."""
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
    components: dict[str, dict[str, Any]]
    """Per component: stored data counts by value and the population-level results."""
