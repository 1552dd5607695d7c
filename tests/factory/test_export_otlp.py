"""`agent-factory export --format otlp-json`: ingest A -> export -> ingest into a fresh store B gives the same
conversations, turns and spans (task trials, the shared OTel fixtures), says what a chat log loses, and redacts."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from agent_factory.adapters.model import Conversation, OutcomeEvent, Span
from agent_factory.adapters.otel.encode import otlp_id, redacted_span, scrub
from agent_factory.evaluators.collect.redact import DefaultRedactor, redact_text
from agent_factory.factory.cli.app import app
from agent_factory.factory.ingest.files import ingest_paths
from agent_factory.factory.pipeline.units import build_conversations
from agent_factory.factory.store import Store
from agent_factory.knowledge_packs import load_pack
from tests.conftest import REPO, shared_data
from tests.evaluators.secret_corpus import leaked, load, write_chat_jsonl
from tests.factory.conftest import NO_MODEL, Res, cli
from tests.fakes.openai_server import FakeOpenAIServer, Reply, ToolCallReply

SUITE = REPO / "specs" / "tasks" / "sales_report.yaml"
REDACTOR = DefaultRedactor()
"""What `export` redacts with when no config names another (the default pack names no phone regions)."""


def _conversations(path: Path) -> tuple[Conversation, ...]:
    """Every stored conversation as the pipeline builds it: its turns (all segments), events and attributes."""
    with Store(path, read_only=True) as st:
        events: dict[str, list[OutcomeEvent]] = defaultdict(list)
        for e in st.events():
            events[e.conversation_id or ""].append(e)
        return build_conversations(list(st.iter_turns(segment=None)), events=events,
                                   attributes=st.conversation_attributes())


def _round_trip(a: Path, tmp: Path, *args: str) -> tuple[Res, Path]:
    """Export store `a` as OTLP/JSON through the CLI and ingest the file into a fresh store: (export's --json run,
    store B)."""
    doc, b = tmp / "traces.otlp.json", tmp / "b.duckdb"
    res = cli("export", "--format", "otlp-json", "--store", str(a), "--out", str(doc), "--json", *args)
    assert res.code == 0, res.err
    with Store(b) as st:
        rep = ingest_paths(st, [doc], pack=load_pack("default"))
        outcomes = len(st.events())  # a task trial's root span states its outcome (`task.success`): one event
    assert rep.quarantined == 0 and rep.accepted == res.json()["spans"] + outcomes
    return res, b


def _ingested(tmp: Path, *sources: Path) -> Path:
    a = tmp / "a.duckdb"
    with Store(a) as st:
        ingest_paths(st, list(sources), pack=load_pack("default"))
    return a


@pytest.fixture(scope="module")
def trials(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Res]:
    """`tasks run` with `script:recover`, 2 trials, into store A; its OTLP export ingested into store B."""
    tmp = tmp_path_factory.mktemp("otlp-trials")
    a = tmp / "a.duckdb"
    res = cli("tasks", "run", str(SUITE), "--agent", "script:recover", "--trials", "2", "--store", str(a))
    assert res.code == 0, res.err
    exported, b = _round_trip(a, tmp)
    return a, b, exported


def test_task_trials_read_back_identically(trials: tuple[Path, Path, Res]) -> None:
    a, b, exported = trials
    before, after = _conversations(a), _conversations(b)
    assert len(before) == 14 and sum(len(t.spans) for c in before for t in c.turns) > 100
    assert after == before
    out = exported.json()
    assert (out["conversations"], out["turns"], out["not_carried"]) == (14, 14, {})
    # Tool calls the model asked for that no span ran are left out of the file and derived again on the way in.
    assert out["spans"] + out["derived"] == sum(len(t.spans) for c in before for t in c.turns)
    assert _provenance(b) == _provenance(a)  # what ingest establishes about each turn, established again


def _provenance(path: Path) -> dict[str, tuple[Any, ...]]:
    with Store(path, read_only=True) as st:
        rows = st.con.execute("SELECT turn_id, segment, complete, injections, record FROM provenance").fetchall()
    return {r[0]: r[1:] for r in rows}


def _one_step(body: dict[str, Any]) -> Reply:
    """A model agent that reads the first table it may, reasoning first, then answers."""
    if any(m["role"] == "tool" for m in body["messages"]):
        return Reply(content="Done.", reasoning="the query answered it", usage=(60, 4))
    return Reply(tool_calls=(ToolCallReply("list_files", {}),), reasoning="look first", usage=(40, 9))


def test_a_model_agents_trials_read_back_identically(tmp_path: Path) -> None:
    a, suite = tmp_path / "a.duckdb", tmp_path / "one.yaml"
    spec = yaml.safe_load(SUITE.read_text(encoding="utf-8"))
    suite.write_text(yaml.safe_dump({**spec, "tasks": spec["tasks"][:2]}), encoding="utf-8")  # two suffice here
    with FakeOpenAIServer(responder=_one_step) as server:
        env = {**NO_MODEL, "AGENT_FACTORY_AGENT_API_BASE": server.base_url,
               "AGENT_FACTORY_AGENT_API_KEY_ENV": "FAKE_AGENT_KEY", "FAKE_AGENT_KEY": "test"}
        res = CliRunner().invoke(app, ["tasks", "run", str(suite), "--agent", "openai/fake-agent", "--trials", "1",
                                       "--store", str(a)], env=env)
    assert res.exit_code == 0, res.output
    before = _conversations(a)
    chats = [s for s in _spans(before) if s.kind == "llm"]
    # The model's usage on every call, its reasoning in the output message.
    assert chats and all(s.tokens is not None for s in chats) and "look first" in (chats[0].output or "")
    exported, b = _round_trip(a, tmp_path)
    assert _conversations(b) == before and exported.json()["not_carried"] == {}


def test_the_export_is_one_otlp_document(trials: tuple[Path, Path, Res]) -> None:
    doc = json.loads(Path(trials[2].json()["out"]).read_text(encoding="utf-8"))
    spans = [s for block in doc["resourceSpans"] for scope in block["scopeSpans"] for s in scope["spans"]]
    assert len(spans) == trials[2].json()["spans"] and len(doc["resourceSpans"]) == 14
    assert {a["key"] for a in doc["resourceSpans"][0]["resource"]["attributes"]} == {"service.name"}
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)


def test_the_shared_otel_fixtures_read_back_identically(tmp_path: Path) -> None:
    vercel = shared_data("openinference-otel-fixtures", "vercel-ai-sdk-v6-spans")
    trail = shared_data("trail", "traces")
    smallest = [sorted(d.glob("*.json"), key=lambda p: (p.stat().st_size, p.name))[:k]
                for d, k in ((trail / "gaia", 1), (trail / "swe_bench", 1))]
    a = _ingested(tmp_path, vercel / "all-spans.json", vercel / "ai-streamText.json", *smallest[0], *smallest[1])
    exported, b = _round_trip(a, tmp_path)
    before, after = _conversations(a), _conversations(b)
    redacted = _redacted(before)
    assert len(before) == 12 and after == _with_durations_of(redacted, after)
    # What the redactor changed: the embedding vectors, whose 10-digit runs read as phone numbers, and nothing else.
    changed = {k for x, y in zip(_spans(before), _spans(redacted), strict=True) if x != y
               for k in x.attributes if x.attributes[k] != y.attributes[k]}
    assert changed == {"ai.embedding", "ai.embeddings"}
    # TRAIL gives a span's duration, not its end: its end is start + duration to the microsecond, and the duration
    # read back is end - start, equal to within float rounding. Nothing else is lost.
    assert set(exported.json()["not_carried"]) <= {"duration_ms"}
    for x, y in zip(_spans(before), _spans(after), strict=True):
        assert y.duration_ms == pytest.approx(x.duration_ms, rel=1e-12, abs=1e-9)


def _text(v: str) -> str:
    return redact_text(v, REDACTOR)


def _redact(s: Span) -> Span:
    return redacted_span(s, _text)


def _redacted(convs: tuple[Conversation, ...]) -> tuple[Conversation, ...]:
    """`convs` with every span as the export writes it, its texts through the default redactor, and each turn's
    attributes as assembly takes them from its redacted root span."""
    return tuple(c.model_copy(update={"turns": tuple(t.model_copy(update={
        "spans": tuple(_redact(s) for s in t.spans), "attributes": scrub(t.attributes, _text)}) for t in c.turns)})
        for c in convs)


def _spans(convs: tuple[Conversation, ...]) -> list[Span]:
    return [s for c in convs for t in c.turns for s in t.spans]


def _with_durations_of(before: tuple[Conversation, ...], after: tuple[Conversation, ...]) -> tuple[Conversation, ...]:
    """`before` with each span's duration taken from the same span of `after` (compared apart, with a tolerance)."""
    durations = {(s.trace_id, s.id): s.duration_ms for s in _spans(after)}

    def span(s: Span) -> Span:
        return s.model_copy(update={"duration_ms": durations.get((s.trace_id, s.id), s.duration_ms)})

    return tuple(c.model_copy(update={"turns": tuple(t.model_copy(update={"spans": tuple(span(s) for s in t.spans)})
                                                      for t in c.turns)}) for c in before)


def test_a_chat_log_keeps_its_spans_but_not_its_turns(tmp_path: Path) -> None:
    raw = json.loads(shared_data("tau-bench-airline-gpt4o", "gpt-4o-airline.json").read_text(encoding="utf-8"))
    src = tmp_path / "tau.json"
    src.write_text(json.dumps(raw[:2]), encoding="utf-8")
    a = _ingested(tmp_path, src)
    exported, b = _round_trip(a, tmp_path)
    before, after = _conversations(a), _conversations(b)
    spans_a, spans_b = _spans(before), {s.id: s for s in _spans(after)}
    assert len(spans_b) == len(spans_a) > 20
    fields = ("kind", "name", "input", "output", "status", "error", "start", "end", "duration_ms", "model", "tokens")
    for raw_span in spans_a:
        s = _redact(raw_span)  # the log's personal data (emails, phone numbers) is redacted on the way out
        got = spans_b[otlp_id(s.id, 16)]  # a chat log's ids are no OTLP ids: each becomes its digest
        assert {f: getattr(got, f) for f in fields} == {f: getattr(s, f) for f in fields}
        assert got.parent_id == (None if s.parent_id is None else otlp_id(s.parent_id, 16))
        assert {k: got.attributes[k] for k in s.attributes} == s.attributes
        assert set(got.attributes) - set(s.attributes) <= _CARRIERS
    assert exported.json()["not_carried"] == {"ids": len(spans_a)}
    # Not carried (docs/export.md): the record's own turns (request, answer, delivery: OTLP turns are assembled from
    # spans, and a log's model calls become client-only calls grouped again), the conversation's attributes and its
    # reward events (OTLP has spans only), so the two stores agree on the conversations' ids and users alone.
    assert {(c.id, c.user_id) for c in after} == {(c.id, c.user_id) for c in before}
    assert any(c.events for c in before) and not any(c.events for c in after)
    assert [len(c.turns) for c in after] != [len(c.turns) for c in before]
    # What came in as OTLP goes out and in again the same, its turns of several client-only traces included.
    assert max(len(t.attributes.get("call_traces", ())) for c in after for t in c.turns) > 1
    (tmp_path / "again").mkdir()
    again, c = _round_trip(b, tmp_path / "again")
    assert _conversations(c) == _redacted(after) and again.json()["not_carried"] == {}


_CARRIERS = {"gen_ai.operation.name", "gen_ai.request.model", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
             "gen_ai.usage.total_tokens", "session.id", "user.id", "session.turn_index"}


def _otlp(path: Path, spans: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}), encoding="utf-8")
    return path


def test_a_secret_in_a_span_is_redacted_in_the_export(tmp_path: Path) -> None:
    secret, mail = "sk-proj-" + "Zq9Xw8Vu7Ts6Rp5On4Ml" * 2, "jane.doe@example.com"
    span = {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": "invoke_agent",
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
            "attributes": [{"key": "input.value", "value": {"stringValue": f"use {secret} to pay"}},
                           {"key": "output.value", "value": {"stringValue": "paid"}},
                           {"key": "user.id", "value": {"stringValue": mail}}]}
    a = _ingested(tmp_path, _otlp(tmp_path / "in.json", [span]))
    exported, b = _round_trip(a, tmp_path)
    text = Path(exported.json()["out"]).read_text(encoding="utf-8")
    assert secret not in text and mail not in text
    ((turn,),) = [c.turns for c in _conversations(b)]
    assert (turn.request, turn.user_id) == ("use [API_KEY] to pay", "[EMAIL]")


def test_the_secret_corpus_leaves_no_planted_value_in_the_export(tmp_path: Path) -> None:
    """Every planted secret (user text, answers, tool arguments and results, user and session ids) is redacted;
    the ids that held one are digests, and the file is still read back whole."""
    secrets, _ = load()
    a = _ingested(tmp_path, write_chat_jsonl(tmp_path / "corpus.jsonl", secrets))
    exported, b = _round_trip(a, tmp_path)
    text = Path(exported.json()["out"]).read_text(encoding="utf-8")
    assert leaked(text, secrets) == [] and "[EMAIL]" in text and "[API_KEY]" in text
    assert leaked("\n".join(str(c) for c in _conversations(b)), secrets) == []


def test_level_does_not_apply_to_otlp_json(trials: tuple[Path, Path, Res], tmp_path: Path) -> None:
    res = cli("export", "--format", "otlp-json", "--level", "turn", "--store", str(trials[0]), "--out",
              str(tmp_path / "x.json"))
    assert res.code == 2 and len(res.err.strip().splitlines()) == 1 and "--level" in res.err
    assert not (tmp_path / "x.json").exists()
    missing = cli("export", "--format", "otlp-json", "--store", str(tmp_path / "none.duckdb"))
    assert missing.code == 1 and len(missing.err.strip().splitlines()) == 1 and "none.duckdb" in missing.err
    with Store(tmp_path / "empty.duckdb"):
        pass
    empty = cli("export", "--format", "otlp-json", "--store", str(tmp_path / "empty.duckdb"), "--out",
                str(tmp_path / "x.json"))
    assert empty.code == 1 and "no traces" in empty.err and not (tmp_path / "x.json").exists()
    plain = cli("export", "--store", str(trials[0]), "--out", str(tmp_path / "x.csv"))
    assert plain.code == 2 and "--level" in plain.err and not (tmp_path / "x.csv").exists()
