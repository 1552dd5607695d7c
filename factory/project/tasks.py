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
    from pydantic_ai.models import Model

    from agent_factory.evaluators.tasks.compare import TaskComparison
    from agent_factory.evaluators.tasks.model import TaskReport, TaskRun
    from agent_factory.factory.ingest.files import IngestReport
    from agent_factory.factory.ingest.sources import Given
    from agent_factory.factory.tasks.agents import Agent
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

    def task_report(self, *, composite: str | None = None) -> TaskReport:
        """pass^k for k = 1..K over the stored task runs, and every task, worst first; with `composite` (a name of
        `evaluators.tasks.composites.COMPOSITES`), a `CompositeReport` carrying that composite, a view."""
        from agent_factory.evaluators.tasks.composites import composite as with_composite
        from agent_factory.evaluators.tasks.passk import task_report
        from agent_factory.factory.store.tasks import read_task_runs

        if not self.store_path.exists():
            raise AgentFactoryError(f"{self.store_path}: no store here yet; import task runs first "
                                    "(`agent-factory tasks import FILE --format tau-bench`)")
        runs = read_task_runs(self.store())
        if not runs:
            raise AgentFactoryError(f"{self.store_path}: no task runs stored; import some first "
                                    "(`agent-factory tasks import FILE --format tau-bench`)")
        report = task_report(runs)
        if composite is None:
            return report
        try:
            return with_composite(report, composite)
        except ValueError as e:
            raise AgentFactoryError(str(e)) from None

    def _task_side(self, text: str, *, option: str) -> tuple[str, list[TaskRun]]:
        """`--baseline`/`--candidate` as (its name, its task runs): a store file (all its runs) or a selector
        `KEY=V1,V2` over the runs of this project's store; one line naming the side when it selects none."""
        from agent_factory.evaluators.tasks.compare import SELECTOR_KEYS, parse_selector, select_runs, selector_value
        from agent_factory.factory.store import Store
        from agent_factory.factory.store.tasks import read_task_runs

        path = Path(text)
        if path.is_file():
            if path.resolve() == self.store_path.resolve():
                runs = read_task_runs(self.store())
            else:
                with Store(path, read_only=True) as st:
                    runs = read_task_runs(st)
            if not runs:
                raise AgentFactoryError(f"{option} {text}: the store holds no task run")
            return str(path), runs
        try:
            selector = parse_selector(text)
        except ValueError as e:
            raise AgentFactoryError(f"{option} {e}") from None
        if selector is None:
            raise AgentFactoryError(f"{option} {text!r}: neither a store file nor a selector; give a store path "
                                    f"(a.duckdb) or KEY=V1,V2 on --store, KEY one of {', '.join(SELECTOR_KEYS)}")
        if not self.store_path.exists():
            raise AgentFactoryError(f"{option} {text}: {self.store_path}: no store here; pass --store")
        stored = read_task_runs(self.store())
        key, values = selector
        runs = select_runs(stored, key, values)
        if not runs:
            known = sorted({v for r in stored if (v := selector_value(r, key)) is not None})
            raise AgentFactoryError(f"{option} {text}: selects no task run of {self.store_path} ({key} takes: "
                                    f"{', '.join(known[:10]) or 'no value'})")
        return text, runs

    def compare_tasks(self, baseline: str, candidate: str, *, alpha: float = 0.05,
                      strict: bool = False) -> TaskComparison:
        """The candidate's task runs against the baseline's (each a store file, or a selector `KEY=V1,V2` on this
        project's store over suite, agent, source or trial): completion per task and over the suite on each side,
        the one-sided signed-rank test over tasks, and whether the candidate falls below (`strict`: any drop in
        mean completion)."""
        from agent_factory.evaluators.tasks.compare import compare_tasks

        base_name, base = self._task_side(baseline, option="--baseline")
        cand_name, cand = self._task_side(candidate, option="--candidate")
        try:
            return compare_tasks(base, cand, baseline_name=base_name, candidate_name=cand_name, alpha=alpha,
                                 strict=strict)
        except ValueError as e:
            raise AgentFactoryError(f"tasks compare: {e}") from None

    def run_tasks(self, suite_path: Path | str, *, agent: str | Model, trials: int) -> TaskRunReport:
        """Run a task suite with an agent for `trials` trials per task, each from a fresh sandbox; write the trials'
        traces as OTLP/JSON beside the store (`task-runs/`), ingest that file as any source (so every component
        applies), and store one task run per trial. The report covers this run's trials.

        `agent`: `script:NAME` (a scripted agent), a litellm model string (`provider/model`, served at the model
        config's `[agent]` endpoint), a pydantic-ai model string (`openai:gpt-4o`), or in code a pydantic-ai `Model`
        object (`FunctionModel`, `TestModel`)."""
        import collections
        import hashlib
        import json

        from agent_factory.errors import SpecError
        from agent_factory.evaluators.collect.config import derive_family
        from agent_factory.evaluators.tasks.passk import task_report
        from agent_factory.factory.store.tasks import record_task_runs
        from agent_factory.factory.tasks.quality import QualityJudge
        from agent_factory.factory.tasks.runner import TaskRunReport, ending_reasons, run_suite
        from agent_factory.factory.tasks.spans import otlp_document, task_run
        from agent_factory.factory.tasks.suite_io import load_suite

        if trials < 1:
            raise SpecError(f"--trials: must be at least 1, got {trials}")
        suite = load_suite(Path(suite_path))
        player = self._task_agent(agent, suite_description=suite.description)
        try:
            # Final quality is judged by a configured model of another family than the agent's (else not
            # collected, with the reason).
            family = None if player.name.startswith("script:") else derive_family(player.name)
            judge = QualityJudge.from_config(self.model_config, agent_family=family, cache=lambda: self.cache)
            results = run_suite(suite, player, trials=trials, judge=judge)
        finally:
            close = getattr(player, "close", None)
            if close is not None:
                close()
        label = player.name.removeprefix("script:")
        body = json.dumps(otlp_document(results, {t.id: t.input for t in suite.tasks})).encode()
        digest = hashlib.sha256(body).hexdigest()
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:40]
        out = self.store_path.parent / "task-runs" / f"{suite.name}-{safe}-{digest[:12]}.json"
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
                             ended_by=dict(collections.Counter(r.ended_by for r in results)),
                             reasons=ending_reasons(results), new_runs=new,
                             spans_ingested=max(0, ingested.accepted - ingested.already_stored))

    def _task_agent(self, agent: str | Model, *, suite_description: str) -> Agent:
        """The runner's agent for `--agent`: a scripted agent, or a model agent (see `run_tasks`)."""
        from agent_factory.errors import SpecError
        from agent_factory.factory.tasks.agents import scripted_agent
        from agent_factory.factory.tasks.model_agent import ModelAgent, model_for, system_prompt

        if isinstance(agent, str) and agent.startswith("script:"):
            try:
                return scripted_agent(agent)
            except ValueError as e:
                raise SpecError(f"--agent: {e}") from None
        if isinstance(agent, str):
            if not agent.strip():
                raise SpecError("--agent: an empty model string (valid: script:NAME, provider/model for litellm, "
                                "provider:model for pydantic-ai)")
            config = self.model_config
            try:
                model = model_for(agent.strip(), config.agent, config.retry)
            except Exception as e:  # noqa: BLE001 - pydantic-ai's lookup raises its own errors for unknown names
                raise SpecError(f"--agent {agent!r}: {type(e).__name__}: {e} (valid: script:NAME, provider/model "
                                "for litellm, provider:model for pydantic-ai)") from None
            name = agent.strip()
        else:
            model = agent
            name = f"{model.system}:{model.model_name}"
        return ModelAgent(model, name=name, instructions=system_prompt(suite_description))
