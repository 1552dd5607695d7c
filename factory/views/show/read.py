"""The part of `agent-factory show` that reads a store: one unit's evidence, data, results and flags, or the
units most flagged with one quote each. Everything is returned as the models of `factory.views.show`, what comes from
a trace redacted (its text, and its ids: a user id may be an email); the stored rows come from
`factory.store.lookup`, every flag from `factory.views.findings.read_findings`."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from agent_factory.errors import AgentFactoryError
from agent_factory.evaluators.collect.redact import Redaction, Redactor, redact_text
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.findings import FlagRow, Level, level_units
from agent_factory.factory.store import Store
from agent_factory.factory.store.lookup import (
    evidence,
    field_value,
    locate,
    spans_of,
    turns_of,
    unit_data,
    unit_results,
    user_conversations,
)
from agent_factory.factory.views.findings import Findings, read_findings
from agent_factory.factory.views.show.unit import (
    ConversationRef,
    DataGroup,
    Datum,
    Flag,
    Kind,
    Pointer,
    Quote,
    Result,
    SpanView,
    TurnView,
    UnitShow,
    Worst,
    WorstUnit,
    counted_flags,
    marked,
    one_line,
    pointer_parts,
    rank_units,
    redact_value,
    subtree,
)

QUOTE_CONTEXT_WORST = 60
"""Context either side of the cited range in a `--worst` quote (one line)."""
CITED_MAX_WORST = 160
"""Longest cited range in a `--worst` quote."""
_QUOTE_TRIES = 20
"""Raised flags tried for a quote before giving up (most point at stored text at once)."""


def _decode(raw: str | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


class _Texts:
    """Field texts read, and redacted, once per (unit, field): a conversation's data point into the same few
    fields (a long field is searched for secrets once, not once per pointer); ids redacted once each."""

    def __init__(self, store: Store, redactor: Redactor) -> None:
        self.store, self.redactor = store, redactor
        self._cache: dict[tuple[str, str], str | list[Any] | None] = {}
        self._found: dict[tuple[str, str], list[Redaction]] = {}
        self._ids: dict[str, str] = {}

    def value(self, unit_id: str, field: str) -> str | list[Any] | None:
        key = (unit_id, field)
        if key not in self._cache:
            self._cache[key] = field_value(self.store, unit_id, field)
        return self._cache[key]

    def found(self, unit_id: str, field: str, value: str) -> list[Redaction]:
        """What the redactor finds in a field's text (searched once)."""
        key = (unit_id, field)
        if key not in self._found:
            self._found[key] = list(self.redactor.find(value))
        return self._found[key]

    def id(self, value: str | None) -> str | None:
        """An id from the store, redacted (None stays None)."""
        if value is None:
            return None
        if value not in self._ids:
            self._ids[value] = redact_text(value, self.redactor)
        return self._ids[value]

    def rid(self, value: str) -> str:
        """An id that is never None, redacted."""
        return self.id(value) or ""

    def text(self, value: str | None) -> str | None:
        """Free text from the store (a reason, a note), redacted."""
        return None if value is None else redact_text(value, self.redactor)

    def pointer(self, p: dict[str, Any], *, context: int | None = None, cited_max: int | None = None
                ) -> tuple[Pointer, str | list[Any] | None]:
        """The pointer with the text it cites, and the field's value (None: not stored)."""
        uid, fld = str(p.get("unit_id")), str(p.get("field"))
        start, end = int(p.get("start") or 0), int(p.get("end") or 0)
        value = self.value(uid, fld)
        if value is None:
            return Pointer(unit_id=self.rid(uid), field=fld, start=start, end=end, missing="field not stored"), None
        found = self.found(uid, fld, value) if isinstance(value, str) else None
        extra: dict[str, int] = {k: v for k, v in (("context", context), ("cited_max", cited_max)) if v is not None}
        before, cited, after, cut = pointer_parts(value, start, end, self.redactor, found=found, **extra)
        return Pointer(unit_id=self.rid(uid), field=fld, start=start, end=end, before=before, cited=cited,
                       after=after, cut=cut), value


def _data(store: Store, texts: _Texts, unit_ids: Sequence[str],
          raising: dict[tuple[str, str], list[str]]) -> dict[str, list[Datum]]:
    out: dict[str, list[Datum]] = {u: [] for u in unit_ids}
    for uid, item, value, fact, reason, cited, tier, collector, rater in unit_data(store, unit_ids):
        pointers = tuple(texts.pointer(p)[0] for p in (_decode(cited) or []) if isinstance(p, dict))
        raises = tuple(raising.get((uid, item), ())) if rater == "primary" else ()
        out[uid].append(Datum(unit_id=texts.rid(uid), item=item, value=texts.text(value),
                              fact=redact_value(_decode(fact), texts.redactor), reason=texts.text(reason), tier=tier,
                              collector=collector, rater=rater, raises=raises, evidence=pointers))
    return out


def _results(store: Store, texts: _Texts, unit_ids: Sequence[str]) -> list[Result]:
    rows = unit_results(store, unit_ids)
    order = {u: i for i, u in enumerate(unit_ids)}
    rows.sort(key=lambda r: order[r[0]])
    return [Result(unit_id=texts.rid(u), component=c, metric=m, value=redact_value(_decode(v), texts.redactor),
                   note=texts.text(note)) for u, c, m, v, note in rows]


def _spans(store: Store, turn_id: str, texts: _Texts, *, span_id: str | None = None) -> list[SpanView]:
    rows = spans_of(store, turn_id=turn_id, span_id=span_id)
    red = texts.text
    return [SpanView(id=texts.rid(i), name=red(n), kind=k, status=s, input=red(a), output=red(b), error=red(e),
                     tool_calls=_tool_calls(attrs, texts.redactor))
            for i, n, k, s, a, b, e, attrs in rows]


def _tool_calls(attributes: str | None, redactor: Redactor) -> tuple[str, ...]:
    calls = (_decode(attributes) or {}).get("tool_calls") if attributes else None
    if not isinstance(calls, list):
        return ()
    return tuple(redact_text(str(c.get("name", c)) if isinstance(c, dict) else str(c), redactor) for c in calls)


def _turns(store: Store, texts: _Texts, *, conversation_id: str | None = None,
           turn_id: str | None = None) -> list[tuple[str, TurnView]]:
    """(raw id, the turn's view) of a conversation's turns, or of one turn."""
    rows = turns_of(store, conversation_id=conversation_id, turn_id=turn_id)
    return [(i, TurnView(id=texts.rid(i), index=x, request=texts.text(q), answer=texts.text(a), delivery=d, mode=m,
                         n_spans=int(n or 0))) for i, x, q, a, d, m, n in rows]


def _flags(specs: Sequence[FlagSpec], findings: Findings, level: Level, unit_id: str,
           texts: _Texts) -> tuple[list[Flag], list[FlagRow]]:
    """The flags raised on the unit, rolled up to it, and the raised rows at or below it."""
    raised_here = {r.flag for r in findings.at(level) if r.unit_id == unit_id and r.value == 1}
    below = [r for r in subtree(findings.rows, findings.units, level, unit_id) if r.value == 1]
    on: dict[str, list[str]] = defaultdict(list)
    for r in below:
        if r.unit_id not in on[r.flag]:
            on[r.flag].append(r.unit_id)
    flags = [Flag(id=s.id, component=s.component, label=s.label, meaning=s.meaning,
                  raised_on=tuple(texts.rid(u) for u in on[s.id])) for s in specs if s.id in raised_here]
    return flags, below


def read_unit(store: Store, unit_id: str, specs: Sequence[FlagSpec], redactor: Redactor) -> UnitShow:
    """One unit: its evidence, its data (a conversation's turns' too) with the text each pointer cites, the
    per-unit results on it and the flags raised on it. An unknown id is an error saying how to find ids."""
    where = locate(store, unit_id)
    if where is None:
        raise AgentFactoryError(f"show: no span, turn, conversation or user {unit_id!r} in {store.path}; "
                                "list ids with `agent-factory show --worst 10` (or `export --level turn`)")
    kind: Kind = where.kind
    # Every unit a roll-up of this one reads belongs to its user: reading that user's flags is enough.
    findings = read_findings(store, specs, with_associations=False, user=where.user_id)
    texts = _Texts(store, redactor)
    flags, below = _flags(specs, findings, kind, unit_id, texts)
    spec_of = {s.id: s for s in specs}
    raising: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in below:
        s = spec_of[r.flag]
        if s.source == "datum":
            raising[(r.unit_id, s.item)].append(s.id)
    span = turn = None
    turns: list[TurnView] = []
    conversations: list[ConversationRef] = []
    groups: list[tuple[str, str]] = []
    rid = texts.rid
    if kind == "span":
        span = _spans(store, where.turn_id or "", texts, span_id=unit_id)[0]
        if where.turn_id is not None:
            turn = next((t for _, t in _turns(store, texts, turn_id=where.turn_id)), None)
        groups = [(unit_id, f"span {rid(unit_id)}")]
    elif kind == "turn":
        turn = _turns(store, texts, turn_id=unit_id)[0][1]
        turn = turn.model_copy(update={"spans": tuple(_spans(store, unit_id, texts))})
        groups = [(unit_id, f"turn {turn.index} {rid(unit_id)}")]
    elif kind == "conversation":
        listed = _turns(store, texts, conversation_id=unit_id)
        turns = [t for _, t in listed]
        groups = [(unit_id, f"conversation {rid(unit_id)}")] + [(i, f"turn {t.index} {t.id}") for i, t in listed]
    else:
        rolled = findings.at("conversation")
        bad = {s.id for s in specs if s.meaning == "bad"}
        raised: dict[str, int] = defaultdict(int)
        for r in rolled:
            if r.value == 1 and r.flag in bad:
                raised[r.unit_id] += 1
        conversations = [ConversationRef(id=rid(c), turns=n, flags_raised=raised.get(c, 0))
                         for c, n in user_conversations(store, unit_id)]
    ids = [u for u, _ in groups]
    data = _data(store, texts, ids, raising) if ids else {}
    return UnitShow(
        unit_id=rid(unit_id), kind=kind, conversation_id=texts.id(where.conversation_id),
        user_id=texts.id(where.user_id), span=span, turn=turn, turns=tuple(turns), conversations=tuple(conversations),
        data=tuple(DataGroup(unit_id=rid(u), title=title, data=tuple(data.get(u, ()))) for u, title in groups),
        results=tuple(_results(store, texts, ids or [unit_id])), flags=tuple(flags))


def _quote(store: Store, texts: _Texts, rows: Sequence[FlagRow], specs: Sequence[FlagSpec],
           position: dict[str, int]) -> Quote | None:
    """The first evidence pointer with stored text of the first raised flag's datum (suite order, then turn
    order) that has one; else the request of the first turn a flag was raised on."""
    order = {s.id: i for i, s in enumerate(specs)}
    spec_of = {s.id: s for s in specs}
    tried = 0
    ranked = sorted(rows, key=lambda r: (order[r.flag], position.get(r.unit_id, 0), r.unit_id))
    for r in ranked:
        s = spec_of[r.flag]
        if s.source != "datum" or tried >= _QUOTE_TRIES:
            continue
        tried += 1
        for p in _decode(evidence(store, r.unit_id, s.item)) or []:
            if not isinstance(p, dict):
                continue
            pointer, value = texts.pointer(p, context=QUOTE_CONTEXT_WORST, cited_max=CITED_MAX_WORST)
            if value is None or (isinstance(value, str) and not value.strip()):
                continue
            return Quote(flag=s.id, unit_id=pointer.unit_id, field=pointer.field, start=pointer.start,
                         end=pointer.end, text=one_line(marked(pointer.before, pointer.cited, pointer.after,
                                                               cut=pointer.cut)))
    for r in ranked:
        request = texts.value(r.unit_id, "request") if r.layer == "trace" else None
        if isinstance(request, str) and request.strip():
            before, cited, after, cut = pointer_parts(request, 0, len(request), texts.redactor,
                                                      context=QUOTE_CONTEXT_WORST, cited_max=CITED_MAX_WORST,
                                                      found=texts.found(r.unit_id, "request", request))
            return Quote(flag=r.flag, unit_id=texts.rid(r.unit_id), field="request", start=0, end=len(request),
                         text=one_line(marked(before, cited, after, cut=cut)), cites="request")
    return None


def read_worst(store: Store, specs: Sequence[FlagSpec], redactor: Redactor, *, n: int, level: Level,
               component: str | None = None, clause: str | None = None) -> Worst:
    """The `n` units of `level` with most flags meaning `bad` raised (of `component`, of conduct's `clause`),
    each with its flags' labels and one quote."""
    counted = counted_flags(specs, component=component, clause=clause)
    findings = read_findings(store, specs, with_associations=False)
    rolled = findings.at(level)
    ranked = rank_units(rolled, counted)
    raised: dict[str, set[str]] = defaultdict(set)
    for r in rolled:
        if r.value == 1 and r.flag in counted:
            raised[r.unit_id].add(r.flag)
    # Only raised, counted rows can give a quote: filter once, then take each unit's subtree of those.
    hits = [r for r in findings.rows if r.value == 1 and r.flag in counted]
    keys = {u.unit_id: u for u in level_units(findings.units, level)}
    position = {u.unit_id: u.position for u in findings.units}
    texts = _Texts(store, redactor)
    out: list[WorstUnit] = []
    for uid, total, per in ranked[:n]:
        key = keys.get(uid)
        out.append(WorstUnit(
            unit_id=texts.rid(uid), conversation_id=texts.id(key.conversation_id) if key else None,
            user_id=texts.id(key.user_id) if key else None,
            flags_raised=total, by_component=per, labels=tuple(s.label for s in specs if s.id in raised[uid]),
            quote=_quote(store, texts, subtree(hits, findings.units, level, uid), specs, position)))
    return Worst(level=level, component=component, clause=clause, flags_counted=len(counted),
                 units_total=len(keys), units_flagged=len(ranked), units=tuple(out))
