"""The terminal summary: per component the few results that matter, worst first, each with its interval and n,
then the flags' associations with the outcomes the traces carry, then what the latest audit corrected (when the
store has one), then where to look next.

`build_summary` is pure (rows in, `Summary` out) and `render` turns it into lines of at most `WIDTH` columns;
`Project.summary` reads a store into it. `run` prints it after its one-line report and
`agent-factory summary` prints it for a store already run; `--verbose` on `run` gives every table instead.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from pydantic import SerializerFunctionWrapHandler, model_serializer

from agent_factory.evaluators.audit.model import AuditReport, Corrected, Criterion
from agent_factory.evaluators.core import present
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.core.present import fmt, number
from agent_factory.evaluators.findings import Association
from agent_factory.factory.views.results import ResultRow, StoreFacts, audit_rows, command_lines, presented
from agent_factory.frozen import Frozen

VERSION = "1"
WIDTH = 98
"""Longest line printed (fits a 100-column terminal)."""
ASSOCIATIONS_SHOWN = 12
"""Flag-outcome associations printed (those with an interval first, largest difference first); all in --json."""
AUDIT_SHOWN = 4
"""Corrected rates, and flags pointing the wrong way, printed each; all in `agent-factory audit --json`."""


class Line(Frozen):
    """One result of the summary."""

    component: str
    """The component it belongs to (`outcomes` for an association)."""
    text: str
    """The result in words, numbers included, as printed."""
    value: float | None = None
    """The estimate (a rate, a difference, a count)."""
    low: float | None = None
    """Lower end of its 95% interval."""
    high: float | None = None
    """Upper end of its 95% interval."""
    n: int | None = None
    """Units it is over."""


class Summary(Frozen):
    """What `run` and `agent-factory summary` print."""

    store: str
    """The store summarised."""
    traffic: str
    """Turns, sessions and users of real traffic, in words."""
    components: dict[str, tuple[Line, ...]]
    """Per component, in the spine's order: its results, worst first (empty when it has none)."""
    absent: dict[str, str]
    """Components with nothing to show, and why."""
    outcomes: tuple[Line, ...]
    """Flag-outcome associations, largest difference first (empty without outcome events)."""
    next: tuple[str, ...]
    """Commands to look further."""
    audit: tuple[Line, ...] = ()
    """From the latest audit: judge-only and corrected rates side by side, retired items, flags pointing the wrong
    way (empty, and left out of `--json`, when the store has no audit)."""

    @model_serializer(mode="wrap")
    def _without_empty_audit(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        # A store never audited prints the summary it always did, `--json` included.
        data: dict[str, object] = handler(self)
        if not self.audit:
            data.pop("audit", None)
        return data


def pct(x: float | None) -> str:
    """A share as a percentage (two decimals below 1%; `—` when undefined)."""
    return "—" if x is None else fmt(x, "rate")


def metric_text(component: str, metric: str, value: object, low: float | None = None,
                high: float | None = None) -> tuple[str, str]:
    """(value, interval) of one result as its component declares the metric's kind (`49.2%`, `1,892`, `13.1
    min`), for any table a person reads (`run --verbose`); a score's format when the metric is undeclared, and
    a value that is no number (a label, a list) as its text."""
    how = dict(presented()).get(component)
    kind = (how.kind_of(metric) if how is not None else None) or "score"
    ci = "" if low is None or high is None else f"{fmt(low, kind)} – {fmt(high, kind)}"
    shown = value if value is None or (isinstance(value, int | float) and not isinstance(value, bool)) else str(value)
    return fmt(shown, kind), ci


def _cut(text: str, width: int) -> str:
    """`text` in at most `width` terminal cells (CJK characters take two), an ellipsis where cut."""
    from rich.cells import cell_len, set_cell_size

    return text if cell_len(text) <= width else set_cell_size(text, max(1, width - 1)).rstrip() + "…"


def _words(text: str) -> str:
    return " ".join(text.split())


def _line(component: str, given: present.Line) -> Line:
    text = _words(given.text)
    if given.quote:
        # The quote (a clause's sentence) gives way to the numbers: it is cut to what the line leaves.
        text += f" «{_cut(_words(given.quote), max(12, WIDTH - 8 - len(text)))}»"
    r = given.row
    return Line(component=component, text=_cut(text, WIDTH - 4), value=given.value if r is None else number(r),
                low=None if r is None else r.low, high=None if r is None else r.high, n=None if r is None else r.n)


def _association_lines(assoc: Sequence[Association]) -> list[Line]:
    def rank(a: Association) -> tuple[int, float, str]:
        return (0 if a.low is not None else 1, -abs(a.diff or 0.0), a.flag)

    out = []
    for a in sorted((a for a in assoc if a.diff is not None), key=rank):
        ci = (f"[{a.low:+.2f}, {a.high:+.2f}]" if a.low is not None and a.high is not None
              else f"({(a.note or 'no interval').split(':')[0]})")
        out.append(Line(component="outcomes", text=_cut(
            f"{a.diff:+.2f} {ci:<14} {a.mean_with:.2f} (n={a.n_with:,}) vs {a.mean_without:.2f} (n={a.n_without:,}) "
            f"{a.outcome}: {a.label}", WIDTH - 4), value=a.diff, low=a.low, high=a.high, n=a.n_with + a.n_without))
    return out


def _unmeasured(how: present.Presentation, rows: present.Rows) -> list[str]:
    """Lines naming the component's estimates over no unit at all (whole population), or none: a format that
    records no latency or no retrieval gives these."""
    parts = []
    for metric in how.metrics:
        empty = [r for r in rows.of(metric) if r.value is None and not r.n]
        if order := how.order_of(metric):
            empty.sort(key=order)
        if empty:
            params = ", ".join(dict.fromkeys(metric.param(r.metric) for r in empty)) if metric.params else ""
            parts.append(f"{metric.label}: {params}" if params else metric.label)
    if not parts:
        return []
    text = "no unit to measure (not recorded by this format, or none occurred): " + "; ".join(parts)
    return textwrap.wrap(text, WIDTH - 4, subsequent_indent="  ", break_on_hyphens=False)


def _ci3(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f" [{low:.3f}, {high:.3f}]"


def _corrected_line(c: Corrected) -> Line:
    judge = "—" if c.judge is None else f"{c.judge:.3f}{_ci3(c.judge_low, c.judge_high)}"
    if c.corrected is None:
        text = f"{c.metric}: judge {judge}, not corrected ({c.note or 'no estimate'})"
    else:
        text = f"{c.metric}: judge {judge} -> corrected {c.corrected:.3f}{_ci3(c.low, c.high)}, {c.labels:,} labels"
    return Line(component="audit", text=text, value=c.corrected, low=c.low, high=c.high, n=c.labels)


def _wrong_way_line(c: Criterion) -> Line:
    diff = "" if c.difference is None else f", difference {c.difference:+.2f}" + (
        "" if c.difference_low is None or c.difference_high is None
        else f" [{c.difference_low:+.2f}, {c.difference_high:+.2f}]")
    auc = "" if c.auc is None else f"AUC {c.auc:.3f}{_ci3(c.low, c.high)}"
    text = f"wrong way: {c.flag} vs {c.outcome}: {auc}{diff} (n={c.n:,})"
    return Line(component="audit", text=text, value=c.auc, low=c.low, high=c.high, n=c.n)


def audit_lines(audit: AuditReport | None) -> tuple[Line, ...]:
    """The latest audit in a few lines: its admissions, then each corrected rate beside the judge-only one with
    the labels it used, the retired items and the flags pointing the wrong way; none without an audit."""
    if audit is None:
        return ()
    admitted = sum(1 for i in audit.items if i.admitted)
    wrong = [c for c in audit.criterion if c.fails]
    said = [f"{admitted} of {len(audit.items)} audited item(s) admitted" if audit.items
            else "no item had two raters"]
    if audit.retired:
        said.append(f"{len(audit.retired)} retired")
    if audit.criterion:
        said.append(f"{len(wrong)} of {len(audit.criterion)} flag-outcome pair(s) pointing the wrong way")
    # Corrected rates first, largest correction first (what a reader should see); those the labels were too few
    # to correct are counted, not listed.
    done = sorted((c for c in audit.corrected if c.corrected is not None and c.judge is not None),
                  key=lambda c: -abs((c.corrected or 0.0) - (c.judge or 0.0)))
    if len(done) < len(audit.corrected):
        said.append(f"{len(audit.corrected) - len(done)} rate(s) with too few labels to correct")
    out = [Line(component="audit", text=f"audit {audit.audit_id} ({audit.started_at}): {', '.join(said)}")]
    out += [_corrected_line(c) for c in done[:AUDIT_SHOWN]]
    if audit.retired:
        out.append(Line(component="audit", text=f"retired (out of the analyses): {', '.join(audit.retired)}"))
    out += [_wrong_way_line(c) for c in wrong[:AUDIT_SHOWN]]
    hidden = max(0, len(done) - AUDIT_SHOWN) + max(0, len(wrong) - AUDIT_SHOWN)
    if hidden:
        out.append(Line(component="audit", text=f"{hidden} more in `agent-factory audit`"))
    return tuple(out)


def build_summary(facts: StoreFacts, rows: Sequence[ResultRow], *, flags: Sequence[FlagSpec] = (),
                  associations: Sequence[Association] = (), store_flag: str = "",
                  audit: AuditReport | None = None) -> Summary:
    """The summary of one store's results (pure). `flags` give the clauses' texts; `store_flag` is the
    `--store ...` to repeat in the commands it suggests; `audit`: the store's latest audit (its corrected rates,
    retired items and wrong-way flags), None for none."""
    comps: dict[str, tuple[Line, ...]] = {}
    absent: dict[str, str] = {}
    # Each component writes its own lines from its own rows; the order is the one the components declare.
    for name, how in sorted(presented(), key=lambda p: p[1].summary_rank):
        own = present.Rows([*(r for r in rows if r.component == name), *audit_rows(how, audit)])
        given = how.summary(own, flags)
        lines = tuple(_line(name, g) for g in given)
        if not how.names_unmeasured and any(g.row is not None and g.row.n for g in given):
            # Beside what it measured, what it could not: said once, not as lines of `undefined, n 0`.
            lines += tuple(Line(component=name, text=t) for t in _unmeasured(how, own))
        comps[name] = lines
        if not lines:
            absent[name] = how.absent
    assoc = tuple(_association_lines(associations))
    with_store = f" {store_flag}" if store_flag else ""
    nxt = (f"agent-factory show --worst 5{with_store}", f"agent-factory report{with_store}",
           f"agent-factory export --level conversation{with_store}")
    traffic = f"{facts.turns:,} turns, {facts.sessions:,} sessions, {facts.users:,} users of real traffic"
    return Summary(store=facts.path, traffic=traffic, components=comps, absent=absent, outcomes=assoc, next=nxt,
                   audit=audit_lines(audit))


def render(summary: Summary) -> list[str]:
    """The summary as lines of at most `WIDTH` columns."""
    out = [_cut(f"{summary.traffic} ({summary.store})", WIDTH)]
    for name, lines in summary.components.items():
        if not lines:
            out.append(_cut(f"{name.capitalize()}: {summary.absent.get(name, 'no results')}", WIDTH))
            continue
        out.append(f"{name.capitalize()}")
        out.extend(_cut(f"  {line.text}", WIDTH) for line in lines)
    if summary.outcomes:
        out.append("Outcomes: difference [95% CI], mean with the flag vs without, per conversation")
        out.extend(_cut(f"  {line.text}", WIDTH) for line in summary.outcomes[:ASSOCIATIONS_SHOWN])
        if len(summary.outcomes) > ASSOCIATIONS_SHOWN:
            out.append(f"  {len(summary.outcomes) - ASSOCIATIONS_SHOWN} more in `agent-factory report` and --json")
    if summary.audit:
        out.append("Audit")
        for line in summary.audit:
            # Wrapped, not cut: a rate's name and its figures both matter (ids are not broken at hyphens).
            out.extend(_cut(x, WIDTH) for x in textwrap.wrap(line.text, WIDTH, initial_indent="  ",
                                                              subsequent_indent="    ", break_on_hyphens=False))
    out.append("next:")
    for cmd in summary.next:
        out.extend(command_lines(cmd))
    out.append("  (`run --verbose` prints every table; `--json` gives everything)")
    return out
