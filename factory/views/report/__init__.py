"""`agent-factory report`: one self-contained HTML file of a store's findings.

`read` reads the store into `ReportData`; `sections` (the components', `components`, and the overview's,
`overview`) and `html` are pure functions of it; `runtime` supplies the inlined plotting library.
"""

from __future__ import annotations

from agent_factory.factory.views.report.components import component_sections
from agent_factory.factory.views.report.html import render_html
from agent_factory.factory.views.report.model import ReportData, Section
from agent_factory.factory.views.report.overview import associations, composite, corrections, gate, layer_table, spine


def report_sections(data: ReportData, *, with_composite: bool = False) -> list[Section]:
    """Every section in report order: the layer table and the spine first, the components, outcome
    associations, the gate's and the corrections' room, and last, only when asked, the composite view."""
    out = [layer_table(data), spine(data), *component_sections(data), associations(data), gate(),
           corrections()]
    if with_composite:
        out.append(composite(data))
    return out


def build_html(data: ReportData, *, runtime_js: str, generated: str, with_composite: bool = False) -> str:
    """The report page of `data`."""
    return render_html(report_sections(data, with_composite=with_composite), data.facts, runtime_js=runtime_js,
                       generated=generated)


__all__ = ["ReportData", "Section", "build_html", "report_sections"]
