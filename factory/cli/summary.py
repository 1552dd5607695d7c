"""`agent-factory summary`: the short terminal summary of a store already run (what `run` prints at its end).

Registered on the app of `factory.cli.app` (which imports this module at its end).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_factory.evaluators.core.flags import FlagSpec

from agent_factory.errors import AgentFactoryError
from agent_factory.factory.cli.app import JsonOpt, ReadPackOpt, ReadSuiteOpt, StoreOpt, app, emit_json, fail, out
from agent_factory.factory.store import DEFAULT_STORE


def store_flag(store: Path, suite: Path | None = None) -> str:
    """`--store S --suite D` to repeat in suggested commands (the store unless it is the default)."""
    parts = ([] if store == DEFAULT_STORE else [f"--store {store}"]) + ([f"--suite {suite}"] if suite else [])
    return " ".join(parts)


def print_summary(store: Path, flags: Sequence[FlagSpec], *, suite: Path | None = None,
                  as_json: bool = False) -> None:
    """Read and print the store's summary (one screen), or its JSON."""
    from agent_factory.factory.views.summary import read_summary, render

    summary = read_summary(store, flags=flags, store_flag=store_flag(store, suite))
    if as_json:
        emit_json(summary.model_dump(mode="json"))
        return
    for line in render(summary):
        out.print(line, markup=False, highlight=False, soft_wrap=True)


@app.command()
def summary(
    store: StoreOpt = DEFAULT_STORE,
    suite: ReadSuiteOpt = None,
    pack: ReadPackOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the few results that matter per component, worst first, with their 95% intervals and n; each
    flag's association with the outcomes the traces carry; and where to look next."""
    from agent_factory.factory.views.findings import flags_at

    try:
        flags = flags_at(store, suite, pack)
        if flags is None:
            raise AgentFactoryError(f"{store}: no store here yet; run `agent-factory ingest PATH` and `run` first")
        print_summary(store, flags, suite=suite, as_json=as_json)
    except AgentFactoryError as e:
        raise fail(e) from e
