"""One model call per unit across components, and `batch = "conversation"`: the items of every turn of a
conversation in one call (one per juror for the unsure ones), counted at the fake OpenAI-compatible server,
with the same data, keys and cache as unit by unit."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agent_factory.adapters.model import Conversation
from agent_factory.evaluators import kernel
from agent_factory.evaluators.collect import cascade as cascade_module
from agent_factory.evaluators.collect.cache import DatumCache
from agent_factory.evaluators.collect.cascade import Cascade
from agent_factory.evaluators.collect.config import ModelConfig
from agent_factory.evaluators.core import AtomicDatum, DataDefinition, EngagementView
from agent_factory.evaluators.core.registry import Engagement
from tests.evaluators.test_collect_litellm import litellm_config
from tests.evaluators.test_collect_support import (
    ANSWERS,
    CONSISTENT,
    MODEL_ITEMS,
    PACK,
    RULE_ITEM,
    SPECIFIC,
    collect_conversations,
    collect_units,
    item_answers,
    make_turn,
)
from tests.fakes.openai_server import FakeOpenAIServer, FaultPlan

# Two components on the turn layer: their model-tier items still go to the model in one call per unit.
OTHER = CONSISTENT.model_copy(update={"id": "conduct.tc_consistent", "component": "conduct"})
PLAN_DEFS = {"trace": {"substance": (RULE_ITEM, ANSWERS, SPECIFIC), "conduct": (OTHER,)}}
TURNS_PER_CONV = 3


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_FACTORY_TEST_KEY", "test-key-not-secret")


def _users(n_users: int = 2, convs: int = 2) -> list[kernel.UserUnits]:
    users = []
    i = 0
    for u in range(n_users):
        conversations = []
        for c in range(convs):
            cid = f"conv-{u}-{c}"
            turns = []
            for k in range(TURNS_PER_CONV):
                t = make_turn(i)
                turns.append(t.model_copy(update={"conversation_id": cid, "user_id": f"user-{u}", "index": k}))
                i += 1
            conversations.append(Conversation(id=cid, user_id=f"user-{u}", turns=tuple(turns)))
        view = EngagementView(engagement=Engagement(id=f"eng-{u}", user_id=f"user-{u}"),
                              conversations=tuple(conversations), horizon=None)
        users.append(kernel.UserUnits(user_key=f"user-{u}", view=view, excluded=()))
    return users


def _kernel_run(cascade: Cascade, users: list[kernel.UserUnits]) -> list[AtomicDatum]:
    plan = kernel.CollectPlan(definitions=PLAN_DEFS, pack=PACK)
    return [d for b in kernel.collect(users, plan, cascade) for d in b.data]


def _content(data: list[AtomicDatum]) -> list[tuple[Any, ...]]:
    """What a datum says (not what its call cost: a batch shares tokens differently)."""
    return sorted((d.unit_id, d.item, d.value, d.reason, d.evidence, d.key, d.collector.tier) for d in data)


def _items_asked(body: dict[str, Any]) -> list[str]:
    return list(body["response_format"]["json_schema"]["schema"]["properties"])


@pytest.mark.parametrize("jury", [False, True], ids=["small", "small+jury"])
def test_calls_per_conversation_unit_and_conversation_batches(fake_openai: FakeOpenAIServer, jury: bool) -> None:
    fake_openai.responder = item_answers
    users = _users()
    turns = sum(len(c.turns) for u in users for c in u.view.conversations)  # type: ignore[union-attr]
    conversations = sum(len(u.view.conversations) for u in users)  # type: ignore[union-attr]
    cfg = litellm_config(fake_openai.base_url)
    if not jury:
        cfg = cfg.model_copy(update={"jury": ()})
    runs: dict[str, tuple[list[AtomicDatum], list[dict[str, Any]]]] = {}
    for batch in ("unit", "conversation"):
        fake_openai.reset()
        data = _kernel_run(Cascade(cfg.model_copy(update={"batch": batch})), users)
        runs[batch] = (data, fake_openai.requests)
    unit_data, unit_calls = runs["unit"]
    conv_data, conv_calls = runs["conversation"]
    small = [b for b in unit_calls if b["model"] == "fake-small"]
    # unit: one call per turn, whatever the number of components; conversation: one per conversation
    assert len(small) == turns
    assert all(len(_items_asked(b)) == 3 for b in small)  # the two components' model items together
    conv_small = [b for b in conv_calls if b["model"] == "fake-small"]
    assert len(conv_small) == conversations
    assert [len(_items_asked(b)) for b in conv_small] == [3 * TURNS_PER_CONV] * conversations
    # the same data: values, reasons, evidence pointers and cache keys
    assert _content(conv_data) == _content(unit_data)
    assert len(unit_data) == 4 * turns
    unsure = {(d.unit_id, d.item) for d in unit_data if d.collector.tier == "jury"}
    if not jury:
        assert len(unit_calls) == turns and len(conv_calls) == conversations
        assert not unsure
        return
    assert unsure  # some items went to the jury
    conversation_of = {t.id: c.id for u in users for c in u.view.conversations for t in c.turns}  # type: ignore[union-attr]
    for calls, groups in ((unit_calls, {u for u, _ in unsure}), (conv_calls, {conversation_of[u] for u, _ in unsure})):
        juror = Counter(b["model"] for b in calls if b["model"] != "fake-small")
        # each juror once per unit (per conversation when batched) that had an unsure item
        assert juror == {"fake-judge-a": len(groups), "fake-judge-b": len(groups)}
    small_unsure = sum(1 for b in conv_small for a in item_answers(b).values() if a["confidence"] < 0.7)
    # the jury is asked about the unsure items only
    for juror in ("fake-judge-a", "fake-judge-b"):
        assert sum(len(_items_asked(b)) for b in conv_calls if b["model"] == juror) == small_unsure == len(unsure)


def test_batched_answers_are_keyed_and_pointed_per_turn(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.responder = item_answers
    turns = [make_turn(i) for i in range(6)]
    cfg = litellm_config(fake_openai.base_url).model_copy(update={"batch": "conversation", "jury": ()})
    data = collect_conversations(Cascade(cfg), turns)
    assert fake_openai.calls == 2
    body = next(b for b in fake_openai.requests if b["model"] == "fake-small")
    keys = _items_asked(body)
    assert keys[:3] == [f"turn_1.{i}" for i in MODEL_ITEMS]
    assert {k.split(".", 1)[0] for k in keys} == {"turn_1", "turn_2", "turn_3"}
    prompt = body["messages"][-1]["content"]
    # each item lists its own turn's evidence only
    for m in re.finditer(r"^- (turn_\d)\.\S+: .*\n  evidence: (.*)$", prompt, re.M):
        assert all(e.strip().startswith(m.group(1) + ".") for e in m.group(2).split(","))
    pointers = 0
    for turn, unit in zip(turns, data, strict=True):
        assert [d.item for d in unit] == [RULE_ITEM.id, *MODEL_ITEMS]
        for d in unit:
            for p in d.evidence:
                pointers += 1
                text = getattr(turn, p.field)
                assert p.unit_id == turn.id and text[p.start:p.end] == text[:24]
    assert pointers == 18  # every model item of every turn, on its own turn


def test_unit_and_conversation_batches_share_cached_answers(fake_openai: FakeOpenAIServer, tmp_path: Path) -> None:
    fake_openai.responder = item_answers
    turns = [make_turn(i) for i in range(9)]
    cfg = litellm_config(fake_openai.base_url)
    for first, second in (("unit", "conversation"), ("conversation", "unit")):
        fake_openai.reset()
        with DatumCache(tmp_path / f"cache-{first}") as cache:
            a = Cascade(cfg.model_copy(update={"batch": first}), cache=cache)
            data = (collect_units(a, turns) if first == "unit" else collect_conversations(a, turns))
            assert a.model_calls == fake_openai.calls > 0
            b = Cascade(cfg.model_copy(update={"batch": second}), cache=cache)
            again = (collect_units(b, turns) if second == "unit" else collect_conversations(b, turns))
            # every model answer reused; the rule item recomputed (rule data are never cached)
            assert b.model_calls == 0 and b.reused == 3 * len(turns) and b.collected == {"rule": len(turns)}
        assert again == data


def test_a_batch_is_cut_at_max_items_between_turns(fake_openai: FakeOpenAIServer,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    fake_openai.responder = item_answers
    monkeypatch.setattr(cascade_module, "MAX_BATCH_ITEMS", 7)  # two turns of three model items fit, not three
    turns = [make_turn(i) for i in range(3)]
    cfg = litellm_config(fake_openai.base_url).model_copy(update={"jury": (), "batch": "conversation"})
    data = collect_conversations(Cascade(cfg), turns)
    assert sorted(len(_items_asked(b)) for b in fake_openai.requests) == [3, 6]
    assert all(d.value in ("yes", "no") for unit in data for d in unit)


def test_a_failed_batch_call_leaves_every_turn_uncollected_and_a_rerun_asks_again(
    fake_openai: FakeOpenAIServer, tmp_path: Path,
) -> None:
    fake_openai.responder = item_answers
    fake_openai.faults = FaultPlan(script=("500",))
    turns = [make_turn(i) for i in range(3)]
    cfg = litellm_config(fake_openai.base_url, attempts=1).model_copy(update={"jury": (), "batch": "conversation"})
    with DatumCache(tmp_path / "cache") as cache:
        data = collect_conversations(Cascade(cfg, cache=cache), turns)
        model = [d for unit in data for d in unit if d.item in MODEL_ITEMS]
        assert len(model) == 9 and all(d.value == "uncollected" and "model error" in (d.reason or "")
                                       for d in model)
        again = collect_conversations(Cascade(cfg, cache=cache), turns)
    assert fake_openai.calls == 2
    assert all(d.value in ("yes", "no") for unit in again for d in unit if d.item in MODEL_ITEMS)


def test_a_one_unit_collector_is_asked_once_per_unit_over_every_component() -> None:
    class Recording:
        """A collector of the one-unit protocol only (no `collect_units`): the kernel asks it unit by unit."""

        def __init__(self) -> None:
            self.inner = Cascade(ModelConfig())
            self.collect_calls: list[tuple[str, int]] = []

        async def collect(self, **kw: Any) -> list[AtomicDatum]:
            self.collect_calls.append((kw["unit_id"], len(kw["definitions"])))
            return await self.inner.collect(**kw)

    users = _users(1, 2)
    rec = Recording()
    one_by_one = _content(_kernel_run(rec, users))  # type: ignore[arg-type]
    assert len(rec.collect_calls) == 2 * TURNS_PER_CONV
    assert all(n == 4 for _, n in rec.collect_calls)  # one collect per unit over both components
    batched = Cascade(ModelConfig(batch="conversation"))
    assert _content(_kernel_run(batched, users)) == one_by_one  # the layer's units in one collect_units


def test_definitions_of_another_layer_are_refused_in_a_batch() -> None:
    from agent_factory.errors import SpecError

    wrong = DataDefinition(id="substance.tc_session", question="?", component="substance", layer="conversation",
                           tiers=("small_model",))
    calls = [kernel.UnitCall(unit_id=t.id, unit=t, definitions=(wrong,)) for t in (make_turn(0), make_turn(1))]
    with pytest.raises(SpecError, match="conversation-layer definition"):
        asyncio.run(Cascade(ModelConfig()).collect_many(batch_id="c", layer="trace", units=calls, pack=PACK))
