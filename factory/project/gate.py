"""The gate's jobs, mixed into `Project`: a candidate gated against a baseline (`factory.loops.gate.run`), the
gate calibrated on the baseline alone (`factory.loops.gate.calibrate`), and the incidents and fixes it recorded.

Both sides are judged on the data of their last run with this project's suite, so each store involved is run first
(an up-to-date store reruns nothing); another store file than the project's is run by a sibling `Project` of the
same suite, pack, config and cache. Everything the gate decides is recorded in the baseline's store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from agent_factory.errors import AgentFactoryError
from agent_factory.factory.project.parts import ProjectParts

if TYPE_CHECKING:
    from agent_factory.evaluators.gate.model import CalibrationReport, Fix, GateReport, Incident
    from agent_factory.factory.store import Store
    from agent_factory.factory.suite.read import Suite


def _same(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


class GateJobs(ProjectParts):
    """`gate`, `gate_calibrate`, `incidents`, `fixes`: the outer loop over this project's suite."""

    if TYPE_CHECKING:
        def run(self) -> object:
            """`Project.run` (the class this mixes into defines it): the store evaluated with the suite."""

    @property
    def suite_label(self) -> str | None:
        """The suite as the gate records it (its absolute directory, so that `gate` and `gate calibrate` run from
        anywhere name the same suite, and a stored calibration is found again); None: every component."""
        return str(self.suite_dir.resolve()) if self.suite_dir is not None else None

    def _sibling(self, store: Path) -> GateJobs:
        """A project over another store file with this one's suite, pack, config, cache and approval choice."""
        from agent_factory.factory.project.root import Project

        config = self._config if self._config is not None else self.config_path
        # The model answers' cache is shared when this project has a store (one cache, no answer paid twice);
        # beside a --store that names no file, none is made: the sibling's own, beside its store.
        cache = self.cache_dir if self.store_path.exists() else None
        return Project(store=store, suite=self.suite_dir, pack=self.pack_name, config=config, cache=cache,
                       unapproved=self.unapproved, on_notice=self.on_notice)

    def _run_store(self) -> None:
        """Run this project's store with its suite (what the gate reads is the last run's data)."""
        if not self.store_path.exists():
            raise AgentFactoryError(f"{self.store_path}: no store here yet; run `agent-factory ingest PATH` first")
        self.run()

    @contextmanager
    def _gate_stores(self, base: Path, cand: Path) -> Iterator[tuple[Store, Store, Suite]]:
        """The baseline's store opened for writing and the candidate's (the same object when it is the same file),
        each run first with this suite, and the suite as the baseline's project read it (without --suite and
        --pack, the pack used at the baseline's ingest, whatever --store is)."""
        with ExitStack() as stack:
            projects: dict[Path, GateJobs] = {}
            for path in (base, cand):
                if any(_same(path, p) for p in projects):
                    continue
                proj = self if _same(path, self.store_path) else stack.enter_context(self._sibling(path))
                proj._run_store()
                projects[path] = proj
            base_proj = next(p for k, p in projects.items() if _same(k, base))
            cand_proj = next(p for k, p in projects.items() if _same(k, cand))
            base_store = base_proj.store(write=True)
            yield base_store, base_store if cand_proj is base_proj else cand_proj.store(), base_proj.suite

    def gate(self, *, baseline: str, candidate: str, sequential: bool = False) -> GateReport:
        """Gate `candidate` against `baseline` (each a store file, or a selector `KEY=V1,V2` on this project's
        store) per component: user-clustered tests against the stored calibration's thresholds (Bonferroni
        without one), incidents of confirmed invariants, fixes proposed and re-checked; with `sequential`, the
        always-valid verdicts and the look counted. Recorded in the baseline's store."""
        from agent_factory.factory.loops.gate.data import parse_side
        from agent_factory.factory.loops.gate.run import run_gate

        base = parse_side(baseline, store=self.store_path, option="--baseline")
        cand = parse_side(candidate, store=self.store_path, option="--candidate")
        if base == cand:
            raise AgentFactoryError(f"--baseline {baseline} and --candidate {candidate} are the same traffic; give "
                                    "another store or selector for the candidate")
        with self._gate_stores(base.store, cand.store) as (base_store, cand_store, suite):
            return run_gate(base_store, cand_store, baseline=base, candidate=cand, pack=suite.pack,
                            components=suite.components, suite=self.suite_label, sequential=sequential,
                            confirmed=suite.source is not None)

    def gate_calibrate(self, *, side: str | None = None, splits: int = 4000, draws: int = 300, seed: int = 0,
                       power: bool = True, on_progress: Callable[[str], None] | None = None) -> CalibrationReport:
        """Check the gate on this project's store alone (or the conversations the selector `side` picks): A/A
        false alarms over `splits` random halves of its users and, with `power`, the smallest effects of seeded
        defects it catches (`draws` per strength). Stored in the store; `gate` reuses it until the baseline or the
        suite changes."""
        from agent_factory.factory.loops.gate.calibrate import run_calibration
        from agent_factory.factory.loops.gate.data import Side, parse_side

        chosen = Side(store=self.store_path) if side is None else parse_side(side, store=self.store_path,
                                                                             option="--baseline")
        if not _same(chosen.store, self.store_path):
            raise AgentFactoryError(f"--baseline {side}: calibrate checks the --store's own traffic; pass that file "
                                    f"as --store ({chosen.store}) or a selector KEY=VALUE on {self.store_path}")
        self._run_store()
        suite = self.suite
        return run_calibration(self.store(write=True), side=chosen, pack=suite.pack, components=suite.components,
                               suite=self.suite_label, splits=splits, draws=draws, seed=seed, power=power,
                               on_progress=on_progress)

    def _gate_records(self) -> Store | None:
        """The store, read-only, for reading what the gate recorded; None when there is no store file."""
        return self.store() if self.store_path.exists() else None

    def incidents(self) -> list[Incident]:
        """Every incident recorded in this (baseline) store, oldest first."""
        from agent_factory.factory.store.gate import read_incidents

        st = self._gate_records()
        if st is None:
            raise AgentFactoryError(f"{self.store_path}: no store here; pass the baseline's store as --store")
        return read_incidents(st)

    def fixes(self) -> list[Fix]:
        """Every fix proposed in this (baseline) store, oldest first."""
        from agent_factory.factory.store.gate import read_fixes

        st = self._gate_records()
        if st is None:
            raise AgentFactoryError(f"{self.store_path}: no store here; pass the baseline's store as --store")
        return read_fixes(st)


__all__ = ["GateJobs"]
