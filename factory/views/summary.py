"""The terminal summary: per component the few results that matter, worst first, each with its interval and n,
then the flags' associations with the outcomes the traces carry, then where to look next.

`build_summary` is pure (rows in, `Summary` out) and `render` turns it into lines of at most `WIDTH` columns;
`read_summary` is the part that reads a store. `run` prints it after its one-line report and
`agent-factory summary` prints it for a store already run; `--verbose` on `run` gives every table instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.findings import Association
from agent_factory.factory.views.report.model import COMPONENTS, ResultRow, StoreFacts
from agent_factory.frozen import Frozen

VERSION = "1"
WIDTH = 98
"""Longest line printed (fits a 100-column terminal)."""
CLAUSES_SHOWN = 5
"""Violated clauses listed (most violations first); the rest are counted in one line."""
ASSOCIATIONS_SHOWN = 12
"""Flag-outcome associations printed (those with an interval first, largest difference first); all in --json."""


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


def _p(x: float) -> str:
    # Below 1% one decimal would print an interval [0.0-0.0] that is not zero.
    return f"{100 * x:.2f}" if 0 < abs(x) < 0.01 else f"{100 * x:.1f}"


def pct(x: float | None) -> str:
    """A share as a percentage (two decimals below 1%; `—` when undefined)."""
    return "—" if x is None else f"{_p(x)}%"


def _ci(r: ResultRow | None) -> str:
    if r is None or r.low is None or r.high is None:
        return ""
    return f" [{_p(r.low)}-{_p(r.high)}]"


def _rate(r: ResultRow | None, *, with_n: bool = True) -> str:
    """`3.5% [2.5-4.5] n=8,256` (without the n when the line gives it once for several)."""
    n = f" n={r.n:,}" if with_n and r is not None and r.n is not None else ""
    return f"{pct(_num(r))}{_ci(r)}{n}"


def _num(r: ResultRow | None) -> float | None:
    return r.value if r is not None and isinstance(r.value, int | float) else None


def _cut(text: str, width: int) -> str:
    """`text` in at most `width` terminal cells (CJK characters take two), an ellipsis where cut."""
    from rich.cells import cell_len, set_cell_size

    return text if cell_len(text) <= width else set_cell_size(text, max(1, width - 1)).rstrip() + "…"


def _words(text: str) -> str:
    return " ".join(text.split())


def _line(component: str, text: str, r: ResultRow | None = None, *, value: float | None = None) -> Line:
    return Line(component=component, text=_cut(_words(text), WIDTH - 4), value=value if r is None else _num(r),
                low=None if r is None else r.low, high=None if r is None else r.high, n=None if r is None else r.n)


class _Rows:
    """The population results indexed by (component, metric, stratum)."""

    def __init__(self, rows: Sequence[ResultRow]) -> None:
        self._by: dict[tuple[str, str, str], ResultRow] = {}
        self.rows = rows
        for r in rows:
            self._by.setdefault((r.component, r.metric, r.stratum or "all"), r)

    def get(self, component: str, metric: str, stratum: str = "all") -> ResultRow | None:
        return self._by.get((component, metric, stratum))

    def number(self, component: str, metric: str, stratum: str = "all") -> float | None:
        return _num(self.get(component, metric, stratum))

    def matching(self, component: str, pattern: str) -> list[ResultRow]:
        rx = re.compile(pattern)
        return [r for r in self.rows if r.component == component and rx.fullmatch(r.metric)]


def _decided(r: ResultRow | None) -> bool:
    return r is not None and _num(r) is not None and (r.n or 0) > 0


def _conduct(rows: _Rows, clause_text: Mapping[str, str]) -> list[Line]:
    broken: list[tuple[int, float, str, ResultRow]] = []
    for r in rows.matching("conduct", r"C\(r\)\.[^.]+"):
        c = _num(r)
        if r.stratum not in (None, "all") or c is None or not r.n:
            continue
        violations = round(r.n * (1.0 - c))
        if violations > 0:
            broken.append((violations, c, r.metric.removeprefix("C(r)."), r))
    broken.sort(key=lambda b: (-b[0], b[1], b[2]))
    out = []
    for violations, _, clause, r in broken[:CLAUSES_SHOWN]:
        head = f"{violations:,} of {r.n:,} turns broke {clause}: C(r) {_rate(r, with_n=False)}"
        text = clause_text.get(clause)
        out.append(_line("conduct", head + (f" «{_cut(_words(text), max(12, WIDTH - 8 - len(head)))}»"
                                            if text else ""), r))
    if len(broken) > CLAUSES_SHOWN:
        rest = broken[CLAUSES_SHOWN:]
        out.append(_line("conduct", f"{len(rest)} more clause(s) broken, {sum(b[0] for b in rest):,} violations "
                                    "(`show --worst 10 --component conduct`)"))
    held = sum(1 for r in rows.matching("conduct", r"C\(r\)\.[^.]+") if _num(r) == 1.0 and r.n)
    undecided = [r for r in rows.matching("conduct", r"C\(r\)\.[^.]+") if not r.n]
    if held or undecided:
        out.append(_line("conduct", f"{held} clause(s) held every time they applied; {len(undecided)} never "
                                    "applied or need a model"))
    return out


def _execution(rows: _Rows) -> list[Line]:
    overall = rows.get("execution", "failure_rate")
    if not _decided(overall):
        return []
    assert overall is not None
    out = [_line("execution", f"delivery failure {_rate(overall)} turns", overall)]
    modes = sorted((r for r in rows.matching("execution", "failure_rate")
                    if r.stratum and r.stratum.startswith("mode=") and _decided(r)), key=lambda r: -(_num(r) or 0))
    if len(modes) > 1:
        out.extend(_line("execution", f"  by mode, {r.stratum.removeprefix('mode=')}: {_rate(r)}", r)  # type: ignore[union-attr]
                   for r in modes)
    steps = []
    for step, words in (("retrieval", "retrieval"), ("thinking", "thinking"), ("chain_complete", "a complete chain")):
        without, with_ = rows.get("execution", f"failure_rate.no_{step}"), rows.get("execution", f"failure_rate.{step}")
        if _decided(without) and _decided(with_):
            gap = (_num(without) or 0) - (_num(with_) or 0)
            steps.append((gap, words, without, with_))
    for gap, words, without, with_ in sorted(steps, key=lambda s: -s[0])[:2]:
        if gap > 0:
            out.append(_line("execution", f"without {words} {_rate(without)} vs with it {_rate(with_)}", without))
    bands = [r for r in rows.matching("execution", r"failure_rate\.band\[.+\]") if r.stratum in (None, "all")
             and _decided(r)]
    if bands:
        worst = max(bands, key=lambda r: _num(r) or 0)
        band = worst.metric.removeprefix("failure_rate.band[").removesuffix("]")
        out.append(_line("execution", f"worst latency band {band}: {_rate(worst)} fail", worst))
    return out


def _substance(rows: _Rows) -> list[Line]:
    scores = [r for r in rows.matching("substance", "S") if _decided(r)]
    passes = sorted((r for r in rows.matching("substance", r"pass_rate\..+") if _decided(r)),
                    key=lambda r: _num(r) or 0)
    out = [_line("substance", f"S {r.stratum or 'all'}: {_num(r):.2f} [{r.low or 0:.2f}-{r.high or 0:.2f}] "
                              f"n={r.n:,}", r) for r in scores[:2]]
    out.extend(_line("substance", f"{r.metric.removeprefix('pass_rate.')} passes {_rate(r)}", r) for r in passes[:3])
    if not out:
        none = rows.get("substance", "no_collected_items")
        if none is not None and _num(none):
            out.append(_line("substance", f"needs a model: no checklist item collected on {int(_num(none) or 0):,} "
                                          "delivered turns", value=_num(none)))
    return out


def _trajectory(rows: _Rows) -> list[Line]:
    out = []
    shares = [(k, rows.get("trajectory", f"outcome_share.{k}")) for k in ("blocked", "struggled", "smooth")]
    decided = [(k, r) for k, r in shares if _decided(r)]
    if decided:
        n = decided[0][1].n if decided[0][1] is not None else None
        cens = rows.number("trajectory", "outcome_share.censored")
        und = rows.number("trajectory", "outcome_share.undetermined")
        parts = ", ".join(f"{k} {_rate(r, with_n=False)}" for k, r in decided if r is not None)
        out.append(_line("trajectory", f"{parts}, n={n or 0:,} sessions", decided[0][1]))
        tail = [f"{pct(cens)} censored (still open)" if cens else "", f"{pct(und)} undetermined" if und else ""]
        if any(tail):
            out.append(_line("trajectory", "  " + ", ".join(t for t in tail if t) + ": no outcome, never guessed"))
    after_f, after_s = rows.get("trajectory", "replay_after_failure"), rows.get("trajectory", "replay_after_success")
    if _decided(after_f) and _decided(after_s):
        out.append(_line("trajectory", f"replay after a failed turn {_rate(after_f)} vs after success "
                                       f"{_rate(after_s)}", after_f))
    return out


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def _results(rows: _Rows) -> list[Line]:
    unobservable = rows.get("results", "sessions.not_observable")
    sessions = unobservable.n if unobservable is not None else None
    if unobservable is not None and sessions and _num(unobservable) == sessions:
        return [_line("results", f"return and redo not observable: the user ids of all {sessions:,} sessions "
                                 "name no person", value=float(sessions))]
    out = []
    redo_f, redo_d = rows.get("results", "redo_rate", "after=failed"), rows.get("results", "redo_rate",
                                                                                 "after=delivered")
    if _decided(redo_f) and _decided(redo_d):
        out.append(_line("results", f"redo after a failed session {_rate(redo_f)} vs after delivered "
                                    f"{_rate(redo_d)}", redo_f))
    ret_f = rows.get("results", "median_return_interval_s", "after=failed")
    ret_d = rows.get("results", "median_return_interval_s", "after=delivered")
    if _decided(ret_f) and _decided(ret_d):
        out.append(_line("results", f"median return after a failed session {_duration(_num(ret_f))} "
                                    f"(n={ret_f.n:,}) vs after delivered {_duration(_num(ret_d))} "  # type: ignore[union-attr]
                                    f"(n={ret_d.n:,})", ret_f))  # type: ignore[union-attr]
    ret = rows.get("results", "return_rate_within_t")
    if _decided(ret) and not out:
        out.append(_line("results", f"returned within T: {_rate(ret)} sessions", ret))
    return out


def _provenance(rows: _Rows) -> list[Line]:
    out = []
    excluded = rows.get("provenance", "excluded_share")
    if _decided(excluded):
        parts = sorted(((r.metric.removeprefix("segment_share."), _num(r) or 0.0)
                        for r in rows.matching("provenance", r"segment_share\..+") if r.metric != "segment_share.real"
                        and (_num(r) or 0) > 0), key=lambda p: -p[1])
        detail = ", ".join(f"{k} {pct(v)}" for k, v in parts[:2])
        out.append(_line("provenance", f"excluded {_rate(excluded)} turns"
                                       + (f" ({detail})" if detail else ""), excluded))
    for metric, words in (("incomplete_evidence", "incomplete evidence"), ("injection_flagged", "injection flags")):
        r = rows.get("provenance", metric)
        if _decided(r):
            out.append(_line("provenance", f"{words} {_rate(r)} turns", r))
    return out


def _adjudication(rows: _Rows) -> list[Line]:
    kappas = sorted((r for r in rows.matching("adjudication", r"kappa\..+") if _num(r) is not None),
                    key=lambda r: _num(r) or 0)
    return [_line("adjudication", f"{r.metric.removeprefix('kappa.')}: kappa {_num(r):.2f}"
                                  f"{'' if (_num(r) or 0) >= 0.60 else ' (below the 0.60 line)'} n={r.n or 0:,}", r)
            for r in kappas[:3]]


ORDER = ("conduct", "execution", "trajectory", "results", "substance", "provenance", "adjudication")
"""The summary's order: what the agent broke (its clauses), then the spine, then the two instruments."""
assert sorted(ORDER) == sorted(COMPONENTS)

_ABSENT = {
    "substance": "no checklist result (its items need a model)",
    "adjudication": "needs a second rater (the audit loop): no kappa yet",
}


def _association_lines(assoc: Sequence[Association]) -> list[Line]:
    def rank(a: Association) -> tuple[int, float, str]:
        return (0 if a.low is not None else 1, -abs(a.diff or 0.0), a.flag)

    out = []
    for a in sorted((a for a in assoc if a.diff is not None), key=rank):
        ci = f"[{a.low:+.2f}, {a.high:+.2f}]" if a.low is not None and a.high is not None else "(no interval)"
        out.append(Line(component="outcomes", text=_cut(
            f"{a.diff:+.2f} {ci:<14} {a.mean_with:.2f} (n={a.n_with}) vs {a.mean_without:.2f} (n={a.n_without}) "
            f"{a.outcome}: {a.label}", WIDTH - 4), value=a.diff, low=a.low, high=a.high, n=a.n_with + a.n_without))
    return out


_BUILDERS: dict[str, Callable[[_Rows], list[Line]]] = {
    "execution": _execution, "substance": _substance, "trajectory": _trajectory, "results": _results,
    "provenance": _provenance, "adjudication": _adjudication,
}


def build_summary(facts: StoreFacts, rows: Sequence[ResultRow], *, flags: Sequence[FlagSpec] = (),
                  associations: Sequence[Association] = (), store_flag: str = "") -> Summary:
    """The summary of one store's results (pure). `flags` give the clauses' texts; `store_flag` is the
    `--store ...` to repeat in the commands it suggests."""
    indexed = _Rows(rows)
    clause_text = {f.id.removeprefix("conduct.").removesuffix(".violated"): f.description
                   for f in flags if f.component == "conduct" and f.description}
    comps: dict[str, tuple[Line, ...]] = {}
    absent: dict[str, str] = {}
    for name in ORDER:
        lines = _conduct(indexed, clause_text) if name == "conduct" else _BUILDERS[name](indexed)
        comps[name] = tuple(lines)
        if not lines:
            absent[name] = _ABSENT.get(name, "no results")
    assoc = tuple(_association_lines(associations))
    with_store = f" {store_flag}" if store_flag else ""
    nxt = (f"agent-factory show --worst 5{with_store}", f"agent-factory report{with_store}",
           f"agent-factory export --level conversation{with_store}")
    traffic = f"{facts.turns:,} turns, {facts.sessions:,} sessions, {facts.users:,} users of real traffic"
    return Summary(store=facts.path, traffic=traffic, components=comps, absent=absent, outcomes=assoc, next=nxt)


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
        out.append("Outcomes: difference [user-clustered 95% CI], mean with the flag vs without, per conversation")
        out.extend(_cut(f"  {line.text}", WIDTH) for line in summary.outcomes[:ASSOCIATIONS_SHOWN])
        if len(summary.outcomes) > ASSOCIATIONS_SHOWN:
            out.append(f"  {len(summary.outcomes) - ASSOCIATIONS_SHOWN} more in `agent-factory report` and --json")
    out.append("next:")
    out.extend(_cut(f"  {cmd}", WIDTH) for cmd in summary.next)
    out.append("  (`run --verbose` prints every table; `--json` gives everything)")
    return out


def read_summary(path: Path, *, flags: Sequence[FlagSpec] = (), store_flag: str = "") -> Summary:
    """Read a store's results (and, when it holds outcome events and `flags` are given, their associations)."""
    from agent_factory.errors import AgentFactoryError
    from agent_factory.factory.store import Store
    from agent_factory.factory.views.findings import read_findings
    from agent_factory.factory.views.report.read import read_facts, read_rows

    if not path.exists():
        raise AgentFactoryError(f"{path}: no store here yet; run `agent-factory ingest PATH` and `run` first")
    with Store(path, read_only=True) as store:
        facts = read_facts(store)
        rows = read_rows(store)
        assoc = read_findings(store, flags).associations if flags and facts.outcome_kinds else ()
    return build_summary(facts, rows, flags=flags, associations=assoc, store_flag=store_flag)
