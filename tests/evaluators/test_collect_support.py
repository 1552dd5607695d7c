"""Shared material of the collection tests: units, definitions and their rules, a secrets corpus, scripted
models; plus the tests that the corpus itself is what it claims (valid cards, IDs, ...)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import string
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent_factory.adapters.model import Span, Turn
from agent_factory.evaluators.collect.redact import luhn_ok
from agent_factory.evaluators.core import DataDefinition, Projection, RuleAnswer, rule
from agent_factory.evaluators.core.registry import register_rule
from agent_factory.knowledge_packs import load_pack

if TYPE_CHECKING:
    from agent_factory.evaluators.collect.cascade import Cascade
    from agent_factory.evaluators.core import AtomicDatum

PACK = load_pack("default")


# ---- rules and definitions used by the cascade tests ---------------------------------------------------

@register_rule
@rule("substance.tc_answer_present")
def _answer_present(unit: Turn, ctx: Any) -> RuleAnswer:
    """A decided rule: yes when the turn has an answer."""
    return RuleAnswer("yes" if unit.answer else "no", reason="answer present" if unit.answer else "no answer")


@register_rule
@rule("substance.tc_never_decides")
def _never_decides(unit: Turn, ctx: Any) -> RuleAnswer:
    """A rule that always abstains, passing the item to the models."""
    return RuleAnswer(None)


@register_rule
@rule("substance.tc_has_request")
def _has_request(unit: Turn, ctx: Any) -> RuleAnswer:
    """applies_when: only turns with a request."""
    return RuleAnswer("yes" if unit.request else "no", reason="no request" if not unit.request else None)


RULE_ITEM = DataDefinition(
    id="substance.tc_delivered", question="Was an answer delivered?", component="substance", layer="trace",
    rule="substance.tc_answer_present",
)
ANSWERS = DataDefinition(
    id="substance.tc_answers_task", question="Does the answer address the user's request?",
    component="substance", layer="trace", tiers=("small_model", "jury"), applies_when="substance.tc_has_request",
)
SPECIFIC = DataDefinition(
    id="substance.tc_specific", question="Is the answer specific (numbers, names, dates)?",
    component="substance", layer="trace", rule="substance.tc_never_decides", tiers=("rule", "small_model", "jury"),
)
CONSISTENT = DataDefinition(
    id="substance.tc_consistent", question="Is the answer free of internal contradictions?",
    component="substance", layer="trace", tiers=("small_model", "jury"),
    projection=Projection(fields=("request", "answer", "spans")),
)
DEFINITIONS = (RULE_ITEM, ANSWERS, SPECIFIC, CONSISTENT)
MODEL_ITEMS = ("substance.tc_answers_task", "substance.tc_specific", "substance.tc_consistent")


def make_turn(i: int, *, request: str | None = None, answer: str | None = None, span_output: str = "") -> Turn:
    """A small turn with one tool span; text varies with i so each turn is its own unit."""
    return Turn(
        id=f"turn-{i:03d}",
        conversation_id=f"conv-{i // 3:03d}",
        user_id=f"user-{i // 6:03d}",
        index=i % 3,
        request=request if request is not None else f"What was revenue in region {i} for Q3?",
        answer=answer if answer is not None else f"Revenue in region {i} was {100 + i}.5M USD, up {i % 7}% on Q2.",
        delivery="delivered",
        spans=(Span(id=f"span-{i:03d}", trace_id=f"turn-{i:03d}", kind="tool", name="sql",
                    input=f"select revenue from sales where region = {i}",
                    output=span_output or f"{100 + i}.5"),),
    )


def collect_units(cascade: Cascade, turns: Sequence[Turn], definitions: Sequence[DataDefinition] = DEFINITIONS,
                  *, concurrency: int = 4) -> list[list[AtomicDatum]]:
    """The real path, `Cascade.collect`, over several turns at once: `concurrency` workers take the turns in
    order (1: one after the other), and the data come back in turn order."""
    async def run() -> list[list[AtomicDatum]]:
        results: list[list[AtomicDatum]] = [[] for _ in turns]
        todo = iter(enumerate(turns))

        async def worker() -> None:
            for i, turn in todo:
                results[i] = await cascade.collect(unit_id=turn.id, layer="trace", unit=turn,
                                                   definitions=definitions, pack=PACK)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return results

    return asyncio.run(run())


# ---- scripted models -----------------------------------------------------------------------------------

ItemScript = Callable[[str, str], dict[str, Any]]
"""(item id, prompt) -> the item's answer as a dict."""


def scripted(script: ItemScript, *, name: str, calls: list[str] | None = None) -> FunctionModel:
    """A pydantic-ai FunctionModel answering every item of sigma with `script(item, prompt)`."""

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = "\n".join(str(getattr(p, "content", "")) for m in messages for p in getattr(m, "parts", ()))
        if calls is not None:
            calls.append(prompt)
        tool = info.output_tools[0]
        items = list(tool.parameters_json_schema["properties"])
        return ModelResponse(parts=[ToolCallPart(tool_name=tool.name, args={i: script(i, prompt) for i in items})])

    return FunctionModel(fn, model_name=name)


def answer(value: str = "yes", confidence: float = 0.9, quote: str = "", reason: str = "because") -> dict[str, Any]:
    return {"value": value, "confidence": confidence, "evidence_quote": quote, "reason": reason}


def evidence_text(prompt: str, block: str = "answer") -> str:
    """The decoded text of an evidence block in a rendered prompt (string content, or its first string part)."""
    m = re.search(rf'<evidence id="{re.escape(block)}"[^>]*>\n(.*?)\n</evidence>', prompt, re.S)
    if not m:
        return ""
    value = json.loads(m.group(1))
    if isinstance(value, list):
        value = next((v for v in value if isinstance(v, str)), "")
    return str(value)


def hashed_answers(body: dict[str, Any]) -> dict[str, Any]:
    """Fake-server responder: a deterministic answer per (model, item, prompt); some items unsure, jurors may
    disagree; the quote is the first 20 characters of the answer evidence."""
    schema = body["response_format"]["json_schema"]["schema"]
    prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
    quote = evidence_text(prompt)[:20]
    out: dict[str, Any] = {}
    for item in schema["properties"]:
        h = int(hashlib.sha256(f"{body['model']}|{item}|{prompt}".encode()).hexdigest(), 16)
        value = ("yes", "no", "not_applicable")[h % 3] if "judge" in body["model"] else ("yes", "no")[h % 2]
        confidence = 0.4 if (h >> 8) % 3 == 0 else 0.9
        out[item] = answer(value, confidence, quote, f"{body['model']} on {item}")
    return out


_ITEM_LINE = re.compile(r"^- (\S+): (.*)\n  evidence: (.*)$", re.M)
_BLOCK = re.compile(r'<evidence id="([^"]+)"[^>]*>\n(.*?)\n</evidence>', re.S)


def _decoded(raw: str) -> str:
    value = json.loads(raw)
    if isinstance(value, list):
        value = "".join(v if isinstance(v, str) else v.get("injection_flagged", "") for v in value)
    return str(value)


def item_answers(body: dict[str, Any]) -> dict[str, Any]:
    """Fake-server responder that answers each item from its question and its OWN evidence blocks only (as the
    prompt tells a model to): the same answer whatever else the prompt holds, so a unit's prompt and a batch of
    units get the same answers. About a third unsure; jurors may disagree; the quote is the first 24 characters
    of the item's first non-empty evidence block."""
    schema = body["response_format"]["json_schema"]["schema"]
    prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
    items = {m.group(1): (m.group(2), [e.strip() for e in m.group(3).split(",")])
             for m in _ITEM_LINE.finditer(prompt)}
    blocks = {m.group(1): _decoded(m.group(2)) for m in _BLOCK.finditer(prompt)}
    out: dict[str, Any] = {}
    for key in schema["properties"]:
        question, ids = items[key]
        texts = [blocks.get(i, "") for i in ids]
        h = int(hashlib.sha256("\x1f".join([body["model"], question, *texts]).encode()).hexdigest(), 16)
        value = ("yes", "no", "not_applicable")[h % 3] if "judge" in body["model"] else ("yes", "no")[h % 2]
        first = next((t for t in texts if t.strip()), "")
        out[key] = answer(value, 0.4 if (h >> 8) % 3 == 0 else 0.9, first.strip()[:24],
                          f"{body['model']} read {len(ids)} field(s)")
    return out


def collect_conversations(cascade: Cascade, turns: Sequence[Turn],
                          definitions: Sequence[DataDefinition] = DEFINITIONS, *,
                          concurrency: int = 4) -> list[list[AtomicDatum]]:
    """The batched path, `Cascade.collect_many`, over the turns grouped by conversation (in order of first
    appearance; `concurrency` conversations at once): the data come back in turn order."""
    from agent_factory.evaluators.kernel import UnitCall

    groups: dict[str, list[int]] = {}
    for i, t in enumerate(turns):
        groups.setdefault(t.conversation_id or t.id, []).append(i)

    async def run() -> list[list[AtomicDatum]]:
        results: list[list[AtomicDatum]] = [[] for _ in turns]
        todo = iter(groups.items())

        async def worker() -> None:
            for conv, idx in todo:
                calls = [UnitCall(unit_id=turns[i].id, unit=turns[i], definitions=definitions) for i in idx]
                batch = await cascade.collect_many(batch_id=conv, layer="trace", units=calls, pack=PACK)
                for i, data in zip(idx, batch, strict=True):
                    results[i] = data

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return results

    return asyncio.run(run())


# ---- the secrets corpus --------------------------------------------------------------------------------

def _luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    for check in string.digits:
        if luhn_ok(body + check):
            return body + check
    raise AssertionError("unreachable")


def _cn_id(rng: random.Random) -> str:
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    body = (f"{rng.choice(['110105', '310104', '440305', '510107'])}{rng.randint(1950, 2005)}"
            f"{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}{rng.randint(0, 999):03d}")
    return body + "10X98765432"[sum(int(c) * w for c, w in zip(body, weights, strict=True)) % 11]


def _iban(rng: random.Random) -> str:
    country, bban = rng.choice([("DE", 18), ("GB", 18), ("FR", 23), ("NL", 14)])
    chars = "".join(rng.choice(string.digits) for _ in range(bban))
    if country in ("GB", "NL"):
        chars = "".join(rng.choice(string.ascii_uppercase) for _ in range(4)) + chars[4:]
    numeric = "".join(str(int(c, 36)) for c in chars + country + "00")
    raw = f"{country}{98 - int(numeric) % 97:02d}{chars}"
    return " ".join(raw[i:i + 4] for i in range(0, len(raw), 4)) if rng.random() < 0.5 else raw


def secrets_corpus(n: int = 100, seed: int = 7) -> list[tuple[str, str]]:
    """n (kind, secret) pairs: emails, phones, API keys, cards, IBANs, Chinese IDs, keyword secrets."""
    rng = random.Random(seed)
    alnum = string.ascii_letters + string.digits

    def rand(k: int, chars: str = alnum) -> str:
        return "".join(rng.choice(chars) for _ in range(k))

    makers: list[tuple[str, Callable[[], str]]] = [
        ("email", lambda: f"{rand(6, string.ascii_lowercase)}.{rand(4, string.ascii_lowercase)}@"
                          f"{rng.choice(['example.com', 'corp.example.org', '163.com', 'mail.example.cn'])}"),
        ("phone", lambda: f"1{rng.choice('3456789')}{rand(9, string.digits)}"),
        ("phone", lambda: f"+86 1{rng.choice('3589')}{rand(1, string.digits)} {rand(4, string.digits)} "
                          f"{rand(4, string.digits)}"),
        ("phone", lambda: f"+44 20 {rand(4, string.digits)} {rand(4, string.digits)}"),
        ("phone", lambda: f"({rng.randint(201, 989)}) {rng.randint(200, 999)}-{rand(4, string.digits)}"),
        ("api_key", lambda: f"sk-proj-{rand(32)}"),
        ("api_key", lambda: f"AKIA{rand(16, string.ascii_uppercase + string.digits)}"),
        ("api_key", lambda: f"ghp_{rand(36)}"),
        ("api_key", lambda: f"xoxb-{rand(12, string.digits)}-{rand(24)}"),
        ("card", lambda: _luhn_complete("4", 16, rng)),
        ("card", lambda: " ".join(re.findall(".{4}", _luhn_complete("5", 16, rng)))),
        ("card", lambda: "-".join(re.findall(".{4}", _luhn_complete("4", 16, rng)))),
        ("card", lambda: _luhn_complete("37", 15, rng)),
        ("iban", lambda: _iban(rng)),
        ("cn_id", lambda: _cn_id(rng)),
        ("secret", lambda: rand(20, "0123456789abcdef") + rand(12, "0123456789abcdef")),
    ]
    out = []
    for k in range(n):
        kind, make = makers[k % len(makers)]
        out.append((kind, make()))
    return out


def embed(kind: str, secret: str) -> str:
    """A sentence carrying the secret the way people write it."""
    if kind == "secret":
        return f"the api token: {secret} works"
    return {
        "email": "please write to {} about it",
        "phone": "call me on {} tomorrow",
        "api_key": "my key is {} if you need it",
        "card": "charge card {} for the report",
        "iban": "wire it to {} today",
        "cn_id": "身份证号 {} 已提交",
    }[kind].format(secret)


def test_corpus_items_are_valid_of_their_kind() -> None:
    corpus = secrets_corpus()
    assert len(corpus) == 100 and len({s for _, s in corpus}) == 100
    kinds = {k for k, _ in corpus}
    assert kinds == {"email", "phone", "api_key", "card", "iban", "cn_id", "secret"}
    for kind, s in corpus:
        if kind == "card":
            digits = re.sub(r"\D", "", s)
            assert luhn_ok(digits) and 13 <= len(digits) <= 19
        if kind == "iban":
            compact = s.replace(" ", "")
            numeric = "".join(str(int(c, 36)) for c in compact[4:] + compact[:4])
            assert int(numeric) % 97 == 1


def test_scripted_model_answers_every_item() -> None:
    from pydantic_ai import Agent

    from agent_factory.evaluators.collect.schema import build_sigma

    sigma = build_sigma([ANSWERS, SPECIFIC])
    out = Agent(scripted(lambda item, prompt: answer("no", 0.3), name="s"), output_type=sigma).run_sync("x").output
    assert [getattr(out, f).value for f in type(out).model_fields] == ["no", "no"]
