"""How Results presents itself (`evaluators.core.present`): the metrics its analyses emit (declared in
`metrics`, which the analyses name them through), its headline, its summary lines and its report section.
Nothing here is imported by an analysis: rewording a line reruns none."""

from __future__ import annotations

from collections.abc import Sequence

from agent_factory.evaluators.components.results.metrics import (
    FEEDBACK_COUNT,
    FEEDBACK_MEAN,
    MEDIAN_RETURN,
    METRICS,
    REDO_RATE,
    REDO_ROLLUP,
    RETURN_RATE,
    SESSIONS,
    SINGLE_COUNT,
    SINGLE_RETURN_RATE,
    SINGLE_RETURNED,
    SINGLE_SHARE,
    UNCOLLECTED,
)
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.core.present import (
    Block,
    Line,
    Presentation,
    Row,
    Rows,
    Section,
    decided,
    estimate,
    fmt,
    number,
)

AFTER_FAILED, AFTER_DELIVERED = "after=failed", "after=delivered"
"""The strata of a session's end (`analysis`)."""


def _summary(rows: Rows, flags: Sequence[FlagSpec]) -> list[Line]:
    hidden = rows.get(SESSIONS, state="not_observable")
    sessions = hidden.n if hidden is not None else None
    if hidden is not None and sessions and number(hidden) == sessions:
        return [Line(f"return and redo not observable: the user ids of all {sessions:,} sessions name no person",
                     value=float(sessions))]
    out = []
    redo_f, redo_d = rows.get(REDO_RATE, AFTER_FAILED), rows.get(REDO_RATE, AFTER_DELIVERED)
    if decided(redo_f) and decided(redo_d):
        out.append(Line(f"redo after a failed session {estimate(redo_f, 'rate')} vs after delivered "
                        f"{estimate(redo_d, 'rate')}", redo_f))
    ret_f, ret_d = rows.get(MEDIAN_RETURN, AFTER_FAILED), rows.get(MEDIAN_RETURN, AFTER_DELIVERED)
    if decided(ret_f) and decided(ret_d) and ret_f is not None and ret_d is not None:
        out.append(Line(f"median return after a failed session {fmt(ret_f.value, 'seconds')} (n={ret_f.n or 0:,}) "
                        f"vs after delivered {fmt(ret_d.value, 'seconds')} (n={ret_d.n or 0:,})", ret_f))
    ret = rows.get(RETURN_RATE)
    if decided(ret) and not out:
        out.append(Line(f"returned within T: {estimate(ret, 'rate')} sessions", ret))
    return out


def _unobservable(rows: Rows) -> str | None:
    hidden = rows.get(SESSIONS, state="not_observable")
    if hidden is None or not (number(hidden) or 0) > 0:
        return None
    return f"not observable: {fmt(hidden.value, 'count')} of {hidden.n or 0:,} {hidden.note or 'sessions'}"


def _goodness(rows: Rows) -> float | None:
    redo = number(rows.get(REDO_RATE))
    return None if redo is None else 1 - redo


def _end(r: Row) -> str:
    return (r.stratum or "all").replace("after=", "after ")


SECTION = Section(
    uncollected=(UNCOLLECTED,),
    intro="What users did next: return, redo, feedback; no return in T is censored.",
    decisive=(RETURN_RATE, REDO_RATE),
    absent=_unobservable,
    blocks=(
        Block("Return within T after failed vs delivered endings", (RETURN_RATE,), label=_end,
              x_title="sessions followed by a return"),
        Block("Redo after failed vs delivered endings", (REDO_RATE,), label=_end,
              x_title="next session opens by redoing the last request"),
        Block("Return interval, single-turn sessions, censoring",
              (SESSIONS, MEDIAN_RETURN, SINGLE_SHARE, SINGLE_RETURNED, SINGLE_RETURN_RATE, SINGLE_COUNT,
               FEEDBACK_COUNT, FEEDBACK_MEAN, REDO_ROLLUP, UNCOLLECTED), chart="none"),
    ),
)

PRESENTATION = Presentation(
    title="Results", place="spine", metrics=METRICS, headline=(("redo", REDO_RATE),), summary=_summary,
    summary_rank=3, section=SECTION, rollup=REDO_ROLLUP, goodness=_goodness, weight=0.15,
)
"""Results as the views show it."""
