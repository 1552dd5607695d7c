"""The audit job, mixed into `Project`: the raters resolved, the loop run (`factory.loops.audit.run`), rewrites of
retired items proposed by the orchestrator's model into the suite's working files."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from agent_factory.errors import AgentFactoryError, SpecError
from agent_factory.factory.project.parts import ProjectParts

if TYPE_CHECKING:
    from agent_factory.evaluators.audit.model import AuditReport, Correction, Rating
    from agent_factory.evaluators.collect.backends import CallCounters
    from agent_factory.evaluators.collect.config import ModelSpec
    from agent_factory.evaluators.collect.redact import Redactor
    from agent_factory.evaluators.core import DataDefinition
    from agent_factory.factory.loops.audit.rewrite import RewriteExample
    from agent_factory.factory.store import Store

EXAMPLES = 5
"""Units of disagreement a rewrite proposal shows the model: enough to see a pattern, few enough to read."""
EVIDENCE_CHARS = 2000
"""Characters of one example's evidence in a proposal's prompt."""


class AuditJobs(ProjectParts):
    """`audit`: the inner loop over this project's store and suite."""

    def audit_raters(self, names: Sequence[str] = ()) -> tuple[ModelSpec, ...]:
        """The audit raters: `names` (litellm model strings, each behind `AGENT_FACTORY_API_BASE` when set), else
        the config's (`[models] audit`, `AGENT_FACTORY_AUDIT_MODELS`)."""
        from agent_factory.evaluators.collect.config import ENV_API_BASE, ModelSpec

        if names:
            base = os.environ.get(ENV_API_BASE) or None
            try:
                return tuple(ModelSpec(model=n, api_base=base) for n in names)
            except ValueError as e:
                raise SpecError(f"--rater: {e}") from None
        return self.model_config.audit

    def audit(
        self, *, raters: Sequence[str] = (), sample: int | None = None, seed: int = 0, n_boot: int = 1000,
        propose: bool = True, on_step: Callable[[str], None] | None = None,
        counters: CallCounters | None = None,
    ) -> AuditReport:
        """Audit the store: a stratified sample re-collected by each rater, agreement per item, rules against
        models, validity, corrected estimates; failing items retired, and (with a small model configured and a
        built suite, unless `propose` is False) a rewrite of each proposed into the suite's working files. The
        report is stored; the next `run` reruns only the analyses reading a retired item."""
        from agent_factory.evaluators.collect.backends import CallCounters
        from agent_factory.evaluators.collect.prompt import template_dir
        from agent_factory.factory.loops.audit.run import DEFAULT_SAMPLE, run_audit

        if not self.store_path.exists():
            raise AgentFactoryError(f"{self.store_path}: no store here yet; run `agent-factory ingest PATH` and "
                                    "`run` first")
        chosen = self.audit_raters(raters)
        st = self.store(write=True)
        if st.count_rows("atomic_data") == 0:
            raise AgentFactoryError(f"{self.store_path}: nothing collected yet; run `agent-factory run` first")
        counted = counters if counters is not None else CallCounters()
        proposer = self._proposer(st, counted) if propose else None
        report = run_audit(st, suite=self.suite, flags=self.flags, raters=chosen, config=self.model_config,
                           cache=self.cache, redactor=self.redactor, templates=template_dir(self.suite.files),
                           size=sample if sample is not None else DEFAULT_SAMPLE, seed=seed, n_boot=n_boot,
                           propose=proposer, counters=counted, on_step=on_step)
        self._flags = None  # a retirement changes which flags the views raise
        return report

    def _proposer(self, st: Store, counters: CallCounters) -> (
            Callable[[DataDefinition, str, dict[str, float | str | None], list[Rating]], Correction | None] | None):
        """The orchestrator's rewrite of a retired item, when a small model is configured and the suite is a
        built one (its working files are where a person reviews a proposal); else None."""
        from agent_factory.factory.suite.read import MANIFEST_FILE

        small = self.model_config.small
        if small is None or self.suite_dir is None or not (self.suite_dir / MANIFEST_FILE).exists():
            return None
        suite_dir = self.suite_dir

        def propose(d: DataDefinition, why: str, figures: dict[str, float | str | None],
                    ratings: list[Rating]) -> Correction | None:
            from agent_factory.evaluators.audit.model import Correction
            from agent_factory.evaluators.collect.budget import Budget
            from agent_factory.factory.loops.audit.rewrite import propose_rewrite, write_proposal

            proposal = propose_rewrite(d, why, _examples(st, ratings, self.redactor), model=small,
                                       cache=self.cache, counters=counters, retry=self.model_config.retry,
                                       budget=Budget(self.model_config.budget), redactor=self.redactor)
            at = datetime.now(UTC).isoformat(timespec="seconds")
            if proposal.definition is None:
                return Correction(at=at, audit_id="", item=d.id, item_version=d.version, action="rewrite_proposed",
                                  why=f"no rewrite: {'; '.join(proposal.problems) or 'the model kept it retired'}",
                                  before=figures)
            path = write_proposal(suite_dir, proposal.definition)
            return Correction(at=at, audit_id="", item=d.id, item_version=d.version, action="rewrite_proposed",
                              why=f"version {proposal.definition.version} proposed in {path} (changes: "
                                  f"{', '.join(proposal.changed) or 'none'}); review with `agent-factory diff "
                                  f"{suite_dir}/approved {suite_dir}`, then `agent-factory approve {suite_dir}`",
                              before=figures, after={"version": proposal.definition.version})

        return propose


def _examples(st: Store, ratings: Sequence[Rating], redactor: Redactor) -> list[RewriteExample]:
    """Up to EXAMPLES units on which the raters of one item disagreed, with their redacted evidence."""
    from agent_factory.factory.loops.audit.review_page import read_passages
    from agent_factory.factory.loops.audit.rewrite import RewriteExample
    from agent_factory.factory.store.lookup import locate
    by_unit: dict[str, dict[str, str]] = {}
    for r in ratings:
        by_unit.setdefault(r.unit_id, {})[r.rater] = r.value
    out: list[RewriteExample] = []
    for unit_id in sorted(u for u, values in by_unit.items() if len(set(values.values())) > 1):
        where = locate(st, unit_id)
        if where is None:
            continue
        text = "\n".join(f"[{p.label}] {p.text}" for p in read_passages(st, unit_id, where, redactor))
        out.append(RewriteExample(unit_id=unit_id, evidence=text[:EVIDENCE_CHARS], values=by_unit[unit_id]))
        if len(out) >= EXAMPLES:
            break
    return out


__all__ = ["AuditJobs"]
