"""The jobs of people's labels, mixed into `Project`: `labels import` and `agreement`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from agent_factory.errors import AgentFactoryError
from agent_factory.factory.project.parts import ProjectParts

if TYPE_CHECKING:
    from agent_factory.evaluators.audit.model import AgreementReport
    from agent_factory.factory.loops.audit.labels import LabelImport


class LabelJobs(ProjectParts):
    """Import people's labels as raters of items, and measure agreement among every rater."""

    def import_labels(self, path: Path | str, *, fmt: str) -> LabelImport:
        """Read a label file (`fmt`: mast, trail, who-and-when or csv) whole and store its labels (a store is
        created when none exists: labels of traces never ingested, as MAST's, still give agreement among people).
        A bad row stores nothing and raises a `LabelError` naming the file, the line or record and the field."""
        from agent_factory.factory.loops.audit.labels import import_labels, read_labels_file

        parsed = read_labels_file(path, fmt)  # a bad file fails here, before a store file is created
        suite_items = None
        if fmt == "csv":
            suite_items = {d.id for c in self.suite.components for d in c.definitions_for(self.suite.pack)}
        return import_labels(self.store(write=True), path, fmt=fmt, parsed=parsed, suite_items=suite_items)

    def agreement(self, *, seed: int = 0, n_boot: int = 1000) -> AgreementReport:
        """Agreement per item and overall among every rater the store holds: people's labels and every
        collector's atomic data (`primary`, `audit:<model>`), on the items two raters or more rated."""
        from agent_factory.factory.loops.audit.labels import agreement

        if not self.store_path.exists():
            raise AgentFactoryError(f"{self.store_path}: no store here yet; import labels (`agent-factory labels "
                                    "import FILE --format ...`) or ingest and run traces first")
        return agreement(self.store(), seed=seed, n_boot=n_boot)


__all__ = ["LabelJobs"]
