"""The litellm path, for real, over HTTP to the fake OpenAI-compatible server on 127.0.0.1: faults and
retries, a rerun with zero calls, secrets that never leave, and SIGKILL at several points then a rerun."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agent_factory.evaluators.collect.cache import DatumCache
from agent_factory.evaluators.collect.cascade import Cascade
from agent_factory.evaluators.collect.config import BudgetLimits, ModelConfig, ModelSpec, RetryPolicy
from agent_factory.evaluators.collect.reasons import is_transient
from agent_factory.evaluators.core import AtomicDatum, DataDefinition, Projection
from tests.evaluators.test_collect_support import (
    DEFINITIONS,
    MODEL_ITEMS,
    RULE_ITEM,
    collect_conversations,
    collect_units,
    embed,
    hashed_answers,
    make_turn,
    secrets_corpus,
)
from tests.fakes.openai_server import FAULT_KINDS, FakeOpenAIServer, FaultPlan

KEY_ENV = "AGENT_FACTORY_TEST_KEY"


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "test-key-not-secret")


def litellm_config(base_url: str, *, concurrency: int = 8, attempts: int = 6,
                   timeout_s: float = 5.0) -> ModelConfig:
    # A short timeout only where a test injects "timeout" faults: on a loaded machine an attempt can time
    # out before the server reads it, so the cascade counts an attempt that the server never saw.
    def spec(model: str, family: str) -> ModelSpec:
        return ModelSpec(model=model, api_base=base_url, api_key_env=KEY_ENV, family=family,
                         timeout_s=timeout_s)

    return ModelConfig(
        small=spec("openai/fake-small", "small-fam"),
        jury=(spec("openai/fake-judge-a", "judge-a"), spec("openai/fake-judge-b", "judge-b")),
        concurrency=concurrency,
        retry=RetryPolicy(attempts=attempts, initial_wait_s=0.01, max_wait_s=0.05),
    )


def collect(cascade: Cascade, turns: list[Any], definitions: tuple[DataDefinition, ...] = DEFINITIONS, *,
            concurrency: int | None = None) -> list[list[AtomicDatum]]:
    return collect_units(cascade, turns, definitions, concurrency=concurrency or cascade.config.concurrency)


def dump(data: list[list[AtomicDatum]]) -> list[list[dict[str, Any]]]:
    return [[d.model_dump(mode="json") for d in unit] for unit in data]


def test_faults_end_collected_or_reasoned_and_a_rerun_makes_zero_calls(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.responder = hashed_answers
    fake_openai.faults = FaultPlan(rate=0.3, seed=11, timeout_s=1.0)
    turns = [make_turn(i) for i in range(40)]
    cfg = litellm_config(fake_openai.base_url, timeout_s=0.3)  # below the 1 s stall of a "timeout" fault
    with DatumCache(tmp_path / "cache") as cache:
        first = Cascade(cfg, cache=cache)
        data = collect(first, turns)
        # no hidden SDK or litellm retries: the server never sees more requests than the attempts counted
        # (it may see fewer: an attempt can time out before its request is read)
        assert first.model_calls - 3 <= fake_openai.calls <= first.model_calls
        served = Counter(fake_openai.faults_served)
        assert all(served[k] > 0 for k in FAULT_KINDS), served
        flat = [d for unit in data for d in unit]
        assert len(flat) == 160
        for d in flat:
            assert d.value in ("yes", "no", "not_applicable") or (d.value == "uncollected" and d.reason)
        assert {d.collector.tier for d in flat} == {"rule", "small_model", "jury"}
        assert first.tokens > 0
        transient = [d for d in flat if d.value == "uncollected" and is_transient(d.reason)]
        before = fake_openai.calls
        second = Cascade(cfg, cache=cache)
        again = collect(second, turns)
        if not transient:  # the usual case: with 6 attempts a call fails for good with probability 0.3**6
            assert fake_openai.calls == before and second.model_calls == 0
            assert again == data and second.reused == 120 and second.collected == {"rule": 40}
        else:  # only the units with a transient failure are asked again
            retried = {d.unit_id for d in transient}
            assert second.model_calls <= len(retried) * 3 * cfg.retry.attempts
            for unit, unit_again in zip(data, again, strict=True):
                if unit[0].unit_id not in retried:
                    assert unit_again == unit


def test_a_secrets_corpus_never_reaches_the_server(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.responder = hashed_answers
    corpus = secrets_corpus(100)
    turns = []
    for u in range(20):
        chunk = corpus[u * 5:(u + 1) * 5]
        turns.append(make_turn(
            u,
            request=f"Q{u}: {embed(*chunk[0])}; also {embed(*chunk[1])}.",
            answer=f"Revenue {u}.5M. {embed(*chunk[2])}. Then {embed(*chunk[3])}.",
            span_output=f"row {u}: {embed(*chunk[4])}",
        ))
    everything = tuple(d.model_copy(update={"projection": Projection(fields=("request", "answer", "spans"))})
                       if d.tiers != ("rule",) else d for d in DEFINITIONS)
    cascade = Cascade(litellm_config(fake_openai.base_url))
    data = collect(cascade, turns, everything)
    assert fake_openai.calls >= 20
    seen = fake_openai.seen_text()
    leaked = [s for _, s in corpus if s in seen]
    assert leaked == []
    digits_seen = re.sub(r"\D", "", seen)
    for kind, s in corpus:
        if kind in ("card", "cn_id"):
            assert re.sub(r"\D", "", s) not in digits_seen
    for placeholder in ("[EMAIL]", "[PHONE]", "[API_KEY]", "[CARD]", "[IBAN]", "[CN_ID]", "[SECRET]"):
        assert placeholder in seen
    # quotes (the first 20 characters of the redacted answer) point at the original characters
    pointers = [(turn, p) for turn, unit in zip(turns, data, strict=True) for d in unit for p in d.evidence]
    assert len(pointers) >= 20
    for turn, p in pointers:
        assert (p.unit_id, p.field, p.start) == (turn.id, "answer", 0)
        assert turn.answer is not None and turn.answer[:p.end].startswith("Revenue ")


# ---- SIGKILL at several points ---------------------------------------------------------------------

KILL_UNITS = 12


def _kill_run(base_url: str, cache_dir: str, batched: bool = False) -> list[list[dict[str, Any]]]:
    with DatumCache(cache_dir) as cache:
        if batched:  # a conversation's three turns per call: as many units, fewer and longer calls
            cfg = litellm_config(base_url, concurrency=1).model_copy(update={"batch": "conversation"})
            turns = [make_turn(i) for i in range(2 * KILL_UNITS)]
            return dump(collect_conversations(Cascade(cfg, cache=cache), turns, concurrency=1))
        cascade = Cascade(litellm_config(base_url, concurrency=1), cache=cache)
        return dump(collect(cascade, [make_turn(i) for i in range(KILL_UNITS)], concurrency=1))


def _child_run(base_url: str, cache_dir: str, out: str, batched: bool = False) -> None:
    """One run in a forked process (a fresh process state, the same imported modules): data as JSON."""
    Path(out).write_text(json.dumps(_kill_run(base_url, cache_dir, batched)))


def _fingerprint(body: dict[str, Any]) -> str:
    return json.dumps([body["model"], body["messages"]], sort_keys=True)


@pytest.mark.parametrize(("batched", "kill_at"), [(False, (3, 9, 17)), (True, (2, 5, 9))],
                         ids=["unit", "conversation"])
def test_sigkill_at_several_points_then_rerun_repeats_no_answered_call(
    tmp_path: Path, batched: bool, kill_at: tuple[int, ...],
) -> None:
    def slow_answers(body: dict[str, Any]) -> dict[str, Any]:
        time.sleep(0.04)  # a call stays in flight long enough to be killed in the middle of it
        return hashed_answers(body)

    ctx = multiprocessing.get_context("fork")
    with FakeOpenAIServer(responder=slow_answers) as server:
        # reference: one uninterrupted run (here, so the children inherit litellm already imported and warm)
        expected = _kill_run(server.base_url, str(tmp_path / "ref-cache"), batched)
        reference = [_fingerprint(b) for b in server.requests]
        assert len(set(reference)) == len(reference) > max(kill_at)  # some units went to the jury
        server.reset()

        cache_dir, out = str(tmp_path / "cache"), tmp_path / "out.json"
        in_flight: list[str] = []
        for target in kill_at:
            p = ctx.Process(target=_child_run, args=(server.base_url, cache_dir, str(out), batched))
            p.start()
            deadline = time.monotonic() + 30
            while server.calls < target and p.is_alive() and time.monotonic() < deadline:
                time.sleep(0.002)
            assert p.is_alive(), "the run ended before the kill point"
            os.kill(p.pid, signal.SIGKILL)
            p.join(10)
            assert p.exitcode == -signal.SIGKILL
            in_flight.append(_fingerprint(server.records[-1].body))
        assert not out.exists()
        p = ctx.Process(target=_child_run, args=(server.base_url, cache_dir, str(out), batched))
        p.start()
        p.join(60)
        assert p.exitcode == 0
        calls = [_fingerprint(b) for b in server.requests]

    assert json.loads(out.read_text()) == expected  # identical data
    assert set(calls) == set(reference)
    repeated = Counter(calls) - Counter(set(calls))
    # only a call that was in flight (unanswered) at a kill may be made again, once per kill
    assert set(repeated) <= set(in_flight)
    assert len(calls) <= len(reference) + len(in_flight)
    data = json.loads(out.read_text())
    assert all(unit[0]["item"] == RULE_ITEM.id for unit in data)
    assert {d["item"] for unit in data for d in unit} == {RULE_ITEM.id, *MODEL_ITEMS}


def test_cost_from_the_local_cost_map_and_a_cost_budget(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.responder = hashed_answers
    known = ModelSpec(model="openai/gpt-4o-mini", api_base=fake_openai.base_url, api_key_env=KEY_ENV,
                      family="openai", timeout_s=2.0)
    cascade = Cascade(ModelConfig(small=known))
    data = collect(cascade, [make_turn(i) for i in range(3)])
    assert fake_openai.calls == 3 and cascade.cost_usd > 0
    assert sum(d.cost_usd for u in data for d in u) == pytest.approx(cascade.cost_usd)
    assert all(d.cost_usd > 0 for u in data for d in u if d.item in MODEL_ITEMS)
    unknown = Cascade(litellm_config(fake_openai.base_url))  # fake-small is not in the cost map: 0, tokens count
    collect(unknown, [make_turn(9)])
    assert unknown.cost_usd == 0 and unknown.tokens > 0
    fake_openai.reset()
    capped = Cascade(ModelConfig(small=known, budget=BudgetLimits(cost_usd=1e-9), concurrency=1))
    data = collect(capped, [make_turn(i) for i in range(3, 6)], concurrency=1)
    assert fake_openai.calls == 1 == capped.model_calls
    assert capped.uncollected == {"budget exhausted": 6}
