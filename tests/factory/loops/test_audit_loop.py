"""The inner loop end to end over real HTTP to the local OpenAI-compatible test server (issue 33, Done-when 2).

A built, approved suite runs over simulated traffic with a small model of family `alpha` as its primary collector.
The audit rater `openai/fake-audit` (family `beta`) answers every item as the primary's stored data say (a rule's
value or the small model's), except one item, whose old question it reads differently on about half the units. The
audit retires that item and the orchestrator proposes a rewrite into the suite's working files; a person approves
it; the next run recollects only that item; the next audit asks the rater only about it, admits it and logs the
figures after; an unchanged audit makes no call, and a rater of the primary's family is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agent_factory import open_project
from agent_factory.errors import SpecError
from agent_factory.evaluators.collect import ModelConfig, ModelSpec, RetryPolicy
from agent_factory.factory.cli.app import app
from agent_factory.factory.simulate import SimConfig, simulate
from agent_factory.factory.store import Store
from agent_factory.factory.store.audit import read_corrections, retired_in_force
from agent_factory.factory.suite.write import build_suite
from tests.fakes.openai_server import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[3]
SPEC = REPO / "specs" / "business_analysis_zh.md"
KEY_ENV = "AGENT_FACTORY_TEST_KEY"
TARGET = "substance.s2_actionable"
NEW_QUESTION = ("Does the answer end with something the user can do now: a result to use, a recommendation, or a "
                "next step named in it?")
_ITEM = re.compile(r"^- (\S+): (.*)\n  evidence: (.*)$", re.M)
_BLOCK = re.compile(r'<evidence id="([^"]+)" unit="([^"]+)"')
_HEAD = re.compile(r"^Evidence for .* (\S+):$", re.M)


def _h(*parts: str) -> int:
    return int(hashlib.sha256("\x1f".join(parts).encode()).hexdigest(), 16)


class Raters:
    """The fake server's answers: the primary model answers each item from (item, unit) alone; the audit rater
    answers as the primary's stored data say, but on the target item's OLD question it differs on about half the
    units; the proposer answers a rewrite with a clearer question."""

    def __init__(self) -> None:
        self.truth: dict[tuple[str, str], str] = {}
        self.old_question = ""

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        schema = body["response_format"]["json_schema"]["schema"]
        if "decision" in schema["properties"]:
            return {"decision": "rewrite", "changes": ["question"], "question": NEW_QUESTION, "evidence_fields": [],
                    "max_chars": None, "tiers": [], "rule": "", "metric_note": "",
                    "rationale": "the raters split on what counts as something to act on"}
        prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
        asked = {m.group(1): (m.group(2), [e.strip() for e in m.group(3).split(",")]) for m in _ITEM.finditer(prompt)}
        unit_of = dict(_BLOCK.findall(prompt))
        out: dict[str, Any] = {}
        for key in schema["properties"]:
            question, ids = asked[key]
            item = key.split(".", 1)[1] if key.startswith("turn_") else key
            units = [unit_of[i] for i in ids if i in unit_of] + _HEAD.findall(prompt) + sorted(set(unit_of.values()))
            unit = units[0]
            value = ("yes", "no")[_h(item, unit) % 2]
            if item.startswith("trajectory.outcome_asked."):
                value = "no"  # unless the rules derived that label (below)
            if body["model"] == "fake-audit":
                # A session's or a user's evidence is its turns': the unit the primary's datum is about is the one
                # the stored data name.
                unit = next((u for u in units if (u, item) in self.truth), unit)
                value = self.truth.get((unit, item), value)
                if item == TARGET and question == self.old_question and _h("flip", unit) % 2:
                    value = "no" if value == "yes" else "yes"
            out[key] = {"value": value, "confidence": 0.9, "evidence_quote": "", "reason": body["model"]}
        return out


def _spec(server: FakeOpenAIServer, model: str, family: str) -> ModelSpec:
    return ModelSpec(model=model, api_base=server.base_url, api_key_env=KEY_ENV, family=family, timeout_s=10.0)


def _config(server: FakeOpenAIServer, *, audit_family: str = "beta") -> ModelConfig:
    return ModelConfig(small=_spec(server, "openai/fake-small", "alpha"),
                       audit=(_spec(server, "openai/fake-audit", audit_family),),
                       retry=RetryPolicy(attempts=2, initial_wait_s=0.01, max_wait_s=0.05))


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path, FakeOpenAIServer, Raters]]:
    """A built suite approved as built, and 20 simulated users ingested and run with the small model."""
    monkeypatch.setenv(KEY_ENV, "test-key-not-secret")
    monkeypatch.chdir(tmp_path)
    simulate(SimConfig(users=20, seed=3), tmp_path / "sim")
    suite = tmp_path / "suite"
    build_suite(SPEC, pack="business_analysis", out=suite)
    assert CliRunner().invoke(app, ["approve", str(suite)]).exit_code == 0
    raters = Raters()
    with FakeOpenAIServer(responder=raters) as server:
        store = tmp_path / "s.duckdb"
        with open_project(store=store, suite=suite, config=_config(server), cache=tmp_path / "cache") as p:
            p.ingest([tmp_path / "sim"])
            assert p.run().model_calls > 0
            raters.old_question = next(d.question for c in p.suite.components for d in c.definitions
                                       if d.id == TARGET)
        with Store(store, read_only=True) as st:
            raters.truth = {(u, i): v for u, i, v in st.con.execute(
                "SELECT unit_id, item, value FROM atomic_data WHERE rater = 'primary'").fetchall()}
            # The outcome label the trajectory rules derived, asked of the rater directly (one check per label).
            raters.truth |= {(u, f"trajectory.outcome_asked.{json.loads(v)}"): "yes" for u, v in st.con.execute(
                "SELECT unit_id, value FROM results WHERE component = 'trajectory' AND metric = 'outcome'"
                " AND unit_id IS NOT NULL").fetchall() if isinstance(json.loads(v), str)}
        server.reset()
        yield store, suite, server, raters


def _audit(store: Path, suite: Path, server: FakeOpenAIServer, **kw: Any) -> Any:
    with open_project(store=store, suite=suite, config=_config(server, **kw), cache=store.parent / "cache") as p:
        return p.audit(sample=150, seed=4, n_boot=200)


def test_the_one_disagreeing_item_is_retired_rewritten_approved_recollected_and_readmitted(
    world: tuple[Path, Path, FakeOpenAIServer, Raters],
) -> None:
    store, suite, server, _raters = world

    first = _audit(store, suite, server)
    asked = dict(server.calls_by_model)
    assert asked.get("fake-audit", 0) > 0 and first.model_calls == server.calls
    assert asked.get("fake-small") == 1  # the one rewrite proposal, by the orchestrator's model
    by_item = {a.item: a for a in first.items}
    assert by_item[TARGET].admitted is False and by_item[TARGET].kappa is not None and by_item[TARGET].kappa < 0.6
    agreeing = [a for a in first.items if a.item != TARGET and a.kappa is not None]
    assert agreeing and all(a.admitted for a in agreeing), [(a.item, a.kappa) for a in agreeing if not a.admitted]
    assert first.retired == (TARGET,)
    actions = [(c.item, c.action) for c in first.corrections]
    assert actions == [(TARGET, "retired"), (TARGET, "rewrite_proposed")]
    assert "kappa" in first.corrections[0].why and first.corrections[0].before["kappa"] == by_item[TARGET].kappa

    # The run after the audit recollects nothing and reruns only the analyses that read the item.
    server.reset()
    with open_project(store=store, suite=suite, config=_config(server), cache=store.parent / "cache") as p:
        after = p.run()
    assert after.plan.definitions_recollected == 0 and after.items["collected"] == 0 and server.calls == 0
    assert 0 < after.plan.analyses_rerun < after.plan.analyses_total
    assert "retired" in after.plan.trigger
    runner = CliRunner()
    with Store(store, read_only=True) as st:
        assert retired_in_force(st) == {TARGET}

    # The proposal is in the working files: diff names that item alone; a person approves it.
    res = runner.invoke(app, ["diff", str(suite / "approved"), str(suite), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert [(c["id"], c["old_version"], c["new_version"]) for c in d["definitions_changed"]] == [(TARGET, "1", "2")]
    assert "question" in d["definitions_changed"][0]["fields"] and d["recollect"] == 1
    assert runner.invoke(app, ["approve", str(suite), "--by", "ana"]).exit_code == 0

    # The next run recollects only that item (the primary model asked about it alone).
    server.reset()
    with open_project(store=store, suite=suite, config=_config(server), cache=store.parent / "cache") as p:
        report = p.run()
    assert report.plan.definitions_recollected == 1
    keys = {k.split(".", 1)[1] if k.startswith("turn_") else k
            for body in server.requests for k in body["response_format"]["json_schema"]["schema"]["properties"]}
    assert keys == {TARGET} and set(server.calls_by_model) == {"fake-small"}

    # The re-audit asks the rater about that item only, admits it and logs the figures after.
    server.reset()
    second = _audit(store, suite, server)
    keys = {k.split(".", 1)[1] if k.startswith("turn_") else k
            for body in server.requests for k in body["response_format"]["json_schema"]["schema"]["properties"]}
    assert keys == {TARGET} and set(server.calls_by_model) == {"fake-audit"}
    readmitted = {a.item: a for a in second.items}[TARGET]
    assert readmitted.admitted and readmitted.kappa == pytest.approx(1.0)
    assert [(c.item, c.action) for c in second.corrections] == [(TARGET, "rewrite_approved")]
    assert second.corrections[0].after["kappa"] == pytest.approx(1.0)
    with Store(store, read_only=True) as st:
        assert retired_in_force(st) == frozenset()
        log = [(c.item, c.action) for c in read_corrections(st)]
    assert log == [(TARGET, "retired"), (TARGET, "rewrite_proposed"), (TARGET, "rewrite_approved")]

    # An unchanged audit makes no call.
    server.reset()
    third = _audit(store, suite, server)
    assert server.calls == 0 and third.model_calls == 0 and third.corrections == ()


def test_a_rater_of_the_primary_family_is_refused_naming_both(
    world: tuple[Path, Path, FakeOpenAIServer, Raters],
) -> None:
    store, suite, server, _raters = world
    with pytest.raises(SpecError, match=r"fake-audit \(alpha\).*fake-small \(alpha\)"):
        _audit(store, suite, server, audit_family="alpha")
    assert server.calls == 0
