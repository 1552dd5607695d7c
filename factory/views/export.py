"""`agent-factory export`: one row per unit of a level, its ids, data, results, outcomes and flag counts.

Three parts: the store read (`read_export`: long Arrow tables of the level's data and results, read by
`factory.store.export`, the units, the outcome events, the flags through `factory.views.findings`), the pure
table builder (`build_table`, which pivots the long tables column-wise with pyarrow compute: one column per data
item or result, never a Python object per cell), and the writers (`write_table`: parquet and csv through
pyarrow, jsonl through DuckDB's JSON writer in `factory.store.export`).

What comes from a trace is redacted before it is written (`redact_table`: every text cell, ids included; a user
id may be an email, a fact may quote the trace), and a csv neutralises spreadsheet formulas (`neutralise_formulas`:
a text cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading `'`, OWASP's rule;
numbers stay numbers).

`--format otlp-json` writes the stored traces instead (`export_otlp`): every turn's spans as one OTLP/JSON
`ExportTraceServiceRequest` (`adapters.otel.encode`), which the project's OTLP adapter reads back as the same
conversations, turns and spans; every text, attribute key and id passes the same redactor first.

Column families, in this order (the README's "Export columns" documents each): ids (`unit_id`,
`conversation_id`, `user_id`, then `turn_index` for turns and spans, `turn_id` for spans), `analysed`, data values
(`<item>`), data facts (`fact.<item>`), per-unit results (`<component>.<metric>`), outcomes (`outcome.<kind>`)
then annotations (`annotation.<kind>`), `flags_total`, `flags.<component>`, `flags_undecided`, `instrument_flags`.
Within a family, names sort.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypeAlias, cast

import pyarrow as pa
import pyarrow.compute as pc

from agent_factory.adapters.model import OutcomeEvent, Turn
from agent_factory.adapters.otel.encode import encode_turn
from agent_factory.errors import AgentFactoryError
from agent_factory.evaluators.collect.redact import Redactor, redact_text
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.evaluators.findings import (
    LAYER_OF,
    LEVELS,
    FlagRow,
    Level,
    UnitKey,
    bad_flags,
    level_units,
    turns_of_spans,
    unit_outcomes,
)
from agent_factory.factory.store import Store
from agent_factory.factory.store.export import layer_tables, write_json_lines
from agent_factory.factory.views.findings import read_findings
from agent_factory.frozen import Frozen

Format = Literal["csv", "jsonl", "parquet"]
SUFFIX_FORMAT: dict[str, Format] = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet",
                                    ".pq": "parquet"}
UNCOLLECTED = "uncollected"
"""The datum value of an item no collector answered: exported as null, never as a value (and never a pass)."""
_RANK = {"span": 0, "trace": 1, "conversation": 2, "engagement": 3}
"""Layers from fine to coarse: a level's flag columns are those of its layer and the layers below it."""


class ExportSummary(Frozen):
    """What `export` wrote (its `--json`)."""

    out: str
    """The file written."""
    level: Level
    """The units of the rows: span, turn, conversation or user."""
    format: Format
    """csv, jsonl or parquet."""
    rows: int
    """One per unit of the level in the store's last run."""
    columns: int
    """Columns of the table, ids included."""


class ExportInput(NamedTuple):
    """What the store read gives the pure builder."""

    units: list[UnitKey]
    """Every unit of the last run (the level's rows, the roll-up and the outcome join need all of them)."""
    data: pa.Table
    """The level's per-unit data, primary rater: unit_id, item, value, fact (JSON text)."""
    results: pa.Table
    """The level's per-unit results: unit_id, name (`<component>.<metric>`), value (JSON text)."""
    analysed: pa.Table
    """The level's units: unit_id, analysed (false: a segment the run leaves out, e.g. synthetic or test traffic)."""
    events: list[OutcomeEvent]
    """Outcome events in time order."""
    flags: list[FlagRow]
    """The suite's flags rolled up to the level's units (`Findings.at(level)`)."""


def format_for(out: Path | None, fmt: Format | None) -> Format:
    """The format asked for, else the one `out`'s suffix names, else csv."""
    if fmt is not None:
        return fmt
    return SUFFIX_FORMAT.get(out.suffix.lower(), "csv") if out is not None else "csv"


def default_out(level: Level, fmt: Format) -> Path:
    """`export-<level>.<format>` in the working directory."""
    return Path(f"export-{level}.{fmt}")


# --- pure: the table -------------------------------------------------------------------------------------------

def _ordered(units: Sequence[UnitKey], level: Level) -> list[UnitKey]:
    """The level's units in a stable order people can read: by user, conversation, turn index, id."""
    return sorted(level_units(units, level),
                  key=lambda u: (u.user_id or "", u.conversation_id or "", u.position, u.unit_id))


Col: TypeAlias = "pa.Array[Any]"
"""One column of the table (a single chunk: the filters' chunked results are combined first)."""


def _one(values: pa.Array[Any] | pa.ChunkedArray[Any]) -> Col:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _null(typ: pa.DataType) -> pa.Scalar[Any]:
    return pa.scalar(None, typ)


def _align(keys: Col, ids: Col, values: Col) -> Col:
    """`values` (one per id of `ids`) placed on the rows of `keys`; null where a key has no id."""
    return pc.take(values, pc.index_in(keys, value_set=ids))


def _json_null(values: Col) -> Col:
    out: Col = pc.if_else(pc.equal(values, pa.scalar("null")), _null(pa.string()), values)
    return out


def decode_json(values: Col) -> Col:
    """JSON texts (a datum's fact, a result's value) as one typed column: float64 when every non-null value is a
    number, else text (JSON strings unquoted, other JSON as written). JSON `null` becomes null."""
    values = _json_null(values)
    try:
        return pc.cast(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    # Text: decode each distinct value once (labels repeat; the dictionary is small).
    encoded = cast("pa.DictionaryArray[Any, Any]", pc.dictionary_encode(values))
    decoded = [_text(json.loads(str(v))) for v in encoded.dictionary.to_pylist()]
    return pc.take(pa.array(decoded, pa.string()), encoded.indices)


def _text(v: object) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _split(long: pa.Table, by: str) -> list[tuple[str, dict[str, Col]]]:
    """`long` split by its `by` column, sorted by that name: (name, its rows' columns)."""
    if long.num_rows == 0:
        return []
    names = sorted(str(n) for n in pc.unique(long[by]).to_pylist())
    out: list[tuple[str, dict[str, Col]]] = []
    for n in names:
        part = long.filter(pc.equal(long[by], pa.scalar(n)))
        out.append((n, {c: _one(part[c]) for c in part.column_names if c != by}))
    return out


def data_columns(keys: Col, data: pa.Table) -> tuple[dict[str, Col], dict[str, Col]]:
    """Per data item: its value column (`uncollected` -> null) and, for items carrying any fact, the fact's."""
    values: dict[str, Col] = {}
    facts: dict[str, Col] = {}
    for item, rows in _split(data, "item"):
        collected = pc.not_equal(rows["value"], pa.scalar(UNCOLLECTED))
        values[item] = _align(keys, rows["unit_id"], pc.if_else(collected, rows["value"], _null(pa.string())))
        fact = _json_null(pc.if_else(collected, rows["fact"], _null(pa.string())))
        if fact.null_count < len(fact):
            facts[f"fact.{item}"] = _align(keys, rows["unit_id"], decode_json(fact))
    return values, facts


def result_columns(keys: Col, results: pa.Table, taken: set[str]) -> dict[str, Col]:
    """Per `<component>.<metric>`: its per-unit values, decoded (`decode_json`). A name a data item already
    holds gets the prefix `result.` (no store has one yet; the column must not vanish if one does)."""
    out: dict[str, Col] = {}
    for name, rows in _split(results, "name"):
        out[f"result.{name}" if name in taken else name] = _align(keys, rows["unit_id"], decode_json(rows["value"]))
    return out


def _mapped(keys: Col, per_unit: dict[str, int] | dict[str, float], typ: pa.DataType) -> Col:
    """A unit id -> value mapping as a column over `keys` (null where a key is absent)."""
    return _align(keys, pa.array(list(per_unit), pa.string()), pa.array(list(per_unit.values()), typ))


def outcome_columns(keys: Col, units: Sequence[UnitKey], events: Sequence[OutcomeEvent],
                    level: Level) -> dict[str, Col]:
    """`outcome.<kind>` per numeric outcome kind, then `annotation.<kind>` per numeric annotation kind (a mistake
    step: a label on the run, no measure of how it went), joined to the level's units (`unit_outcomes`)."""
    columns: dict[str, Col] = {}
    for prefix, chosen in (("outcome", [e for e in events if e.is_outcome]),
                           ("annotation", [e for e in events if not e.is_outcome])):
        columns |= {f"{prefix}.{kind}": _mapped(keys, values, pa.float64())
                    for kind, values in sorted(unit_outcomes(chosen, units, level=level).items())}
    return columns


def flag_columns(keys: Col, specs: Sequence[FlagSpec], rows: Sequence[FlagRow], level: Level) -> dict[str, Col]:
    """`flags_total`, `flags.<component>`, `flags_undecided` and `instrument_flags` (README: "Export columns").

    A component's count is the number of its flags meaning `bad` raised on the unit (a flag raised on several
    turns of a conversation counts once: the rows are rolled up); null when none of them was decided on the
    unit (never 0 for "not looked at"). `flags_total` is the sum of the non-null counts (null when all are).
    Flags meaning `instrument` (Provenance's: the evidence is incomplete, text addressed to the evaluator) say
    nothing of the agent: they are counted apart in `instrument_flags`, outside the total; `descriptive` ones
    (a hand-off, a fast answer) are not counted (their data columns hold them). `flags_undecided` counts the
    `bad` flags left undecided on the unit (uncollected data): with it above 0 the counts are lower bounds."""
    bad = bad_flags(specs)
    instrument = frozenset(s.id for s in specs if s.meaning == "instrument")
    reach = _RANK[LAYER_OF[level]]
    components = list(dict.fromkeys(s.component for s in specs if s.id in bad and _RANK[s.layer] <= reach))
    counts: dict[str, dict[str, int]] = defaultdict(dict)  # column -> unit id -> count, decided units only
    undecided: dict[str, int] = {}
    for r in rows:
        if r.value is None:
            if r.flag in bad:
                undecided[r.unit_id] = undecided.get(r.unit_id, 0) + 1
            continue
        column = f"flags.{r.component}" if r.flag in bad else ("instrument_flags" if r.flag in instrument else None)
        if column is not None:
            per_unit = counts[column]
            per_unit[r.unit_id] = per_unit.get(r.unit_id, 0) + r.value
    parts = {f"flags.{c}": _mapped(keys, counts.get(f"flags.{c}", {}), pa.int64()) for c in components}
    zero = pa.scalar(0, pa.int64())
    total: Col = pa.nulls(len(keys), pa.int64())
    for col in parts.values():
        total = pc.if_else(pc.is_null(total), col, pc.add(total, pc.coalesce(col, zero)))
    # Every unit whose flags were read has a count of undecided ones (0 included); the others have no flag.
    seen = pa.array(list(dict.fromkeys(r.unit_id for r in rows if r.flag in bad)), pa.string())
    n_undecided = pc.coalesce(_mapped(keys, undecided, pa.int64()),
                              pc.if_else(pc.is_in(keys, value_set=seen), zero, _null(pa.int64())))
    return {"flags_total": total, **parts, "flags_undecided": n_undecided,
            "instrument_flags": _mapped(keys, counts.get("instrument_flags", {}), pa.int64())}


def build_table(level: Level, specs: Sequence[FlagSpec], read: ExportInput) -> pa.Table:
    """The export table of `level` (module docstring): one row per unit, columns in their families' order."""
    if level not in LEVELS:
        raise AgentFactoryError(f"export: unknown level {level!r}; one of {', '.join(LEVELS)}")
    units = _ordered(read.units, level)
    keys = pa.array([u.unit_id for u in units], pa.string())
    columns: dict[str, Col] = {
        "unit_id": keys,
        "conversation_id": pa.array([u.conversation_id for u in units], pa.string()),
        "user_id": pa.array([u.user_id for u in units], pa.string()),
    }
    if level in ("turn", "span"):
        columns["turn_index"] = pa.array([u.position for u in units], pa.int64())
    if level == "span":
        turn_of = turns_of_spans(read.units)
        columns["turn_id"] = pa.array([turn_of.get(u.unit_id) for u in units], pa.string())
    columns["analysed"] = _align(keys, _one(read.analysed["unit_id"]), _one(read.analysed["analysed"]))
    values, facts = data_columns(keys, read.data)
    columns |= values | facts
    columns |= result_columns(keys, read.results, set(columns))
    columns |= outcome_columns(keys, read.units, read.events, level)
    columns |= flag_columns(keys, specs, read.flags, level)
    return pa.table(columns)


def _is_text(typ: pa.DataType) -> bool:
    return bool(pa.types.is_string(typ) or pa.types.is_large_string(typ))


def _map_text(table: pa.Table, fn: Callable[[str], str]) -> pa.Table:
    """`table` with `fn` applied to every text cell (once per distinct value); other columns as they are."""
    columns: list[Col] = []
    for col in table.columns:
        values = _one(col)
        if _is_text(values.type) and len(values):
            encoded = cast("pa.DictionaryArray[Any, Any]", pc.dictionary_encode(values))
            mapped = [fn(str(v)) for v in encoded.dictionary.to_pylist()]
            values = pc.take(pa.array(mapped, pa.string()), encoded.indices)
        columns.append(values)
    return pa.table(columns, names=table.column_names)


def redact_table(table: pa.Table, redactor: Redactor) -> pa.Table:
    """`table` with every text cell redacted, ids included; numbers and the names of columns as they are."""
    return _map_text(table, lambda v: redact_text(v, redactor))


_FORMULA = re.compile(r"[=+\-@\t\r]")
"""What a spreadsheet may run as a formula at the start of a cell (OWASP, CSV injection)."""
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _defused(cell: str) -> str:
    return "'" + cell if _FORMULA.match(cell) and not _NUMBER.fullmatch(cell) else cell


def neutralise_formulas(table: pa.Table) -> pa.Table:
    """`table` with a `'` before every text cell a spreadsheet would read as a formula (one starting with `=`,
    `+`, `-`, `@`, a tab or a carriage return), unless the cell is a plain number (`-3.5` stays `-3.5`)."""
    return _map_text(table, _defused)


# --- the store read ---------------------------------------------------------------------------------------------

def read_export(store: Store, specs: Sequence[FlagSpec], level: Level) -> ExportInput:
    """The last run's units, the level's data and per-unit results, the outcome events, and the flags at the
    level (through `factory.views.findings`, so a flag means here what it means in `summary`, `show` and `report`)."""
    findings = read_findings(store, specs, with_associations=False)
    if not findings.units:
        raise AgentFactoryError(f"{store.path}: no units yet; run `agent-factory run` on the store first")
    # A user's row is analysed when any of their units is: per user, not per engagement unit.
    tables = layer_tables(store, LAYER_OF[level], by_user=level == "user")
    return ExportInput(findings.units, tables.data, tables.results, tables.analysed, store.events(),
                       findings.at(level))


# --- writers -------------------------------------------------------------------------------------------------

def write_table(table: pa.Table, out: Path, fmt: Format) -> None:
    """Write `table` to `out` as `fmt`, through a temporary file beside it (no half-written export is left)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, tmp)
        elif fmt == "csv":
            import pyarrow.csv as pcsv

            pcsv.write_csv(neutralise_formulas(table), tmp)
        else:
            write_json_lines(table, tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


# --- the stored traces as OTLP/JSON -----------------------------------------------------------------------------

class OtlpExportSummary(Frozen):
    """What `export --format otlp-json` wrote (its `--json`)."""

    out: str
    format: Literal["otlp-json"] = "otlp-json"
    conversations: int
    turns: int
    """Turns written, of every traffic segment."""
    spans: int
    derived: int
    """Tool spans left out because the reader derives them again from their model call's output."""
    not_carried: dict[str, int]
    """Per field, the units whose value the OTLP reader will not give back as stored (`adapters.otel.encode`:
    ids of a non-OTel source, a duration given without times, ...); empty for traces that came in as OTel."""


def default_otlp_out() -> Path:
    """`export-traces.otlp.json` in the working directory."""
    return Path("export-traces.otlp.json")


def export_otlp(store: Store, out: Path, redactor: Redactor) -> OtlpExportSummary:
    """Write the store's turns, of every traffic segment, in conversation order, to `out` as one OTLP/JSON
    document, every text redacted (`write_otlp`)."""
    if not (summary := write_otlp(store.iter_turns(segment=None), out, redactor)).turns:
        raise AgentFactoryError(f"{store.path}: no traces yet; run `agent-factory ingest PATH` first")
    return summary


def write_otlp(turns: Iterable[Turn], out: Path, redactor: Redactor) -> OtlpExportSummary:
    """Write `turns` to `out` as one OTLP/JSON document, every text redacted, streamed one turn at a time
    through a temporary file beside `out` (no half-written export is left; nothing is written for no turns)."""
    text = lru_cache(maxsize=512)(lambda v: redact_text(v, redactor))  # a prompt repeats on every model call
    conversations: set[str] = set()
    n_turns = n_spans = derived = blocks = 0
    lost: dict[str, int] = defaultdict(int)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            f.write('{"resourceSpans":[')
            for turn in turns:
                encoded = encode_turn(turn, text)
                for block in encoded.blocks:
                    f.write(("," if blocks else "") + json.dumps(block, ensure_ascii=False, separators=(",", ":")))
                    blocks += 1
                n_turns, n_spans, derived = n_turns + 1, n_spans + encoded.spans, derived + encoded.derived
                conversations.add(turn.conversation_id)
                for field, n in encoded.lost.items():
                    lost[field] += n
            f.write("]}\n")
        if n_turns:
            os.replace(tmp, out)
    except OSError as e:
        raise AgentFactoryError(f"{e.filename or out}: cannot write the export ({e.strerror})") from e
    finally:
        tmp.unlink(missing_ok=True)
    return OtlpExportSummary(out=str(out), conversations=len(conversations), turns=n_turns, spans=n_spans,
                             derived=derived, not_carried=dict(sorted(lost.items())))
