"""The rows of one input file on their way into the store: turns with their provenance, and the spans that
arrive on their own (OTel formats), staged and grouped into turns per trace once the file is read.

Used by `factory.ingest`, which owns the file loop and its reports.
"""

from __future__ import annotations

from datetime import UTC, datetime

from agent_factory.adapters.assemble import assemble_turn, split_trace
from agent_factory.adapters.base import Quarantine
from agent_factory.adapters.calls import CALL_GROUP, group_calls, group_key, is_call_trace
from agent_factory.adapters.model import Conversation, Span, Turn
from agent_factory.adapters.otel.toolcalls import DERIVED
from agent_factory.evaluators.provenance import provenance_record
from agent_factory.evaluators.provenance.endings import classify as classify_ending
from agent_factory.factory.store import Batch, Store, conversation_row, event_row, span_row, turn_row
from agent_factory.factory.store.ingest import (
    call_group_spans,
    consume_staged,
    delete_turns,
    iter_staged_spans,
    shared_traces,
    trace_elsewhere,
    turn_attributes,
)
from agent_factory.knowledge_packs import KnowledgePack

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_REPORTED_ERRORS = 1000
"""Errors kept in the report per run; the store keeps every quarantined record."""


class _Rows:
    """One set of row batches: the file's stream, or the rows written in its closing transaction.

    Batches of 4,000 rows: a turn's rows carry its texts and its provenance record (kilobytes each), and larger
    batches held hundreds of megabytes in Python before each append."""

    def __init__(self, store: Store, *, size: int = 4_000) -> None:
        self.spans = Batch(store, "spans", size=size)
        self.turns = Batch(store, "turns", size=size)
        self.provenance = Batch(store, "provenance", size=size)

    def flush(self) -> None:
        for b in (self.spans, self.turns, self.provenance):
            b.flush()


class FileWriter:
    """Buffers the rows of one file and applies provenance on the way in.

    Spans of a trace that other files also hold (an earlier file's pending orphans, or a turn already built)
    are joined with them and the trace's turn is rebuilt; client-only model calls are grouped into turns with
    the calls of their conversation already stored. Those rebuilt turns, and the staging rows they consume,
    are written in the file's closing transaction (`finish`), with the commit marker.
    """

    def __init__(self, store: Store, *, source_id: str, path: str, pack: KnowledgePack) -> None:
        self.store, self.source_id, self.path, self.pack = store, source_id, path, pack
        self.rows = _Rows(store)
        self.late = _Rows(store, size=1 << 62)  # flushed only inside the closing transaction
        self.conversations = Batch(store, "conversations")
        self.events = Batch(store, "events")
        self.staged = Batch(store, "staged_spans", size=4_000)
        self.quarantine = Batch(store, "quarantine")
        self.accepted = 0
        self.quarantined = 0
        self.pending = 0
        self.errors: list[Quarantine] = []
        self.staged_count = 0
        self.replaced: set[str] = set()
        """Ids of stored turns this file rebuilds (deleted in the closing transaction)."""
        self.keep: list[tuple[str, str]] = []
        """(trace id, span id) of staged spans that stay pending (orphans), of any file."""
        self.joined: set[str] = set()
        """Traces whose staged rows of other files this file consumed."""
        self.calls: dict[str, list[list[Span]]] = {}
        """Client-only call traces by call group, grouped into turns once the file is read."""

    def reject(self, q: Quarantine) -> None:
        """Quarantine a record (the first errors are also kept for the report)."""
        self.quarantined += 1
        if len(self.errors) < MAX_REPORTED_ERRORS:
            self.errors.append(q)
        self.quarantine.add(
            {"source_id": self.source_id, "path": self.path, "location": q.location, "field": q.field,
             "message": q.message}
        )

    def turn(self, turn: Turn, *, last: bool | None = None, late: bool = False) -> None:
        """Write a turn with its spans and provenance, its ending classified by the pack."""
        # Hand-offs and closing messages first: coverage and every later reader see the pack's delivery state.
        turn = classify_ending(turn, self.pack, last=last)
        rec = provenance_record(turn, self.pack)
        rows = self.late if late else self.rows
        rows.turns.add(turn_row(turn, segment=rec.segment.segment, source_id=self.source_id))
        rows.provenance.add({
            "turn_id": turn.id, "segment": rec.segment.segment, "record": rec.model_dump_json(),
            "complete": rec.coverage.complete, "injections": len(rec.injections), "source_id": self.source_id,
        })
        for seq, span in enumerate(turn.spans):
            rows.spans.add(span_row(span, seq=seq, source_id=self.source_id, turn_id=turn.id))

    def conversation(self, conv: Conversation) -> None:
        """Write a conversation with its turns and events."""
        # Duplicate ids within a file are the adapter's to catch (it knows the record's location).
        self.conversations.add(conversation_row(conv, source_id=self.source_id))
        for k, t in enumerate(conv.turns):
            self.turn(t, last=k == len(conv.turns) - 1)
        for ev in conv.events:
            self.events.add(event_row(ev, source_id=self.source_id))
        self.accepted += 1

    def stage(self, span: Span) -> None:
        """Stage a span until its trace is complete."""
        self.staged.add(span_row(span, seq=self.staged_count, source_id=self.source_id))
        self.staged_count += 1

    def assemble_staged(self) -> None:
        """Group staged spans by trace (in arrival order), check each tree, and write its turn."""
        self.staged.flush()
        if not self.staged_count:
            return
        shared = shared_traces(self.store, self.source_id)
        current: list[Span] = []
        for span in iter_staged_spans(self.store, self.source_id):
            if current and current[0].trace_id != span.trace_id:
                self._trace(current, shared=current[0].trace_id in shared)
                current = []
            current.append(span)
        if current:
            self._trace(current, shared=current[0].trace_id in shared)
        self._group_calls()

    def _stored(self, trace_id: str) -> list[Span]:
        """The trace's spans held elsewhere: other files' pending spans and the spans of stored turns (which this
        file's turn replaces)."""
        pending, stored = trace_elsewhere(self.store, trace_id, source_id=self.source_id)
        for turn_id, _span in stored:
            self._replace(turn_id)
        out = pending + [span for _turn_id, span in stored]
        if out:
            self.joined.add(trace_id)
        return out

    def _replace(self, turn_id: str | None) -> None:
        if turn_id is None or turn_id in self.replaced:
            return
        self.replaced.add(turn_id)
        attrs = turn_attributes(self.store, turn_id)
        key = attrs.get(CALL_GROUP) if attrs is not None else None
        if isinstance(key, str):  # a turn of client-only calls: its whole group is grouped again
            self.calls.setdefault(key, [])

    def _trace(self, spans: list[Span], *, shared: bool) -> None:
        own, count = {s.id for s in spans}, len(spans)
        if shared:
            spans = _by_start(self._stored(spans[0].trace_id) + spans)
        kept, bad, orphans = split_trace(spans, source=self.path)
        for q in bad:
            self.reject(q)
        self.accepted += max(count - len(bad), 0)
        self.pending += sum(1 for s in orphans if s.id in own)  # this file's; earlier files counted theirs
        self.keep.extend((s.trace_id, s.id) for s in orphans)
        if not kept:
            return
        if is_call_trace(kept):
            self.calls.setdefault(group_key(kept), []).append(kept)
        else:
            self.turn(assemble_turn(kept), late=shared)

    def _group_calls(self) -> None:
        """Turns of the client-only calls of this file, with the stored calls of the same groups."""
        if not self.calls:
            return
        stored_turns, stored_spans = call_group_spans(self.store, self.calls)
        by_trace: dict[str, list[Span]] = {}
        mine = {s.trace_id for traces in self.calls.values() for t in traces for s in t}
        for span in stored_spans:
            if span.trace_id not in mine and span.attributes.get(DERIVED) is None:
                by_trace.setdefault(span.trace_id, []).append(span)
        self.replaced.update(stored_turns)
        for spans in by_trace.values():
            self.calls.setdefault(group_key(spans), []).append(spans)
        late = bool(stored_turns)
        for key in sorted(self.calls):
            for t in group_calls(self.calls[key], key=key):
                self.turn(t, late=late)

    def flush(self) -> None:
        """Append every queued row."""
        self.rows.flush()
        for b in (self.conversations, self.events, self.quarantine):
            b.flush()

    def finish(self) -> None:
        """The closing transaction's writes: stored turns this file rebuilt are replaced, staging rows consumed
        are removed (orphans stay pending). The caller writes the commit marker before committing."""
        if self.replaced:
            delete_turns(self.store, self.replaced)
        self.late.flush()
        consume_staged(self.store, source_id=self.source_id, joined=self.joined, keep=self.keep)


def _by_start(spans: list[Span]) -> list[Span]:
    # Spans of one trace from several files: parents before children is not guaranteed, time order is the
    # best order there is (assembly does not rely on it).
    return sorted(spans, key=lambda s: (s.start is None, s.start or _EPOCH))


