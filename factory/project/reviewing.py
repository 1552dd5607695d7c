"""The review jobs of a `Project`: a page of sampled (unit, item) pairs for people to label offline, and the
labels it downloads read back into the store (`factory.loops.audit.review_page`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from agent_factory.errors import AgentFactoryError
from agent_factory.factory.project.parts import ProjectParts

if TYPE_CHECKING:
    from agent_factory.evaluators.core.model import DataDefinition
    from agent_factory.factory.loops.audit.review_page import ReviewExport, ReviewImport

DEFAULT_REVIEW_SAMPLE = 20
"""(unit, component) pairs a review page draws unless told (`review_page.DEFAULT_SAMPLE`, repeated so that parsing
the CLI's options imports no loop; a test holds the two equal)."""


class ReviewJobs(ProjectParts):
    """`review export` and `review import` over the project's store, suite and redactor."""

    def _definitions(self) -> dict[str, DataDefinition]:
        """The suite's data items by id, over its pack."""
        return {d.id: d for c in self.suite.components for d in c.definitions_for(self.suite.pack)}

    def _existing(self) -> None:
        if not self.store_path.exists():
            raise AgentFactoryError(f"{self.store_path}: no store here yet; run `agent-factory ingest PATH` and "
                                    "`agent-factory run` first")

    def review_export(self, out: Path, *, sample: int = DEFAULT_REVIEW_SAMPLE, seed: int = 0) -> ReviewExport:
        """Draw the audit's stratified sample (`sample` (unit, component) pairs, `seed`) and write `out/review.csv`
        and `out/review.html`, the self-contained page a person labels offline (its evidence redacted)."""
        from agent_factory.factory.loops.audit.review_page import export_review

        self._existing()
        return export_review(self.store(), self._definitions(), self.redactor, out, size=sample, seed=seed)

    def review_import(self, path: Path) -> ReviewImport:
        """Store the labels of a file the review page downloaded (or a filled `review.csv`) as people's labels,
        source `review:<file name>`; a bad row fails naming its line and field, and nothing is stored."""
        from agent_factory.factory.loops.audit.review_page import import_review

        self._existing()
        items = self._definitions()
        redactor = self.redactor
        return import_review(self.store(write=True), path, redactor, items=items)


__all__ = ["DEFAULT_REVIEW_SAMPLE", "ReviewJobs"]
