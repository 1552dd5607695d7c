"""An analysis's version comes from its code: editing an analysis (or a helper it calls, in its module or in
another) reruns that analysis on the next run, and only the analyses that depend on the edit, with no bump.

Edits are made in temporary copies of the code: a copy of the real provenance analysis module, and a small
package of two analyses and a helper module. Each "process" is simulated by dropping the copy's modules from
`sys.modules` and importing them again, so the next run sees the edited source as a new process would.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from agent_factory.evaluators.components.provenance import analysis as provenance
from agent_factory.evaluators.core import Analysis, ComponentSpec, get_component, register_component
from agent_factory.factory.cli.app import app
from agent_factory.factory.simulate import SimConfig, simulate
from agent_factory.factory.store import Store

PROBE_HELPERS = '''
def share(hits: list[bool]) -> float:
    return sum(hits) / len(hits) if hits else 0.0
'''
PROBE_SHARE = '''
from agent_factory.evaluators.core.model import Result
from af_probe.helpers import share


def probe_share(obs, pack):
    hits = [r.values.get("provenance.evidence_complete") == "yes" for r in obs.layer("trace")]
    return [Result(component="provenance", layer="trace", metric="probe.share", value=share(hits), n=len(hits),
                   analysis="probe.share", analysis_version="1")]
'''
PROBE_COUNT = '''
from agent_factory.evaluators.core.model import Result


def probe_count(obs, pack):
    rows = obs.layer("trace")
    return [Result(component="provenance", layer="trace", metric="probe.count", value=float(len(rows)),
                   n=len(rows), analysis="probe.count", analysis_version="1")]
'''


@pytest.fixture(scope="module")
def sim_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of 12 simulated users (ingested once; tests copy it)."""
    root = tmp_path_factory.mktemp("sim")
    simulate(SimConfig(users=12, seed=5), root / "sim")
    store = root / "store.duckdb"
    res = CliRunner().invoke(app, ["ingest", str(root / "sim"), "--store", str(store), "--pack",
                                   "business_analysis", "--json"])
    assert res.exit_code == 0, res.output
    return store


@pytest.fixture
def store(sim_store: Path, no_model: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # No bytecode: an edit within the same second and of the same size must not be served from a stale .pyc.
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    dst = no_model / "store.duckdb"
    dst.write_bytes(sim_store.read_bytes())
    return dst


@pytest.fixture
def provenance_spec() -> Iterator[ComponentSpec]:
    """The registered provenance component, put back after the test however the test replaced it."""
    original = get_component("provenance")
    yield original
    register_component(original, replace=True)


def _run(store: Path) -> dict:
    res = CliRunner().invoke(app, ["run", "--store", str(store), "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _results(store: Path) -> dict[str, list[tuple]]:
    """Stored result rows (run id and analysis version included) by analysis."""
    with Store(store, read_only=True) as st:
        rows = st.con.execute("SELECT analysis, * FROM results ORDER BY ALL").fetchall()
    out: dict[str, list[tuple]] = {}
    for r in rows:
        out.setdefault(r[0], []).append(r[1:])
    return out


def _versions(store: Path) -> dict[str, set[str]]:
    with Store(store, read_only=True) as st:
        rows = st.con.execute("SELECT DISTINCT analysis, analysis_version FROM results").fetchall()
    out: dict[str, set[str]] = {}
    for name, version in rows:
        out.setdefault(name, set()).add(version)
    return out


def _fresh_import(root: Path, package: str, module: str) -> ModuleType:
    """`package.module` imported from `root` as a new process would: no module of `package` kept."""
    for name in [n for n in sys.modules if n == package or n.startswith(f"{package}.")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module(f"{package}.{module}")


def _write_package(root: Path, package: str, files: dict[str, str]) -> None:
    pkg = root / package
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    for name, text in files.items():
        (pkg / f"{name}.py").write_text(text)


def _with(spec: ComponentSpec, *analyses: Analysis, replace: Callable[[Analysis], Analysis] | None = None) -> None:
    own = tuple(replace(a) if replace else a for a in spec.analyses)
    register_component(dataclasses.replace(spec, analyses=own + analyses), replace=True)


def test_editing_a_helper_of_a_copied_analysis_reruns_that_analysis_only(
    store: Path, provenance_spec: ComponentSpec, tmp_path: Path,
) -> None:
    code = tmp_path / "code"
    original = Path(inspect.getsourcefile(provenance) or "").read_text()
    helper = "def _cluster(row: UnitRow) -> str:\n    return row.user_id or row.conversation_id or row.unit_id\n"
    assert helper in original

    def register_copy() -> Analysis:
        copy = _fresh_import(code, "af_probe_copy", "analysis")
        current = get_component("provenance")
        _with(provenance_spec, replace=lambda a: dataclasses.replace(a, fn=copy.provenance_analysis)
              if a.name == provenance.NAME else a)
        assert get_component("provenance") is not current
        return next(a for a in get_component("provenance").analyses if a.name == provenance.NAME)

    _write_package(code, "af_probe_copy", {"analysis": original})
    copied = register_copy()
    # The copy is the same code under another module name: the same version as the installed analysis.
    assert copied.content_version == next(a.content_version for a in provenance_spec.analyses
                                          if a.name == provenance.NAME)
    first = _run(store)
    assert first["plan"]["trigger"] == "first run"
    assert first["plan"]["analyses_rerun"] == first["plan"]["analyses_total"] > 1
    before = _results(store)

    # A new process on the unedited copy: nothing reruns, every stored result stays as it was.
    register_copy()
    same = _run(store)
    assert same["plan"]["trigger"] == "nothing changed" and same["plan"]["analyses_rerun"] == 0
    assert _results(store) == before

    # Clustering by session instead of by user, in a helper the analysis calls, with VERSION left at "1".
    edited = original.replace(helper, "def _cluster(row: UnitRow) -> str:\n"
                                      "    return row.conversation_id or row.unit_id\n")
    (code / "af_probe_copy" / "analysis.py").write_text(edited)
    changed = register_copy()
    assert changed.version == copied.version == provenance.VERSION
    assert changed.content_version != copied.content_version
    after_edit = _run(store)
    assert after_edit["plan"]["analyses_rerun"] == 1
    assert after_edit["plan"]["trigger"] == "1 analysis(es) changed (code, declared fields or invariants)"
    assert after_edit["plan"]["definitions_recollected"] == 0 and after_edit["plan"]["users_visited"] == 0
    assert after_edit["model_calls"] == 0 and after_edit["units"] == {}
    after = _results(store)
    # Every other analysis's rows are byte-identical (their run id too: they were not rerun).
    assert {k: v for k, v in after.items() if k != provenance.NAME} == \
        {k: v for k, v in before.items() if k != provenance.NAME}
    # The edited one reran: its clustered intervals changed; the rows the edit reproduced (Wilson intervals,
    # counts) were left as they were, with the run and the version that first produced them.
    clustered = [r for r in after[provenance.NAME] if r[2].endswith(".clustered")]
    plain = [r for r in after[provenance.NAME] if not r[2].endswith(".clustered")]
    assert clustered and not set(clustered) & set(before[provenance.NAME])
    assert plain == [r for r in before[provenance.NAME] if not r[2].endswith(".clustered")]
    assert {r[11] for r in clustered} == {changed.content_version}
    assert {r[11] for r in plain} == {copied.content_version}
    assert after_edit["results"]["added"] == after_edit["results"]["removed"] == len(clustered)

    # And the run after that, on the same edited code, reruns nothing.
    register_copy()
    assert _run(store)["plan"]["analyses_rerun"] == 0


def test_editing_a_helper_module_reruns_the_analyses_that_import_it_only(
    store: Path, provenance_spec: ComponentSpec, tmp_path: Path,
) -> None:
    code = tmp_path / "code"
    _write_package(code, "af_probe", {"helpers": PROBE_HELPERS, "uses_helper": PROBE_SHARE,
                                      "standalone": PROBE_COUNT})

    def register_probes() -> tuple[Analysis, Analysis]:
        share = Analysis("probe.share", "1", _fresh_import(code, "af_probe", "uses_helper").probe_share)
        count = Analysis("probe.count", "1", importlib.import_module("af_probe.standalone").probe_count)
        _with(provenance_spec, share, count)
        return share, count

    share1, count1 = register_probes()
    first = _run(store)
    assert first["plan"]["analyses_rerun"] == first["plan"]["analyses_total"]
    before, versions1 = _results(store), _versions(store)
    assert versions1["probe.share"] == {share1.content_version} and share1.content_version.startswith("1+")

    # The helper module, not the analysis's: the share now counts what is not complete.
    edited = PROBE_HELPERS.replace("return sum(hits)", "return (len(hits) - sum(hits))")
    assert edited != PROBE_HELPERS
    (code / "af_probe" / "helpers.py").write_text(edited)
    share2, count2 = register_probes()
    assert share2.content_version != share1.content_version and count2.content_version == count1.content_version
    second = _run(store)
    assert second["plan"]["analyses_rerun"] == 1
    after = _results(store)
    assert {k: v for k, v in after.items() if k != "probe.share"} == \
        {k: v for k, v in before.items() if k != "probe.share"}
    (old,), (new,) = before["probe.share"], after["probe.share"]
    assert old[8] == new[8] > 0 and 0 < json.loads(old[5]) <= 1
    assert json.loads(new[5]) == pytest.approx(1 - json.loads(old[5]))
    assert _versions(store)["probe.share"] == {share2.content_version}

    # A declared field is part of the version too: reading another component reruns that analysis.
    read_more = dataclasses.replace(count2, reads=("execution",))
    assert read_more.content_version != count2.content_version
    _with(provenance_spec, share2, read_more)
    third = _run(store)
    assert third["plan"]["analyses_rerun"] == 1
    assert _results(store)["probe.count"] == after["probe.count"]  # same rows: reproduced, left as they were
