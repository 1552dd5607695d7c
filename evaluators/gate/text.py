"""How the gate's numbers read, written once for every place that prints them (the terminal view, the report,
a fix's finding): a share as a percentage, a change in its unit (`+4.6 pp`, `+46%`), an always-valid bound."""

from __future__ import annotations

from agent_factory.evaluators.gate.model import MetricVerdict, Unit

CROSS_TALK_SHOWN = 0.05
"""A defect's cross-talk is listed for the other metrics it fails in more than this share of draws."""


def pct(share: float | None) -> str:
    """A share as a percentage, one decimal (two below 1%, so 0.04% and 0.4% differ); `—` when undefined."""
    if share is None:
        return "—"
    p = 100.0 * share
    return f"{p:.1f}%" if abs(p) >= 1.0 or p == 0.0 else f"{p:.2f}%"


def value_text(x: float | None, unit: Unit) -> str:
    """A metric's value as its unit reads: a share as a percentage, a geometric mean or a mean as it is."""
    if x is None:
        return "—"
    return pct(x) if unit == "pp" else f"{x:.3g}"


def delta_text(d: float | None, unit: Unit) -> str:
    """A change in its unit: `+4.6 pp`, `+46%`, `+0.12`."""
    if d is None:
        return "—"
    if unit == "pp":
        return f"{d:+.1f} pp"
    return f"{d:+.0f}%" if unit == "%" else f"{d:+.3g}"


def bound_text(m: MetricVerdict) -> str:
    """The always-valid bound that decided, in the metric's unit: `always-valid bound of the worse change +1.6 pp
    > 0`."""
    if m.bound is None:
        return "no always-valid bound"
    return f"always-valid bound of the worse change {delta_text(m.bound, m.unit)} {'>' if m.bound > 0 else '<='} 0"


__all__ = ["CROSS_TALK_SHOWN", "bound_text", "delta_text", "pct", "value_text"]
