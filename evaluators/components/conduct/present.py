"""How Conduct presents itself (`evaluators.core.present`): the metrics its analyses emit (declared in
`metrics`, which the analyses name them through), its headline, its summary lines and its report section.
Nothing here is imported by an analysis: rewording a line reruns none."""

from __future__ import annotations

import re
from collections.abc import Sequence

from agent_factory.evaluators.components.conduct.definitions import obligation_id
from agent_factory.evaluators.components.conduct.metrics import (
    APPLIES,
    COMPLIES,
    INVARIANT,
    METRICS,
    UNCOLLECTED,
    VIOLATION,
    VIOLATIONS,
)
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.core.present import (
    Block,
    Line,
    Pivot,
    Presentation,
    Rows,
    Section,
    estimate,
    number,
    units_of,
)

CLAUSES_SHOWN = 5
"""Violated clauses listed in the summary (most violations first); the rest are counted in one line."""


_FLAG = re.compile(r"conduct\.(.+)\.violated")


def clause_of(flag_id: str) -> str | None:
    """The clause a flag id names (`conduct.<clause>.violated`, `flags.flags_for`); None for another flag."""
    m = _FLAG.fullmatch(flag_id)
    return m.group(1) if m else None


def evidence_of(metric: str) -> str | None:
    """The datum a clause's violation stands on: the clause's obligation."""
    return obligation_id(VIOLATION.param(metric)) if VIOLATION.headline(metric) else None


def _summary(rows: Rows, flags: Sequence[FlagSpec]) -> list[Line]:
    texts = {k: f.description for f in flags if (k := clause_of(f.id)) is not None and f.description}
    broken = []
    for r in rows.of(COMPLIES):
        c = number(r)
        if c is None or not r.n:
            continue
        violations = round(r.n * (1.0 - c))
        if violations > 0:
            broken.append((violations, c, COMPLIES.param(r.metric), r))
    broken.sort(key=lambda b: (-b[0], b[1], b[2]))
    out = []
    for violations, _, clause, r in broken[:CLAUSES_SHOWN]:
        # The unit is the layer the clause was judged on (a conversation-level clause counts conversations).
        head = (f"{violations:,} of {r.n or 0:,} {units_of(r.layer, r.n)} broke {clause}: "
                f"C(r) {estimate(r, 'rate', with_n=False)}")
        out.append(Line(head, r, quote=texts.get(clause)))
    if len(broken) > CLAUSES_SHOWN:
        rest = broken[CLAUSES_SHOWN:]
        out.append(Line(f"{len(rest)} more clause(s) broken, {sum(b[0] for b in rest):,} violations "
                        "(`show --worst 10 --component conduct`)"))
    held = sum(1 for r in rows.of(COMPLIES) if number(r) == 1.0 and r.n)
    undecided = [r for r in rows.of(COMPLIES) if not r.n]
    if held or undecided:
        out.append(Line(f"{held} clause(s) held every time they applied; {len(undecided)} never applied or need "
                        "a model"))
    return out


def _box(rows: Rows) -> list[str]:
    clauses = rows.of(VIOLATIONS)
    if not clauses:
        return ["no clause results"]
    violated = [r for r in clauses if (number(r) or 0) > 0]
    return [f"{len(violated)} of {len(clauses)} clauses violated at least once"]


def _goodness(rows: Rows) -> float | None:
    values = [v for r in rows.of(COMPLIES) if (v := number(r)) is not None]
    return sum(values) / len(values) if values else None


SECTION = Section(
    uncollected=(UNCOLLECTED,),
    intro="Each clause of the spec: how often it applies and, when it does, how often the agent complied.",
    decisive=(APPLIES, COMPLIES),
    blocks=(
        Pivot("Clauses, worst first", by="clause",
              columns=(("A(r) applicability", APPLIES), ("C(r) compliance | trigger", COMPLIES),
                       ("violations", VIOLATIONS), ("uncollected", UNCOLLECTED), ("invariant", INVARIANT)),
              order=(VIOLATIONS, COMPLIES),
              note="Wilson 95% intervals; uncollected trigger or obligation data are in no denominator."),
        Block("Compliance C(r) where the trigger fired", (COMPLIES,), label=lambda r: COMPLIES.param(r.metric),
              x_title="C(r) = P(obligation | trigger)"),
        Block("Violations per clause", (VIOLATIONS,), chart="count", label=lambda r: VIOLATIONS.param(r.metric),
              x_title="triggered units that did not comply", evidence=True),
    ),
)

PRESENTATION = Presentation(
    title="Conduct", place="across", metrics=METRICS, headline=(("compliance", COMPLIES),), box=_box,
    summary=_summary, summary_rank=0, section=SECTION, names_unmeasured=True, goodness=_goodness, weight=0.15,
    flag_param=("clause", clause_of), evidence_of=evidence_of,
)
"""Conduct as the views show it."""
