"""The review page: a stratified sample of (unit, item) pairs for a person to label offline, and its labels read
back (`agent-factory review export` / `review import`, docs/method.md section 6).

The sample is the audit's own (`draw_sample` over the store's `sample_candidates`): the same size and seed draw
the same (unit, component) pairs an `audit --sample N --seed K` re-collects, so people's labels land on the
units a model rater collected too. Each drawn pair is expanded to the component's yes/no items the suite's
cascade collected on that unit; the page shows the unit's evidence once (redacted, as text) and the items'
questions under it. The evaluator's own values are left off the page, so a person's labels are independent of
them (`review.csv`, for the operator, carries them as `primary_value`).

Rendering, the CSV text and parsing labels are pure; `export_review` and `import_review` read and write the store
and files.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, NamedTuple

import jinja2
from pydantic import Field

from agent_factory.digest import stable_id
from agent_factory.errors import SpecError
from agent_factory.evaluators.audit.model import HUMAN_PREFIX, RATED_VALUES, Rating, SampleSummary
from agent_factory.evaluators.audit.sample import Drawn, draw_sample
from agent_factory.evaluators.collect.redact import Redactor, redact_text
from agent_factory.evaluators.core.model import DataDefinition
from agent_factory.factory.store import Store
from agent_factory.factory.store.audit import sample_candidates, write_labels
from agent_factory.factory.store.lookup import (
    Located,
    SpanRecord,
    locate,
    spans_of,
    turns_of,
    unit_data,
    user_conversations,
)
from agent_factory.frozen import Frozen

LABEL_COLUMNS = ("unit_id", "item", "rater", "value")
"""The columns of a labels file (what the page downloads, what `review import` reads)."""
CONTEXT_COLUMNS = ("user_id", "question", "primary_value")
"""The columns `review.csv` adds for the operator (ignored on import)."""
DEFAULT_SAMPLE = 20
"""(unit, component) pairs drawn unless told: a person reads each unit once and answers its items."""
PASSAGE_MAX = 12_000
"""Characters of one passage shown (a tool's output can be a whole database record); the rest is counted."""
CONVERSATIONS_MAX = 5
"""Conversations shown of a user-level unit (the rest are counted)."""
REDACTED_KEY = "redacted:"
"""The prefix of a unit's key on the page when its id holds something the redactor hides (an email as a user
id): the id itself never reaches the page; `review import` maps the key back through the store."""
ITEM_ID = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")
"""A data item's id (`DataDefinition.id`)."""
TEMPLATE = Path(__file__).with_name("templates") / "review.html.j2"

Role = Literal["user", "agent", "tool", "span", "note"]


class Passage(Frozen):
    """One piece of a unit's evidence: a user's message, the agent's answer, a tool call, a span."""

    role: Role
    """Whose text it is (styles the page)."""
    label: str
    """Its heading (`turn 2 · user`), redacted."""
    text: str
    """The text, redacted, cut at `PASSAGE_MAX`."""
    cut: int = Field(default=0, ge=0)
    """Characters not shown."""


class ReviewQuestion(Frozen):
    """One item to label on a unit."""

    item: str
    """The data item's id."""
    question: str
    """Its question, as the suite asks it."""
    primary: str
    """The suite's cascade's value (`review.csv` only; never on the page)."""


class ReviewUnit(Frozen):
    """A drawn (unit, component) pair: the unit's evidence and the component's items to label on it."""

    key: str
    """The unit's key on the page and in the labels: its id, or `redacted:<digest>` (`REDACTED_KEY`)."""
    unit: str
    """Its id as shown (redacted)."""
    kind: str
    """span, turn, conversation or user (what `show` calls it)."""
    layer: str
    """The data layer."""
    user: str
    """Its user's id as shown (redacted)."""
    component: str
    """The component drawn."""
    stratum: str
    """The stratum it was drawn from."""
    weight: float = Field(ge=0.0)
    """Its sampling weight w_h = N_h / n_h."""
    passages: tuple[Passage, ...] = ()
    """Its evidence."""
    questions: tuple[ReviewQuestion, ...] = ()
    """The items to label."""


class ReviewExport(Frozen):
    """What `review export` wrote."""

    directory: str
    """The output directory."""
    csv: str
    """`review.csv`: one row per (unit, item), rater and value empty, with context columns."""
    html: str
    """`review.html`: the self-contained page."""
    units: int = Field(ge=0)
    """Units (drawn (unit, component) pairs with an item to label) on the page."""
    pairs: int = Field(ge=0)
    """(unit, item) pairs to label."""
    items: tuple[str, ...] = ()
    """The items asked, sorted."""
    sample: SampleSummary
    """The draw (seed, strata, weights)."""


class ReviewImport(Frozen):
    """What `review import` stored."""

    file: str
    """The labels file."""
    source: str
    """The labels' source in the store (`review:<file name>`)."""
    labels: int = Field(ge=0)
    """Labels stored (a label of the same unit, item and rater replaces the one stored)."""
    skipped: int = Field(ge=0)
    """Rows left without a value (not labelled)."""
    raters: tuple[str, ...] = ()
    """The raters, sorted."""
    items: tuple[str, ...] = ()
    """The items labelled, sorted."""
    units: int = Field(ge=0)
    """Distinct units labelled."""


class LabelRow(NamedTuple):
    """One label read from a file, with the line it came from."""

    line: int
    unit_id: str
    item: str
    rater: str
    value: str


# ---- the sample and each unit's evidence (reads the store) ---------------------------------------------------

def unit_key(unit_id: str, redactor: Redactor) -> str:
    """The key a unit has on the page: its id, unless the redactor hides part of it (then a digest)."""
    return unit_id if redact_text(unit_id, redactor) == unit_id else REDACTED_KEY + stable_id(unit_id)[-16:]


def _passage(role: Role, label: str, text: str | None, redactor: Redactor) -> Passage | None:
    if text is None or not text.strip():
        return None
    shown = redact_text(text, redactor)
    return Passage(role=role, label=redact_text(label, redactor), text=shown[:PASSAGE_MAX],
                   cut=max(len(shown) - PASSAGE_MAX, 0))


def _span_passage(s: SpanRecord, prefix: str, redactor: Redactor) -> Passage | None:
    """A span as one passage: a tool call's arguments and result; another span's text only when it failed."""
    parts = [f"{k}: {v}" for k, v in (("arguments", s.input), ("result", s.output), ("error", s.error)) if v]
    if s.kind != "tool" and not s.error:
        return None  # the model's own spans repeat the turn's answer
    name = s.name or s.id
    return _passage("tool" if s.kind == "tool" else "span", f"{prefix}{s.kind or 'span'} {name}",
                    "\n".join(parts) or "(no arguments or result recorded)", redactor)


def _turn_passages(store: Store, turn_id: str, prefix: str, redactor: Redactor) -> list[Passage]:
    out: list[Passage | None] = []
    for t in turns_of(store, turn_id=turn_id):
        out.append(_passage("user", f"{prefix}user", t.request, redactor))
        out.extend(_span_passage(s, prefix, redactor) for s in spans_of(store, turn_id=t.id))
        out.append(_passage("agent", f"{prefix}agent", t.answer, redactor))
    return [p for p in out if p is not None]


def _conversation_passages(store: Store, conversation_id: str, redactor: Redactor, *,
                           head: str = "") -> list[Passage]:
    out: list[Passage] = []
    for t in turns_of(store, conversation_id=conversation_id):
        out.extend(_turn_passages(store, t.id, f"{head}turn {t.idx if t.idx is not None else '?'} · ", redactor))
    return out


def read_passages(store: Store, unit_id: str, where: Located, redactor: Redactor) -> tuple[Passage, ...]:
    """A unit's evidence as a person reads it, redacted: a span with its turn's request; a turn's request, tool
    calls and answer; a conversation's turns; a user's first conversations."""
    if where.kind == "span":
        turn = next(iter(turns_of(store, turn_id=where.turn_id)), None) if where.turn_id else None
        request = turn.request if turn is not None else None
        span = spans_of(store, span_id=unit_id)
        shown = [_passage("user", "the turn's request", request, redactor)]
        for s in span:
            parts = [f"{k}: {v}" for k, v in (("name", s.name), ("kind", s.kind), ("status", s.status),
                                               ("input", s.input), ("output", s.output), ("error", s.error)) if v]
            shown.append(_passage("span", "the span", "\n".join(parts), redactor))
        return tuple(p for p in shown if p is not None)
    if where.kind == "turn":
        return tuple(_turn_passages(store, unit_id, "", redactor))
    if where.kind == "conversation":
        return tuple(_conversation_passages(store, unit_id, redactor))
    conversations = user_conversations(store, unit_id)
    out: list[Passage] = []
    for i, (cid, _) in enumerate(conversations[:CONVERSATIONS_MAX]):
        out.extend(_conversation_passages(store, cid, redactor, head=f"conversation {i + 1} · "))
    if len(conversations) > CONVERSATIONS_MAX:
        out.append(Passage(role="note", label="not shown",
                           text=f"{len(conversations) - CONVERSATIONS_MAX} more conversations of this user"))
    return tuple(out)


def review_units(store: Store, drawn: Sequence[Drawn], definitions: Mapping[str, DataDefinition],
                 redactor: Redactor) -> list[ReviewUnit]:
    """The drawn (unit, component) pairs as units to label: each with the component's yes/no items of the suite
    that its cascade collected on the unit (a drawn pair with none, or a unit no longer stored, is left out)."""
    primary: dict[str, dict[str, str]] = {}
    for d in unit_data(store, sorted({x.unit_id for x in drawn})):
        if d.rater == "primary":
            primary.setdefault(d.unit_id, {})[d.item] = d.value or "uncollected"
    out: list[ReviewUnit] = []
    for x in drawn:
        questions = tuple(
            ReviewQuestion(item=item, question=definitions[item].question, primary=value)
            for item, value in sorted(primary.get(x.unit_id, {}).items())
            if item in definitions and definitions[item].component == x.component
            and definitions[item].kind == "check")
        where = locate(store, x.unit_id) if questions else None
        if where is None:
            continue
        user = where.user_id or x.user
        out.append(ReviewUnit(
            key=unit_key(x.unit_id, redactor), unit=redact_text(x.unit_id, redactor), kind=where.kind,
            layer=x.layer, user=redact_text(user, redactor), component=x.component, stratum=x.stratum,
            weight=x.weight, passages=read_passages(store, x.unit_id, where, redactor), questions=questions))
    return out


# ---- the page and the CSV (pure) -----------------------------------------------------------------------------

def page_id(units: Sequence[ReviewUnit]) -> str:
    """The page's identity (its pairs): the key its progress is kept under in the browser."""
    return stable_id(*((u.key, q.item) for u in units for q in u.questions), prefix="review")


def render_page(units: Sequence[ReviewUnit], *, store_name: str, seed: int, generated: str) -> str:
    """The self-contained review page (styles and script inline, nothing fetched; every text escaped)."""
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    template = env.from_string(TEMPLATE.read_text(encoding="utf-8"))
    return template.render(units=units, store_name=store_name, seed=seed, generated=generated,
                           page_id=page_id(units), pairs=sum(len(u.questions) for u in units),
                           values=RATED_VALUES, value_labels={"yes": "yes", "no": "no",
                                                              "not_applicable": "not applicable"})


def review_csv(units: Sequence[ReviewUnit]) -> str:
    """`review.csv`: one row per (unit, item), rater and value empty, with the context columns."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(LABEL_COLUMNS + CONTEXT_COLUMNS)
    for u in units:
        for q in u.questions:
            w.writerow([u.key, q.item, "", "", u.user, q.question, q.primary])
    return buf.getvalue()


def parse_labels(text: str, *, name: str, items: Collection[str] | None = None) -> tuple[list[LabelRow], int]:
    """The labels of a labels file (`unit_id,item,rater,value`, other columns ignored), and the rows left without
    a value. A bad row is a `SpecError` naming the file, the line and the field; nothing is returned then."""
    rows = csv.reader(io.StringIO(text.lstrip("\ufeff"), newline=""))
    header = next(rows, None)
    if header is None:
        raise SpecError(f"{name}: the file is empty; expected a header {','.join(LABEL_COLUMNS)}")
    columns = [c.strip() for c in header]
    missing = [c for c in LABEL_COLUMNS if c not in columns]
    if missing:
        raise SpecError(f"{name} line 1: no column {missing[0]!r} in the header; expected {','.join(LABEL_COLUMNS)}")
    at = {c: columns.index(c) for c in LABEL_COLUMNS}
    out: list[LabelRow] = []
    seen: dict[tuple[str, str, str], LabelRow] = {}
    skipped = 0
    for fields in rows:
        line = rows.line_num
        if not any(f.strip() for f in fields):
            continue
        if len(fields) != len(columns):
            raise SpecError(f"{name} line {line}: {len(fields)} fields, the header has {len(columns)}")
        unit_id, item, rater, value = (fields[at[c]].strip() for c in LABEL_COLUMNS)
        if not value:
            skipped += 1
            continue
        row = LabelRow(line, unit_id, item, rater, _value(value, name, line))
        _check(row, name, items)
        key = (unit_id, item, rater)
        if key in seen and seen[key].value != row.value:
            raise SpecError(f"{name} line {line}, field value: {row.value!r} contradicts line {seen[key].line} "
                            f"({seen[key].value!r}) for unit {unit_id!r}, item {item!r}, rater {rater!r}")
        if key not in seen:
            seen[key] = row
            out.append(row)
    return out, skipped


def _value(value: str, name: str, line: int) -> str:
    v = value.lower()
    if v == "uncollected":
        raise SpecError(f"{name} line {line}, field value: 'uncollected' is a missing label, not a rating; leave "
                        "the value empty")
    if v not in RATED_VALUES:
        raise SpecError(f"{name} line {line}, field value: {value!r} is not one of {', '.join(RATED_VALUES)}")
    return v


def _check(row: LabelRow, name: str, items: Collection[str] | None) -> None:
    where = f"{name} line {row.line}"
    if not row.unit_id:
        raise SpecError(f"{where}, field unit_id: empty")
    if not ITEM_ID.match(row.item):
        raise SpecError(f"{where}, field item: {row.item!r} is not a data item id (component.name)")
    if items is not None and row.item not in items:
        raise SpecError(f"{where}, field item: {row.item!r} is not a data item of the suite")
    if not row.rater.startswith(HUMAN_PREFIX) or not row.rater[len(HUMAN_PREFIX):].strip():
        raise SpecError(f"{where}, field rater: {row.rater!r} is not a person's rater; write human:<name>")


# ---- the jobs (store and files) ------------------------------------------------------------------------------

def export_review(store: Store, definitions: Mapping[str, DataDefinition], redactor: Redactor, out: Path, *,
                  size: int = DEFAULT_SAMPLE, seed: int = 0) -> ReviewExport:
    """Draw the audit's sample of (unit, component) pairs (`size`, `seed`) from the components of `definitions`,
    and write `out/review.csv` and `out/review.html`."""
    components = sorted({d.component for d in definitions.values()})
    drawn, summary = draw_sample(sample_candidates(store, components=components), size=size, seed=seed)
    units = review_units(store, drawn, definitions, redactor)
    if not units:
        raise SpecError(f"{store.path}: nothing to review: no yes/no datum of the suite is stored; run "
                        "`agent-factory run` first")
    out.mkdir(parents=True, exist_ok=True)
    csv_path, html_path = out / "review.csv", out / "review.html"
    csv_path.write_text(review_csv(units), encoding="utf-8")
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    html_path.write_text(render_page(units, store_name=store.path.name, seed=seed, generated=generated),
                         encoding="utf-8")
    return ReviewExport(directory=str(out), csv=str(csv_path), html=str(html_path), units=len(units),
                        pairs=sum(len(u.questions) for u in units),
                        items=tuple(sorted({q.item for u in units for q in u.questions})), sample=summary)


def import_review(store: Store, path: Path, redactor: Redactor, *,
                  items: Collection[str] | None = None) -> ReviewImport:
    """Read a labels file (the page's download, or a filled `review.csv`) into the store's labels, as source
    `review:<file name>`: every row checked first (a bad row names the file, line and field), then all stored
    at once, or none."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{name}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"{name}: cannot be read as UTF-8 text: {e}") from None
    rows, skipped = parse_labels(text, name=name, items=items)
    if not rows:
        raise SpecError(f"{name}: no row has a value ({', '.join(RATED_VALUES)}): nothing to import")
    hidden = {r.unit_id for r in rows if r.unit_id.startswith(REDACTED_KEY)}
    keys = {unit_key(c.unit_id, redactor): c.unit_id for c in sample_candidates(store)} if hidden else {}
    ratings: list[Rating] = []
    users: dict[str, str] = {}
    for r in rows:
        unit_id = keys.get(r.unit_id, r.unit_id)
        if unit_id not in users:
            where = None if unit_id.startswith(REDACTED_KEY) else locate(store, unit_id)
            if where is None:
                raise SpecError(f"{name} line {r.line}, field unit_id: {r.unit_id!r} is no unit of {store.path}")
            users[unit_id] = where.user_id or unit_id
        ratings.append(Rating(unit_id, users[unit_id], r.item, r.rater, r.value))
    source = f"review:{path.name}"
    written = write_labels(store, ratings, source=source)
    return ReviewImport(file=name, source=source, labels=written, skipped=skipped,
                        raters=tuple(sorted({r.rater for r in ratings})),
                        items=tuple(sorted({r.item for r in ratings})), units=len(users))


__all__ = [
    "CONTEXT_COLUMNS", "DEFAULT_SAMPLE", "LABEL_COLUMNS", "LabelRow", "Passage", "ReviewExport", "ReviewImport",
    "ReviewQuestion", "ReviewUnit", "export_review", "import_review", "page_id", "parse_labels", "read_passages",
    "render_page", "review_csv", "review_units", "unit_key",
]
