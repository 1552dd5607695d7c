"""Rule-derived outcome labels against the same label asked of a model directly (issue 33 point 6): the pure
comparison (the model's label from its answers, kappa and the confusion table, checked against scikit-learn), and
the whole path over real HTTP to the local OpenAI-compatible test server: a simulated store run with a small
model of family `alpha`, its sessions' outcome labels derived by Trajectory's rule, asked of `openai/fake-audit`
(family `beta`) whose planted answers equal the rule's label on all but k conversations."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sklearn.metrics import cohen_kappa_score

from agent_factory import open_project
from agent_factory.evaluators.audit.model import Rating
from agent_factory.evaluators.collect import ModelConfig, ModelSpec, RetryPolicy
from agent_factory.evaluators.collect.prompt import template_dir
from agent_factory.factory.loops.audit.outcomes import (
    ASKED,
    ASKED_ITEMS,
    LABELS,
    OUTCOME_ITEM,
    compare_outcomes,
    model_labels,
    outcome_agreement,
    rule_labels,
)
from agent_factory.factory.project import Project
from agent_factory.factory.simulate import SimConfig, simulate
from tests.evaluators.test_collect_support import hashed_answers
from tests.fakes.openai_server import FakeOpenAIServer

KEY_ENV = "AGENT_FACTORY_TEST_KEY"
AUDIT = "openai/fake-audit"
RATER = f"audit:{AUDIT}"
_SESSION = re.compile(r"^Evidence for .* (\S+):$", re.M)


# ---- pure ---------------------------------------------------------------------------------------------------

def _answers(rater: str, unit: str, yes: set[str]) -> list[Rating]:
    return [Rating(unit, "u", ASKED[label].id, rater, "yes" if label in yes else "no") for label in LABELS]


def test_the_models_label_is_the_worst_it_said_yes_to_and_none_when_it_said_yes_to_none() -> None:
    got = model_labels([*_answers("m", "c1", {"smooth", "struggled"}), *_answers("m", "c2", {"smooth"}),
                        *_answers("m", "c3", set()), *_answers("m", "c4", {"blocked", "smooth"}),
                        Rating("c5", "u", "trajectory.request_replay", "m", "yes")])
    assert got == {("m", "c1"): "struggled", ("m", "c2"): "smooth", ("m", "c3"): None, ("m", "c4"): "blocked"}


def test_kappa_and_confusion_of_the_rules_labels_against_the_models_agree_with_scikit_learn() -> None:
    # 30 conversations of 10 users; the model agrees with the rule on all but 4, and gives no label on one.
    rule_of = [("smooth", "struggled", "blocked")[i % 3] if i % 5 else "struggled" for i in range(30)]
    rule = {f"c{i:02d}": (f"u{i % 10}", label) for i, label in enumerate(rule_of)}
    rule |= {"c-open": ("u0", "censored"), "c-unknown": ("u1", "undetermined")}
    flipped = {"c01": "blocked", "c02": "smooth", "c07": "smooth", "c22": "blocked"}
    model: dict[tuple[str, str], str | None] = {("m", u): flipped.get(u, label) for u, (_user, label) in rule.items()
                                                if label in LABELS}
    model[("m", "c29")] = None
    out = compare_outcomes(rule, model, raters=["m"], seed=1, n_boot=300)
    kept = sorted(u for u, (_user, label) in rule.items() if label in LABELS and u != "c29")
    expected = cohen_kappa_score([rule[u][1] for u in kept], [model[("m", u)] for u in kept])
    a = out.agreement
    assert a is not None and a.item == OUTCOME_ITEM and a.component == "trajectory"
    assert a.raters == ("m", "primary") and a.kappa_method == "cohen" and a.n == 29
    assert a.kappa == pytest.approx(expected) and 0.5 < expected < 1.0
    assert a.kappa_low is not None and a.kappa_high is not None and a.kappa_low <= a.kappa <= a.kappa_high
    assert a.reason is not None and "asked of the model directly" in a.reason
    (c,) = out.confusion
    assert (c.rater, c.n, c.agree) == ("m", 29, 25)
    off = {(r, m): k for r, row in c.counts.items() for m, k in row.items() if r != m and k}
    assert off == dict(Counter((rule[u][1], m) for u, m in flipped.items())) and sum(off.values()) == 4
    assert out.conversations == 30 and out.unlabelled == {"m": 1}
    assert out.left_out == {"the rule's label is censored": 1, "the rule's label is undetermined": 1}
    assert out.note() == ("outcome labels, rule vs asked directly: kappa 0.789 over 29 conversations; m: 25 of 29 "
                          "agree (disagree: blocked->smooth 1, struggled->blocked 2, struggled->smooth 1), 1 given no "
                          "label")


def test_no_model_label_gives_no_agreement() -> None:
    out = compare_outcomes({"c1": ("u1", "smooth")}, {("m", "c1"): None}, raters=["m"], n_boot=50)
    assert out.agreement is None and out.unlabelled == {"m": 1} and out.confusion[0].n == 0


# ---- over HTTP ----------------------------------------------------------------------------------------------

class Planted:
    """The fake server's answers: the primary model's hashed (so the rule's data vary); the audit rater says yes
    to exactly the planted label of the session the prompt names, no to the others."""

    def __init__(self) -> None:
        self.labels: dict[str, str] = {}

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if body["model"] != "fake-audit":
            return hashed_answers(body)
        prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
        (session,) = _SESSION.findall(prompt)
        planted = self.labels[session]
        return {key: {"value": "yes" if key == ASKED[planted].id else "no", "confidence": 0.9, "evidence_quote": "",
                      "reason": "planted"} for key in body["response_format"]["json_schema"]["schema"]["properties"]}


def _spec(server: FakeOpenAIServer, model: str, family: str) -> ModelSpec:
    return ModelSpec(model=model, api_base=server.base_url, api_key_env=KEY_ENV, family=family, timeout_s=10.0)


def _config(server: FakeOpenAIServer) -> ModelConfig:
    return ModelConfig(small=_spec(server, "openai/fake-small", "alpha"),
                       retry=RetryPolicy(attempts=3, initial_wait_s=0.01, max_wait_s=0.05))


@pytest.fixture(scope="module")
def planted() -> Planted:
    return Planted()


@pytest.fixture(scope="module")
def server(planted: Planted) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(responder=planted) as s:
        yield s


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "test-key-not-secret")


@pytest.fixture(scope="module")
def primary_store(server: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10 simulated users ingested and run with the small model `openai/fake-small` (family alpha) as primary."""
    root = tmp_path_factory.mktemp("outcome-labels")
    simulate(SimConfig(users=10, seed=5), root / "sim")
    store = root / "store.duckdb"
    mp = pytest.MonkeyPatch()
    mp.setenv(KEY_ENV, "test-key-not-secret")
    try:
        with open_project(store=store, pack="business_analysis", config=_config(server), cache=root / "cache") as p:
            p.ingest([root / "sim"])
            p.run()
    finally:
        mp.undo()
    return store


@pytest.fixture
def project(primary_store: Path, server: FakeOpenAIServer, tmp_path: Path) -> Iterator[Project]:
    store = tmp_path / "store.duckdb"
    shutil.copy(primary_store, store)
    server.reset()
    with open_project(store=store, pack="business_analysis", config=_config(server), cache=tmp_path / "cache") as p:
        yield p


def _ask(p: Project, server: FakeOpenAIServer, conversations: list[str]) -> Any:
    return outcome_agreement(p.store(write=True), conversations=conversations, raters=[_spec(server, AUDIT, "beta")],
                             pack=p.pack, config=p.model_config, cache=p.cache, redactor=p.redactor,
                             templates=template_dir(p.suite.files), seed=2, n_boot=300)


def test_planted_answers_equal_to_the_rule_but_on_k_conversations_give_the_expected_kappa(
    project: Project, server: FakeOpenAIServer, planted: Planted,
) -> None:
    p = project
    st = p.store()
    conversations = [u for u, in st.con.execute(
        "SELECT unit_id FROM units WHERE layer = 'conversation' ORDER BY unit_id").fetchall()]
    rule = rule_labels(st, conversations)
    decided = sorted(u for u, (_user, label) in rule.items() if label in LABELS)
    assert len({rule[u][1] for u in decided}) >= 2 and len(decided) >= 8  # labels of two kinds at least
    k = 3
    flip = decided[:: max(1, len(decided) // k)][:k]
    planted.labels = {u: (LABELS[(LABELS.index(rule[u][1]) + 1) % 3] if u in flip else rule[u][1]) for u in decided}

    out = _ask(p, server, conversations)
    print(f"\n{len(decided)} of {len(conversations)} conversations decided by the rule; {out.note()}")
    expected = cohen_kappa_score([rule[u][1] for u in decided], [planted.labels[u] for u in decided])
    a = out.agreement
    assert a is not None and a.raters == (RATER, "primary") and a.n == len(decided)
    assert a.kappa == pytest.approx(expected)
    (c,) = out.confusion
    assert (c.n, c.agree) == (len(decided), len(decided) - k)
    assert out.conversations == len(decided) and out.unlabelled == {}
    assert sum(out.left_out.values()) == len(conversations) - len(decided)
    # Asked once per decided conversation, through the audit rater only; the answers stored beside the primary's.
    assert out.model_calls == server.calls == server.calls_by_model["fake-audit"] == len(decided)
    stored = p.store().con.execute(
        "SELECT count(*), count(DISTINCT unit_id) FROM atomic_data WHERE rater = ? AND item IN (SELECT unnest(?))",
        [RATER, sorted(ASKED_ITEMS)]).fetchall()
    assert stored == [(3 * len(decided), len(decided))]

    server.reset()
    again = _ask(p, server, conversations)
    assert server.calls == 0 and again.model_calls == 0  # an unchanged audit asks nothing
    assert again.agreement == a and again.confusion == out.confusion
