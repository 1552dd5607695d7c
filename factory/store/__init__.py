"""The store layer: every SQL statement of the project is in this package.

- `schema`: table definitions, `SCHEMA_VERSION`, the version check at open;
- `rows`: the row of each record and back, and `Batch` (Arrow appends);
- `base`: `Store`, the connection (meta, ingested files, trace reads, transactions);
- `ingest`: the reads and deletes of an input file's closing steps;
- `units`, `data`, `results`, `runs`, `pipeline`: a run's units, atomic data (per rater), results, run records
  and the pipeline state between runs;
- `findings`, `lookup`, `export`: the views' reads (the rows every flag is decided from; what an id names and
  the stored text and rows of one unit; a level's long Arrow tables and the JSON-lines writer). The views hold
  no SQL and never touch `Store.con` (`tests/factory/test_store_owns_sql.py`).
"""

from agent_factory.factory.store.base import Store
from agent_factory.factory.store.rows import (
    Batch,
    arrow_rows,
    conversation_row,
    dumps,
    event_from_row,
    event_row,
    span_from_row,
    span_row,
    turn_from_row,
    turn_row,
)
from agent_factory.factory.store.schema import (
    CONVERSATION_COLUMNS,
    DATUM_COLUMNS,
    DEFAULT_MEMORY,
    DEFAULT_STORE,
    EVENT_COLUMNS,
    PROVENANCE_COLUMNS,
    QUARANTINE_COLUMNS,
    READ_MEMORY,
    RESULT_COLUMNS,
    SCHEMA_VERSION,
    SPAN_COLUMNS,
    TABLES,
    TURN_COLUMNS,
    UNIT_COLUMNS,
)

__all__ = [
    "CONVERSATION_COLUMNS", "DATUM_COLUMNS", "DEFAULT_MEMORY", "DEFAULT_STORE", "EVENT_COLUMNS",
    "PROVENANCE_COLUMNS", "QUARANTINE_COLUMNS", "READ_MEMORY", "RESULT_COLUMNS", "SCHEMA_VERSION", "SPAN_COLUMNS",
    "TABLES", "TURN_COLUMNS", "UNIT_COLUMNS", "Batch", "Store", "arrow_rows", "conversation_row", "dumps",
    "event_from_row", "event_row", "span_from_row", "span_row", "turn_from_row", "turn_row",
]
