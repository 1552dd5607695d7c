"""The gate as a pytest plugin: one test per component, so a CI job that already runs pytest gates a new agent
version with the tests it reports anyway.

    pytest --agent-factory-baseline a.duckdb --agent-factory-candidate b.duckdb [--agent-factory-store S]
           [--agent-factory-suite D] [--agent-factory-pack P]

`--agent-factory-baseline` and `--agent-factory-candidate` take what `agent-factory gate --baseline/--candidate`
takes: a store file, or a selector `KEY=V1,V2` on `--agent-factory-store` (`service.version=2.3.0`). The gate runs
once, when the session collects, and adds a test `agent_factory[<component>]` per component (marked
`agent_factory`, so `-m agent_factory` runs them alone): it passes on `pass`, fails on `fail` naming the failing
metrics, fails on `incident` naming the units that broke the invariant, and skips a component that is undecided
or not gated (the instruments). The gate records its run, incidents and fixes in the baseline's store, as the
command does.

Registered through the `pytest11` entry point, so every pytest in an environment with Agent Factory installed
loads it, this project's own test suite included: without the options it adds nothing, and it imports nothing of
Agent Factory until they are given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import pytest

if TYPE_CHECKING:
    from agent_factory.evaluators.gate.model import ComponentVerdict, GateReport

OPTIONS = ("baseline", "candidate", "store", "suite", "pack")
"""The plugin's options, each `--agent-factory-<name>`."""
SHOWN_UNITS = 10
"""Units an incident's failure names (the rest are counted; `agent-factory incidents` lists them all)."""
_TOP_LEVEL = frozenset({"agent_factory", "adapters", "evaluators", "factory", "knowledge_packs"})
"""The names pytest may mark for rewriting from this distribution (`_keep_modules_unrewritten`)."""
_REPORT = pytest.StashKey["GateReport | BaseException"]()


@dataclass(frozen=True)
class GateOptions:
    """The plugin's options as given (None when absent)."""

    baseline: str | None
    candidate: str | None
    store: str | None
    suite: str | None
    pack: str | None

    @property
    def active(self) -> bool:
        """Whether the gate is asked for at all (else the plugin is inert)."""
        return self.baseline is not None or self.candidate is not None


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """Register `--agent-factory-*`, and keep pytest from rewriting Agent Factory's own modules."""
    _keep_modules_unrewritten(pluginmanager)
    group = parser.getgroup("agent-factory", "Agent Factory gate: one test per component (docs/gate.md)")
    helps = {
        "baseline": "the baseline agent version: a store file, or KEY=V1,V2 on --agent-factory-store",
        "candidate": "the candidate agent version: a store file, or KEY=V1,V2 on --agent-factory-store",
        "store": "the store a selector applies to (default: .agent-factory/store.duckdb, as for `agent-factory gate`)",
        "suite": "the suite directory (built by `build`, approved by `approve`)",
        "pack": "the knowledge pack (default: the one used at ingest)",
    }
    for name in OPTIONS:
        group.addoption(f"--agent-factory-{name}", dest=f"agent_factory_{name}", default=None, metavar="VALUE",
                        help=helps[name])


def _keep_modules_unrewritten(pluginmanager: pytest.PytestPluginManager) -> None:
    # pytest marks every top-level package of a pytest11 plugin's distribution for assertion rewriting: here
    # agent_factory and, from a checkout's egg-info, adapters, evaluators, factory (factory_boy's name) and
    # knowledge_packs. A rewritten module has other bytecode, and an analysis's or a rule's version digests its
    # bytecode (evaluators/core/source.py), so under pytest versions would differ from the CLI's and a store run
    # by one would look changed to the other. Only this plugin module needs pytest's loader, and it is loaded.
    # `_must_rewrite` is pytest's private set: if it moves, this does nothing, and tests/factory/test_pytest_plugin.py
    # (`python -m pytest` from a checkout) fails.
    must = getattr(getattr(pluginmanager, "rewrite_hook", None), "_must_rewrite", None)
    if isinstance(must, set):
        must.difference_update(_TOP_LEVEL)


def options(config: pytest.Config) -> GateOptions:
    """The plugin's options of this session."""
    return GateOptions(*(config.getoption(f"agent_factory_{name}") for name in OPTIONS))


def pytest_configure(config: pytest.Config) -> None:
    """Check that both sides are given, and declare the `agent_factory` marker."""
    opts = options(config)
    if not opts.active:
        return
    if opts.baseline is None or opts.candidate is None:
        given, missing = ("baseline", "candidate") if opts.baseline is not None else ("candidate", "baseline")
        raise pytest.UsageError(f"--agent-factory-{given} needs --agent-factory-{missing}: the gate compares a "
                                f"candidate agent version with a baseline")
    config.addinivalue_line("markers", "agent_factory: the Agent Factory gate's verdict on one component")


def _run_gate(config: pytest.Config) -> GateReport:
    """Run the gate once for the session (tests replace this seam with a fixed report)."""
    from agent_factory.factory.project import DEFAULT_STORE, open_project

    opts = options(config)
    assert opts.baseline is not None and opts.candidate is not None  # pytest_configure checked both
    with open_project(store=opts.store or DEFAULT_STORE, suite=opts.suite, pack=opts.pack) as project:
        return project.gate(baseline=opts.baseline, candidate=opts.candidate)


class ComponentItem(pytest.Item):
    """One component's verdict as a test."""

    def __init__(self, *, component: str, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.component = component
        self.add_marker("agent_factory")

    def runtest(self) -> None:
        """Pass, fail or skip as the component's verdict says."""
        got = self.config.stash[_REPORT]
        if isinstance(got, BaseException):
            pytest.fail(f"the gate did not run: {type(got).__name__}: {got}", pytrace=False)
        verdict = next(c for c in got.components if c.component == self.component)
        outcome, message = judge(verdict)
        if outcome == "fail":
            pytest.fail(message, pytrace=False)
        if outcome == "skip":
            pytest.skip(message)

    def reportinfo(self) -> tuple[str, int | None, str]:
        """Where the test comes from: the gate, not a file of tests."""
        return "agent-factory gate", None, self.name


def judge(c: ComponentVerdict) -> tuple[Literal["pass", "fail", "skip"], str]:
    """The test's outcome and its message for one component's verdict."""
    if c.verdict == "pass":
        return "pass", ""
    if c.verdict is None:
        return "skip", f"{c.component}: {c.reason or 'undecided'}"
    if c.verdict == "incident":
        units = [f"{i.unit_id} ({i.clause})" for i in c.incidents]
        named = ", ".join(units[:SHOWN_UNITS]) + (f" and {len(units) - SHOWN_UNITS} more" if len(units) > SHOWN_UNITS
                                                  else "")
        return "fail", (f"{c.component}: incident: {c.reason or 'a confirmed invariant was broken'}; units: {named} "
                        f"(agent-factory incidents lists them with their evidence)")
    from agent_factory.evaluators.gate.fixes import metric_finding

    failed = [f"  {m.metric}: {metric_finding(m)}" for m in c.metrics if m.verdict == "fail"]
    return "fail", "\n".join([f"{c.component}: significantly worse on {len(failed)} metric(s):", *failed])


@pytest.hookimpl(tryfirst=True)  # before `-m` and `-k` deselect: they apply to these tests too
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the gate and add one test per component (one failing test when the gate itself cannot run)."""
    if not options(config).active:
        return
    try:
        report = _run_gate(config)
    except Exception as e:  # a bad store or suite is reported as a failed test, not a crashed session
        config.stash[_REPORT] = e
        items.append(ComponentItem.from_parent(session, name="agent_factory[gate]", nodeid="agent_factory[gate]",
                                               component="gate"))
        return
    config.stash[_REPORT] = report
    # The node id is the name itself: these tests belong to no file.
    items.extend(ComponentItem.from_parent(session, name=f"agent_factory[{c.component}]",
                                           nodeid=f"agent_factory[{c.component}]", component=c.component)
                 for c in report.components)


def pytest_report_header(config: pytest.Config) -> str | None:
    """Say which versions the session gates."""
    opts = options(config)
    return None if not opts.active else f"agent-factory gate: {opts.baseline} -> {opts.candidate}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """The gate's overall verdict and what would be its exit code, under the tests."""
    got = config.stash.get(_REPORT, None)
    if got is None or isinstance(got, BaseException):
        return
    calibrated = ("calibrated" if got.calibration is not None
                  else "not calibrated: Bonferroni thresholds (run agent-factory gate calibrate)")
    terminalreporter.section("agent-factory gate")
    terminalreporter.write_line(f"agent-factory gate: {got.verdict or 'undecided'} (exit {got.exit_code}), "
                                f"{got.users_baseline} baseline and {got.users_candidate} candidate users, "
                                f"{calibrated}; {len(got.fixes)} fix(es) proposed or re-checked")


__all__ = ["OPTIONS", "ComponentItem", "GateOptions", "judge", "options"]
