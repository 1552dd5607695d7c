"""Identity across files: no record counted and dropped.

Conversation ids are the sources' own (a chat export's `id`, tau-bench's task and trial, an OTLP session), so two
files can use one id for two things: two chat exports that both number from 1, two agents' runs over the same
tasks, a chat conversation and an OTLP session of another user, an edited file ingested again. Stored rows are
keyed by those ids, and an append keeps the stored row of a key it already holds, so ingest decides first, record
by record, and never lets an append drop what it counted:

- the same record seen again (a copy, a file that grew: its digest is the stored one) is *already stored*: it is
  accepted, written once, and counted apart (`FileReport.already_stored`);
- another record under a stored id is refused, quarantined with one line naming both files: the store keeps one
  record per id, and which one is the user's call (`ingest --replace` for an edited file; other ids or another
  `--store` for two sources that number alike);
- turns built from spans (OTLP and the other span formats) add to a session across files by design, so they are
  refused only when the session's id is another source's whole-conversation record, which owns its id
  (`FileWriter.finish`, `store.claims.claimed_sessions`); a whole-conversation record is refused in turn when
  turns of another file already use its id.

The checks read the store only when it holds another file; a first ingest pays nothing for them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from agent_factory.adapters.base import Quarantine
from agent_factory.adapters.model import Conversation, OutcomeEvent, Turn
from agent_factory.factory.store import Store
from agent_factory.factory.store.claims import Claim, conversation_claims, event_claims, turn_claims

HOLD = 256
"""Whole-conversation records held before their ids are looked up together."""
HOLD_CHARS = 4 << 20
"""Or the characters of text they may hold before the look-up, whichever comes first."""


def conversation_digest(conv: Conversation) -> str:
    """sha256 of a whole-conversation record as read: equal digests, the same record."""
    return hashlib.sha256(conv.model_dump_json().encode("utf-8", "surrogatepass")).hexdigest()


def _text_size(conv: Conversation) -> int:
    return sum(len(t.request or "") + len(t.answer or "") + sum(len(s.output or "") for s in t.spans)
               for t in conv.turns)


def conflict_message(kind: str, rid: str, claim_paths: list[str], *, earlier: set[str], session: bool = False
                     ) -> str:
    """The one line of a record refused because files already hold its id."""
    other = claim_paths[0] if claim_paths else "another file"
    if other in earlier:
        return (f"{kind} {rid!r} is stored from an earlier version of this file with other content and was left as "
                "it was; `agent-factory ingest --replace` replaces the earlier version")
    if session:
        return (f"{kind} {rid!r} is already a conversation of {other}, another source; one id cannot name both: "
                "give this source other ids, or ingest it into another --store")
    return (f"{kind} {rid!r} is already stored from {other} with other content; the store keeps one record per id: "
            "give this source other ids, or ingest it into another --store")


class IdentityGuard:
    """Decides, for the whole-conversation records and standalone turns and events of one file, whether each is
    new (written), already stored (counted, not written again) or another record under a stored id (refused)."""

    def __init__(self, store: Store, *, source_id: str, active: bool, earlier: set[str],
                 write: Callable[[Conversation, str], None], reject: Callable[[Quarantine], None],
                 path: str) -> None:
        self.store, self.source_id, self.active, self.earlier, self.path = store, source_id, active, earlier, path
        self._write, self._reject = write, reject
        self._held: list[tuple[Conversation, str]] = []
        self._held_chars = 0
        self.accepted = 0
        """Records this guard let in or found already stored."""
        self.already = 0
        """Of those, the ones the store held already (identical)."""

    def conversation(self, conv: Conversation) -> None:
        """Take a whole-conversation record: written now when no other file is stored, else decided in a batch."""
        digest = conversation_digest(conv)
        if not self.active:
            self.accepted += 1
            self._write(conv, digest)
            return
        self._held.append((conv, digest))
        self._held_chars += _text_size(conv)
        if len(self._held) >= HOLD or self._held_chars >= HOLD_CHARS:
            self.flush()

    def flush(self) -> None:
        """Decide every held record."""
        held, self._held, self._held_chars = self._held, [], 0
        if not held:
            return
        claims = conversation_claims(self.store, [c.id for c, _ in held], source_id=self.source_id)
        for conv, digest in held:
            claim = claims.get(conv.id)
            if claim is None:
                self.accepted += 1
                self._write(conv, digest)
            elif claim.digest == digest:
                self.accepted += 1
                self.already += 1
            else:
                self._refuse("conversation", conv.id, claim)

    def _refuse(self, kind: str, rid: str, claim: Claim) -> None:
        session = claim.digest is None
        self._reject(Quarantine(source=self.path, location=f"{kind} {rid}", field="id",
                                message=conflict_message(kind, rid, claim.paths, earlier=self.earlier,
                                                         session=session)))

    def turn(self, turn: Turn) -> bool:
        """Whether a standalone turn may be written (no other file stored its id); refused otherwise."""
        if not self.active:
            return True
        other = turn_claims(self.store, [turn.id], source_id=self.source_id).get(turn.id)
        if other is None:
            return True
        self._reject(Quarantine(source=self.path, location=f"turn {turn.id}", field="id",
                                message=conflict_message("turn", turn.id, [other], earlier=self.earlier)))
        return False

    def event(self, event: OutcomeEvent, value_json: str | None) -> bool | None:
        """Whether a standalone outcome event may be written: True new, None the same event already stored
        (counted, not written), False refused (another event under its id)."""
        if not self.active:
            return True
        stored = event_claims(self.store, [event.id], source_id=self.source_id).get(event.id)
        if stored is None:
            return True
        path, kind, value = stored
        if kind == event.kind and _same_json(value, value_json):
            return None
        self._reject(Quarantine(source=self.path, location=f"event {event.id}", field="id",
                                message=conflict_message("event", event.id, [path], earlier=self.earlier)))
        return False


def _same_json(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a is b
    return bool(json.loads(a) == json.loads(b))
