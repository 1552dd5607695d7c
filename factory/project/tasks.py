"""The jobs of long-horizon tasks, mixed into `Project`: `tasks import` (a benchmark's trajectories as task runs)
and `tasks report` (pass^k and the per-task report). The task runner (`tasks run`) is to come (issue 35)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agent_factory.errors import AgentFactoryError
from agent_factory.factory.project.parts import ProjectParts

if TYPE_CHECKING:
    from agent_factory.evaluators.tasks.model import TaskReport
    from agent_factory.factory.ingest.files import IngestReport
    from agent_factory.factory.ingest.sources import Given
    from agent_factory.factory.tasks.importing import TaskImport


class TaskJobs(ProjectParts):
    """Import task runs and report on them."""

    if TYPE_CHECKING:
        def ingest(self, sources: Sequence[Given], *, fmt: str | None = None) -> IngestReport:
            """`Project.ingest` (the class this mixes into defines it): sources into the store."""

    def import_tasks(self, path: Path | str, *, fmt: str = "tau-bench") -> TaskImport:
        """Import a benchmark's trajectories (`fmt`: tau-bench): the file is ingested as any source (its
        conversations, spans and reward events, so every component applies) and one task run is stored per
        trajectory. A bad record fails before anything is stored, naming the file, the record and the field;
        the same file imported again adds nothing."""
        from agent_factory.factory.store.tasks import record_task_runs
        from agent_factory.factory.tasks.importing import TaskImport, read_task_runs

        file = Path(path)
        runs = read_task_runs(file, fmt=fmt)  # a bad file fails here, before a store file is created
        ingested = self.ingest([file], fmt=fmt)
        if ingested.quarantined:
            # The task runs were read from the same parse, so ingest can only refuse what the store's identity
            # rules refuse (an id clashing with another file's): say which, and keep the runs out.
            first = ingested.errors[0].line() if ingested.errors else "see `agent-factory stats`"
            raise AgentFactoryError(f"tasks import: {file}: ingest quarantined {ingested.quarantined} record(s): "
                                    f"{first}")
        new = record_task_runs(self.store(write=True), runs)
        return TaskImport(
            file=str(file), format=fmt, suite=runs[0].suite, trajectories=len(runs),
            tasks=len({r.task_id for r in runs}), new_runs=new, unlabelled=sum(1 for r in runs if r.success is None),
            conversations_stored=max(0, ingested.accepted - ingested.already_stored),
        )

    def task_report(self) -> TaskReport:
        """pass^k for k = 1..K over the stored task runs, and every task, worst first."""
        from agent_factory.evaluators.tasks.passk import task_report
        from agent_factory.factory.store.tasks import read_task_runs

        if not self.store_path.exists():
            raise AgentFactoryError(f"{self.store_path}: no store here yet; import task runs first "
                                    "(`agent-factory tasks import FILE --format tau-bench`)")
        runs = read_task_runs(self.store())
        if not runs:
            raise AgentFactoryError(f"{self.store_path}: no task runs stored; import some first "
                                    "(`agent-factory tasks import FILE --format tau-bench`)")
        return task_report(runs)
