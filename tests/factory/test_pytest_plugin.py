"""The gate as a pytest plugin (`factory/pytest_plugin.py`): one test per component, inert without its options.

The unit tests replace the plugin's one seam (`_run_gate`, the session's single gate run) with a fixed report, and
run pytest in-process on a scratch directory (`pytester`); the end-to-end test gates a simulated candidate
against a simulated baseline through `Project.gate`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent_factory.evaluators.gate.model import ComponentVerdict, GateReport, Incident, MetricVerdict
from agent_factory.factory import pytest_plugin
from tests.factory.conftest import NO_MODEL

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]

QUIET = ("-W", "ignore::pytest.PytestAssertRewriteWarning")
"""An in-process pytest finds agent_factory imported already (by this one), and says so: not what is tested."""
BASE = (*QUIET, "--agent-factory-baseline", "a.duckdb", "--agent-factory-candidate", "b.duckdb")


def _metric(metric: str, *, verdict: str | None, candidate: float, delta: float, z: float) -> MetricVerdict:
    return MetricVerdict.model_validate(dict(
        component="execution", metric=metric, label="delivery failure", layer="trace", worse="higher", unit="pp",
        baseline=0.035, candidate=candidate, delta=delta, statistic=z, per_turn_statistic=2.4 * z, threshold=2.9,
        calibrated=True, verdict=verdict, users_baseline=150, users_candidate=148, rows_baseline=905,
        rows_candidate=890))


def _incident(unit: str) -> Incident:
    return Incident(id=f"inc-{unit}", component="conduct", clause="no_unprompted_disclosure",
                    metric="violation_rate.no_unprompted_disclosure", unit_id=unit, evidence="answer: Acme Corp",
                    candidate="b.duckdb", opened_at="2026-12-01T10:00:00+00:00")


REPORT = GateReport(
    baseline="a.duckdb", candidate="b.duckdb", suite="suite", verdict="incident", exit_code=5, calibration=None,
    users_baseline=150, users_candidate=148, seconds=0.4,
    components=(
        ComponentVerdict(component="execution", verdict="fail", reason="significantly worse: failure_rate",
                         metrics=(_metric("failure_rate", verdict="fail", candidate=0.081, delta=4.6, z=6.1),)),
        ComponentVerdict(component="conduct", verdict="incident", incidents=(_incident("t_91"), _incident("t_17")),
                         reason="2 unit(s) broke confirmed invariant(s) no_unprompted_disclosure"),
        ComponentVerdict(component="results", verdict="pass"),
        ComponentVerdict(component="substance", verdict=None, reason="undecided: substance was not collected"),
        ComponentVerdict(component="provenance", verdict=None, reason="not gated: an instrument, not the agent"),
    ))


@pytest.fixture
def gate_calls(monkeypatch: pytest.MonkeyPatch) -> list[pytest.Config]:
    """Replace the session's gate run with REPORT; the list records each call."""
    calls: list[pytest.Config] = []

    def fake(config: pytest.Config) -> GateReport:
        calls.append(config)
        return REPORT

    monkeypatch.setattr(pytest_plugin, "_run_gate", fake)
    return calls


def test_one_test_per_component_follows_its_verdict(pytester: pytest.Pytester, gate_calls: list[object]) -> None:
    pytester.makepyfile(test_own="def test_own():\n    assert True\n")
    result = pytester.runpytest("-rA", *BASE)
    result.assert_outcomes(passed=2, failed=2, skipped=2)
    assert len(gate_calls) == 1  # once per session, not per test
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "PASSED test_own.py::test_own",
        "PASSED agent_factory[[]results[]]",
        "SKIPPED*substance: undecided: substance was not collected",
        "SKIPPED*provenance: not gated: an instrument, not the agent",
        "FAILED agent_factory[[]execution[]]*",
        "FAILED agent_factory[[]conduct[]]*",
    ])
    assert "failure_rate: delivery failure 3.5% -> 8.1% (+4.6 pp), z 6.10 > threshold 2.90" in out
    assert "units: t_91 (no_unprompted_disclosure), t_17 (no_unprompted_disclosure)" in out
    assert "agent-factory gate: a.duckdb -> b.duckdb" in out
    assert "agent-factory gate: incident (exit 5), 150 baseline and 148 candidate users, not calibrated" in out


def test_the_marker_and_names_select_the_gates_tests(pytester: pytest.Pytester, gate_calls: list[object]) -> None:
    pytester.makepyfile(test_own="def test_own():\n    assert True\n")
    result = pytester.runpytest("-m", "agent_factory", *BASE)
    result.assert_outcomes(passed=1, failed=2, skipped=2, deselected=1)
    result = pytester.runpytest("-k", "execution or results", *BASE)
    result.assert_outcomes(passed=1, failed=1, deselected=4)


def test_without_its_options_the_plugin_adds_nothing(pytester: pytest.Pytester, gate_calls: list[object]) -> None:
    pytester.makepyfile(test_own="def test_own():\n    assert True\n")
    result = pytester.runpytest(*QUIET, "-m", "agent_factory")
    result.assert_outcomes(deselected=1)
    assert gate_calls == []


def test_one_side_alone_is_a_usage_error(pytester: pytest.Pytester, gate_calls: list[object]) -> None:
    result = pytester.runpytest(*QUIET, "--agent-factory-candidate", "b.duckdb")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and gate_calls == []
    result.stderr.fnmatch_lines(["*--agent-factory-candidate needs --agent-factory-baseline*"])


def test_a_gate_that_cannot_run_is_one_failed_test(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(config: pytest.Config) -> GateReport:
        raise FileNotFoundError("no store at a.duckdb")

    monkeypatch.setattr(pytest_plugin, "_run_gate", broken)
    result = pytester.runpytest(*BASE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*agent_factory[[]gate[]]*", "*the gate did not run: FileNotFoundError: no store*"])


def test_importing_the_plugin_loads_no_part_of_agent_factory_beyond_the_package() -> None:
    # Every pytest in the environment loads the plugin: it must stay cheap when inert.
    code = ("import sys, agent_factory.factory.pytest_plugin; "
            "print(sorted(m for m in sys.modules if m.startswith(('agent_factory.', 'pydantic', 'duckdb', 'numpy'))))")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert got == "['agent_factory.factory', 'agent_factory.factory.pytest_plugin']"


def test_pytest_leaves_agent_factory_modules_unrewritten(pytester: pytest.Pytester) -> None:
    # pytest would rewrite the asserts of every package of a plugin's distribution; a rewritten rule has other
    # bytecode, hence another version than the CLI gives it. `python -m pytest` from the checkout (its egg-info on
    # sys.path) is where pytest marks them, as in CI.
    pytester.makepyfile(test_loader=(
        "import agent_factory.evaluators.components.conduct.tooluse.preconditions as p\n"
        "def test_loader():\n"
        "    assert type(p.__loader__).__name__ != 'AssertionRewritingHook'\n"))
    got = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                          str(pytester.path), str(pytester.path / "test_loader.py")],
                         cwd=REPO, capture_output=True, text=True)
    assert got.returncode == 0, got.stdout[-2000:]


class _Hook:
    def __init__(self, names: set[str]) -> None:
        self._must_rewrite = names


class _Manager:
    def __init__(self, names: set[str]) -> None:
        self.rewrite_hook = _Hook(names)


def test_only_agent_factorys_own_names_are_unmarked() -> None:
    manager = _Manager({"agent_factory", "factory", "evaluators", "pytest_mock", "hypothesis"})
    pytest_plugin._keep_modules_unrewritten(manager)  # type: ignore[arg-type]
    assert manager.rewrite_hook._must_rewrite == {"pytest_mock", "hypothesis"}


def _cli(*args: str) -> None:
    from typer.testing import CliRunner

    from agent_factory.factory.cli.app import app

    res = CliRunner().invoke(app, list(args), env=NO_MODEL)
    assert res.exit_code == 0, res.output


@pytest.fixture(scope="module")
def sim_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(baseline store, candidate store, suite): two simulated versions of one agent (seeds 1 and 2), each
    ingested and run with one built and approved suite."""
    from agent_factory.factory.simulate import SimConfig, simulate

    root = tmp_path_factory.mktemp("plugin-gate")
    suite = root / "suite"
    _cli("build", "--spec", str(REPO / "specs" / "business_analysis_zh.md"), "--pack", "business_analysis",
         "--out", str(suite))
    _cli("approve", str(suite))
    stores = []
    for seed in (1, 2):
        simulate(SimConfig(users=120, seed=seed), root / f"sim{seed}")
        store = root / f"v{seed}.duckdb"
        _cli("ingest", str(root / f"sim{seed}"), "--pack", "business_analysis", "--store", str(store))
        _cli("run", "--suite", str(suite), "--store", str(store))
        stores.append(store)
    return stores[0], stores[1], suite


@pytest.mark.slow
def test_end_to_end_the_same_agent_reseeded_passes(pytester: pytest.Pytester, sim_pair: tuple[Path, Path, Path],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_factory.factory.store import Store
    from agent_factory.factory.store.gate import latest_gate

    base, cand, suite = sim_pair
    for k, v in NO_MODEL.items():
        monkeypatch.setenv(k, v)
    result = pytester.runpytest("-rA", *QUIET, "--agent-factory-baseline", str(base), "--agent-factory-candidate",
                                str(cand), "--agent-factory-suite", str(suite))
    with Store(base, read_only=True) as st:
        report = latest_gate(st)
    assert report is not None  # the gate ran, and recorded its run in the baseline's store as the command does
    verdicts = {c.component: c.verdict for c in report.components}
    assert verdicts["execution"] == "pass" and verdicts["provenance"] is None
    assert report.verdict == "pass" and report.exit_code == 0
    # One test per component of the suite, each as its verdict says.
    for name, verdict in verdicts.items():
        result.stdout.fnmatch_lines([f"PASSED*agent_factory[[]{name}[]]" if verdict == "pass" else f"SKIPPED*{name}: *"])
    result.assert_outcomes(passed=sum(v == "pass" for v in verdicts.values()),
                           skipped=sum(v is None for v in verdicts.values()))


def test_the_readmes_ci_example_uses_options_that_exist() -> None:
    import re

    import yaml
    from typer.testing import CliRunner

    from agent_factory.factory.cli.app import app

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Gate a new version", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert block is not None, "README, Gate a new version: no ```yaml block"
    steps = yaml.safe_load(block.group(1))["jobs"]["gate"]["steps"]
    lines = [" ".join(line.split()) for s in steps for line in s.get("run", "").replace("\\\n", " ").splitlines()]
    commands = [line for line in lines if line.startswith("agent-factory ")]
    assert any(c.startswith("agent-factory gate ") for c in commands), commands
    for command in commands:
        words = command.split()
        name = words[1]  # ingest, gate, fixes
        helped = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "200", **NO_MODEL})
        assert helped.exit_code == 0, helped.output
        for option in (w for w in words if w.startswith("--")):
            assert option in helped.output, f"README: `agent-factory {name}` has no option {option}"
    pytest_line = " ".join(section.split("Or from pytest", 1)[1].split())
    used = set(re.findall(r"--agent-factory-([a-z]+)", pytest_line))
    assert used and used <= set(pytest_plugin.OPTIONS)
