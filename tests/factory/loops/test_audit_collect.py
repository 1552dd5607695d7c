"""The audit's re-collection by a second rater, over real HTTP to the local OpenAI-compatible test server: a
simulated store whose primary collector is a small model of family `alpha`, re-collected on a stratified sample
by `openai/fake-audit` of family `beta` through the same cascade code. The audit's data sit beside the primary's,
calls are counted at the server, an unchanged audit asks nothing, an interrupted one repeats no answered call, a
same-family rater is refused before any call, and a changed definition is the only one asked again."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_factory import open_project
from agent_factory.errors import SpecError
from agent_factory.evaluators.audit.sample import draw_sample
from agent_factory.evaluators.collect import BudgetLimits, ModelConfig, ModelSpec, RetryPolicy
from agent_factory.evaluators.collect.prompt import template_dir
from agent_factory.factory.loops.audit.collect import FACT, NOT_IN_STORE, Recollection, recollect
from agent_factory.factory.project import Project
from agent_factory.factory.simulate import SimConfig, simulate
from agent_factory.factory.store.audit import sample_candidates
from tests.evaluators.test_collect_support import hashed_answers
from tests.fakes.openai_server import FakeOpenAIServer

KEY_ENV = "AGENT_FACTORY_TEST_KEY"
AUDIT = "openai/fake-audit"
RATER = f"audit:{AUDIT}"


def _spec(server: FakeOpenAIServer, model: str, family: str) -> ModelSpec:
    return ModelSpec(model=model, api_base=server.base_url, api_key_env=KEY_ENV, family=family, timeout_s=10.0)


def _config(server: FakeOpenAIServer, **extra: Any) -> ModelConfig:
    return ModelConfig(small=_spec(server, "openai/fake-small", "alpha"),
                       retry=RetryPolicy(attempts=3, initial_wait_s=0.01, max_wait_s=0.05), **extra)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    """One server for the module: each test resets its counts. Answers differ by model, item and prompt."""
    with FakeOpenAIServer(responder=hashed_answers) as s:
        yield s


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "test-key-not-secret")


@pytest.fixture(scope="module")
def primary_store(server: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3 simulated users ingested and run with the small model `openai/fake-small` (family alpha) as primary."""
    root = tmp_path_factory.mktemp("audit-collect")
    simulate(SimConfig(users=3, seed=5), root / "sim")
    store = root / "store.duckdb"
    mp = pytest.MonkeyPatch()
    mp.setenv(KEY_ENV, "test-key-not-secret")
    try:
        with open_project(store=store, pack="business_analysis", config=_config(server), cache=root / "cache") as p:
            p.ingest([root / "sim"])
            report = p.run()
    finally:
        mp.undo()
    assert report.model_calls > 0
    return store


@pytest.fixture
def project(primary_store: Path, server: FakeOpenAIServer, tmp_path: Path) -> Iterator[Project]:
    """A copy of the primary store, with a cache of its own (the audit's answers start uncached)."""
    store = tmp_path / "store.duckdb"
    shutil.copy(primary_store, store)
    server.reset()
    with open_project(store=store, pack="business_analysis", config=_config(server), cache=tmp_path / "cache") as p:
        yield p


def _sample(p: Project) -> list[tuple[str, str]]:
    drawn, _summary = draw_sample(sample_candidates(p.store()), size=20, seed=1)
    return [(d.unit_id, d.component) for d in drawn]


def _recollect(p: Project, sample: list[tuple[str, str]], *raters: ModelSpec, config: ModelConfig | None = None,
               specs: Any = None) -> Recollection:
    return recollect(p.store(write=True), specs=specs if specs is not None else p.suite.components, pack=p.pack,
                     sample=sample, raters=raters, config=config or p.model_config, cache=p.cache,
                     redactor=p.redactor, templates=template_dir(p.suite.files))


def _rows(p: Project, rater: str) -> list[tuple[Any, ...]]:
    return p.store().con.execute("SELECT * FROM atomic_data WHERE rater = ? ORDER BY unit_id, item",
                                 [rater]).fetchall()


def test_the_audit_data_sit_beside_the_primary_and_an_unchanged_audit_makes_no_call(
    project: Project, server: FakeOpenAIServer,
) -> None:
    p = project
    sample = _sample(p)
    primary = _rows(p, "primary")
    by_tier = dict(p.store().con.execute(
        "SELECT tier, count(*) FROM atomic_data WHERE rater = 'primary' GROUP BY 1").fetchall())
    assert by_tier.get("rule", 0) > 0 and by_tier.get("small_model", 0) > 0  # rules and a model collected

    out = _recollect(p, sample, _spec(server, AUDIT, "beta"))
    (r,) = out.raters
    assert r.rater == RATER
    assert r.model_calls == server.calls_by_model["fake-audit"] > 0  # every call counted, at the server too
    assert set(server.calls_by_model) == {"fake-audit"}  # the primary's model was not asked
    assert r.tokens > 0 and r.collected == r.written > 0 and r.reused == 0 and r.uncollected == {}

    audit = p.store().con.execute(
        "SELECT unit_id, item, tier, collector, family, value, item_version FROM atomic_data WHERE rater = ?"
        " ORDER BY unit_id, item",
        [RATER]).fetchall()
    assert len(audit) == r.written
    assert {(t, c, f) for _u, _i, t, c, f, _v, _ver in audit} == {("small_model", AUDIT, "beta")}
    assert {v for *_x, v, _ver in audit} <= {"yes", "no", "not_applicable"}
    # Every judgment of a sampled component on its unit, rule-only items included; no fact is asked.
    expected = set(p.store().con.execute(
        "SELECT d.unit_id, d.item FROM atomic_data d JOIN (SELECT unnest(?) AS u, unnest(?) AS c) s"
        " ON s.u = d.unit_id AND s.c = split_part(d.item, '.', 1) WHERE d.rater = 'primary'",
        [[u for u, _c in sample], [c for _u, c in sample]]).fetchall())
    facts = set(out.not_collected[FACT])
    assert {(u, i) for u, i, *_x in audit} == {(u, i) for u, i in expected if i not in facts}
    primary_tiers = dict(p.store().con.execute(
        "SELECT item, any_value(tier) FROM atomic_data WHERE rater = 'primary' GROUP BY 1").fetchall())
    assert any(primary_tiers[i] == "rule" for _u, i, *_x in audit)  # rules are checked against the model
    # Same versions as the primary's data: the two raters rate the same definition.
    versions = dict(p.store().con.execute(
        "SELECT unit_id || '|' || item, item_version FROM atomic_data WHERE rater = 'primary'").fetchall())
    assert all(versions[f"{u}|{i}"] == ver for u, i, *_x, ver in audit)
    assert _rows(p, "primary") == primary  # the primary's data are untouched

    server.reset()
    again = _recollect(p, sample, _spec(server, AUDIT, "beta"))
    assert server.calls == 0 and again.model_calls == 0 and again.tokens == 0
    (r2,) = again.raters
    assert (r2.reused, r2.collected, r2.written) == (r.written, 0, r.written)
    assert p.store().con.execute(
        "SELECT unit_id, item, tier, collector, family, value, item_version FROM atomic_data WHERE rater = ?"
        " ORDER BY unit_id, item",
        [RATER]).fetchall() == audit
    assert _rows(p, "primary") == primary


def test_an_interrupted_audit_repeats_no_answered_call(project: Project, server: FakeOpenAIServer) -> None:
    p = project
    sample = _sample(p)
    cut = _recollect(p, sample, _spec(server, AUDIT, "beta"),
                     config=p.model_config.model_copy(update={"budget": BudgetLimits(calls=3)}))
    (first,) = cut.raters
    assert first.model_calls == server.calls == 3 and first.uncollected  # stopped short: the rest uncollected
    rest = _recollect(p, sample, _spec(server, AUDIT, "beta"))
    (second,) = rest.raters
    assert second.uncollected == {} and second.reused == first.collected > 0
    # The second asked only what the first left: together they collected what one whole audit collects, in no
    # more calls (the items left may share a call that two cut-off calls of a whole audit would have made).
    (whole,) = _recollect(p, sample, _spec(server, "openai/fake-audit-whole", "beta")).raters
    assert first.collected + second.collected == whole.collected == whole.written == second.written
    assert first.model_calls + second.model_calls <= whole.model_calls == server.calls_by_model["fake-audit-whole"]
    assert server.calls_by_model["fake-audit"] == first.model_calls + second.model_calls


def test_a_rater_of_the_primary_models_family_is_refused_before_any_call(
    project: Project, server: FakeOpenAIServer,
) -> None:
    p = project
    sample = _sample(p)
    before = p.store().con.execute("SELECT count(*) FROM atomic_data").fetchone()
    with pytest.raises(SpecError) as e:
        _recollect(p, sample, _spec(server, AUDIT, "beta"), _spec(server, "openai/fake-cousin", "alpha"))
    msg = str(e.value)
    assert "\n" not in msg and "openai/fake-cousin" in msg and "openai/fake-small" in msg and "alpha" in msg
    assert server.calls == 0  # refused before the first rater asked anything
    assert p.store().con.execute("SELECT count(*) FROM atomic_data").fetchone() == before


def test_only_the_item_whose_definition_changed_is_asked_again(project: Project, server: FakeOpenAIServer) -> None:
    p = project
    sample = _sample(p)
    first = _recollect(p, sample, _spec(server, AUDIT, "beta"))
    asked = p.store().con.execute(
        "SELECT item, count(*) FROM atomic_data WHERE rater = ? AND item LIKE 'substance.%' GROUP BY 1 ORDER BY 2 DESC,"
        " 1", [RATER]).fetchall()
    assert asked, "the sample holds substance units"
    item, n = asked[0]
    specs = tuple(
        dataclasses.replace(s, definitions=tuple(d.model_copy(update={"version": d.version + "-r2"})
                                                 if d.id == item else d for d in s.definitions))
        if s.name == "substance" else s for s in p.suite.components)

    server.reset()
    out = _recollect(p, sample, _spec(server, AUDIT, "beta"), specs=specs)
    (r,) = out.raters
    assert r.model_calls == server.calls > 0
    assert r.collected == n and r.reused == first.raters[0].written - n
    for body in server.requests:  # every question asked was about that item alone
        props = body["response_format"]["json_schema"]["schema"]["properties"]
        assert props and all(k == item or k.endswith("." + item) for k in props), sorted(props)
    versions = dict(p.store().con.execute(
        "SELECT DISTINCT item, item_version FROM atomic_data WHERE rater = ? AND item LIKE 'substance.%'",
        [RATER]).fetchall())
    assert versions[item].endswith("-r2") and all(not v.endswith("-r2") for i, v in versions.items() if i != item)


def test_sampled_units_no_run_built_are_reported_not_collected(project: Project, server: FakeOpenAIServer) -> None:
    out = _recollect(project, [("no-such-turn", "substance")], _spec(server, AUDIT, "beta"))
    assert out.not_collected[NOT_IN_STORE] == ("no-such-turn",)
    assert out.units == 0 and out.model_calls == 0 and server.calls == 0
