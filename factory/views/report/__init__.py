"""`agent-factory report`: one self-contained HTML file of a store's findings.

`read` reads the store into `ReportData`; `sections` (the components', `components`, the overview's,
`overview`, the audit's, `audit`, the gate's, `gate`, and the tasks', `tasks`) and `html` are pure functions of
it; `runtime` supplies the inlined plotting library.
"""

from __future__ import annotations

from agent_factory.factory.views.report.audit import KEY as ADJUDICATION
from agent_factory.factory.views.report.audit import adjudication, corrections_log
from agent_factory.factory.views.report.components import component_sections
from agent_factory.factory.views.report.gate import gate_section
from agent_factory.factory.views.report.html import render_html
from agent_factory.factory.views.report.model import ReportData, Section
from agent_factory.factory.views.report.overview import associations, composite, layer_table, spine
from agent_factory.factory.views.report.tasks import task_sections


def report_sections(data: ReportData, *, with_composite: bool = False) -> list[Section]:
    """Every section in report order: the layer table and the spine first, the components (Adjudication's from
    the latest audit), outcome associations, the gate's verdicts and calibration, the long-horizon tasks (only when
    the store holds task runs), the corrections log, and last, only when asked, the composite view."""
    comps = [adjudication(data, s) if s.key == ADJUDICATION else s for s in component_sections(data)]
    out = [layer_table(data), spine(data), *comps, associations(data), gate_section(data), *task_sections(data),
           corrections_log(data)]
    if with_composite:
        out.append(composite(data))
    return out


def build_html(data: ReportData, *, runtime_js: str, generated: str, with_composite: bool = False) -> str:
    """The report page of `data`."""
    return render_html(report_sections(data, with_composite=with_composite), data.facts, runtime_js=runtime_js,
                       generated=generated)


__all__ = ["ReportData", "Section", "build_html", "report_sections"]
