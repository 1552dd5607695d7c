"""What the pipeline keeps in the store between runs, and the queries that turn a change into work.

The SQL lives in the store layer (`factory.store.pipeline`, `.units`, `.data`, `.results`); this module names
those reads and writes for the pipeline, so its callers keep one import.
"""

from __future__ import annotations

from agent_factory.evaluators.kernel import row_order
from agent_factory.factory.store.data import data_counts, drop_items
from agent_factory.factory.store.pipeline import (
    GRAPH_VERSION_KEY,
    HORIZON_KEY,
    WINDOW_KEY,
    Previous,
    all_user_keys,
    current_sources,
    load_previous,
    save_state,
    users_touched,
)
from agent_factory.factory.store.results import merge_results
from agent_factory.factory.store.units import drop_users, load_rows

__all__ = [
    "GRAPH_VERSION_KEY", "HORIZON_KEY", "WINDOW_KEY", "Previous", "all_user_keys", "current_sources", "data_counts",
    "drop_items", "drop_users", "load_previous", "load_rows", "merge_results", "row_order", "save_state",
    "users_touched",
]
