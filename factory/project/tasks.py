"""The jobs of long-horizon tasks, mixed into `Project`: `tasks import` (a benchmark's trajectories as task runs),
`tasks report` (pass^k and the per-task report) and `tasks run` (an agent against a suite, its trials recorded as
spans)."""

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
    from agent_factory.factory.tasks.runner import TaskRunReport


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

    def run_tasks(self, suite_path: Path | str, *, agent: str, trials: int) -> TaskRunReport:
        """Run a task suite with an agent (`script:NAME`) for `trials` trials per task, each from a fresh sandbox;
        write the trials' traces as OTLP/JSON beside the store (`task-runs/`), ingest that file as any source (so
        every component applies), and store one task run per trial. The report covers this run's trials."""
        import collections
        import hashlib
        import json

        from agent_factory.errors import SpecError
        from agent_factory.evaluators.tasks.passk import task_report
        from agent_factory.factory.store.tasks import record_task_runs
        from agent_factory.factory.tasks.agents import scripted_agent
        from agent_factory.factory.tasks.runner import TaskRunReport, run_suite
        from agent_factory.factory.tasks.spans import otlp_document, task_run
        from agent_factory.factory.tasks.suite_io import load_suite

        if not agent.startswith("script:"):
            raise SpecError(f"--agent {agent!r}: only scripted agents (script:NAME) run for now; model agents "
                            "are to come (issue 35)")
        try:
            player = scripted_agent(agent)
        except ValueError as e:
            raise SpecError(f"--agent: {e}") from None
        if trials < 1:
            raise SpecError(f"--trials: must be at least 1, got {trials}")
        suite = load_suite(Path(suite_path))
        results = run_suite(suite, player, trials=trials)
        body = json.dumps(otlp_document(results, {t.id: t.input for t in suite.tasks})).encode()
        digest = hashlib.sha256(body).hexdigest()
        out = self.store_path.parent / "task-runs" / f"{suite.name}-{agent.removeprefix('script:')}-{digest[:12]}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(body)
        ingested = self.ingest([out], fmt="otlp-json")
        if ingested.quarantined:
            first = ingested.errors[0].line() if ingested.errors else "see `agent-factory stats`"
            raise AgentFactoryError(f"tasks run: {out}: ingest quarantined {ingested.quarantined} record(s): {first}")
        runs = [task_run(r, source=str(out), digest=digest) for r in results]
        new = record_task_runs(self.store(write=True), runs)
        report = task_report(runs)
        return TaskRunReport(**report.model_dump(), file=str(out), agent=player.name, trials=trials,
                             ended_by=dict(collections.Counter(r.ended_by for r in results)), new_runs=new,
                             spans_ingested=max(0, ingested.accepted - ingested.already_stored))
