"""How Provenance presents itself (`evaluators.core.present`): the metrics its analyses emit (declared in
`metrics`, which the analyses name them through), its headline, its summary lines and its report section.
Nothing here is imported by an analysis: rewording a line reruns none."""

from __future__ import annotations

from collections.abc import Sequence

from agent_factory.evaluators.components.provenance.definitions import EVIDENCE_COMPLETE, INJECTION_FLAGGED
from agent_factory.evaluators.components.provenance.metrics import (
    CLEAN,
    COVERAGE,
    EXCLUDED,
    INCOMPLETE,
    INJECTION,
    METRICS,
    SEGMENT_SHARE,
    UNCOLLECTED,
)
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.core.present import (
    Block,
    Line,
    Presentation,
    Rows,
    Section,
    decided,
    estimate,
    fmt,
    number,
)
from agent_factory.knowledge_packs import REAL_SEGMENT

_EVIDENCE = {INCOMPLETE.name: EVIDENCE_COMPLETE, INJECTION.name: INJECTION_FLAGGED}
"""The datum whose evidence each per-unit result stands on (the metric alone does not name it)."""
_FLAG_WORDS = ((INCOMPLETE, "incomplete evidence"), (INJECTION, "injection flags"))


def _summary(rows: Rows, flags: Sequence[FlagSpec]) -> list[Line]:
    out = []
    excluded = rows.get(EXCLUDED)
    if decided(excluded):
        parts = sorted(((SEGMENT_SHARE.param(r.metric), number(r) or 0.0) for r in rows.of(SEGMENT_SHARE)
                        if SEGMENT_SHARE.param(r.metric) != REAL_SEGMENT and (number(r) or 0) > 0),
                       key=lambda p: -p[1])
        detail = ", ".join(f"{k} {fmt(v, 'rate')}" for k, v in parts[:2])
        out.append(Line(f"excluded {estimate(excluded, 'rate')} turns" + (f" ({detail})" if detail else ""),
                        excluded))
    for metric, words in _FLAG_WORDS:
        r = rows.get(metric)
        if decided(r):
            out.append(Line(f"{words} {estimate(r, 'rate')} turns", r))
    return out


SECTION = Section(
    uncollected=(UNCOLLECTED,),
    intro="Where the evidence comes from and how complete it is; it proves the evidence and sits off the spine.",
    decisive=(EXCLUDED, SEGMENT_SHARE, COVERAGE),
    blocks=(
        Block("Traffic segments (only real traffic is analysed)", (EXCLUDED, SEGMENT_SHARE),
              label=lambda r: SEGMENT_SHARE.param(r.metric), x_title="share of all turns"),
        Block("Evidence coverage per field", (COVERAGE,), label=lambda r: COVERAGE.param(r.metric),
              group=lambda r: r.stratum or "all", x_title="turns with the field complete"),
        Block("Incomplete evidence and injection flags", (INCOMPLETE, INJECTION), chart="none", evidence=True),
        Block("The clean set", (CLEAN, UNCOLLECTED), chart="none"),
    ),
)

PRESENTATION = Presentation(
    title="Provenance", place="apart", metrics=METRICS, headline=(("excluded from analysis", EXCLUDED),),
    summary=_summary, summary_rank=5, section=SECTION, evidence_of=_EVIDENCE.get,
)
"""Provenance as the views show it."""
