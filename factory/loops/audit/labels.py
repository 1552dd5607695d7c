"""People's labels into the store (`labels import`) and agreement among every rater (`agreement`).

A label file is read whole and checked before anything is written (`read_labels_file`: the pure readers of
`label_formats` for the benchmarks, `csv_labels` here for people's CSV), then stored in one transaction
(`store.audit.write_labels`): a bad row leaves the store as it was. Agreement reads the stored labels and the
atomic data of every rater (`read_labels`, `read_ratings`) and measures them with `evaluators.audit.agreement`.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from agent_factory.evaluators.audit.agreement import agreement_report
from agent_factory.evaluators.audit.model import HUMAN_PREFIX, RATED_VALUES, AgreementReport, Rating
from agent_factory.factory.loops.audit.label_formats import (
    FORMATS,
    LabelError,
    LabelMapping,
    ParsedLabels,
    mast_labels,
    trail_labels,
    who_when_labels,
)
from agent_factory.factory.store import Store
from agent_factory.factory.store.audit import read_labels, read_ratings, write_labels
from agent_factory.factory.store.lookup import spans_of
from agent_factory.frozen import Frozen

SpanKinds = Callable[[Collection[str]], Mapping[str, str]]
"""Span ids -> the stored kind of those the store holds."""
MAST_FILE = "MAD_human_labelled_dataset.json"
"""The MAST file looked for when `labels import` is given its folder."""


class LabelImport(Frozen):
    """What `labels import` stored."""

    format: str
    """The format read."""
    source: str
    """The file or folder read (the labels' `source` in the store)."""
    labels: int = Field(ge=0)
    """Labels stored (a label of the same unit, item and rater replaces the stored one)."""
    units: int = Field(ge=0)
    """Distinct units labelled."""
    units_with_data: int = Field(ge=0)
    """Of them, units the store holds atomic data of (a run evaluated them): there, the labels meet the suite's
    raters."""
    raters: tuple[str, ...] = ()
    """The raters stored (`human:<name>`)."""
    items: tuple[str, ...] = ()
    """The items labelled."""
    skipped: int = Field(default=0, ge=0)
    """Source rows holding no label (a blank CSV value, an annotator's NaN)."""
    mapped: tuple[LabelMapping, ...] = ()
    """Source labels that answer items of the suite, and which."""
    unmapped: tuple[LabelMapping, ...] = ()
    """Source labels that answer no suite item (kept as the benchmark's own item when they name one), and why."""
    notes: tuple[str, ...] = ()
    """What else the person importing should know."""


MISSING_VALUES = frozenset({"", "uncollected"})
"""CSV values that are no label (a row left blank): skipped and counted, never a rating."""
CSV_COLUMNS = ("unit_id", "item", "rater", "value")
"""The CSV's required header columns (`user_id` is optional)."""


# ---- CSV -----------------------------------------------------------------------------------------------------

def _rater(name: str) -> str | None:
    """`alice` or `human:alice` -> `human:alice`; another rater kind (`primary`, `audit:...`) -> None."""
    name = name.strip()
    if name.startswith(HUMAN_PREFIX):
        name = name.removeprefix(HUMAN_PREFIX)
    elif ":" in name or name == "primary":
        return None
    return HUMAN_PREFIX + name if name else None


def csv_labels(text: str, *, where: str) -> ParsedLabels:
    """A CSV of people's labels: header `unit_id,item,rater,value` (any order; `user_id` optional, else the
    unit is its own user), a rater a person's name (`alice` or `human:alice`), a value one of `RATED_VALUES`
    (case and spacing ignored); a blank value (or `uncollected`) is a row left unlabelled and is skipped. A bad
    row fails the whole file with one line naming it, its line and its field."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise LabelError(f"{where}: line 1: header: the file is empty (expected {','.join(CSV_COLUMNS)})")
    cols = [h.strip().lower() for h in header]
    missing = [c for c in CSV_COLUMNS if c not in cols]
    if missing:
        raise LabelError(f"{where}: line 1: header: missing column(s) {', '.join(missing)} (expected "
                         f"{','.join(CSV_COLUMNS)}, optional user_id)")
    pos = {c: cols.index(c) for c in (*CSV_COLUMNS, "user_id") if c in cols}
    out = ParsedLabels()
    first: dict[tuple[str, str, str], tuple[int, str]] = {}
    items: dict[str, int] = {}
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) < len(cols) or any(cell.strip() for cell in row[len(cols):]):
            raise LabelError(f"{where}: line {line}: row: {len(row)} field(s), the header has {len(cols)}")
        get = {c: row[i].strip() for c, i in pos.items()}
        for c in ("unit_id", "item", "rater"):
            if not get[c]:
                raise LabelError(f"{where}: line {line}: {c}: empty")
        rater = _rater(get["rater"])
        if rater is None:
            raise LabelError(f"{where}: line {line}: rater: {get['rater']!r} is not a person's name (labels are "
                             f"people's: `alice` or `human:alice`)")
        value = get["value"].lower()
        if value in MISSING_VALUES:
            out.skipped += 1
            continue
        if value not in RATED_VALUES:
            raise LabelError(f"{where}: line {line}: value: {get['value']!r} is not one of "
                             f"{', '.join(RATED_VALUES)}")
        key = (get["unit_id"], get["item"], rater)
        before = first.setdefault(key, (line, value))
        if before[1] != value:
            raise LabelError(f"{where}: line {line}: value: {value!r} contradicts line {before[0]} ({before[1]!r}) "
                             f"for unit {key[0]!r}, item {key[1]!r}, rater {rater!r}")
        if before[0] != line:
            continue
        items[get["item"]] = items.get(get["item"], 0) + 1
        out.ratings.append(Rating(get["unit_id"], get.get("user_id") or get["unit_id"], get["item"], rater, value))
    for item in sorted(items):
        out.mappings.append(LabelMapping(label=item, items=(item,), count=items[item], why="stored as labelled"))
    return out


def _json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise LabelError(f"{path}: byte {e.start}: not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise LabelError(f"{path}: line {e.lineno}: {e.msg}") from None


def _files(path: Path, pattern: str = "*.json") -> list[Path]:
    return sorted(p for p in path.rglob(pattern) if p.is_file()) if path.is_dir() else [path]


def _trail(path: Path, span_kinds: SpanKinds | None) -> ParsedLabels:
    """A TRAIL annotation file, its `annotations` folder, or the TRAIL folder holding one."""
    root = path / "annotations" if (path / "annotations").is_dir() else path
    docs: dict[str, Any] = {}
    where: dict[str, str] = {}
    for f in _files(root):
        if f.stem in docs:
            raise LabelError(f"{f}: trace {f.stem!r} is annotated twice (also {where[f.stem]})")
        docs[f.stem], where[f.stem] = _json(f), str(f)
    if not docs:
        raise LabelError(f"{path}: no TRAIL annotation file (<trace_id>.json) here")
    locations = {e["location"] for d in docs.values() if isinstance(d, dict) and isinstance(d.get("errors"), list)
                 for e in d["errors"] if isinstance(e, dict) and isinstance(e.get("location"), str)}
    return trail_labels(docs, where=where, span_kinds=span_kinds(locations) if span_kinds else None)


def _who_when(path: Path) -> ParsedLabels:
    records: list[tuple[str, Any]] = []
    for f in _files(path):
        doc = _json(f)
        if isinstance(doc, list):
            records.extend((f"{f}: record {i}", r) for i, r in enumerate(doc))
        else:
            records.append((str(f), doc))
    if not records:
        raise LabelError(f"{path}: no Who&When record (*.json) here")
    return who_when_labels(records)


def read_labels_file(path: Path | str, fmt: str, *, span_kinds: SpanKinds | None = None) -> ParsedLabels:
    """Read a label file (or folder) of format `fmt` whole; a `LabelError` naming file, record and field when
    any of it is bad. `span_kinds`: the kind of each stored span among those given (TRAIL's mapping reads it)."""
    path = Path(path)
    if fmt not in FORMATS:
        raise LabelError(f"--format {fmt!r}: not one of {', '.join(FORMATS)}")
    if not path.exists():
        raise LabelError(f"{path}: no such file or folder")
    if fmt == "mast":
        f = path / MAST_FILE if path.is_dir() else path
        return mast_labels(_json(f), where=str(f))
    if fmt == "trail":
        return _trail(path, span_kinds)
    if fmt == "who-and-when":
        return _who_when(path)
    if path.is_dir():
        raise LabelError(f"{path}: a folder; --format csv reads one CSV file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise LabelError(f"{path}: byte {e.start}: not UTF-8 text (save the CSV as UTF-8)") from None
    return csv_labels(text, where=str(path))


def import_labels(store: Store, path: Path | str, *, fmt: str, parsed: ParsedLabels | None = None,
                  suite_items: Collection[str] | None = None) -> LabelImport:
    """Read a label file whole (unless `parsed`, what `read_labels_file` made of it), then store its labels at
    once (`write_labels`, source `<format>:<path>`). `suite_items`: the suite's item ids, which tell a CSV's
    items of the suite from others (a benchmark's readers know the suite items they answer)."""
    if parsed is None or fmt == "trail":  # TRAIL's mapping reads the kinds of the stored spans
        parsed = read_labels_file(path, fmt, span_kinds=lambda ids: stored_span_kinds(store, ids))
    mappings = parsed.mappings
    if fmt == "csv" and suite_items is not None:
        known = set(suite_items)
        mappings = [m.model_copy(update={"suite_items": m.items, "why": "an item of the suite"}) if m.label in known
                    else m.model_copy(update={"why": "not an item of the suite: stored as labelled"})
                    for m in mappings]
    written = write_labels(store, parsed.ratings, source=f"{fmt}:{path}")
    units = {r.unit_id for r in parsed.ratings}
    with_data = {r.unit_id for r in read_ratings(store, units=units)} if units else set()
    return LabelImport(
        format=fmt, source=str(path), labels=written, units=len(units), units_with_data=len(with_data),
        raters=tuple(sorted({r.rater for r in parsed.ratings})), items=tuple(sorted({r.item for r in parsed.ratings})),
        skipped=parsed.skipped, mapped=tuple(m for m in mappings if m.suite_items),
        unmapped=tuple(m for m in mappings if not m.suite_items), notes=tuple(parsed.notes),
    )


def stored_span_kinds(store: Store, span_ids: Collection[str]) -> dict[str, str]:
    """The stored kind of each of `span_ids` the store holds (`spans_of`)."""
    kinds = {}
    for sid in sorted(span_ids):
        found = spans_of(store, span_id=sid)
        if found and found[0].kind:
            kinds[sid] = found[0].kind
    return kinds


def rated_together(labels: Sequence[Rating], data: Sequence[Rating]) -> list[Rating]:
    """The ratings agreement reads: people's labels and every rater's data, of the items at least two raters
    rated, on the units at least two of them rated. A unit keeps one user (cluster): the store's where a run gave
    it one, else its first label's (two label files, or two rows of one, may cluster a unit differently)."""
    user: dict[str, str] = {}
    for r in (*data, *labels):  # the store's user first, else the first label's
        user.setdefault(r.unit_id, r.user)
    everything = [*data, *(r._replace(user=user[r.unit_id]) for r in labels)]
    raters: dict[str, set[str]] = {}
    per_unit: dict[tuple[str, str], int] = {}
    for r in everything:
        raters.setdefault(r.item, set()).add(r.rater)
        per_unit[(r.item, r.unit_id)] = per_unit.get((r.item, r.unit_id), 0) + 1
    return [r for r in everything if len(raters[r.item]) >= 2 and per_unit[(r.item, r.unit_id)] >= 2]


def agreement(store: Store, *, seed: int = 0, n_boot: int = 1000) -> AgreementReport:
    """Agreement among every rater of the store, people and models (`agreement_report` of `rated_together`)."""
    return agreement_report(rated_together(read_labels(store), read_ratings(store)), seed=seed, n_boot=n_boot)


__all__ = ["CSV_COLUMNS", "MAST_FILE", "LabelImport", "SpanKinds", "agreement", "csv_labels", "import_labels",
           "rated_together", "read_labels_file", "stored_span_kinds"]
