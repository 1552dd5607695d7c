"""`agent-factory show`: one unit with its evidence, its data and what cites them; or the units most flagged.

The models here are what `--json` dumps; the functions here are pure (pointer windows, ranking, the flags
`--worst` counts); `views.show.read` reads a store into the models (every flag through `views.findings`, so
a flag means here what it means in summary, report and export) and `views.show.text` draws the terminal lines.
Every text taken from a trace is redacted by the configured redactor before it is put in a model: the
evidence and the cited text, and the ids (a user id may be an email or a phone), a datum's reason and fact, a
result's value and note.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any, Literal

from agent_factory.errors import AgentFactoryError
from agent_factory.evaluators.collect.redact import Redaction, Redactor, redact_pieces, redact_text
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.findings import FlagRow, Level, UnitKey, bad_flags, flag_counts, turns_of_spans
from agent_factory.factory.views.results import QUOTE_CONTEXT, presented
from agent_factory.frozen import Frozen

Kind = Literal["span", "turn", "conversation", "user"]
WORST_LEVELS: tuple[Level, ...] = ("conversation", "turn", "user")
CITED_MAX = 300
"""Longest cited range returned, in characters (longer ones are cut at their end, `cut` says so)."""


class Pointer(Frozen):
    """One evidence pointer of a datum, with the text it cites (redacted) and some context either side."""

    unit_id: str
    """The unit whose field it points into."""
    field: str
    """The field (`answer`, `request`, `input`, `output`, `attributes.<key>`)."""
    start: int
    """First character cited (for `attributes.tool_calls`: the first call)."""
    end: int
    """One past the last character cited (for `attributes.tool_calls`: one past the last call)."""
    before: str = ""
    """Up to `QUOTE_CONTEXT` characters before the range (an ellipsis where cut)."""
    cited: str = ""
    """The cited range itself (at most `CITED_MAX` characters)."""
    after: str = ""
    """Up to `QUOTE_CONTEXT` characters after the range (an ellipsis where cut)."""
    cut: bool = False
    """The cited range was longer than `CITED_MAX` and is cut."""
    missing: str | None = None
    """Why no text is shown: the field is not stored (None when it is)."""


class Datum(Frozen):
    """One atomic datum of the unit."""

    unit_id: str
    """The unit it is about."""
    item: str
    """Its data id."""
    value: str | None
    """Its value (`yes` / `no` / `not_applicable` / `uncollected`, a number, a label)."""
    fact: Any = None
    """The fact it carries (decoded JSON), if any."""
    reason: str | None = None
    """Why the collector gave that value."""
    tier: str | None = None
    """The tier that collected it (`rule`, `model`, ...)."""
    collector: str | None = None
    """The collector within the tier."""
    rater: str = "primary"
    """`primary` (the suite's cascade) or `audit:<model-id>`."""
    raises: tuple[str, ...] = ()
    """The flags this datum raises on its unit."""
    evidence: tuple[Pointer, ...] = ()
    """Its evidence pointers, each with the text it cites."""


class DataGroup(Frozen):
    """The data of one unit (a conversation's, or one of its turns')."""

    unit_id: str
    """The unit."""
    title: str
    """How it is named on screen (`conversation c1`, `turn 2 c1/turn-2`)."""
    data: tuple[Datum, ...]
    """Its atomic data, in item order."""


class Result(Frozen):
    """One per-unit result row that cites the unit."""

    unit_id: str
    """The unit it is on."""
    component: str
    """The component whose analysis wrote it."""
    metric: str
    """Its metric (`outcome`, `violation.<clause>`)."""
    value: Any = None
    """Its value (decoded JSON)."""
    note: str | None = None
    """The analysis's note."""


class Flag(Frozen):
    """A flag raised on the unit (from `read_findings`, rolled up to the unit's level)."""

    id: str
    """The flag id (`conduct.<clause>.violated`)."""
    component: str
    """The component that raises it."""
    label: str
    """What it says, in words."""
    meaning: str
    """`bad` (a problem of the agent), `descriptive` or `instrument`."""
    raised_on: tuple[str, ...]
    """The units at or below this one where it is raised."""


class SpanView(Frozen):
    """A span's evidence."""

    id: str
    """The span id."""
    name: str | None
    """Its name (the tool or model call)."""
    kind: str | None
    """Its kind (`llm`, `tool`, `retrieval`, ...)."""
    status: str | None
    """`ok` or `error`."""
    input: str | None
    """Its input (redacted)."""
    output: str | None
    """Its output (redacted)."""
    error: str | None
    """Its error (redacted)."""
    tool_calls: tuple[str, ...] = ()
    """The tools a model call asked for (`attributes.tool_calls`), in order."""


class TurnView(Frozen):
    """A turn's evidence."""

    id: str
    """The turn id."""
    index: int | None
    """Its index in the conversation."""
    request: str | None
    """The user's request (redacted)."""
    answer: str | None
    """The agent's answer (redacted)."""
    delivery: str | None
    """Its delivery state (`delivered`, `failed_*`, `handed_off`, ...)."""
    mode: str | None
    """Its mode."""
    spans: tuple[SpanView, ...] = ()
    """Its spans in order (shown for a turn; a conversation lists its turns without them)."""
    n_spans: int = 0
    """How many spans it has."""


class ConversationRef(Frozen):
    """One conversation of a user."""

    id: str
    """The conversation id."""
    turns: int
    """Its turns."""
    flags_raised: int
    """Flags meaning `bad` raised on it."""


class UnitShow(Frozen):
    """What `show UNIT_ID` prints."""

    unit_id: str
    """The unit shown."""
    kind: Kind
    """`span`, `turn`, `conversation` or `user`."""
    conversation_id: str | None
    """Its conversation (None for a user)."""
    user_id: str | None
    """Its user."""
    span: SpanView | None = None
    """A span's evidence."""
    turn: TurnView | None = None
    """A turn's evidence (for a span: the turn it belongs to, without its spans)."""
    turns: tuple[TurnView, ...] = ()
    """A conversation's turns, in order."""
    conversations: tuple[ConversationRef, ...] = ()
    """A user's conversations."""
    data: tuple[DataGroup, ...] = ()
    """Its atomic data (a conversation's, then each turn's), with the evidence each cites."""
    results: tuple[Result, ...] = ()
    """The per-unit results on it (a conversation's and its turns')."""
    flags: tuple[Flag, ...] = ()
    """The flags raised on it, every meaning, in the suite's order."""


class Quote(Frozen):
    """The first evidence pointer of a raised flag's datum, redacted, on one line."""

    flag: str
    """The flag whose datum it is."""
    unit_id: str
    """The unit the pointer points into."""
    field: str
    """The field."""
    start: int
    """First character cited."""
    end: int
    """One past the last character cited."""
    text: str
    """Context and the cited range marked «…», whitespace collapsed."""
    cites: Literal["evidence", "request"] = "evidence"
    """`evidence`: the datum's own pointer; `request`: no raised flag's datum points at stored text (an
    absence, such as no retrieval before answering), so the request of the turn it was raised on is quoted."""


class WorstUnit(Frozen):
    """One of the units most flagged."""

    unit_id: str
    """The unit."""
    conversation_id: str | None
    """Its conversation (None for a user)."""
    user_id: str | None
    """Its user."""
    flags_raised: int
    """The counted flags raised on it (rolled up to the level)."""
    by_component: dict[str, int]
    """Those per component."""
    labels: tuple[str, ...]
    """The labels of the flags raised, in the suite's order."""
    quote: Quote | None
    """One quote of the evidence (None when no raised flag's datum points at stored text)."""


class Worst(Frozen):
    """What `show --worst N` prints."""

    level: Level
    """The level ranked: `conversation`, `turn` or `user`."""
    component: str | None
    """The component whose flags were counted (None: every component)."""
    clause: str | None
    """The conduct clause whose flag was counted (None: every clause)."""
    flags_counted: int
    """How many flags (meaning `bad`) were counted."""
    units_total: int
    """Units of the level."""
    units_flagged: int
    """Units of the level with at least one counted flag raised."""
    units: tuple[WorstUnit, ...]
    """The N units with most flags raised, most first, ties by unit id."""


# --- pure --------------------------------------------------------------------------------------------------------


def pointer_parts(value: str | list[Any], start: int, end: int, redactor: Redactor,
                  *, context: int = QUOTE_CONTEXT, cited_max: int = CITED_MAX,
                  found: Sequence[Redaction] | None = None) -> tuple[str, str, str, bool]:
    """(before, cited, after, cut) of a pointer into `value`. A string is redacted over its whole length (or by
    `found`, what the redactor found in it, when the caller has it already), so a secret cut by a window's
    edge is still hidden; a list (`attributes.tool_calls`) is cited by item."""
    if isinstance(value, list):
        names = [str(v.get("name", v)) if isinstance(v, dict) else str(v) for v in value]
        parts = (", ".join(names[:start]), ", ".join(names[start:end]), ", ".join(names[end:]))
        return redact_text(parts[0], redactor), redact_text(parts[1], redactor), redact_text(parts[2], redactor), False
    n = len(value)
    start, end = max(0, min(start, n)), max(0, min(end, n))
    end = max(start, end)
    a, b = max(0, start - context), min(n, end + context)
    cend = min(end, start + cited_max)
    before, cited, after = redact_pieces(value, [(a, start), (start, cend), (end, b)],
                                         redactor.find(value) if found is None else found)
    return ("…" if a > 0 else "") + before, cited, after + ("…" if b < n else ""), cend < end


def redact_value(value: Any, redactor: Redactor) -> Any:
    """`value` (decoded JSON: a datum's fact, a result's value) with every string in it redacted."""
    if isinstance(value, str):
        return redact_text(value, redactor)
    if isinstance(value, list):
        return [redact_value(v, redactor) for v in value]
    if isinstance(value, dict):
        return {redact_text(str(k), redactor): redact_value(v, redactor) for k, v in value.items()}
    return value


def one_line(text: str) -> str:
    """`text` on one line: whitespace runs collapsed, control characters (terminal escapes) made visible."""
    return " ".join(clean(text).split())


def clean(text: str) -> str:
    """`text` with control characters other than newline and tab shown as hex escapes (a trace cannot drive
    the terminal)."""
    return "".join(c if c in "\n\t" or (c >= " " and c != "\x7f") else f"\\x{ord(c):02x}" for c in text)


def marked(before: str, cited: str, after: str, *, cut: bool = False) -> str:
    """The cited range between «», its context either side."""
    return f"{before}«{cited}{'…' if cut else ''}»{after}"


def subtree(rows: Iterable[FlagRow], units: Sequence[UnitKey], level: Level | Literal["span"],
            unit_id: str) -> list[FlagRow]:
    """The rows of the units at or below `unit_id` (a unit of `level`), whatever their layer."""
    if level == "user":
        return [r for r in rows if r.user_id == unit_id]
    if level == "conversation":
        return [r for r in rows if r.conversation_id == unit_id]
    if level == "turn":
        spans = turns_of_spans(units)
        return [r for r in rows if r.unit_id == unit_id or spans.get(r.unit_id) == unit_id]
    return [r for r in rows if r.unit_id == unit_id]


def rank_units(rows: Iterable[FlagRow], counted: Collection[str]) -> list[tuple[str, int, dict[str, int]]]:
    """(unit id, flags raised, per component) of every unit with a `counted` flag raised, most first, ties by
    unit id (units with none are left out)."""
    counts = flag_counts(rows, counted=counted)
    ranked = sorted(counts.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    return [(u, sum(c.values()), c) for u, c in ranked]


def counted_flags(specs: Sequence[FlagSpec], *, component: str | None, clause: str | None) -> frozenset[str]:
    """The flags `--worst` counts: those meaning `bad`, of `component` and of `clause` when given (a clause is
    the parameter a component's flags carry, as it declares: Conduct's). An unknown component or clause is an
    error naming the valid ones."""
    names = list(dict.fromkeys(s.component for s in specs))
    if component is not None and component not in names:
        raise AgentFactoryError(f"show: unknown component {component!r}; valid: {', '.join(names)}")
    of = {name: how.flag_param[1] for name, how in presented()
          if how.flag_param is not None and how.flag_param[0] == "clause"}

    def clause_of(s: FlagSpec) -> str | None:
        return of[s.component](s.id) if s.component in of else None

    if clause is not None:
        if component is not None and component not in of:
            owners = " or ".join(of) or "(none)"
            raise AgentFactoryError(f"show: --clause is a {owners} clause, not of {component!r}; "
                                    f"drop --component or pass --component {owners}")
        clauses = [c for s in specs if (c := clause_of(s)) is not None]
        if clause not in clauses:
            raise AgentFactoryError(f"show: unknown clause {clause!r}; valid: {', '.join(clauses) or '(none)'}")
    bad = bad_flags(specs)
    return frozenset(s.id for s in specs if s.id in bad
                     and (component is None or s.component == component)
                     and (clause is None or clause_of(s) == clause))
