"""The terminal lines of `agent-factory show` (pure): one unit, or the units most flagged.

Trace text arrives redacted (`factory.views.show.read`); here it is made safe for a terminal (`show.clean`: control
characters shown, never sent) and cut where long. The caller prints each line with rich markup, emoji codes and
highlighting off, so `[bold]` or `:smile:` in a trace is printed as written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from agent_factory.factory.views.show.unit import (
    Datum,
    Pointer,
    Result,
    SpanView,
    TurnView,
    UnitShow,
    Worst,
    clean,
    marked,
    one_line,
)

TEXT_SHOWN = 1500
"""Characters of a request, answer or span field shown for a turn or a span (all of it in --json)."""
TEXT_SHOWN_IN_CONVERSATION = 300
"""Characters of each turn's request and answer shown for a conversation."""
POINTERS_SHOWN = 3
"""Evidence pointers printed per datum (all of them in --json)."""
FACT_SHOWN = 80
"""Characters of a datum's fact printed."""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… (+{len(text) - limit:,} characters; --json for all)"


def _block(label: str, text: str | None, *, indent: str, limit: int) -> list[str]:
    """`label: text`, later lines of the text indented under it."""
    if text is None:
        return [f"{indent}{label}: (none)"]
    lines = clean(_cut(text, limit)).splitlines() or [""]
    pad = indent + " " * (len(label) + 2)
    return [f"{indent}{label}: {lines[0]}"] + [pad + line for line in lines[1:]]


def _scalar(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def pointer_line(p: Pointer) -> str:
    """`unit field[start:end]: context «cited» context`, on one line."""
    where = f"{p.unit_id} {p.field}[{p.start}:{p.end}]"
    if p.missing is not None:
        return f"{where}: ({p.missing})"
    return f"{where}: {one_line(marked(p.before, p.cited, p.after, cut=p.cut))}"


def datum_lines(d: Datum, *, indent: str = "  ") -> list[str]:
    """A datum: `item = value`, who collected it, the flags it raises, its reason, fact and pointers."""
    who = "/".join(x for x in (d.tier, d.collector) if x) or "?"
    head = f"{indent}{'!' if d.raises else ' '} {d.item} = {d.value}  ({who}"
    head += ")" if d.rater == "primary" else f", {d.rater})"
    if d.raises:
        head += "  raises " + ", ".join(d.raises)
    out = [clean(head)]
    sub = indent + "    "
    if d.reason:
        out.append(f"{sub}reason: {one_line(d.reason)}")
    if d.fact is not None:
        out.append(f"{sub}fact: {one_line(_cut(_scalar(d.fact), FACT_SHOWN))}")
    out.extend(f"{sub}{pointer_line(p)}" for p in d.evidence[:POINTERS_SHOWN])
    if len(d.evidence) > POINTERS_SHOWN:
        out.append(f"{sub}+{len(d.evidence) - POINTERS_SHOWN} more pointers (--json)")
    return out


def _span_lines(s: SpanView, *, indent: str, limit: int) -> list[str]:
    out = [clean(f"{indent}span {s.id}  {s.kind or '?'} {s.name or '?'}  status {s.status or '?'}")]
    for label, text in (("input", s.input), ("output", s.output), ("error", s.error)):
        if text is not None or label != "error":
            out.extend(_block(label, text, indent=indent + "  ", limit=limit))
    if s.tool_calls:
        out.append(clean(f"{indent}  tool calls: {', '.join(s.tool_calls)}"))
    return out


def _turn_lines(t: TurnView, *, indent: str, limit: int) -> list[str]:
    state = ", ".join(x for x in (t.delivery, t.mode and f"mode {t.mode}", f"{t.n_spans} spans") if x)
    out = [clean(f"{indent}turn {t.index} {t.id}  ({state})")]
    out.extend(_block("request", t.request, indent=indent + "  ", limit=limit))
    out.extend(_block("answer", t.answer, indent=indent + "  ", limit=limit))
    for s in t.spans:
        out.extend(_span_lines(s, indent=indent + "  ", limit=limit))
    return out


def _result_line(r: Result) -> str:
    note = f"  {one_line(r.note)}" if r.note else ""
    return clean(f"  {r.component} {r.metric} = {_scalar(r.value)}  on {r.unit_id}{note}")


def _ordered(data: Iterable[Datum]) -> list[Datum]:
    """Data raising a flag first (what the unit was flagged for), then the rest, each in item order."""
    data = list(data)
    return [d for d in data if d.raises] + [d for d in data if not d.raises]


def render_unit(u: UnitShow) -> list[str]:
    """The lines `show UNIT_ID` prints."""
    where = [f"conversation {u.conversation_id}"] if u.kind in ("span", "turn") and u.conversation_id else []
    where += [f"user {u.user_id}"] if u.kind != "user" and u.user_id else []
    out = [clean(" · ".join([f"{u.kind} {u.unit_id}", *where]))]
    bad = [f for f in u.flags if f.meaning == "bad"]
    out.append(f"flags raised: {len(bad)} meaning bad, {len(u.flags) - len(bad)} other" if u.flags
               else "flags raised: none")
    for f in u.flags:
        on = ", ".join(f.raised_on[:3]) + (f" +{len(f.raised_on) - 3}" if len(f.raised_on) > 3 else "")
        out.append(clean(f"  {f.component}: {f.label}  [{f.id}, {f.meaning}]  on {on}"))
    if u.span is not None:
        out.append("evidence")
        out.extend(_span_lines(u.span, indent="  ", limit=TEXT_SHOWN))
        if u.turn is not None:
            out.append(clean(f"  in turn {u.turn.index} {u.turn.id} ({u.turn.delivery or '?'})"))
    elif u.turn is not None:
        out.append("evidence")
        out.extend(_turn_lines(u.turn, indent="  ", limit=TEXT_SHOWN))
    if u.turns:
        out.append(f"turns ({len(u.turns)})")
        for t in u.turns:
            out.extend(_turn_lines(t, indent="  ", limit=TEXT_SHOWN_IN_CONVERSATION))
    if u.conversations:
        out.append(f"conversations ({len(u.conversations)}); `show CONVERSATION_ID` for each one's data")
        out.extend(clean(f"  {c.id}  {c.turns} turns, {c.flags_raised} flags meaning bad raised")
                   for c in u.conversations)
    if any(d.raises for g in u.data for d in g.data):
        out.append("(! marks a datum that raises a flag; those come first)")
    for g in u.data:
        out.append(clean(f"data of {g.title} ({len(g.data)})" if g.data else f"data of {g.title}: none"))
        for d in _ordered(g.data):
            out.extend(datum_lines(d))
    out.append(f"results on it ({len(u.results)})" if u.results else "results on it: none")
    out.extend(_result_line(r) for r in u.results)
    return out


def render_worst(w: Worst, *, options: str = "") -> list[str]:
    """The lines `show --worst N` prints; `options` (`--store S`) are repeated in the command suggested."""
    what = (f"clause {w.clause}" if w.clause else f"component {w.component}" if w.component else "every component")
    head = (f"{len(w.units)} of {w.units_flagged:,} flagged {w.level}s ({w.units_total:,} in all), most flags "
            f"meaning bad first ({w.flags_counted} flag{'s' if w.flags_counted != 1 else ''} of {what} counted)")
    out = [clean(head)]
    if not w.units:
        out.append(f"  no {w.level} raised any of them")
        return out
    for i, u in enumerate(w.units, 1):
        per = ", ".join(f"{c} {n}" for c, n in u.by_component.items())
        who = f"  user {u.user_id}" if u.user_id and w.level != "user" else ""
        plural = "s" if u.flags_raised != 1 else ""
        out.append(clean(f"{i:>3}. {u.unit_id}  {u.flags_raised} flag{plural} ({per}){who}"))
        out.append(clean("     " + "; ".join(u.labels)))
        q = u.quote
        why = " (the datum points at nothing: the turn's request)" if q and q.cites == "request" else ""
        out.append("     " + (clean(f"{q.unit_id} {q.field}{why}: {q.text}") if q else "(nothing to quote)"))
    out.append(clean(f"next: agent-factory show {w.units[0].unit_id}{' ' + options if options else ''}"))
    return out

