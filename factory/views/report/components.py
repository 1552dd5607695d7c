"""One section per component: the results its analyses stored, as tables and interval charts. Pure."""

from __future__ import annotations

import re
from collections.abc import Callable

from agent_factory.factory.views.report.blocks import (
    ChartIds,
    absent_reason,
    number,
    prefixed,
    quotes_for,
    rate_block,
    result_table,
    rows_of,
)
from agent_factory.factory.views.report.charts import count_chart
from agent_factory.factory.views.report.model import Block, ReportData, ResultRow, Section, Table

_STEP = re.compile(r"^failure_rate\.(no_)?(thinking|retrieval|chain_complete)$")
_BAND = re.compile(r"^failure_rate\.band\[(.+)\]$")


def _stratum(r: ResultRow) -> str:
    return (r.stratum or "all").removeprefix("mode=")


def _suffix(prefix: str) -> Callable[[ResultRow], str]:
    return lambda r: r.metric.removeprefix(prefix)


def _section(key: str, title: str, intro: str, blocks: list[Block | None], absent: str | None) -> Section:
    kept = tuple(b for b in blocks if b is not None)
    if absent is None and not kept:
        absent = "no results of this kind in the store"
    return Section(key=key, title=title, intro=intro, blocks=() if absent else kept, absent=absent)


def execution(data: ReportData) -> Section:
    """Failure by mode and by chain step, latency against the per-mode baselines, the fast-failure band."""
    ids = ChartIds("execution")
    by_mode = rows_of(data, "execution", lambda m: m == "failure_rate")
    steps = [r for r in rows_of(data, "execution", lambda m: _STEP.match(m) is not None) if r.stratum == "all"]
    steps_all = rows_of(data, "execution", lambda m: _STEP.match(m) is not None)
    latency = rows_of(data, "execution", lambda m: m in ("latency_gm_ratio", "latency_gm_seconds"))
    bands = rows_of(data, "execution", lambda m: _BAND.match(m) is not None)
    other = rows_of(data, "execution", lambda m: m in ("handed_off", "span_error_rate", "early_stop_share",
                                                       "stop_median_seconds", "uncollected"))
    blocks = [
        rate_block(ids, "Delivery failure by mode", by_mode, label=_stratum, x_title="turns that failed to deliver",
                   note="User-clustered 95% intervals; hand-offs to a person are neither delivered nor failed."),
        rate_block(ids, "Failure by chain step (all modes)", steps, x_title="failure rate",
                   label=lambda r: (m := _STEP.match(r.metric)) and m.group(2) or r.metric,
                   group=lambda r: "without the step" if ".no_" in r.metric else "with the step",
                   note="Turns without a step against turns with it; the table gives each mode."),
        Block(title="Failure by chain step and mode", table=result_table(steps_all)) if steps_all else None,
        rate_block(ids, "Latency against the per-mode baseline", [r for r in latency if r.metric == "latency_gm_ratio"],
                   label=_stratum, x_title="geometric-mean latency / the pack's baseline", share=False, rule_at=1.0,
                   rule_label="the baseline", table_label=lambda r: r.metric,
                   note="Delivered turns; 1 is the pack's baseline for the mode."),
        Block(title="Latency (seconds)", table=result_table([r for r in latency if r.metric != "latency_gm_ratio"]))
        if latency else None,
        rate_block(ids, "The fast-failure band (all modes)", [r for r in bands if r.stratum == "all"],
                   label=lambda r: (m := _BAND.match(r.metric)) and m.group(1) or r.metric,
                   x_title="failure rate by latency band",
                   note="Answers faster than the pack's fast edge fail far more often when something broke early."),
        Block(title="Band by mode", table=result_table(bands)) if bands else None,
        Block(title="Other execution results", table=result_table(other)) if other else None,
    ]
    return _section("execution", "Execution", "Did each turn deliver, how fast, and what the chain looked like.",
                    blocks, absent_reason(data, "execution", by_mode))


def substance(data: ReportData) -> Section:
    """S by mode and checklist pass rates by item and mode."""
    ids = ChartIds("substance")
    score = rows_of(data, "substance", lambda m: m == "S")
    passes = rows_of(data, "substance", prefixed("pass_rate"))
    other = rows_of(data, "substance", lambda m: m in ("no_collected_items", "delivery_undecided", "uncollected"))
    blocks = [
        rate_block(ids, "Substance score S by mode", score, label=_stratum, x_title="S (0-1)",
                   note="S = delivery x the mean of the admitted applicable checklist items, stratum-weighted."),
        rate_block(ids, "Checklist pass rates by item and mode", passes, label=_suffix("pass_rate."),
                   group=_stratum, x_title="pass rate"),
        Block(title="What was not scored", table=result_table(other)) if other else None,
    ]
    return _section("substance", "Substance", "Whether delivered answers did the work: the checklist items.",
                    blocks, absent_reason(data, "substance", score + passes))


def trajectory(data: ReportData) -> Section:
    """Session outcomes, friction and recovery events, replay after failure vs success."""
    ids = ChartIds("trajectory")
    shares = rows_of(data, "trajectory", prefixed("outcome_share"))
    events = rows_of(data, "trajectory", prefixed("event_share"))
    replay = rows_of(data, "trajectory", lambda m: m in ("replay_after_failure", "replay_after_success"))
    other = rows_of(data, "trajectory", lambda m: m == "mean_friction" or m.startswith(("outcome_count", "event_count"))
                    or m == "uncollected")
    blocks = [
        rate_block(ids, "Session outcomes", shares, label=_suffix("outcome_share."), x_title="share of sessions",
                   note="Undetermined: the data deciding the outcome were left uncollected (never guessed)."),
        rate_block(ids, "Recovery events", events, label=_suffix("event_share."), x_title="sessions with the event"),
        rate_block(ids, "Replay after a failed vs a successful turn", replay,
                   label=lambda r: "after failure" if r.metric.endswith("failure") else "after success",
                   x_title="next message replays the request"),
        Block(title="Counts, friction and what was not collected", table=result_table(other)) if other else None,
    ]
    return _section("trajectory", "Trajectory", "How sessions went: smooth, struggled, blocked, censored.",
                    blocks, absent_reason(data, "trajectory", shares + replay))


def results(data: ReportData) -> Section:
    """Return and redo after failed vs delivered session ends, the return interval, single-turn sessions."""
    ids = ChartIds("results")
    ret = rows_of(data, "results", lambda m: m == "return_rate_within_t")
    redo = rows_of(data, "results", lambda m: m == "redo_rate")
    other = rows_of(data, "results", lambda m: m not in ("return_rate_within_t", "redo_rate"))
    end = lambda r: (r.stratum or "all").replace("after=", "after ")  # noqa: E731
    blocks = [
        rate_block(ids, "Return within T after failed vs delivered endings", ret, label=end,
                   x_title="sessions followed by a return"),
        rate_block(ids, "Redo after failed vs delivered endings", redo, label=end,
                   x_title="next session opens by redoing the last request"),
        Block(title="Return interval, single-turn sessions, censoring", table=result_table(other)) if other else None,
    ]
    absent = absent_reason(data, "results", ret + redo)
    hidden = next((r for r in other if r.metric == "sessions.not_observable" and isinstance(r.value, int | float)
                   and r.value > 0), None)
    if absent is not None and hidden is not None:
        absent = f"not observable: {number(hidden.value)} of {hidden.n or 0:,} {hidden.note or 'sessions'}"
    return _section("results", "Results", "What users did next: return, redo, feedback; no return in T is censored.",
                    blocks, absent)


def _clause_rows(data: ReportData) -> list[tuple[str, dict[str, ResultRow]]]:
    by: dict[str, dict[str, ResultRow]] = {}
    for r in rows_of(data, "conduct", lambda m: True):
        kind, _, clause = r.metric.partition(".")
        if clause:
            by.setdefault(clause, {})[kind] = r

    def worst(item: tuple[str, dict[str, ResultRow]]) -> tuple[float, float, str]:
        v, c = item[1].get("violations"), item[1].get("C(r)")
        n_v = float(v.value) if v is not None and isinstance(v.value, int | float) else 0.0
        c_r = float(c.value) if c is not None and isinstance(c.value, int | float) else 2.0
        return (-n_v, c_r, item[0])

    return sorted(by.items(), key=worst)


def conduct(data: ReportData) -> Section:
    """A(r), C(r) and violations per clause, worst first (most violations, then lowest compliance)."""
    ids = ChartIds("conduct")
    clauses = _clause_rows(data)
    body = []
    for clause, rs in clauses:
        a, c, v, u, inv = (rs.get(k) for k in ("A(r)", "C(r)", "violations", "uncollected", "invariant"))

        def cell(r: ResultRow | None, *, share: bool = True) -> str:
            if r is None:
                return ""
            ci = f" ({number(r.low, share=share)} – {number(r.high, share=share)})" if r.low is not None else ""
            n = f", n {r.n:,}" if r.n is not None else ""
            return f"{number(r.value, share=share)}{ci}{n}"

        def count(r: ResultRow | None) -> str:
            # A count is its value alone: no interval, no n (a cell cut at its first comma printed 1 for 1,892).
            return "" if r is None else number(r.value, share=False)

        body.append((clause, cell(a), cell(c), count(v), count(u), number(inv.value) if inv is not None else ""))
    table = Table(columns=("clause", "A(r) applicability", "C(r) compliance | trigger", "violations", "uncollected",
                           "invariant"), rows=tuple(body))
    c_rows = [rs["C(r)"] for _, rs in clauses if "C(r)" in rs]
    violated = [(clause, float(rs["violations"].value)) for clause, rs in clauses
                if "violations" in rs and isinstance(rs["violations"].value, int | float) and rs["violations"].value]
    blocks: list[Block | None] = [
        Block(title="Clauses, worst first", table=table,
              note="Wilson 95% intervals; uncollected trigger or obligation data are in no denominator.")
        if body else None,
        rate_block(ids, "Compliance C(r) where the trigger fired", c_rows, label=_suffix("C(r)."),
                   x_title="C(r) = P(obligation | trigger)"),
        Block(title="Violations per clause", chart=ids.chart("Violations per clause", count_chart(violated,
              x_title="triggered units that did not comply")),
              quotes=quotes_for(data, "conduct")) if violated else None,
    ]
    a_rows = [rs["A(r)"] for _, rs in clauses if "A(r)" in rs]
    return _section("conduct", "Conduct", "Each clause of the spec: how often it applies and, when it does, "
                    "how often the agent complied.", blocks, absent_reason(data, "conduct", a_rows + c_rows))


def provenance(data: ReportData) -> Section:
    """Segments excluded, coverage per field, injection flags."""
    ids = ChartIds("provenance")
    segments = rows_of(data, "provenance", lambda m: m == "excluded_share" or m.startswith("segment_share."))
    coverage = rows_of(data, "provenance", prefixed("coverage"))
    flags = rows_of(data, "provenance", lambda m: m in ("incomplete_evidence", "injection_flagged"))
    clean = rows_of(data, "provenance", lambda m: m.startswith("clean.") or m == "uncollected")
    blocks = [
        rate_block(ids, "Traffic segments (only real traffic is analysed)", segments,
                   label=lambda r: r.metric.removeprefix("segment_share."), x_title="share of all turns"),
        rate_block(ids, "Evidence coverage per field", coverage, label=_suffix("coverage."), group=_stratum,
                   x_title="turns with the field complete"),
        Block(title="Incomplete evidence and injection flags", table=result_table(flags),
              quotes=quotes_for(data, "provenance")) if flags else None,
        Block(title="The clean set", table=result_table(clean)) if clean else None,
    ]
    return _section("provenance", "Provenance", "Where the evidence comes from and how complete it is; it proves the "
                    "evidence and sits off the spine.", blocks, absent_reason(data, "provenance", segments + coverage))


def adjudication(data: ReportData) -> Section:
    """Kappa per item against the 0.60 admission line, and admission."""
    ids = ChartIds("adjudication")
    kappa = rows_of(data, "adjudication", prefixed("kappa"))
    admission = rows_of(data, "adjudication", prefixed("admission"))
    blocks = [
        rate_block(ids, "Cross-rater kappa per item", kappa, label=lambda r: f"{_suffix('kappa.')(r)} ({r.layer})",
                   x_title="Cohen's kappa", share=False, rule_at=0.60, rule_label="admission line 0.60"),
        Block(title="Admission", table=result_table(admission)) if admission else None,
    ]
    absent = None
    if not kappa and not admission:
        absent = ("needs a second rater: no audit sample has been re-collected by a second model yet "
                  "(the audit loop), so no kappa or admission exists")
    return _section("adjudication", "Adjudication", "Whether the evaluators agree: an item enters the analyses "
                    "only if cross-model kappa >= 0.60.", blocks, absent)


SECTIONS = (execution, substance, trajectory, results, conduct, provenance, adjudication)
"""The component sections in report order."""
