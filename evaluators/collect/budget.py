"""The per-run budget: calls, tokens and cost, checked before every model call.

A call is reserved before it is made (so concurrent calls never exceed the call ceiling) and charged with its
reported usage when it returns. Tokens and cost are only known afterwards, so calls already in flight when a
ceiling is crossed may overshoot it by at most `concurrency` calls; nothing is started after that.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_factory.errors import CollectionError
from agent_factory.evaluators.collect.config import BudgetLimits

BUDGET_EXHAUSTED = "budget exhausted"
"""The reason of every item left uncollected because the budget ran out."""


class BudgetExhausted(CollectionError):
    """No further model call may be made in this run."""


@dataclass
class Budget:
    """Spending of one run against its limits (not thread-safe: one event loop reserves and charges)."""

    limits: BudgetLimits
    calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0

    def exhausted_by(self) -> str | None:
        """Which ceiling is reached (`calls`, `tokens`, `cost_usd`), or None while calls may still be made."""
        lim = self.limits
        if lim.calls is not None and self.calls >= lim.calls:
            return "calls"
        if lim.tokens is not None and self.tokens >= lim.tokens:
            return "tokens"
        if lim.cost_usd is not None and self.cost_usd >= lim.cost_usd:
            return "cost_usd"
        return None

    @property
    def exhausted(self) -> bool:
        """Whether a ceiling is reached."""
        return self.exhausted_by() is not None

    def reserve(self) -> None:
        """Count one call about to be made; `BudgetExhausted` (and nothing counted) when a ceiling is reached."""
        which = self.exhausted_by()
        if which is not None:
            raise BudgetExhausted(f"{BUDGET_EXHAUSTED} ({which})")
        self.calls += 1

    def charge(self, *, tokens: int, cost_usd: float) -> None:
        """Add a returned call's usage."""
        self.tokens += max(0, tokens)
        self.cost_usd += max(0.0, cost_usd)
