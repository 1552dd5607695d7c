"""How Trajectory presents itself (`evaluators.core.present`): the metrics its analyses emit (declared in
`metrics`, which the analyses name them through), its headline, its summary lines and its report section.
Nothing here is imported by an analysis: rewording a line reruns none."""

from __future__ import annotations

from collections.abc import Sequence

from agent_factory.evaluators.components.trajectory.metrics import (
    BLOCKED,
    CENSORED,
    EVENT_COUNT,
    EVENT_SHARE,
    MEAN_FRICTION,
    METRICS,
    OUTCOME_COUNT,
    REPLAY_FAILURE,
    REPLAY_SUCCESS,
    SHARES,
    SMOOTH,
    STRUGGLED,
    UNCOLLECTED,
    UNDETERMINED,
)
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.core.present import (
    Block,
    Line,
    Metric,
    Presentation,
    Row,
    Rows,
    Section,
    decided,
    estimate,
    fmt,
    number,
    units_of,
)


def _word(r: Row) -> str:
    # The outcome or event a share names is its last dotted part (`outcome_share.blocked` -> `blocked`).
    return r.metric.rpartition(".")[2]


def _summary(rows: Rows, flags: Sequence[FlagSpec]) -> list[Line]:
    out = []
    shares = [(_word_of(m), rows.get(m)) for m in (BLOCKED, STRUGGLED, SMOOTH)]
    known = [(k, r) for k, r in shares if decided(r) and r is not None]
    if known:
        first = known[0][1]
        parts = ", ".join(f"{k} {estimate(r, 'rate', with_n=False)}" for k, r in known)
        # The count goes on a line of its own: with it, the three shares overflow a summary line.
        out.append(Line(parts, first))
        cens, und = number(rows.get(CENSORED)), number(rows.get(UNDETERMINED))
        tail = [f"{fmt(cens, 'rate')} censored (still open)" if cens else "",
                f"{fmt(und, 'rate')} undetermined" if und else ""]
        count = f"  n={first.n or 0:,} {units_of(first.layer, first.n)}"
        out.append(Line(count + ("; " + ", ".join(t for t in tail if t) + ": no outcome, never guessed"
                                 if any(tail) else "")))
    after_f, after_s = rows.get(REPLAY_FAILURE), rows.get(REPLAY_SUCCESS)
    if decided(after_f) and decided(after_s):
        out.append(Line(f"replay after a failed turn {estimate(after_f, 'rate')} vs after success "
                        f"{estimate(after_s, 'rate')}", after_f))
    return out


def _word_of(m: Metric) -> str:
    return m.name.rpartition(".")[2]


def _goodness(rows: Rows) -> float | None:
    blocked, struggled = number(rows.get(BLOCKED)), number(rows.get(STRUGGLED))
    return None if blocked is None or struggled is None else 1 - blocked - struggled


SECTION = Section(
    uncollected=(UNCOLLECTED,),
    intro="How sessions went: smooth, struggled, blocked, censored.",
    decisive=(*SHARES, REPLAY_FAILURE, REPLAY_SUCCESS),
    blocks=(
        Block("Session outcomes", SHARES, label=_word, x_title="share of sessions",
              note="Undetermined: the data deciding the outcome were left uncollected (never guessed)."),
        Block("Recovery events", (EVENT_SHARE,), label=_word, x_title="sessions with the event"),
        Block("Replay after a failed vs a successful turn", (REPLAY_FAILURE, REPLAY_SUCCESS),
              label=lambda r: "after failure" if REPLAY_FAILURE.headline(r.metric) else "after success",
              x_title="next message replays the request"),
        Block("Counts, friction and what was not collected", (MEAN_FRICTION, OUTCOME_COUNT, EVENT_COUNT, UNCOLLECTED),
              chart="none"),
    ),
)

PRESENTATION = Presentation(
    title="Trajectory", place="spine", metrics=METRICS, headline=(("blocked", BLOCKED), ("struggled", STRUGGLED)),
    summary=_summary, summary_rank=2, section=SECTION, goodness=_goodness, weight=0.2,
)
"""Trajectory as the views show it."""
