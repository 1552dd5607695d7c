"""The rows of one input file on their way into the store: turns with their provenance, and the spans that
arrive on their own (OTel formats), staged and grouped into turns per trace once the file is read.

Used by `factory.ingest`, which owns the file loop and its reports.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa

from agent_factory.adapters.assemble import assemble_turn, split_trace
from agent_factory.adapters.base import Quarantine
from agent_factory.adapters.calls import CALL_GROUP, group_calls, group_key, is_call_trace
from agent_factory.adapters.model import Conversation, OutcomeEvent, Span, Turn
from agent_factory.adapters.otel.toolcalls import DERIVED
from agent_factory.evaluators.collect.redact import DefaultRedactor, redact_text
from agent_factory.evaluators.provenance import provenance_record, record_json
from agent_factory.evaluators.provenance.endings import classify as classify_ending
from agent_factory.factory.executors.process import ProcessExecutor, can_fork, whole_groups
from agent_factory.factory.ingest.identity import IdentityGuard, conflict_message
from agent_factory.factory.store import Batch, Store, conversation_row, event_row, span_row, turn_row
from agent_factory.factory.store.claims import claimed_sessions, has_sources, refuse_turns
from agent_factory.factory.store.ingest import (
    call_group_spans,
    consume_staged,
    delete_turns,
    iter_staged_batches,
    iter_staged_spans,
    shared_traces,
    trace_elsewhere,
    turn_attributes,
)
from agent_factory.factory.store.rows import BATCH_BYTES, arrow_dicts, arrow_rows, span_from_row, table_text
from agent_factory.factory.store.schema import TEXT_COLUMNS
from agent_factory.factory.store.turn_tables import ipc_stream, read_ipc
from agent_factory.knowledge_packs import KnowledgePack

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MIN_SPANS_FOR_WORKERS = 20_000
"""Staged spans from which a file's traces are settled by worker processes (when there are workers)."""
CHUNK_SPANS = 2_000
"""Staged spans (of whole traces) per chunk a worker settles, unless they hold `CHUNK_BYTES` of text first."""
CHUNK_BYTES = 4 << 20
"""Span text per chunk: the chunks in flight (two per worker) and their turns' rows stay tens of megabytes
when spans carry long prompts."""
_SPAN_TEXT = TEXT_COLUMNS["staged_spans"]
MAX_REPORTED_ERRORS = 1000
"""Errors kept in the report per run; the store keeps every quarantined record."""


TurnWrite = tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]
"""The rows one turn writes: its `turns` row, its `provenance` row, its `spans` rows in order."""


def turn_rows(turn: Turn, *, pack: KnowledgePack, source_id: str, last: bool | None = None) -> TurnWrite:
    """The rows of a turn, its ending classified by the pack and its provenance recorded (pure)."""
    # Hand-offs and closing messages first: coverage and every later reader see the pack's delivery state.
    turn = classify_ending(turn, pack, last=last)
    rec = provenance_record(turn, pack)
    provenance = {
        "turn_id": turn.id, "segment": rec.segment.segment, "record": record_json(rec),
        "complete": rec.coverage.complete, "injections": len(rec.injections), "source_id": source_id,
    }
    return (turn_row(turn, segment=rec.segment.segment, source_id=source_id), provenance,
            [span_row(span, seq=seq, source_id=source_id, turn_id=turn.id) for seq, span in enumerate(turn.spans)])


@dataclass(frozen=True)
class SettledTrace:
    """What one trace's staged spans come to (`settle_trace`)."""

    bad: list[Quarantine]
    """Defects (duplicate ids, parent cycles), quarantined."""
    accepted: int
    """This file's spans of the trace that are no defect."""
    pending: int
    """This file's spans still waiting for their parent."""
    orphans: list[tuple[str, str]]
    """(trace id, span id) of every orphan, of any file: they stay staged."""
    call: list[Span] | None = None
    """A client-only model call: grouped into a turn with its conversation's other calls once the file is read."""
    written: TurnWrite | None = None
    """The rows of the trace's turn."""


def settle_trace(spans: list[Span], *, own: set[str], count: int, path: str, pack: KnowledgePack,
                 source_id: str) -> SettledTrace:
    """Check one trace's spans (`own`: the ids of the `count` spans this file brought) and build its turn's
    rows (pure: a worker process settles traces no other file shares)."""
    kept, bad, orphans = split_trace(spans, source=path)
    call = kept if kept and is_call_trace(kept) else None
    written = turn_rows(assemble_turn(kept), pack=pack, source_id=source_id) if kept and call is None else None
    return SettledTrace(bad=bad, accepted=max(count - len(bad), 0), pending=sum(1 for s in orphans if s.id in own),
                        orphans=[(s.trace_id, s.id) for s in orphans], call=call, written=written)


class _Rows:
    """One set of row batches: the file's stream, or the rows written in its closing transaction.

    Batches of 4,000 rows: a turn's rows carry its texts and its provenance record (kilobytes each), and larger
    batches held hundreds of megabytes in Python before each append."""

    def __init__(self, store: Store, *, size: int = 4_000, max_bytes: int = BATCH_BYTES) -> None:
        self.spans = Batch(store, "spans", size=size, max_bytes=max_bytes)
        self.turns = Batch(store, "turns", size=size, max_bytes=max_bytes)
        self.provenance = Batch(store, "provenance", size=size, max_bytes=max_bytes)

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

    def __init__(self, store: Store, *, source_id: str, path: str, pack: KnowledgePack, workers: int = 1,
                 earlier: set[str] | None = None) -> None:
        self.store, self.source_id, self.path, self.pack = store, source_id, path, pack
        self.workers = workers
        """Processes that settle staged traces (`_assemble_in_processes`); 1: this one."""
        self.rows = _Rows(store)
        self.late = _Rows(store, size=1 << 62, max_bytes=1 << 62)  # flushed only inside the closing transaction
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
        self.already = 0
        """Accepted records the store held already, identical (a file that grew, read again): written once."""
        self.identity = IdentityGuard(store, source_id=source_id, active=has_sources(store), earlier=earlier or set(),
                                      write=self._conversation, reject=self.reject, path=path)
        """Decides whole-conversation records whose id another file stored (`factory.identity`)."""

    def reject(self, q: Quarantine) -> None:
        """Quarantine a record (the first errors are also kept for the report). A reason may echo the value it
        rejects (a bearer token in a bad timestamp): what it says is redacted before it is kept or printed."""
        q = _redacted(q)
        self.quarantined += 1
        if len(self.errors) < MAX_REPORTED_ERRORS:
            self.errors.append(q)
        self.quarantine.add(
            {"source_id": self.source_id, "path": self.path, "location": q.location, "field": q.field,
             "message": q.message}
        )

    def turn(self, turn: Turn, *, last: bool | None = None, late: bool = False) -> None:
        """Write a turn with its spans and provenance, its ending classified by the pack."""
        self._write(turn_rows(turn, pack=self.pack, source_id=self.source_id, last=last), late=late)

    def _write(self, written: TurnWrite, *, late: bool = False) -> None:
        turn, provenance, spans = written
        rows = self.late if late else self.rows
        rows.turns.add(turn)
        rows.provenance.add(provenance)
        for span in spans:
            rows.spans.add(span)

    def conversation(self, conv: Conversation) -> None:
        """Take a whole-conversation record: written with its turns and events, unless another file stored its id
        (`factory.identity`: the same record is counted and not written again, another one is refused)."""
        # Duplicate ids within a file are the adapter's to catch (it knows the record's location).
        self.identity.conversation(conv)

    def _conversation(self, conv: Conversation, digest: str) -> None:
        self.conversations.add(conversation_row(conv, source_id=self.source_id, digest=digest))
        for k, t in enumerate(conv.turns):
            self.turn(t, last=k == len(conv.turns) - 1)
        for ev in conv.events:
            self.events.add(event_row(ev, source_id=self.source_id))

    def standalone_turn(self, turn: Turn) -> None:
        """Take a turn that arrived as a record of its own (refused when another file stored its id)."""
        if self.identity.turn(turn):
            self.turn(turn)
            self.accepted += 1

    def event(self, event: OutcomeEvent) -> None:
        """Take an outcome event that arrived as a record of its own."""
        row = event_row(event, source_id=self.source_id)
        verdict = self.identity.event(event, row["value"])
        if verdict is False:
            return
        if verdict is None:
            self.already += 1
        else:
            self.events.add(row)
        self.accepted += 1

    def stage(self, span: Span) -> None:
        """Stage a span until its trace is complete."""
        self.stage_row(span_row(span, seq=0, source_id=self.source_id))

    def stage_row(self, row: dict[str, Any]) -> None:
        """Stage a span given as its row (`span_row` of this file's source), numbered here in arrival order."""
        row["seq"] = self.staged_count
        self.staged.add(row)
        self.staged_count += 1

    def stage_table(self, table: pa.Table) -> None:
        """Stage spans given as a table of their rows (`span_row`s of this file's source), numbered here in
        arrival order."""
        n = table.num_rows
        at = table.schema.get_field_index("seq")
        seq = pa.array(np.arange(self.staged_count, self.staged_count + n), type=table.schema.field(at).type)
        self.staged.add_table(table.set_column(at, "seq", seq))
        self.staged_count += n

    def assemble_staged(self) -> None:
        """Group staged spans by trace (in arrival order), check each tree, and write its turn."""
        self.staged.flush()
        if not self.staged_count:
            return
        shared = shared_traces(self.store, self.source_id)
        if self.workers > 1 and self.staged_count >= MIN_SPANS_FOR_WORKERS and can_fork():
            self._assemble_in_processes(shared)
        else:
            current: list[Span] = []
            for span in iter_staged_spans(self.store, self.source_id):
                if current and current[0].trace_id != span.trace_id:
                    self._trace(current, shared=current[0].trace_id in shared)
                    current = []
                current.append(span)
            if current:
                self._trace(current, shared=current[0].trace_id in shared)
        self._group_calls()

    def _assemble_in_processes(self, shared: set[str]) -> None:
        """`assemble_staged` with the traces no other file shares settled by forked workers (`settle_trace`,
        pure), in chunks of traces, taken in here in trace order as the one-process path takes them. A shared
        trace travels in its chunk untouched and is joined here, where the store is (`_trace`). Chunks travel
        as Arrow both ways: the staged rows out (an IPC stream), the rows of the turns back as tables the worker
        made, so this process builds no row of a trace the workers settled."""
        pack, path, source_id = self.pack, self.path, self.source_id

        def work(chunk: _TraceChunk) -> _Settled:
            staged, shared_here = chunk
            out: list[SettledTrace | _SpanRows] = []
            written: dict[str, list[dict[str, Any]]] = {"turns": [], "provenance": [], "spans": []}
            for rows in _traces(arrow_dicts(read_ipc(staged))):
                if rows[0]["trace_id"] in shared_here:
                    out.append(rows)
                    continue
                spans = [span_from_row(r) for r in rows]
                t = settle_trace(spans, own={s.id for s in spans}, count=len(spans), path=path, pack=pack,
                                 source_id=source_id)
                if t.written is not None:
                    turn, provenance, span_rows = t.written
                    written["turns"].append(turn)
                    written["provenance"].append(provenance)
                    written["spans"].extend(span_rows)
                    t = replace(t, written=None)
                out.append(t)
            return out, {name: arrow_rows(name, rows) for name, rows in written.items()}

        def sink(done: _Settled) -> None:
            settled, tables = done
            for t in settled:
                if isinstance(t, SettledTrace):
                    self._settled(t)
                else:
                    self._trace([span_from_row(r) for r in t], shared=True)
            # The chunk's turns in its traces' order: the rows `_settled` would have queued one by one.
            self.rows.turns.add_table(tables["turns"])
            self.rows.provenance.add_table(tables["provenance"])
            self.rows.spans.add_table(tables["spans"])

        executor: ProcessExecutor[_TraceChunk, _Settled] = ProcessExecutor(workers=self.workers)
        executor.run(_trace_chunks(iter_staged_batches(self.store, self.source_id), shared=shared,
                                   spans=CHUNK_SPANS, max_bytes=CHUNK_BYTES), work=work, sink=sink)

    def _stored(self, trace_id: str, spans: list[Span]) -> tuple[list[Span], list[Span]]:
        """The trace's spans held elsewhere (other files' pending spans, the spans of stored turns, which this
        file's turn replaces), and those of `spans` that are not among them as they are: a span stored already,
        identical (a file that grew, read again), is not read twice."""
        pending, stored = trace_elsewhere(self.store, trace_id, source_id=self.source_id)
        held = {s.id: s for s in pending} | {s.id: s for _turn_id, s in stored}
        fresh: list[Span] = []
        for s in spans:
            if s.id not in held:
                fresh.append(s)
            elif held[s.id] != s:  # another span under a stored id: the stored one stays, this one is refused
                self.reject(Quarantine(source=self.path, location=f"trace {s.trace_id} span {s.id}", field="span_id",
                                       message=f"duplicate span id {s.id!r} in trace {s.trace_id!r}: another file "
                                               "stored a span with this id and other content"))
        if not fresh:
            return [], []  # nothing new: what is stored stays as it is
        for turn_id, _span in stored:
            self._replace(turn_id)
        out = pending + [span for _turn_id, span in stored]
        if out:
            self.joined.add(trace_id)
        return out, fresh

    def _replace(self, turn_id: str | None) -> None:
        if turn_id is None or turn_id in self.replaced:
            return
        self.replaced.add(turn_id)
        attrs = turn_attributes(self.store, turn_id)
        key = attrs.get(CALL_GROUP) if attrs is not None else None
        if isinstance(key, str):  # a turn of client-only calls: its whole group is grouped again
            self.calls.setdefault(key, [])

    def _trace(self, spans: list[Span], *, shared: bool) -> None:
        if shared:
            before = self.quarantined
            elsewhere, fresh = self._stored(spans[0].trace_id, spans)
            known = len(spans) - len(fresh) - (self.quarantined - before)
            self.accepted += known
            self.already += known
            if not fresh:
                return
            spans = fresh
        own, count = {s.id for s in spans}, len(spans)
        if shared:
            spans = _by_start(elsewhere + spans)
        self._settled(settle_trace(spans, own=own, count=count, path=self.path, pack=self.pack,
                                   source_id=self.source_id), late=shared)

    def _settled(self, t: SettledTrace, *, late: bool = False) -> None:
        """Take in a settled trace: its defects quarantined, its orphans kept pending, its turn written (or its
        client-only call kept for grouping)."""
        for q in t.bad:
            self.reject(q)
        self.accepted += t.accepted
        self.pending += t.pending
        self.keep.extend(t.orphans)
        if t.call is not None:
            self.calls.setdefault(group_key(t.call), []).append(t.call)
        if t.written is not None:
            self._write(t.written, late=late)

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
        """Decide the held records, then append every queued row."""
        self.identity.flush()
        self.accepted += self.identity.accepted
        self.already += self.identity.already
        self.identity.accepted = self.identity.already = 0
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
        if self.identity.active:
            self._refuse_claimed_sessions()

    def _refuse_claimed_sessions(self) -> None:
        """Turns this file built from spans whose conversation id another file holds as a whole-conversation
        record: refused with their spans, each span quarantined (`factory.identity`)."""
        claimed = [c for c in claimed_sessions(self.store, self.source_id) if c[0] not in self.joined]
        if not claimed:
            return
        conversation = {t: (cid, path) for t, cid, path in claimed}
        for trace_id, span_id, turn_id, attributes in refuse_turns(self.store, conversation, source_id=self.source_id):
            if DERIVED in json.loads(attributes):
                continue  # made from another span at assembly: no record of the file
            cid, path = conversation[turn_id]
            self.accepted -= 1
            self.reject(Quarantine(source=self.path, location=f"trace {trace_id} span {span_id}", field="session.id",
                                   message=conflict_message("conversation", cid, [path], earlier=set(),
                                                            session=True)))
        self.quarantine.flush()


_REDACTOR = DefaultRedactor()


def _redacted(q: Quarantine) -> Quarantine:
    """`q` with its location, field and message redacted (ids and rejected values may be personal or secret)."""
    parts = {k: redact_text(v, _REDACTOR) for k, v in (("location", q.location), ("field", q.field),
                                                         ("message", q.message)) if v}
    changed = {k: v for k, v in parts.items() if v != getattr(q, k)}
    return q.model_copy(update=changed) if changed else q


_SpanRows = list[dict[str, Any]]
_TraceChunk = tuple[pa.Buffer, frozenset[str]]
"""Whole traces' staged rows in trace order (an Arrow IPC stream), and the ids of those another file shares."""
_Settled = tuple[list["SettledTrace | _SpanRows"], dict[str, pa.Table]]
"""A chunk settled: each trace's outcome, its turn's rows left out, or, for a shared trace, its staged rows; and
the `turns`, `provenance` and `spans` rows of its turns as tables, in trace order."""


def _traces(rows: list[dict[str, Any]]) -> Iterator[_SpanRows]:
    """Rows in trace order, as each trace's rows."""
    group: _SpanRows = []
    for r in rows:
        if group and r["trace_id"] != group[0]["trace_id"]:
            yield group
            group = []
        group.append(r)
    if group:
        yield group


def _trace_chunks(batches: Iterable[pa.RecordBatch], *, shared: set[str], spans: int, max_bytes: int
                  ) -> Iterator[tuple[_TraceChunk, int]]:
    """Staged rows in trace order (Arrow batches) as chunks of whole traces, cut by `whole_groups` (at least
    `spans` rows, or `max_bytes` of span text by `table_text`), each a slice of the batches; each chunk with its
    number of traces."""
    held: dict[int, pa.RecordBatch] = {}

    def positions() -> Iterator[list[tuple[str, int, int, int]]]:
        # Each row as (trace id, text, batch, row): what `whole_groups` groups and weighs.
        for j, batch in enumerate(batches):
            held[j] = batch
            ids = [str(k) for k in batch.column("trace_id").to_pylist()]  # never null (`staged_spans`)
            yield [(k, w, j, i) for i, (k, w) in enumerate(zip(ids, table_text(batch, _SPAN_TEXT).tolist(),
                                                                  strict=True))]

    for traces in whole_groups(positions(), key=lambda p: p[0], size=spans, weight=lambda p: p[1],
                               max_weight=max_bytes):
        (_, _, j0, i0), (_, _, j1, i1) = traces[0][0], traces[-1][-1]
        parts = []
        for j in range(j0, j1 + 1):
            lo, hi = i0 if j == j0 else 0, i1 + 1 if j == j1 else held[j].num_rows
            parts.append(held[j].slice(lo, hi - lo))
        for j in range(j0, j1):
            del held[j]  # the next chunk starts in batch j1 or later
        mine = frozenset(t[0][0] for t in traces if t[0][0] in shared)
        yield (ipc_stream(pa.Table.from_batches(parts)), mine), len(traces)


def _by_start(spans: list[Span]) -> list[Span]:
    # Spans of one trace from several files: parents before children is not guaranteed, time order is the
    # best order there is (assembly does not rely on it).
    return sorted(spans, key=lambda s: (s.start is None, s.start or _EPOCH))


