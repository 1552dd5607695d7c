"""What `Project`'s jobs return beside the models of the layers below (`RunReport`, `IngestReport`, `Summary`,
...): the report a `report` wrote, and an approval with whether it changed anything.

Kept apart from `project.root` so that importing the project (the CLI does, to parse its options) loads no
pydantic model until a job runs.
"""

from __future__ import annotations

from typing import NamedTuple

from agent_factory.factory.suite.read import Approval
from agent_factory.frozen import Frozen


class ReportWritten(Frozen):
    """What `Project.report` wrote (the `--json` of `agent-factory report`; its keys are a contract)."""

    out: str
    """The HTML file written."""
    bytes: int
    """Its size."""
    sections: list[str]
    """The sections' keys, in page order."""
    absent: dict[str, str]
    """Sections without data: key -> why (e.g. no outcome events in the traces)."""
    charts: int
    """Plots on the page."""
    quotes: int
    """Redacted evidence quotes (0 without `evidence`)."""
    composite: bool
    """Whether the weighted composite view was added."""


class Approved(NamedTuple):
    """What `Project.approve` did."""

    approval: Approval
    """The suite's approval as recorded in `approval.json`."""
    already_approved: bool
    """True when the suite was approved as it is before: nothing was written."""


__all__ = ["Approved", "ReportWritten"]
