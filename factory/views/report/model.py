"""What the report is made of: the rows read from a store (`ReportData`) and the sections built from them.

Reading fills `ReportData` (the only part touching the store); everything after it is pure: rows -> sections
-> HTML, so the same store gives the same file.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agent_factory.evaluators.audit.model import AuditReport, Correction
from agent_factory.evaluators.core.present import units_of
from agent_factory.evaluators.findings import Association
from agent_factory.evaluators.gate.model import CalibrationReport, GateReport
from agent_factory.evaluators.tasks.model import TaskRun
from agent_factory.factory.views.results import ResultRow, StoreFacts
from agent_factory.frozen import Frozen

LAYERS = ("span", "trace", "conversation", "engagement")
"""The four layers, lowest first."""
LAYER_NAMES = {layer: units_of(layer) for layer in LAYERS}
"""How the report names each layer's units (spans / turns / conversations / users), as every view does
(`evaluators.core.present.UNIT_NAMES`)."""


class Quote(Frozen):
    """A redacted example of the evidence behind a finding (only with `--evidence`)."""

    component: str
    """The component whose finding it illustrates."""
    finding: str
    """The finding: a per-unit result's metric (`violation.<clause>`) or a flag."""
    unit_id: str
    """The unit it comes from."""
    field: str
    """The text field quoted (`request`, `answer`, a span's `input` ...)."""
    text: str
    """The quoted characters, redacted; plain text (escaped when rendered)."""


class LayerCell(Frozen):
    """How many units of one layer a component flagged (the layer table)."""

    component: str
    """The component."""
    layer: str
    """The layer (`span`, `trace`, `conversation`, `engagement`)."""
    flagged: int = Field(ge=0)
    """Units with at least one of the component's flags raised."""
    units: int = Field(ge=0)
    """Units of that layer with at least one decided flag of the component (the denominator)."""


class ReportData(Frozen):
    """Everything the report shows, as read from one store."""

    facts: StoreFacts
    """The store's traffic and runs."""
    rows: tuple[ResultRow, ...]
    """Every population-level result."""
    per_unit: dict[str, int]
    """Per-unit results by `component/metric` (e.g. `conduct/violation.x`): how many units carry one."""
    layer_table: tuple[LayerCell, ...] | None = None
    """Flagged units per component and layer; None when per-unit flags are not available."""
    associations: tuple[Association, ...] | None = None
    """Flag-outcome associations at the conversation level (`evaluators.findings`); None when not computed."""
    quotes: tuple[Quote, ...] | None = None
    """Redacted evidence examples; None unless `--evidence`."""
    audit: AuditReport | None = None
    """The latest stored audit (the Adjudication section); None before any audit."""
    corrections_log: tuple[Correction, ...] = ()
    """The corrections log, oldest first (every audit's)."""
    gate: GateReport | None = None
    """The latest gate run recorded in the store (the Gate section); None before any."""
    calibration: CalibrationReport | None = None
    """The calibration that gate run used, else the latest stored; None before any."""
    task_runs: tuple[TaskRun, ...] = ()
    """Every stored task run (the Tasks section); none in a store without task runs."""


class Table(Frozen):
    """A table of already-formatted cells."""

    columns: tuple[str, ...]
    """Header cells."""
    rows: tuple[tuple[str, ...], ...]
    """Body rows, one cell per column."""


class Chart(Frozen):
    """A Vega-Lite chart: its spec is rendered in the page by vega-embed."""

    key: str
    """Stable id within the report (`chart-<section>-<n>`)."""
    title: str
    """What it shows."""
    spec: dict[str, Any]
    """The Vega-Lite specification (data inline)."""


class Block(Frozen):
    """One finding group inside a section: a title, a note, a table and/or a chart."""

    title: str
    """The block's heading."""
    note: str = ""
    """What the reader should know to read it (denominators, what is left out)."""
    table: Table | None = None
    """The numbers."""
    chart: Chart | None = None
    """The plot of the numbers."""
    quotes: tuple[Quote, ...] = ()
    """Evidence examples (with `--evidence`)."""


class Section(Frozen):
    """A section of the report: its blocks, or why it has none."""

    key: str
    """Anchor id (`layers`, `spine`, `execution`, ...)."""
    title: str
    """Heading."""
    intro: str = ""
    """One or two sentences on what the section shows."""
    blocks: tuple[Block, ...] = ()
    """Its content."""
    absent: str | None = None
    """Why it has no data (shown instead of blocks), e.g. `needs a model: uncollected`."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Section-specific structured content the renderer draws (the spine's boxes)."""
