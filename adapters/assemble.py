"""Group standalone spans of one trace into a Turn: structural checks, then turn-level fields.

Pure functions: no I/O. Used by ingest for every format that yields spans rather than whole turns
(OTLP, span-per-line JSON), so the rules for what a turn is live in one place.

The request and answer are the root span's input and output. Many tracers leave the root empty (a `main`
function, a job runner); then the request is the last user message of the first model call and the answer
the reply of the last one, and the turn says so (`request_source: llm_input`, `answer_source: llm_output`,
with the span ids), so coverage can tell a reader where the text came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agent_factory.adapters.base import Quarantine
from agent_factory.adapters.model import DeliveryState, Span, Turn
from agent_factory.adapters.otel.attributes import SESSION_KEYS
from agent_factory.adapters.otel.messages import (
    indexed_messages,
    last_user_text,
    maybe_json,
    model_messages,
    part_text,
    reply_text,
)
from agent_factory.adapters.otel.toolcalls import attach_tool_calls
from agent_factory.digest import digest

USER_KEYS = ("user.id", "enduser.id", "gen_ai.user.id", "ai.telemetry.metadata.userId")
"""Span attributes that carry the end user's id."""
MODE_KEYS = ("agent.mode", "gen_ai.agent.mode", "mode")
"""Span attributes that carry the agent's mode (normal / simple / deep ...)."""
DELIVERY_KEYS = ("agent.delivery", "delivery.status")
"""Span attributes that state the delivery outcome explicitly (values of `DeliveryState`)."""
REQUEST_KEYS = ("agent.request", "gen_ai.prompt.user")
"""Span attributes carrying the user's request text when the root span's input is not it."""
INDEX_KEYS = ("session.turn_index", "turn.index", "gen_ai.conversation.turn_index")
"""Span attributes giving the turn's position in its conversation; without one, start order decides
(factory.pipeline.units numbers a conversation's turns when the source did not)."""
TRUNCATION_FINISH = {"length", "max_tokens", "max_output_tokens", "content_filter"}
"""Finish reasons that mean the answer was cut off (by the token limit, or by the provider's content filter)."""

REQUEST_SOURCE, REQUEST_SPAN = "request_source", "request_span_id"
"""Turn attributes saying where the request was taken from when not from the root span, and from which span."""
ANSWER_SOURCE, ANSWER_SPAN = "answer_source", "answer_span_id"
"""Turn attributes saying where the answer was taken from when not from the root span, and from which span."""
LLM_INPUT, LLM_OUTPUT = "llm_input", "llm_output"
"""Values of `request_source` / `answer_source`: the first model call's input, the last model call's output."""

_DELIVERY_VALUES: set[str] = {"delivered", "failed_empty", "failed_error", "failed_truncated", "cut_off", "unknown"}


def split_trace(spans: Sequence[Span], *, source: str) -> tuple[list[Span], list[Quarantine], list[Span]]:
    """Split a trace into the spans that form a forest, the defects, and the orphans.

    Duplicate ids and parent cycles are defects (quarantined). A span whose parent is not among `spans` is an
    orphan, and so is every span below it: its parent may still arrive (a rotating exporter, a second file), so
    orphans are returned for the caller to keep, not rejected.
    """
    bad: list[Quarantine] = []
    by_id: dict[str, Span] = {}
    for s in spans:
        if s.id in by_id:
            bad.append(_q(source, s, "span_id", f"duplicate span id {s.id!r} in trace {s.trace_id!r}"))
        else:
            by_id[s.id] = s
    # Cycles first: walk each chain of parents; a chain that revisits a span is a cycle.
    in_cycle: set[str] = set()
    for sid in by_id:
        seen: list[str] = []
        cur: str | None = sid
        while cur is not None and cur in by_id and cur not in in_cycle:
            if cur in seen:
                in_cycle.update(seen[seen.index(cur):])
                break
            seen.append(cur)
            cur = by_id[cur].parent_id
    for sid in sorted(in_cycle):
        bad.append(_q(source, by_id[sid], "parent_span_id", f"parent cycle through span {sid!r}"))
        del by_id[sid]
    # Orphans, repeated until stable because removing a span can orphan its children.
    orphaned: set[str] = set()
    changed = True
    while changed:
        changed = False
        for sid, s in list(by_id.items()):
            if s.parent_id is not None and s.parent_id not in by_id:
                orphaned.add(sid)
                del by_id[sid]
                changed = True
    kept = [s for s in spans if by_id.get(s.id) is s]
    orphans = [s for s in spans if s.id in orphaned and s.id not in by_id]
    first: dict[str, Span] = {}  # the first span of each id, in order
    for s in orphans:
        first.setdefault(s.id, s)
    orphans = list(first.values())
    return kept, bad, orphans


def check_trace(spans: Sequence[Span], *, source: str) -> tuple[list[Span], list[Quarantine]]:
    """Drop spans that break the tree: duplicate ids, parents that are missing (orphans) or cyclic.

    A span whose parent was dropped is dropped too (it became an orphan), so what remains is a forest.
    """
    kept, bad, orphans = split_trace(spans, source=source)
    bad += [_q(source, s, "parent_span_id", f"parent {s.parent_id!r} is not a span of trace {s.trace_id!r} (orphan)")
            for s in orphans]
    return kept, bad


def _q(source: str, s: Span, field: str, message: str) -> Quarantine:
    return Quarantine(source=source, location=f"trace {s.trace_id} span {s.id}", field=field, message=message)


def first_attr(spans: Iterable[Span], keys: Sequence[str]) -> Any:
    """The first non-empty value of any of `keys` over `spans` (in order), or None."""
    for s in spans:
        for k in keys:
            v = s.attributes.get(k)
            if v not in (None, ""):
                return v
    return None


def roots_first(spans: Sequence[Span]) -> list[Span]:
    """Root spans (earliest first), then the rest in their given order."""
    roots = sorted((s for s in spans if s.parent_id is None), key=lambda s: (s.start is None, s.start))
    return roots + [s for s in spans if s.parent_id is not None]


FINISH_KEYS = ("gen_ai.response.finish_reasons", "finish_reason", "llm.finish_reason", "ai.response.finishReason",
               "gen_ai.response.finish_reason", "finish_reasons")
"""Span attributes carrying a model call's finish reason(s) (turn assembly and provenance coverage read these)."""
USAGE, SYSTEM_SHA, SYSTEM_CHARS = "tokens", "system_prompt_sha256", "system_prompt_chars"
"""Turn attributes: the turn's token usage counted once (`{"input", "output", "total", "counted"}`), and the
system prompt's digest and length (the text stays on the span that carried it)."""
SYSTEM_KEYS = ("gen_ai.system_instructions", "gen_ai.system_prompt")
"""Span attributes holding the system prompt / instructions as such (OpenInference's `llm.system` names the
provider)."""


def finish_reasons(span: Span) -> list[str]:
    """A model call's finish reasons: its attributes, else those of its output messages or response body."""
    for k in FINISH_KEYS:
        v = span.attributes.get(k)
        if v not in (None, "", []):
            v = maybe_json(v)
            return [str(x) for x in (v if isinstance(v, list) else [v]) if x is not None]
    found: list[str] = []
    for key in ("gen_ai.output.messages", "output.value"):
        v = maybe_json(span.attributes.get(key))
        items = v.get("choices") if isinstance(v, Mapping) else v
        for m in items if isinstance(items, list) else []:
            if isinstance(m, Mapping) and isinstance(m.get("finish_reason"), str):
                found.append(m["finish_reason"])
        if found:
            return found
    for fields in indexed_messages(span.attributes, "llm.output_messages"):
        if isinstance(fields.get("message.finish_reason"), str):
            found.append(fields["message.finish_reason"])
    return found


def delivery_of(root: Span | None, answer: str | None, spans: Sequence[Span],
                answer_span: Span | None = None) -> DeliveryState:
    """Delivery state: explicit attribute if any, else error status of the root, a cut-off finish reason (of
    the root, the span the answer was taken from, or the last model call), empty answer."""
    explicit = first_attr(spans, DELIVERY_KEYS)
    if isinstance(explicit, str) and explicit in _DELIVERY_VALUES:
        return explicit  # type: ignore[return-value]
    if root is None:
        return "unknown"
    if root.status == "error":
        return "failed_error"
    last = _llm_spans(spans, by="end")
    for s in (root, answer_span, last[-1] if last else None):
        if s is not None and any(f in TRUNCATION_FINISH for f in finish_reasons(s)):
            return "failed_truncated"
    if answer is None:
        return "unknown"
    if not answer.strip():
        return "failed_empty"
    return "delivered"


def turn_usage(spans: Sequence[Span]) -> dict[str, Any] | None:
    """The turn's tokens counted once: the sum over its model calls when any reports usage, else what an agent
    span reports for the whole run (pydantic-ai's aggregate, a root that sums its children); never both."""
    llm = [s.tokens for s in spans if s.kind == "llm" and s.tokens is not None]
    counted = "llm_spans"
    if not llm:
        top = [s for s in roots_first(spans) if s.tokens is not None and s.parent_id is None]
        llm, counted = ([top[0].tokens] if top and top[0].tokens is not None else []), "agent_span"
    if not llm:
        return None

    def total(vals: list[int | None]) -> int | None:
        return None if all(v is None for v in vals) else sum(v or 0 for v in vals)

    # A call that reports its parts but no total still adds its parts to the turn's total.
    totals = [t.total if t.total is not None else total([t.input, t.output]) for t in llm]
    return {"input": total([t.input for t in llm]), "output": total([t.output for t in llm]), "total": total(totals),
            "counted": counted}


def system_prompt(spans: Sequence[Span]) -> str | None:
    """The system prompt: an instructions attribute on any span, else the first model call's system messages."""
    v = first_attr(roots_first(spans), SYSTEM_KEYS)
    if v is not None:
        v = maybe_json(v)
        if isinstance(v, list):  # GenAI: a list of parts
            return "\n".join(t for t in (part_text(p) for p in v) if t) or None
        return str(v)
    for s in _llm_spans(spans, by="start"):
        texts = [t for role, t in model_messages(s.attributes, s.input, side="input")
                 if role in ("system", "developer") and t]
        if texts:
            return "\n".join(texts)
    return None


def turn_attributes(root: Span | None, spans: Sequence[Span]) -> dict[str, Any]:
    """Turn-level attributes every assembled turn carries: the root's own, usage and the system prompt's digest."""
    attrs = dict(root.attributes) if root is not None else {}
    usage = turn_usage(spans)
    if usage is not None:
        attrs[USAGE] = usage
    prompt = system_prompt(spans)
    if prompt is not None:
        attrs[SYSTEM_SHA] = digest(prompt)
        attrs[SYSTEM_CHARS] = len(prompt)
    return attrs


def root_request(root: Span) -> str | None:
    """The user's request from a root span: its last user message when the input is a message list, else
    the input as recorded (an agent span's input is the request itself)."""
    if root.input is None:
        return None
    return last_user_text(root.attributes, root.input) or root.input


def root_answer(root: Span) -> str | None:
    """The answer from a root span: the reply text when the output is a message list or response, else as is."""
    if root.output is None:
        return None
    return reply_text(root.attributes, root.output)


def assemble_turn(spans: Sequence[Span]) -> Turn:
    """Build the Turn of one (already checked) trace from its spans."""
    if not spans:
        raise ValueError("assemble_turn needs at least one span")
    spans = attach_tool_calls(spans)
    ordered = roots_first(spans)
    root = ordered[0] if ordered[0].parent_id is None else None
    trace_id = spans[0].trace_id
    starts = [s.start for s in spans if s.start is not None]
    ends = [s.end for s in spans if s.end is not None]
    start = min(starts) if starts else None
    end = max(ends) if ends else None
    if start is not None and end is not None:
        latency: float | None = max((end - start).total_seconds() * 1000.0, 0.0)
    else:
        latency = root.duration_ms if root is not None else None
    request = first_attr(ordered, REQUEST_KEYS)
    if request is None and root is not None:
        request = root_request(root)
    answer = root_answer(root) if root is not None else None
    attrs = turn_attributes(root, spans)
    answer_span = None
    # Only an empty root hands the turn to its model calls: a root that holds the request but no answer
    # (it failed) says the answer never came, and a model call's reply must not stand in for it.
    empty_root = root is None or (root.input is None and root.output is None)
    if request is None and empty_root:
        request, span = first_llm_request(spans)
        if span is not None:
            attrs.update({REQUEST_SOURCE: LLM_INPUT, REQUEST_SPAN: span.id})
    if answer is None and empty_root:
        answer, answer_span = last_llm_answer(spans)
        if answer_span is not None:
            attrs.update({ANSWER_SOURCE: LLM_OUTPUT, ANSWER_SPAN: answer_span.id})
    mode = first_attr(ordered, MODE_KEYS)
    user = first_attr(ordered, USER_KEYS)
    session = first_attr(ordered, SESSION_KEYS)
    index = first_attr(ordered, INDEX_KEYS)
    return Turn(
        id=trace_id,
        conversation_id=str(session) if session is not None else trace_id,
        user_id=str(user) if user is not None else None,
        index=int(index) if isinstance(index, int | float) and index >= 0 else 0,
        request=None if request is None else str(request),
        answer=answer,
        mode=None if mode is None else str(mode),
        delivery=delivery_of(root, answer, spans, answer_span),
        start=start,
        end=end,
        latency_ms=latency,
        spans=tuple(spans),
        attributes=attrs,
    )


def _llm_spans(spans: Sequence[Span], *, by: str) -> list[Span]:
    # Model calls in time order (start for the first, end for the last) when every one has the time,
    # else in source order (depth first, parents before children).
    llms = [s for s in spans if s.kind == "llm"]
    if llms and all(getattr(s, by) is not None for s in llms):
        return sorted(llms, key=lambda s: getattr(s, by))
    return llms


def first_llm_request(spans: Sequence[Span]) -> tuple[str | None, Span | None]:
    """The last user message of the earliest model call that has one, and that call's span."""
    for s in _llm_spans(spans, by="start"):
        text = last_user_text(s.attributes, s.input)
        if text is not None:
            return text, s
    return None, None


def last_llm_answer(spans: Sequence[Span]) -> tuple[str | None, Span | None]:
    """The reply of the latest model call that recorded an output, and that call's span."""
    for s in reversed(_llm_spans(spans, by="end")):
        if s.output is not None:
            text = reply_text(s.attributes, s.output)
            if text is not None:
                return text, s
    return None, None
