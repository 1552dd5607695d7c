"""What every view reads besides the flags: the components that present themselves, the population-level results
and the store's traffic facts. The terminal summary, `show` and the HTML report all read them here, so none of
them depends on another view's model.
"""

from __future__ import annotations

import json

from agent_factory.adapters.model import ANNOTATION_KINDS
from agent_factory.evaluators.audit.model import AuditReport
from agent_factory.evaluators.collect.redact import DefaultRedactor, Redactor, redact_text
from agent_factory.evaluators.core.present import Presentation, Row
from agent_factory.factory.store import Store
from agent_factory.factory.store.results import population_results
from agent_factory.factory.store.runs import last_finished
from agent_factory.factory.store.units import layer_counts
from agent_factory.frozen import Frozen

QUOTE_CONTEXT = 80
"""Characters shown either side of a cited range."""

def presented() -> list[tuple[str, Presentation]]:
    """Every registered component that presents itself, in the registry's order (the spine, Conduct across it,
    then the instruments): the views iterate over these and hold no component list of their own."""
    from agent_factory.evaluators.core.registry import components

    return [(c.name, c.present) for c in components() if c.present is not None]


def audit_rows(how: Presentation, audit: AuditReport | None) -> list[Row]:
    """The rows a component gives from the store's latest audit (its `from_audit`), which every view adds to
    its stored results; none without an audit or for a component the audit says nothing of."""
    return list(how.from_audit(audit)) if audit is not None and how.from_audit is not None else []


class ResultRow(Frozen):
    """One population-level result (no unit id) as the analyses stored it."""

    component: str
    """The component that produced it."""
    layer: str | None
    """The layer of its units."""
    metric: str
    """The metric name, e.g. `failure_rate` or `C(r).confirm_before_write`."""
    stratum: str | None
    """`all`, `mode=deep`, `end=failed`, ...; None when the analysis gave none."""
    value: float | str | None
    """The estimate (a number), a label (`held`, `admitted`), or None when undefined."""
    low: float | None = None
    """Lower end of its 95% interval."""
    high: float | None = None
    """Upper end of its 95% interval."""
    n: int | None = None
    """The denominator (units the estimate is over)."""
    note: str | None = None
    """What the analysis says about how it was computed, and what it left out."""


class StoreFacts(Frozen):
    """What the store holds besides results: traffic, segments, quarantine, runs."""

    path: str
    """The store file the report was made from."""
    turns: int
    """Real turns."""
    sessions: int
    """Real sessions."""
    users: int
    """Real users."""
    spans: int
    """Spans of real turns."""
    segments: dict[str, int]
    """Turns per traffic segment (real included)."""
    quarantined: int
    """Records quarantined at ingest."""
    units: dict[str, int]
    """Units the last run collected, per layer."""
    last_run: str | None
    """When the last run finished (ISO time); None when the store was never run."""
    outcome_kinds: tuple[str, ...] = ()
    """The outcome event kinds stored (e.g. `task_reward`); annotations (`ANNOTATION_KINDS`) are no outcome."""


def _value(raw: str | None) -> float | str | None:
    if raw is None:
        return None
    v = json.loads(raw)
    if isinstance(v, bool):
        return float(v)
    return v if isinstance(v, int | float | str) or v is None else json.dumps(v, ensure_ascii=False)


def read_facts(store: Store) -> StoreFacts:
    """The store's traffic counts, the units of its last run and the outcome kinds it holds."""
    counts = store.counts()
    last = last_finished(store)
    return StoreFacts(
        path=str(store.path), turns=counts["turns"], sessions=counts["sessions"], users=counts["users"],
        spans=counts["spans"], segments={str(k): int(v) for k, v in counts["segments"].items()},
        quarantined=counts["all"]["quarantined"], units=layer_counts(store),
        last_run=last.isoformat() if last is not None else None,
        outcome_kinds=tuple(k for k in store.outcome_kinds() if k not in ANNOTATION_KINDS),
    )


def read_rows(store: Store, redactor: Redactor | None = None) -> tuple[ResultRow, ...]:
    """Every population-level result, in (component, analysis, metric, layer, stratum) order; strata, notes and
    text values redacted (by the default redactor when none is given)."""
    red = redactor if redactor is not None else DefaultRedactor()

    def text(v: str | None) -> str | None:
        return None if v is None else redact_text(v, red)

    rows = []
    for c, layer, m, s, v, lo, hi, n, note in population_results(store):
        value = _value(v)
        rows.append(ResultRow(component=c, layer=layer, metric=m, stratum=text(s),
                              value=text(value) if isinstance(value, str) else value, low=lo, high=hi,
                              n=None if n is None else int(n), note=text(note)))
    return tuple(rows)


COMMAND_WIDTH = 98
"""Columns a suggested command is laid out for (a 100-column terminal), in every view that prints `next:`."""


def command_lines(cmd: str, *, width: int = COMMAND_WIDTH, indent: str = "  ") -> list[str]:
    """A suggested command as lines of at most `width` columns that a shell reads as the one command: broken
    between options with a trailing backslash, never inside an option's value (a path is printed whole, on a
    line of its own past `width` if it must)."""
    if len(indent) + len(cmd) <= width:
        return [indent + cmd]
    words = cmd.split(" ")
    # Each option stays with its value: `--store PATH` is one piece.
    pieces: list[str] = []
    for w in words:
        if pieces and not w.startswith("-") and pieces[-1].startswith("-") and " " not in pieces[-1]:
            pieces[-1] += " " + w
        else:
            pieces.append(w)
    lines, cur, pad = [], indent, indent + "    "
    for p in pieces:
        if cur.strip() and len(cur) + 1 + len(p) + 2 > width:
            lines.append(cur + " \\")
            cur = pad + p
        else:
            cur = cur + (" " if cur.strip() else "") + p
    return [*lines, cur]
