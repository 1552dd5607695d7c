"""Adjudication reads what the audit writes: the latest stored audit as the component's own results.

The audit (`factory/loops/audit/`, docs/method.md section 6) re-collects a sample with a second rater, measures
agreement per data item and retires what fails; it stores its second rater's data as atomic data keyed by rater
(`audit:<model>`) and its findings as one `AuditReport`. `audit_rows` turns that report into this component's
metrics (`kappa.<item>` with its user-clustered interval, `admission.<item>`: admitted, below the line, retired
or undecided), which the views add to the component's stored results (`Presentation.from_audit`), so its
headline, summary lines and spine box say what the latest audit found. Pure.

Why the old `rater_b` convention no longer feeds the component: the pipeline's analysis `adjudication.kappa`
reads a second rater's value from unit-row facts `adjudication.<item>.rater_b` (`rules`), but nothing writes them
(`grep -rn rater_b` finds the tests alone), and the audit cannot: the kernel's observations hold one rater's data
at a time, and the audit's agreement (Cohen or Fleiss, alpha, user-bootstrap intervals, the rule on too few units)
is richer than a per-run Cohen's kappa. So the audit is the one source of agreement, and the component reads it
here. The registered analysis stays, unchanged and emitting nothing without such facts, because every built
suite names it (`evaluators/adjudication.yaml`: a suite whose analysis is no longer registered is refused at
load, so removing it would break every suite built so far); no writer of the facts should be added.
"""

from __future__ import annotations

from typing import NamedTuple

from agent_factory.evaluators.audit.model import AuditReport, ItemAgreement
from agent_factory.evaluators.components.adjudication.metrics import ADMISSION, KAPPA

COMPONENT = "adjudication"
ADMITTED = "admitted"
"""An item whose kappa at two decimals is >= 0.60 (`stats.admit`)."""
BELOW = "below the line"
"""An item below the line that the audit did not retire (too few units to decide, or no suite item)."""
RETIRED = "retired"
"""An item out of the analyses: retired by this audit or an earlier one."""
UNDECIDED = "undecided"
"""An item whose kappa is undefined (one category only, one rater, no unit rated by both)."""


class AuditRow(NamedTuple):
    """One of the component's results from the latest audit, shaped as the views' rows
    (`evaluators.core.present.Row`). An item's layer is not in the report: None."""

    component: str
    layer: str | None
    metric: str
    stratum: str | None
    value: float | str | None
    low: float | None
    high: float | None
    n: int | None
    note: str | None


def _kappa_note(a: ItemAgreement, audit_id: str) -> str:
    how = f"{a.kappa_method or 'no'} kappa among {', '.join(a.raters)}"
    alpha = f"alpha {a.alpha:.3f}" if a.alpha is not None else "alpha undefined"
    parts = [f"audit {audit_id}", how, alpha, f"{a.labels:,} labels"]
    if a.near_line:
        parts.append("near the line: its interval holds 0.60")
    if a.reason:
        parts.append(a.reason)
    return "; ".join(parts)


def _decision(a: ItemAgreement, retired: set[str]) -> str:
    if a.item in retired:
        return RETIRED
    if a.admitted is None:
        return UNDECIDED
    return ADMITTED if a.admitted else BELOW


def audit_rows(report: AuditReport) -> list[AuditRow]:
    """Per audited item its kappa (unrounded, interval over users, n the units rated by two raters or more) and
    its admission; an item still retired by an earlier audit that this one did not rate gets its admission alone
    (`retired`, n 0)."""
    retired = set(report.retired)
    out: list[AuditRow] = []
    for a in sorted(report.items, key=lambda i: i.item):
        note = _kappa_note(a, report.audit_id)
        out.append(AuditRow(COMPONENT, None, KAPPA.of(item=a.item), "all", a.kappa, a.kappa_low, a.kappa_high, a.n,
                            note))
        out.append(AuditRow(COMPONENT, None, ADMISSION.of(item=a.item), "all", _decision(a, retired), None, None,
                            a.n, note))
    rated = {a.item for a in report.items}
    for item in sorted(retired - rated):
        out.append(AuditRow(COMPONENT, None, ADMISSION.of(item=item), "all", RETIRED, None, None, 0,
                            f"audit {report.audit_id}: retired by an earlier audit, not rated again"))
    return out


__all__ = ["ADMITTED", "BELOW", "RETIRED", "UNDECIDED", "AuditRow", "audit_rows"]
