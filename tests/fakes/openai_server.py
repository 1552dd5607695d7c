"""An OpenAI-compatible chat server on 127.0.0.1, so the model path is tested offline but for real.

The code under test talks HTTP to this server through its real client (litellm, the openai SDK,
pydantic-ai's OpenAI provider); nothing is mocked and no provider is ever reached.

Use it as a fixture (import it into a test module; `tests/fakes/conftest.py` already does so for this folder)::

    from tests.fakes.openai_server import FaultPlan, fake_openai  # noqa: F401

    def test_collect(fake_openai):
        fake_openai.responder = lambda body: {"verdict": "yes"}
        litellm.completion(model="openai/fake-small", api_base=fake_openai.base_url, api_key="test", ...)
        assert fake_openai.calls == 1
        assert "secret" not in fake_openai.seen_text()

or as a context manager: ``with FakeOpenAIServer(responder=..., faults=...) as server: ...``.

- Routes: ``POST /v1/chat/completions`` (and ``/chat/completions``); ``GET /v1/models``. A request with
  ``stream: true`` gets the same answer as server-sent ``chat.completion.chunk`` events, with a last usage
  chunk when ``stream_options.include_usage`` is set (see ``tests/fakes/openai_stream.py``); a fault is
  answered as the JSON error, before any stream.
- ``responder(body) -> dict | str | ToolCallReply | Reply | FaultReply`` gets the parsed request body. A
  ``Reply`` scripts the answer fully: content, several tool calls (with their ids), the finish reason
  (e.g. "length" for a cut-off answer) and the usage numbers. A ``FaultReply("500")`` serves that fault
  to this request, so a client's retries of it fail too. Otherwise a dict is the JSON
  answer: when the request has ``tools`` (and ``tool_choice`` is not "none") it becomes the arguments of a
  tool call (the named ``tool_choice``, else a ``final_result*`` tool, else the first tool); otherwise it is
  serialized into ``message.content``. A str is sent as raw ``message.content``. A ``ToolCallReply`` calls
  the tool it names. The default, ``schema_responder``, builds a schema-valid object from the request's
  tool parameters or ``response_format`` json_schema (see ``example_for_schema``).
- Faults: ``server.faults = FaultPlan(rate=0.3, kinds=("429", "500"), seed=0)`` draws per call, from the
  seed and the call's index only, so the same seed gives the same sequence even under concurrency.
  ``FaultPlan(script=[429, 500, "malformed_json", "schema_invalid", None])`` fixes the first calls exactly;
  indices count from the moment the plan is set. Kinds: "429" (OpenAI error body, ``Retry-After: 0``),
  "500" (error body), "timeout" (stalls ``timeout_s`` before answering), "malformed_json" (200, content or
  tool arguments truncated so they do not parse), "schema_invalid" (200, valid JSON that breaks the schema).
  The openai SDK retries 429 / 500 by itself (``max_retries``, default 2): every retry is a counted call.
- Accounting: ``calls``, ``calls_by_model``, ``requests`` (bodies), ``records`` (``CallRecord`` with the
  fault served), ``faults_served``, ``seen_text()`` (every message content and tool argument received).
"""

from __future__ import annotations

import copy
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, field_validator

from tests.fakes.openai_stream import stream_chunks

FaultKind = Literal["429", "500", "timeout", "malformed_json", "schema_invalid"]
FAULT_KINDS: tuple[FaultKind, ...] = ("429", "500", "timeout", "malformed_json", "schema_invalid")
YES_LIKE = ("yes", "y", "true", "pass")
MAX_DEPTH = 8


@dataclass(frozen=True)
class ToolCallReply:
    """A responder's answer that calls a named tool with these arguments (id: the call id to send)."""

    name: str
    arguments: dict[str, Any]
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """A fully scripted answer: text and/or tool calls, the finish reason and the usage block to send.

    ``finish_reason`` None means "tool_calls" when there are tool calls, else "stop"; "length" scripts an
    answer cut off by the token limit. ``usage`` is (prompt_tokens, completion_tokens); None derives it
    from the text lengths as for every other answer.
    """

    content: str | None = None
    tool_calls: tuple[ToolCallReply, ...] = ()
    finish_reason: str | None = None
    usage: tuple[int, int] | None = None
    reasoning: str | None = None
    """Sent as the message's ``reasoning_content``, as reasoning models' OpenAI-compatible servers do."""


@dataclass(frozen=True)
class FaultReply:
    """A responder's answer that serves this fault for this request (a retry of it asks again)."""

    kind: FaultKind


Responder = Callable[[dict[str, Any]], "dict[str, Any] | str | ToolCallReply | Reply | FaultReply"]


class FaultPlan(BaseModel):
    """Which calls fail and how: a fixed script for the first calls, then seeded random draws."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rate: float = Field(default=0.0, ge=0.0, le=1.0)
    """Probability that a call after the script fails."""
    kinds: tuple[FaultKind, ...] = FAULT_KINDS
    """Fault kinds a failing draw picks from, uniformly."""
    seed: int = 0
    """Seed of the draws; a call's draw depends only on the seed and its index."""
    script: tuple[FaultKind | None, ...] = ()
    """Faults (None: answer normally) for the first len(script) calls, in order."""
    timeout_s: float = Field(default=2.0, gt=0.0)
    """How long a "timeout" call stalls before answering; give the client a shorter timeout."""

    @field_validator("kinds", "script", mode="before")
    @classmethod
    def _status_ints(cls, value: Any) -> Any:
        # Let callers write 429 / 500 as the status codes they are.
        return tuple(str(v) if isinstance(v, int) else v for v in value)

    def fault_for(self, index: int) -> FaultKind | None:
        """The fault of the call at this index (0-based, counted from when the plan was set)."""
        if index < len(self.script):
            return self.script[index]
        if self.rate <= 0.0 or not self.kinds:
            return None
        rng = random.Random(f"{self.seed}:{index}")
        if rng.random() >= self.rate:
            return None
        return rng.choice(self.kinds)

    def sequence(self, n: int) -> list[FaultKind | None]:
        """The faults of the first n calls."""
        return [self.fault_for(i) for i in range(n)]


class CallRecord(BaseModel):
    """One chat-completion request the server received."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    """0-based arrival order over the server's life (reset() restarts it)."""
    path: str
    """Request path, e.g. /v1/chat/completions."""
    model: str
    """The model the request named."""
    body: dict[str, Any]
    """The parsed request body."""
    fault: FaultKind | None
    """The fault served, or None for a normal answer."""


# ---- schema-valid and schema-invalid examples -------------------------------------------------


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """Follow local $refs (#/$defs/X, #/definitions/X) to the schema they name."""
    seen = 0
    while isinstance(schema, dict) and "$ref" in schema and seen < MAX_DEPTH:
        node: Any = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node.get(part.replace("~1", "/").replace("~0", "~"), {}) if part else node
        schema, seen = node, seen + 1
    return schema if isinstance(schema, dict) else {}


def example_for_schema(schema: dict[str, Any], root: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """A value valid under a JSON schema: first enum value ("yes" when offered), "", 0, [], True, nested."""
    root = schema if root is None else root
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        yes = [v for v in schema["enum"] if isinstance(v, str) and v.lower() in YES_LIKE]
        return yes[0] if yes else schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [_resolve(o, root) for o in schema[key]]
            concrete = [o for o in options if o.get("type") != "null"]
            # Deep in a recursive schema, take the null branch so generation ends.
            if not concrete or (depth >= MAX_DEPTH // 2 and len(concrete) < len(options)):
                return None
            return example_for_schema(concrete[0], root, depth + 1)
    if "allOf" in schema:
        parts = [example_for_schema(s, root, depth + 1) for s in schema["allOf"]]
        if parts and all(isinstance(p, dict) for p in parts):
            return {k: v for p in parts for k, v in p.items()}
        return parts[0] if parts else None
    return _example_for_type(schema, root, depth)


def _example_for_type(schema: dict[str, Any], root: dict[str, Any], depth: int) -> Any:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else ("array" if "items" in schema else None)
    if kind == "object":
        if depth >= MAX_DEPTH:
            return {}
        props = schema.get("properties", {})
        return {name: example_for_schema(sub, root, depth + 1) for name, sub in props.items()}
    if kind == "array":
        prefix = [example_for_schema(s, root, depth + 1) for s in schema.get("prefixItems", [])]
        need = max(0, int(schema.get("minItems", 0)) - len(prefix))
        item = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        return prefix + [example_for_schema(item, root, depth + 1) for _ in range(need)]
    if kind == "string":
        fmt = {"date-time": "1970-01-01T00:00:00Z", "date": "1970-01-01", "time": "00:00:00Z"}
        return fmt.get(schema.get("format", ""), "x" * int(schema.get("minLength", 0)))
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        value = 0 if low is None else low + (1 if "exclusiveMinimum" in schema and "minimum" not in schema else 0)
        if kind == "integer":
            return int(value) if float(value).is_integer() else int(value) + 1
        return float(value)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "" if "default" not in schema else schema["default"]


def violate_schema(value: Any, schema: dict[str, Any]) -> Any:
    """Valid JSON that breaks the schema: a required field dropped, else a field of the wrong type."""
    root, schema = schema, _resolve(schema, schema)
    for key in ("anyOf", "oneOf"):
        options = [_resolve(o, root) for o in schema.get(key, [])]
        schema = next((o for o in options if o.get("type") != "null"), schema)
    if isinstance(value, dict):
        missing = [name for name in schema.get("required", []) if name in value]
        if missing:
            return {k: v for k, v in value.items() if k != missing[0]}
        if value:
            first = next(iter(value))
            return {**value, first: 12345 if isinstance(value[first], str) else "not-the-right-type"}
        return ["not", "an", "object"]
    if isinstance(value, list):
        return {"not": "an array"}
    return 12345 if isinstance(value, str) else ["not", "a", "scalar"]


def truncate_json(text: str) -> str:
    """A prefix of the JSON text that no longer parses."""
    cut = text[: max(1, len(text) // 2)]
    while True:
        try:
            json.loads(cut)
        except ValueError:
            return cut
        cut = '{"' + cut


def pick_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """The function definition a tool-call answer should call, or None to answer in content."""
    choice = body.get("tool_choice")
    functions = [t.get("function", {}) for t in body.get("tools") or [] if t.get("type", "function") == "function"]
    if not functions or choice == "none":
        return None
    if isinstance(choice, dict):
        wanted = choice.get("function", {}).get("name")
        return next((f for f in functions if f.get("name") == wanted), functions[0])
    return next((f for f in functions if str(f.get("name", "")).startswith("final_result")), functions[0])


def request_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema the answer must follow: the picked tool's parameters or the response_format's."""
    tool = pick_tool(body)
    if tool is not None:
        return tool.get("parameters") or {"type": "object", "properties": {}}
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return fmt.get("json_schema", {}).get("schema") or {}
    if fmt.get("type") == "json_object":
        return {"type": "object", "properties": {}}
    return None


def schema_responder(body: dict[str, Any]) -> dict[str, Any] | str:
    """Default responder: a schema-valid object for structured requests, "ok" for plain chat."""
    schema = request_schema(body)
    return "ok" if schema is None else example_for_schema(schema)


def message_text(message: dict[str, Any]) -> str:
    """All the text one chat message carries: content (string or parts) and tool-call arguments."""
    content = message.get("content")
    parts: list[str] = []
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        parts += [str(p.get("text", "")) for p in content if isinstance(p, dict)]
    for call in message.get("tool_calls") or []:
        parts.append(str(call.get("function", {}).get("arguments", "")))
    return "\n".join(p for p in parts if p)


# ---- the server --------------------------------------------------------------------------------

ERRORS: dict[str, tuple[int, dict[str, Any]]] = {
    "429": (429, {"message": "Rate limit reached (injected fault).", "type": "requests",
                  "code": "rate_limit_exceeded"}),
    "500": (500, {"message": "The server had an error while processing your request (injected fault).",
                  "type": "server_error", "code": None}),
}
CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")


class FakeOpenAIServer:
    """A threaded HTTP server speaking the OpenAI chat-completions format; see the module docstring."""

    def __init__(
        self,
        *,
        responder: Responder | None = None,
        faults: FaultPlan | None = None,
        models: tuple[str, ...] = ("fake-small",),
        host: str = "127.0.0.1",
    ) -> None:
        self.responder: Responder = responder or schema_responder
        self.models = models
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._records: list[CallRecord] = []
        self._faults = faults or FaultPlan()
        self._fault_base = 0
        self._httpd = ThreadingHTTPServer((host, 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.fake = self  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None

    # lifecycle
    @property
    def url(self) -> str:
        """http://127.0.0.1:<port>, without /v1."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL: url + "/v1"."""
        return self.url + "/v1"

    def start(self) -> FakeOpenAIServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes calls stalled by a "timeout" fault
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # faults and accounting
    @property
    def faults(self) -> FaultPlan:
        return self._faults

    @faults.setter
    def faults(self, plan: FaultPlan) -> None:
        # A new plan's script applies to the calls that follow, not to those already served.
        with self._lock:
            self._faults, self._fault_base = plan, len(self._records)

    def reset(self) -> None:
        """Forget every call; the current fault plan starts again at its first entry."""
        with self._lock:
            self._records, self._fault_base = [], 0

    @property
    def records(self) -> list[CallRecord]:
        with self._lock:
            return list(self._records)

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self._records)

    @property
    def calls_by_model(self) -> dict[str, int]:
        return dict(Counter(r.model for r in self.records))

    @property
    def requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.records]

    @property
    def faults_served(self) -> list[FaultKind | None]:
        return [r.fault for r in self.records]

    def seen_text(self) -> str:
        """Every message content and tool argument received, joined by newlines."""
        return "\n".join(message_text(m) for r in self.records for m in r.body.get("messages") or [])

    # answering
    def _admit(self, path: str, body: dict[str, Any]) -> CallRecord:
        with self._lock:
            index = len(self._records)
            fault = self._faults.fault_for(index - self._fault_base)
            record = CallRecord(index=index, path=path, model=str(body.get("model", "")), body=body, fault=fault)
            self._records.append(record)
            return record

    def _serve_fault(self, record: CallRecord, kind: FaultKind) -> CallRecord:
        """Record that the responder chose this call's fault (FaultReply)."""
        with self._lock:
            served = record.model_copy(update={"fault": kind})
            self._records[record.index] = served
            return served

    def _answer(self, record: CallRecord) -> tuple[int, dict[str, Any]]:
        """Status and JSON body for one admitted call."""
        if record.fault in ERRORS:
            status, error = ERRORS[record.fault]
            return status, {"error": {**error, "param": None}}
        if record.fault == "timeout":
            self._stopping.wait(self._faults.timeout_s)
        body = copy.deepcopy(record.body)
        reply = self.responder(body)
        if isinstance(reply, FaultReply):
            record = self._serve_fault(record, reply.kind)
            if reply.kind in ERRORS:
                status, error = ERRORS[reply.kind]
                return status, {"error": {**error, "param": None}}
            if reply.kind == "timeout":
                self._stopping.wait(self._faults.timeout_s)
            reply = schema_responder(body)  # what the fault then spoils, as for a planned fault
        if isinstance(reply, Reply):
            return 200, self._completion(record, _scripted_message(record, reply), reply.finish_reason,
                                         reply.usage)
        tool = pick_tool(body)
        schema = request_schema(body) or {}
        name = reply.name if isinstance(reply, ToolCallReply) else (tool or {}).get("name")
        value: Any = reply.arguments if isinstance(reply, ToolCallReply) else reply
        if record.fault == "schema_invalid":
            value = violate_schema(value, schema)
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if record.fault == "malformed_json":
            text = truncate_json(text)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        as_tool = name is not None and not isinstance(reply, str)  # raw text stays text even with tools
        if as_tool:
            call_id = (reply.id if isinstance(reply, ToolCallReply) else None) or f"call_fake_{record.index:06d}"
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}
            ]}
        return 200, self._completion(record, message, None, None)

    def _completion(self, record: CallRecord, message: dict[str, Any], finish_reason: str | None,
                    usage: tuple[int, int] | None) -> dict[str, Any]:
        """The chat.completion body around one assistant message."""
        if usage is None:
            prompt = "\n".join(message_text(m) for m in record.body.get("messages") or [])
            usage = (max(1, len(prompt) // 4), max(1, len(message_text(message)) // 4))
        return {
            "id": f"chatcmpl-fake-{record.index:06d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": record.model,
            "system_fingerprint": "fp_fake",
            "choices": [{
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if message.get("tool_calls") else "stop"),
                "logprobs": None,
            }],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
        }


def _scripted_message(record: CallRecord, reply: Reply) -> dict[str, Any]:
    """The assistant message a Reply scripts; tool calls without an id get call_fake_<call>_<n>."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": call.id or f"call_fake_{record.index:06d}_{n}", "type": "function",
             "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)}}
            for n, call in enumerate(reply.tool_calls)
        ]
    return message


class _Handler(BaseHTTPRequestHandler):
    server_version = "FakeOpenAI/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # keep test output clean

    @property
    def fake(self) -> FakeOpenAIServer:
        return self.server.fake  # type: ignore[attr-defined]

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. after a "timeout" fault)
        self.close_connection = True

    def _error(self, status: int, message: str) -> None:
        error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
        self._send(status, {"error": error})

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.fake.models]
            self._send(200, {"object": "list", "data": data})
        else:
            self._error(404, f"unknown path {self.path}")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        path = self.path.split("?")[0].rstrip("/")
        if path not in CHAT_PATHS:
            self._error(404, f"unknown path {self.path}")
            return
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            self._error(400, "request body is not JSON")
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._error(400, "body must be an object with a messages list")
            return
        record = self.fake._admit(path, body)
        try:
            status, payload = self.fake._answer(record)
        except Exception as exc:  # a broken responder must fail the test visibly, not hang the client
            self._error(500, f"fake responder raised {type(exc).__name__}: {exc}")
            return
        if status == 200 and body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._send_events(stream_chunks(payload, include_usage=include_usage))
            return
        self._send(status, payload, {"Retry-After": "0"} if status == 429 else None)

    def _send_events(self, chunks: list[dict[str, Any]]) -> None:
        """Server-sent events, one chunk per event, then [DONE]; the closed connection ends the body."""
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """A started FakeOpenAIServer with the schema responder and no faults; set .responder / .faults."""
    with FakeOpenAIServer() as server:
        yield server
