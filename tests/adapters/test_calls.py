"""Client-only call traces grouped into conversations and turns; a turn's tokens counted once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_factory.adapters.assemble import assemble_turn, delivery_of, turn_usage
from agent_factory.adapters.calls import group_calls, group_key, is_call_trace
from agent_factory.adapters.model import Span, TokenUsage
from agent_factory.adapters.otel import OtlpJsonAdapter

PRODUCERS = Path(__file__).resolve().parents[1] / "fixtures" / "producers"
CLIENT = PRODUCERS / "genai_client"
SESSION_AND_USER = ("session.id", "user.id", "gen_ai.conversation.id")


def _traces(path: Path, *, strip: tuple[str, ...] = ()) -> dict[str, list[Span]]:
    out: dict[str, list[Span]] = {}
    for s in OtlpJsonAdapter().read(path):
        assert isinstance(s, Span)
        s = s.model_copy(update={"attributes": {k: v for k, v in s.attributes.items() if k not in strip}})
        out.setdefault(s.trace_id, []).append(s)
    return out


@pytest.mark.skipif(not CLIENT.is_dir(), reason="no genai_client fixture")
def test_without_session_ids_the_message_history_groups_the_calls() -> None:
    truth = json.loads((CLIENT / "truth.json").read_text(encoding="utf-8"))
    traces = _traces(CLIENT / "traces.json", strip=SESSION_AND_USER)
    assert all(is_call_trace(t) for t in traces.values()) and len(traces) == 22
    groups: dict[str, list[list[Span]]] = {}
    for t in traces.values():
        groups.setdefault(group_key(t), []).append(t)
    turns = [turn for key, ts in groups.items() for turn in group_calls(ts, key=key)]
    assert sorted(t.request for t in turns) == sorted(w["request"] for w in truth["turns"])
    session_of = {w["request"]: w["session_id"] for w in truth["turns"]}
    index_of = {w["request"]: w["index_in_session"] for w in truth["turns"]}
    by_conv: dict[str, list] = {}
    for t in turns:
        by_conv.setdefault(t.conversation_id, []).append(t)
    for conv in by_conv.values():
        # No conversation mixes two of the app's sessions, and its turns keep their order.
        assert len({session_of[t.request] for t in conv}) == 1
        assert [index_of[t.request] for t in sorted(conv, key=lambda t: t.index)] == \
            sorted(index_of[t.request] for t in conv)
    # The app dropped the failed exchange before its user retried: that history starts afresh, so the retry
    # opens a conversation of its own; every other session is whole.
    assert len(by_conv) == len({w["session_id"] for w in truth["turns"]}) + 1


def _llm(sid: str, tokens: TokenUsage | None, *, parent: str | None = "root", **attrs: object) -> Span:
    return Span(id=sid, trace_id="t", parent_id=parent, kind="llm", tokens=tokens, attributes=dict(attrs))


def test_tokens_are_the_model_calls_sum_or_the_agent_total_never_both() -> None:
    agent = Span(id="root", trace_id="t", kind="agent", tokens=TokenUsage(input=30, output=7, total=37))
    calls = [_llm("a", TokenUsage(input=10, output=3, total=13)), _llm("b", TokenUsage(input=20, output=4))]
    assert turn_usage([agent, *calls]) == {"input": 30, "output": 7, "total": 37, "counted": "llm_spans"}
    assert turn_usage([agent, _llm("a", None)]) == {"input": 30, "output": 7, "total": 37, "counted": "agent_span"}
    assert turn_usage([Span(id="root", trace_id="t", kind="agent")]) is None


def test_a_filtered_or_cut_last_call_fails_the_turn_whatever_the_root_says() -> None:
    root = Span(id="root", trace_id="t", kind="agent", input="hi", output="Hello, I can")
    for reason in ("length", "content_filter"):
        last = _llm("b", None, **{"gen_ai.response.finish_reasons": [reason]})
        assert delivery_of(root, "Hello, I can", [root, last]) == "failed_truncated"
    ok = _llm("b", None, **{"gen_ai.response.finish_reasons": ["stop"]})
    assert assemble_turn([root, ok]).delivery == "delivered"
