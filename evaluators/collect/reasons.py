"""Why a datum is uncollected, which of those reasons a rerun could fix, and the cascade's counters."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from agent_factory.evaluators.collect.budget import BUDGET_EXHAUSTED

NO_MODEL = "no model configured"
NO_JURY = "jury required but no jury configured"
JURY_SPLIT = "jury split"
SCHEMA_INVALID = "schema-invalid after retries"
MODEL_ERROR = "model error after retries"
FATAL_MODEL_ERROR = "model error"
RULE_ABSTAINED = "rule abstained and no model tier is allowed"
RULE_ERROR = "rule error"
# A rerun may collect these (a model configured, budget left, the provider back, the rule fixed): never cached.
_TRANSIENT = (NO_MODEL, NO_JURY, BUDGET_EXHAUSTED, SCHEMA_INVALID, MODEL_ERROR, FATAL_MODEL_ERROR, RULE_ERROR)


def reason_category(reason: str) -> str:
    """The reason without its detail: `model error after retries: timeout ...` -> `model error after retries`."""
    return reason.split(":", 1)[0].strip()


def is_transient(reason: str | None) -> bool:
    """Whether an uncollected datum may be collected by a rerun (so it is never cached)."""
    return reason is not None and reason_category(reason) in _TRANSIENT


@dataclass
class CascadeCounters:
    """Every returned datum is counted once: reused (cache hit), collected by tier, or uncollected by reason."""

    reused: int = 0
    reused_uncollected: Counter[str] = field(default_factory=Counter)
    """Of the reused, those the cache holds as uncollected (a jury split, a rule's abstention), by reason
    category: a part of `reused`, not counted again in `uncollected`."""
    collected: Counter[str] = field(default_factory=Counter)
    uncollected: Counter[str] = field(default_factory=Counter)


# Of the transient reasons, those a rerun with the same suite and models could fix: the pipeline keeps their
# definitions dirty. A missing model or jury, or a rule error, needs a config or code change, which changes v.
_RETRY = (BUDGET_EXHAUSTED, SCHEMA_INVALID, MODEL_ERROR, FATAL_MODEL_ERROR)


def retry_later(reason: str | None) -> bool:
    """Whether an uncollected datum should be asked again by the next run even if nothing changed."""
    return reason is not None and reason_category(reason) in _RETRY
